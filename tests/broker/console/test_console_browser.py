"""The console page in a real browser (headless Chromium through selenium): what it shows of a
real broker with real Proton clients, that it updates without a reload, and the tester."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ..broker_clients import (
    BrokerFactory,
    bodies,
    connect,
    message,
    refusal_of,
    send,
    sql,
    wait_for,
)
from ..browser import wait_until
from ..streams.stream_clients import consumer, four_read, stream_broker
from .console_clients import Traffic, api, node_of, with_traffic

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


def test_the_page_shows_streams_offsets_and_their_consumers_position_and_lag(
        chrome: Any, broker_factory: BrokerFactory) -> None:
    """``events.v`` holds offsets 0-9, its consumer read four (position 4, lag 6);
    ``events.empty`` holds nothing, its consumer waits at offset 0."""
    running = stream_broker(broker_factory, console="127.0.0.1:0")
    kept, _, _ = four_read(running)
    consumer(kept, "events.empty", credit=5, name="waiting")
    console = running.broker.console
    assert console is not None
    chrome.get(console.url)
    wait_until(chrome, lambda d: _by_css(d, 'tr[data-link-name="waiting"]'), "both streams")
    held, empty = 'tr[data-node="events.v"]', 'tr[data-node="events.empty"]'
    assert _texts(chrome, f"{held} td")[:3] == ["events.v", "stream", "10"]
    assert _text(chrome, f'{held} td[data-field="stream"]') == "0–9, next 10; 1 segment, 0 dropped"
    assert _text(chrome, f'{empty} td[data-field="depth"]') == "0"
    assert _text(chrome, f'{empty} td[data-field="stream"]') == (
        "empty, next 0; 0 segments, 0 dropped")
    assert _texts(chrome, 'table[data-links-of="events.v"] th')[3:5] == ["position", "lag"]
    for link, position, lag in (("reader", "4", "6"), ("waiting", "0", "0")):
        row = f'tr[data-link-name="{link}"]'
        assert _text(chrome, f'{row} td[data-counter="position"]') == position, link
        assert _text(chrome, f'{row} td[data-counter="lag"]') == lag, link
    kept.close()


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


def _drawn(driver: Any, chart: str, series: str) -> list[tuple[float, float]]:
    """The (time, value) points a chart's line draws, read back from its SVG path through
    the chart's own scale (data-start, data-span, data-max and its size in pixels)."""
    found = driver.execute_script(
        "const svg = Array.from(document.querySelectorAll('svg.chart'))"
        "  .find(s => s.dataset.chart === arguments[0]);"
        "if (!svg) return null;"
        "const path = svg.querySelector(`path[data-series='${arguments[1]}']`);"
        "return [path.getAttribute('d'), svg.dataset.start, svg.dataset.span, svg.dataset.max,"
        "        svg.dataset.width, svg.dataset.height];", chart, series)
    assert found is not None, f"no chart {chart!r} on the page"
    d, start, span, top, width, height = found
    points = []
    for command in d.split():
        x, y = (float(part) for part in command[1:].split(","))
        points.append((float(start) + x * float(span) / float(width),
                       float(top) * (1 - y / float(height))))
    return points


def test_the_charts_draw_the_history_and_agree_with_the_counters(
        chrome: Any, broker_factory: BrokerFactory) -> None:
    """A minute of history in a few seconds (a short sample interval): each node's in/out and
    depth chart, each filtered link's matched/not matched chart and the memory chart draw
    the points of GET /api/history, and the rates add up to the counters."""
    traffic = with_traffic(broker_factory, console_sample_interval=0.25)
    running = traffic.running
    wait_for(lambda: len(api(running, "/api/history")["times"]) >= 2, "two samples")
    sender = traffic.connection.create_sender("charted")
    charted = connect(running.url)
    odd = charted.create_receiver("charted", name="odd", options=sql("n % 2 = 1", "odd"),
                                  credit=100)
    for burst in range(3):
        send(sender, *(message(f"c{burst}-{i}", n=i) for i in range(5 + burst)))
        time.sleep(0.6)  # a few samples apart
    assert len(bodies(odd, 2 + 3 + 3)) == 8  # 1, 3 | 1, 3, 5 | 1, 3, 5
    overview = api(running, "/api/overview")
    wait_for(lambda: api(running, "/api/history")["times"][-1] > overview["time"] + 0.3,
             "samples after the traffic")
    console = running.broker.console
    assert console is not None
    chrome.get(console.url)  # opened after the traffic: the charts are drawn on first paint
    wait_until(chrome, lambda d: d.execute_script(
        "return document.querySelectorAll('svg.chart').length") > 0, "the charts")
    history = api(running, "/api/history")
    times = history["times"]
    node = node_of(overview, "charted")
    link = next(link for link in node["links"] if link["name"] == "odd")

    def total(points: list[tuple[float, float]]) -> float:
        """Rates times the time each covers: a point, since the sample before it."""
        covered = 0.0
        for at, rate in points:
            index = min(range(1, len(times)), key=lambda i: abs(times[i] - at))
            covered += rate * (times[index] - times[index - 1])
        return covered

    for chart, series, expected in (("rates:charted", "in", node["in"]),
                                    ("rates:charted", "out", node["out"]),
                                    ("rates:charted", "filtered_out", node["filtered_out"]),
                                    (f"link:{link['id']}", "matched",
                                     link["counters"]["matched"]),
                                    (f"link:{link['id']}", "not_matched",
                                     link["counters"]["not_matched"])):
        drawn = _drawn(chrome, chart, series)
        kept = history["nodes"]["charted"] if chart.startswith("rates") else \
            history["links"][link["id"]]
        values = [(t, v) for t, v in zip(times, kept[series], strict=True) if v is not None]
        assert len(drawn) >= len(values) - 2, (chart, series)  # the page's copy may be older
        for at, value in drawn:
            near = min(values, key=lambda point: abs(point[0] - at))
            assert abs(near[0] - at) < 0.05 and abs(near[1] - value) < 0.05, (chart, series)
        assert total(drawn) == pytest.approx(expected, abs=0.2), (chart, series, drawn)
    assert node["in"] == 18 and link["counters"]["matched"] == 8
    depth = _drawn(chrome, "depth:charted", "depth")
    assert depth[-1][1] == pytest.approx(node["depth"], abs=0.1)
    memory = _drawn(chrome, "memory", "memory")
    assert memory and memory[-1][1] == pytest.approx(history["memory"]["used"][-1], rel=0.05,
                                                     abs=history["memory"]["limit"] / 3600)
    note = _text(chrome, "#filtered-out-note")
    assert "counts per link" in note and "can exceed" in note
    charted.close()
