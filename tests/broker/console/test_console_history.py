"""The console's 15-minute history (broker/console/history.py), sample by sample: rates from
each link's own counters, detached and new links, the window's length, what is forgotten."""

from __future__ import annotations

import math

import pytest

from filtex_broker.console.history import History
from filtex_broker.console.snapshot import LinkCopy, NodeCopy, Overview


def _link(link_id: str, *, sent: int = 0, evaluated: int = 0, matched: int = 0,
          ruled_out: int = 0, filtered: bool = True) -> LinkCopy:
    counters = ({"evaluated": evaluated, "matched": matched,
                 "not_matched": evaluated - matched, "unknown": 0, "errors": 0,
                 "over_budget": 0, "ruled_out": ruled_out} if filtered else None)
    return LinkCopy(id=link_id, name=link_id, node="q", connection=1, peer="p",
                    role="consumer", durable=False, attached=True, presettled=False,
                    credit=10, sent=sent, unsettled=0, filter_set=None, counters=counters)


def _state(time: float, *nodes: NodeCopy, memory: int = 0) -> Overview:
    return Overview(time=time, container_id="b", version="0", connections=1,
                    connections_closed_idle=0, memory_used=memory, memory_limit=1000,
                    nodes=list(nodes), refusals=[], refusal_counts={}, upstream=None)


def _node(name: str, messages_in: int, depth: int, *links: LinkCopy) -> NodeCopy:
    return NodeCopy(name, "queue", depth, 0, messages_in, len(links), 0, list(links))


def test_rates_are_differences_per_second_and_the_first_sample_is_a_level() -> None:
    history = History(interval=2.0)
    history.add(_state(100.0, _node("q", 10, 4, _link("a", sent=2, evaluated=8, matched=2)),
                       memory=50))
    history.add(_state(102.0, _node("q", 30, 6, _link("a", sent=12, evaluated=28, matched=12)),
                       memory=70))
    got = history.as_json()
    assert got["times"] == [100.0, 102.0]
    assert got["nodes"]["q"] == {"in": [None, 10.0], "out": [None, 5.0],
                                 "filtered_out": [None, 5.0], "depth": [4.0, 6.0]}
    assert got["links"]["a"] == {"node": "q", "matched": [None, 5.0], "not_matched": [None, 5.0]}
    assert got["memory"] == {"limit": 1000, "used": [50.0, 70.0]}


def test_a_detached_link_takes_its_counts_and_a_new_one_counts_from_zero() -> None:
    """A node's out is the sum over the links attached now: a link leaving must not make the
    rate negative, and a link that attached between samples counts all it did."""
    history = History(interval=1.0)
    history.add(_state(0.0, _node("q", 0, 0, _link("a", sent=100), _link("b", sent=50))))
    history.add(_state(1.0, _node("q", 0, 0, _link("b", sent=60), _link("c", sent=7))))
    assert history.as_json()["nodes"]["q"]["out"] == [None, 17.0]


def test_a_counter_that_restarts_counts_from_zero() -> None:
    """The same link id attached again (its counters start over)."""
    history = History(interval=1.0)
    history.add(_state(0.0, _node("q", 0, 0, _link("a", sent=100))))
    history.add(_state(1.0, _node("q", 0, 0, _link("a", sent=3))))
    assert history.as_json()["nodes"]["q"]["out"] == [None, 3.0]


def test_ruled_out_messages_count_as_filtered_out_and_unfiltered_links_have_no_series() -> None:
    history = History(interval=1.0)
    history.add(_state(0.0, _node("q", 0, 0, _link("f"), _link("u", filtered=False))))
    history.add(_state(1.0, _node("q", 0, 0, _link("f", evaluated=4, matched=1, ruled_out=6),
                                  _link("u", filtered=False, sent=9))))
    got = history.as_json()
    assert got["nodes"]["q"]["filtered_out"] == [None, 9.0]
    assert list(got["links"]) == ["f"]


def test_the_window_keeps_span_over_interval_points() -> None:
    history = History(interval=5.0, span=20.0)
    for second in range(0, 60, 5):
        history.add(_state(float(second), _node("q", second, second)))
    got = history.as_json()
    assert got["times"] == [40.0, 45.0, 50.0, 55.0]
    assert got["nodes"]["q"]["depth"] == [40.0, 45.0, 50.0, 55.0]
    assert got["nodes"]["q"]["in"] == [1.0, 1.0, 1.0, 1.0]
    assert got["span"] == 20.0


def test_a_node_that_leaves_is_null_then_forgotten_once_out_of_the_window() -> None:
    history = History(interval=1.0, span=3.0)
    history.add(_state(0.0, _node("gone", 0, 1), _node("stays", 0, 1)))
    history.add(_state(1.0, _node("stays", 0, 1)))
    assert history.as_json()["nodes"]["gone"]["depth"] == [1.0, None]
    history.add(_state(2.0, _node("stays", 0, 1)))
    assert "gone" in history.as_json()["nodes"]
    history.add(_state(3.0, _node("stays", 0, 1)))
    assert "gone" not in history.as_json()["nodes"]
    assert len(history.as_json()["nodes"]["stays"]["depth"]) == 3


def test_a_node_that_arrives_late_is_null_before() -> None:
    history = History(interval=1.0)
    history.add(_state(0.0))
    history.add(_state(1.0, _node("new", 5, 5)))
    assert history.as_json()["nodes"]["new"] == {"in": [None, 5.0], "out": [None, 0.0],
                                                 "filtered_out": [None, 0.0],
                                                 "depth": [None, 5.0]}


def test_a_clock_step_back_is_not_a_sample() -> None:
    history = History(interval=1.0)
    history.add(_state(10.0, _node("q", 0, 0)))
    history.add(_state(9.0, _node("q", 5, 0)))
    assert history.as_json()["times"] == [10.0]


@pytest.mark.parametrize("interval", [0.5, 5.0, 60.0])
def test_at_most_fifteen_minutes_are_kept(interval: float) -> None:
    history = History(interval=interval)
    assert math.isclose(history.points * interval, 900.0)
