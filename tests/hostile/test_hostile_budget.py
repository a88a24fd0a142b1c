"""The per-message evaluation budget (Limits.eval_budget_ms, spec §7.1): an expensive filter
set stops midway, the message is not eligible, and FilterSet.stats.budget_exceeded counts it.

The budget is checked between the filters of a set, between the members of a group (at
every level) and inside topic-binding searches; a filter set with none of those never
reads the clock, and a finished TRUE is not overturned (a GC pause must not strand a
matching message). Most tests use a fake clock that advances a second per reading, so
that they do not depend on the machine's speed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from proton import Described, symbol

from filtex_proton.amqp.message import encode_message
from filtex_proton.amqp.view import DictMessageView
from filtex_proton.filters import base
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.limits import Limits
from filtex_proton.plugin import FiltexPlugin, LinkFilter

MB = 1_000_000
SILENT = logging.getLogger("hostile.silent")
SILENT.disabled = True


class FakeClock:
    """Stands in for the ``time`` module in filters.base: every reading is a second later."""

    def __init__(self) -> None:
        self.now = 0.0
        self.readings = 0

    def perf_counter(self) -> float:
        self.readings += 1
        self.now += 1.0
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    fake = FakeClock()
    monkeypatch.setattr(base, "time", fake)
    yield fake


def sql(text: str) -> Described:
    return Described(symbol("amqp:sql-filter"), text)


def like_filters(count: int) -> dict[str, Described]:
    return {f"f{i}": sql(f"a LIKE '%x{i}%' OR a LIKE '%'") for i in range(count)}


MESSAGE = DictMessageView(application_properties={"a": "y" * MB})


def test_an_expensive_filter_set_is_stopped_and_counted(clock: FakeClock) -> None:
    filter_set = decode_filter_set(like_filters(32))
    assert filter_set.matches(MESSAGE) is False
    assert filter_set.stats.budget_exceeded == 1
    assert filter_set.stats.nulls == 1
    assert filter_set.stats.matches == 0
    outcome = filter_set.evaluate(MESSAGE)
    assert outcome.result is None and outcome.budget_exceeded
    assert outcome.key == "f1"  # the first filter ran, the second was never started
    assert outcome.reason == "the per-message evaluation budget was exceeded"
    assert filter_set.stats.budget_exceeded == 2


def test_a_real_tiny_budget_stops_real_work() -> None:
    """No fake clock: thirty-two scans of a 1 MB string against a budget of a microsecond."""
    filter_set = decode_filter_set(like_filters(32), Limits(eval_budget_ms=0.001))
    assert filter_set.matches(MESSAGE) is False
    assert filter_set.stats.budget_exceeded == 1
    generous = decode_filter_set(like_filters(32), Limits(eval_budget_ms=60_000))
    assert generous.matches(MESSAGE) is True
    assert generous.stats.budget_exceeded == 0


@pytest.mark.parametrize("group", ["amqp:all-filter", "amqp:any-filter", "amqp:not-filter",
                                   "apache.org:and-filter:list"])
def test_groups_check_the_budget_between_members(clock: FakeClock, group: str) -> None:
    members: list[Any] = [sql("a IS NOT NULL")] * 60
    nested: Any = Described(symbol(group), members)
    for _ in range(5):
        nested = Described(symbol(group), [nested, sql("a IS NOT NULL")])
    filter_set = decode_filter_set({"g": nested})  # one filter: the group checks itself
    assert filter_set.matches(MESSAGE) is False
    assert filter_set.stats.budget_exceeded == 1
    assert clock.readings < 10  # stopped at once, not after 65 members


def test_topic_bindings_check_the_budget_while_searching(clock: FakeClock) -> None:
    binding = Described(symbol("apache.org:legacy-amqp-topic-binding:string"), "#.b.#.c")
    filter_set = decode_filter_set({"t": binding})
    view = DictMessageView(properties={"subject": "a." * 100_000 + "c"})
    assert filter_set.matches(view) is False
    assert filter_set.stats.budget_exceeded == 1


def test_link_filter_counts_budget_refusals(clock: FakeClock) -> None:
    link = LinkFilter(decode_filter_set(like_filters(4)), consumer=1, logger=SILENT)
    message = FiltexPlugin.message(encode_message(application_properties={"a": "y" * 1000}))
    for _ in range(3):
        assert link.matches(message) is False
    stats = link.filter_set.stats
    assert (stats.evaluations, stats.budget_exceeded, stats.matches) == (3, 3, 0)


def test_a_finished_true_is_not_overturned(clock: FakeClock) -> None:
    """One filter, no group: nothing to stop midway, and the clock is not even read."""
    filter_set = decode_filter_set({"one": sql("a LIKE '%y'")})
    assert filter_set.matches(MESSAGE) is True
    assert clock.readings == 0
    assert filter_set.stats.budget_exceeded == 0


def test_the_budget_is_per_message() -> None:
    """Each message starts a fresh budget: a cheap set under a real budget keeps matching."""
    filter_set: FilterSet = decode_filter_set(
        {"a": sql("a IS NOT NULL"), "b": sql("a IS NOT NULL")}, Limits(eval_budget_ms=60_000))
    small = DictMessageView(application_properties={"a": 1})
    assert all(filter_set.matches(small) for _ in range(1_000))
    assert filter_set.stats.budget_exceeded == 0
