"""The console page in a real browser (headless Chromium through selenium): what it shows of a
real broker with real Proton clients, that it updates without a reload, and the tester."""

from __future__ import annotations

from typing import Any

import pytest

from .broker_clients import BrokerFactory, bodies, connect, message, refusal_of, send, sql
from .browser import wait_until
from .console_clients import Traffic, with_traffic

pytest.importorskip("aiohttp")


@pytest.fixture
def traffic(broker_factory: BrokerFactory) -> Traffic:
    return with_traffic(broker_factory)


def _by_css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def _text(driver: Any, selector: str) -> str:
    """The element's text, read in one step (the page re-renders every second: an element
    found first and read later may be gone)."""
    return str(driver.execute_script(
        "const found = document.querySelector(arguments[0]);"
        "return found ? found.innerText : '';", selector))


def _texts(driver: Any, selector: str) -> list[str]:
    return list(driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.innerText);",
        selector))


def _open(driver: Any, traffic: Traffic) -> None:
    console = traffic.running.broker.console
    assert console is not None
    driver.get(console.url)
    wait_until(driver, lambda d: _by_css(d, 'tr[data-node="orders"]'), "the orders node")


def test_the_page_shows_nodes_links_and_filters(chrome: Any, traffic: Traffic) -> None:
    _open(chrome, traffic)
    row = 'tr[data-node="orders"]'
    assert _text(chrome, f'{row} td[data-field="depth"]') == "3"
    assert _text(chrome, f'{row} td[data-field="in"]') == "3"
    assert _text(chrome, f'{row} td[data-field="consumers"]') == "2"
    assert _by_css(chrome, 'tr[data-node="news"]')
    red = 'tr[data-link-name="red-orders"]'
    assert _text(chrome, f'{red} code[data-normalised="colour"]') == "color = 'red'"
    assert "amqp:sql-filter" in _text(chrome, red)
    eu = 'tr[data-link-name="eu-news"]'
    assert _text(chrome, f'{eu} code[data-normalised="region"]') == "region = 'eu'"
    assert _text(chrome, f'{eu} td[data-counter="matched"]') == "1"
    assert _text(chrome, f'{eu} td[data-counter="not_matched"]') == "1"


def test_the_page_updates_without_a_reload(chrome: Any, traffic: Traffic) -> None:
    _open(chrome, traffic)
    chrome.execute_script("window.notReloaded = true;")
    red = 'tr[data-link-name="red-orders"]'
    assert _text(chrome, f'{red} td[data-counter="matched"]') == "0"
    traffic.red.flow(5)
    assert bodies(traffic.red, 1) == ["m1"]
    wait_until(chrome, lambda d: _text(d, f'{red} td[data-counter="matched"]') == "1",
               "the red consumer's match counted on the page")
    assert _text(chrome, f'{red} td[data-counter="sent"]') == "1"
    # a new node, and a refusal, appear too
    sender = traffic.connection.create_sender("invoices")
    send(sender, message("i1"))
    wait_until(chrome, lambda d: _by_css(d, 'tr[data-node="invoices"]'), "the new node")
    other = connect(traffic.running.url)
    refusal_of(other, "orders", sql("color = = 'red'", "typo"), name="typo-link")
    wait_until(chrome, lambda d: _by_css(d, 'tr[data-refusal="typo-link"]'), "the refusal")
    assert "syntax error" in _text(chrome, 'tr[data-refusal="typo-link"]')
    assert chrome.execute_script("return window.notReloaded === true;")
    other.close()


def _run_test(driver: Any, text: str, kind: str, node: str) -> None:
    from selenium.webdriver.support.ui import Select

    area = _by_css(driver, "#test-text")[0]
    area.clear()
    area.send_keys(text)
    Select(_by_css(driver, "#test-kind")[0]).select_by_value(kind)
    wait_until(driver, lambda d: _by_css(d, f'#test-node option[value="{node}"]'),
               "the node in the tester's choice")
    Select(_by_css(driver, "#test-node")[0]).select_by_value(node)
    driver.execute_script("document.getElementById('test-result').replaceChildren();")
    _by_css(driver, "#test-run")[0].click()
    wait_until(driver, lambda d: _by_css(d, "#test-validity"), "the tester's answer")


def test_the_tester_shows_validity_pushdown_spark_and_verdicts(
        chrome: Any, traffic: Traffic) -> None:
    _open(chrome, traffic)
    _run_test(chrome, "color = 'red' AND", "sql", "orders")
    assert "line 1, column 18" in _text(chrome, "#test-validity")
    assert "^" in _text(chrome, "#test-error")

    _run_test(chrome, "color <> 'blue' AND amount < 100", "sql", "orders")
    assert _text(chrome, "#test-validity") == "valid"
    assert "(color <> 'blue') AND (amount < 100)" in _text(chrome, "code.normalised")
    assert "color <> 'blue'" in _text(chrome, "#test-pushdown")
    assert "spark:" in _text(chrome, "#test-spark")
    results = _texts(chrome, "#test-messages td[data-result]")
    assert results == ["TRUE", "FALSE", "TRUE"]
    assert "m1" not in _text(chrome, "#test-messages")  # bodies only when asked

    _run_test(chrome, "missing = 1", "jms", "orders")
    results = _texts(chrome, "#test-messages td[data-result]")
    assert results == ["NULL", "NULL", "NULL"]
