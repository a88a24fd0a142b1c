"""The plugin's per-delivery promises that need no sockets: never raise, log tersely."""

from __future__ import annotations

import logging

import pytest
from proton import Described, symbol

from filtex_proton.amqp.message import encode_message
from filtex_proton.plugin import FiltexPlugin, LinkFilter


def _link_filter(text: str, interval: float) -> LinkFilter:
    plugin = FiltexPlugin()
    filter_set = plugin.compile({symbol("f"): Described(symbol("amqp:sql-filter"), text)})
    return LinkFilter(filter_set, consumer=1, label="link 'x'", logger=plugin.logger,
                      log_interval=interval)


def test_bytes_that_are_not_a_message_match_nothing_and_are_counted() -> None:
    link_filter = _link_filter("a = 1", interval=0)
    assert link_filter.matches(FiltexPlugin.message(b"\x00\x53\x77\xff")) is False
    assert link_filter.filter_set.stats.errors == 1


def test_evaluation_errors_are_logged_at_most_once_per_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    link_filter = _link_filter("a = 1", interval=3600)
    broken = FiltexPlugin.message(b"not an AMQP message")
    with caplog.at_level(logging.WARNING, logger="filtex_proton"):
        for _ in range(50):
            assert link_filter.matches(broken) is False
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert "link 'x': 1 filter evaluation error(s)" in lines[0]
    assert link_filter.filter_set.stats.errors == 50


def test_the_next_report_counts_what_happened_since_the_last(
        caplog: pytest.LogCaptureFixture) -> None:
    link_filter = _link_filter("a = 1", interval=0)
    broken = FiltexPlugin.message(b"\x01\x02")
    good = FiltexPlugin.message(encode_message(application_properties={"a": 1}, body="x"))
    with caplog.at_level(logging.WARNING, logger="filtex_proton"):
        link_filter.matches(broken)
        link_filter.matches(broken)
        assert link_filter.matches(good) is True
    assert [r.getMessage().split(" since")[0] for r in caplog.records] == [
        "link 'x': 1 filter evaluation error(s)", "link 'x': 1 filter evaluation error(s)"]
