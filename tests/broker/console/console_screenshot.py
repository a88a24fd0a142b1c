"""Make docs/console.png: a real broker with a few nodes and filtered links, a minute of
traffic (so that the charts have 15-minute history to draw), its console page in headless
Chromium (selenium; ``apt-get install chromium chromium-driver``), one filter tested, and a
screenshot of the whole page. From the repository root:

    python -m tests.broker.console.console_screenshot [OUTPUT.png] [TRAFFIC_SECONDS]
"""

from __future__ import annotations

import contextlib
import logging
import math
import random
import sys
import time
from pathlib import Path

from proton import Described, Message, Timeout, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from filtex_broker.server import Broker
from filtex_broker.settings import BrokerConfig

from ..broker_clients import TopicOption, filters
from ..browser import start_chrome

REPO = Path(__file__).resolve().parents[3]
WIDTH = 1360


def sql(key: str, text: str, descriptor: str = "amqp:sql-filter") -> Filter:
    return filters({key: Described(symbol(descriptor), text)})


def _traffic(orders: BlockingSender, prices: BlockingSender,
             takers: list[BlockingReceiver], seconds: float) -> None:
    """Orders at a rate that rises and falls, a price now and then; the ``takers`` take
    what they match as it comes (the big-orders consumer takes nothing: its queue grows).
    Taking also pumps the clients' connections (heartbeats: the broker closes a connection
    silent for --idle-timeout)."""
    rng = random.Random(7)
    regions = ("eu-west", "eu-north", "us-east", "ap-south")
    start = time.monotonic()
    sent = 0
    while (elapsed := time.monotonic() - start) < seconds:
        per_second = 4 + 16 * abs(math.sin(elapsed / 15))
        orders.send(Message(body=f"order {sent}", priority=rng.choice((1, 4, 5, 9)),
                            properties={"region": rng.choice(regions),
                                        "amount": rng.randrange(5, 1000)}))
        sent += 1
        if sent % 10 == 0:
            symbol_name = rng.choice(("EURUSD", "GBPUSD", "EURJPY", "AAPL"))
            prices.send(Message(body=symbol_name, properties={"symbol": symbol_name}))
        for taker in takers:
            taker.flow(2)
            with contextlib.suppress(Timeout):
                while True:
                    taker.receive(timeout=0.005)  # (0 would not pump the connection)
                    taker.accept()
        time.sleep(1 / per_second)


def main() -> int:
    output = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "console.png"
    traffic_seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    logging.basicConfig(level=logging.WARNING)
    broker = Broker(BrokerConfig(listen=(("127.0.0.1", 0),), console="127.0.0.1:0",
                                 container_id="filtex-broker"))
    broker.start_in_thread()
    host, port = broker.addresses[0]
    try:
        shop = BlockingConnection(f"{host}:{port}")
        eu = shop.create_receiver("orders", name="eu-orders",
                                  options=sql("eu", "region LIKE 'eu-%'"), credit=0)
        shop.create_receiver("orders", name="big-orders",
                             options=sql("big", "amount > 100 AND header.priority >= 4"),
                             credit=0)
        audit = BlockingConnection(f"{host}:{port}")
        all_prices = audit.create_receiver("prices", name="all-prices", options=TopicOption(),
                                           credit=0)
        fx_prices = audit.create_receiver("prices", name="fx-prices", credit=0, options=[
            TopicOption(), sql("fx", "symbol LIKE 'EUR%'", "apache.org:selector-filter:string")])
        sender = shop.create_sender("orders")
        for index, (region, amount) in enumerate([("eu-west", 40), ("us-east", 250),
                                                  ("eu-north", 900), ("ap-south", 12),
                                                  ("eu-west", 75)]):
            sender.send(Message(body=f"order {index}", priority=5,
                                properties={"region": region, "amount": amount}))
        prices = shop.create_sender("prices", options=TopicOption())
        for name in ("EURUSD", "GBPUSD", "EURJPY", "AAPL"):
            prices.send(Message(body=name, properties={"symbol": name}))
        _traffic(sender, prices, [eu, all_prices, fx_prices], traffic_seconds)
        with contextlib.suppress(Exception):  # refused: a refusal for the page to show
            shop.create_receiver("orders", name="typo", options=sql("t", "amount >> 5"))
        time.sleep(1.5)  # two polls: the rates have something to compare
        console = broker.console
        assert console is not None
        driver = start_chrome(WIDTH, 900)
        try:
            driver.get(console.url)
            wait = WebDriverWait(driver, 20)
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, 'tr[data-node="orders"]'))
            area = driver.find_element(By.ID, "test-text")
            area.send_keys("region LIKE 'eu-%' AND amount > 50")
            Select(driver.find_element(By.ID, "test-node")).select_by_value("orders")
            driver.find_element(By.ID, "test-run").click()
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#test-messages tr"))
            time.sleep(1.2)
            for _ in range(2):  # the viewport exactly as high as the page (the height changes
                height = driver.execute_script(  # with the width)
                    "return document.documentElement.scrollHeight")
                driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
                    "width": WIDTH, "height": int(height), "deviceScaleFactor": 1,
                    "mobile": False})
                time.sleep(0.3)
            driver.execute_script("window.scrollTo(0, 0);")
            time.sleep(0.5)
            driver.save_screenshot(str(output))
        finally:
            driver.quit()
        shop.close()
        audit.close()
    finally:
        broker.stop()
    print(f"wrote {output} ({output.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
