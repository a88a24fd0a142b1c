"""The console's last 15 minutes: per-node and per-link rates, depth and memory, sampled.

Why sampled here and not computed by the page: a page opened now must draw the last
minutes at once, and rates from two polls of the page are blank on its first paint. The
console samples the broker's overview every ``console_sample_interval`` seconds (5 by
default, RabbitMQ's management sampling) whether or not a page is open, and keeps one point
per sample for :data:`SPAN` seconds.

Rates come from each link's own counters, so a link that detaches between two samples
takes its counts with it instead of making a node's rate negative, and a link that
attached in between counts from zero. Storage is a ``float64`` array per series (NaN where
the node or link did not exist): 8 bytes per point, 180 points per series at the default.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from dataclasses import dataclass
from typing import Any, Final

from filtex_broker.console.snapshot import NodeCopy, Overview

__all__ = ["NODE_SERIES", "SPAN", "History"]

SPAN: Final = 900.0
"""Seconds of history kept (15 minutes)."""

NODE_SERIES: Final = ("in", "out", "filtered_out", "depth")
"""Per node: messages stored, sent, filtered out (per second), and depth (messages)."""
LINK_SERIES: Final = ("matched", "not_matched")
"""Per filtered link: messages its filters let through and did not (per second)."""

_ABSENT: Final = math.nan


@dataclass(frozen=True, slots=True)
class _Totals:
    """One link's counters at a sample (what a rate is a difference of)."""

    sent: int
    filtered_out: int
    matched: int
    not_matched: int


_NEW: Final = _Totals(0, 0, 0, 0)
"""The counters of a link before its first sample."""


def _grew(now: int, before: int) -> int:
    """What a counter added since the previous sample (all of it if it restarted, as for a
    link of the same id attached again)."""
    return now if now < before else now - before


class History:
    """One point per sample, the last ``SPAN`` seconds of them."""

    def __init__(self, interval: float, span: float = SPAN) -> None:
        self.interval = interval
        self.points = max(2, round(span / interval))
        self.times: deque[float] = deque(maxlen=self.points)
        self.memory_used = array("d")
        self.memory_limit: int | None = None
        self.nodes: dict[str, dict[str, array[float]]] = {}
        self.links: dict[str, tuple[str, dict[str, array[float]]]] = {}
        self._last_time: float | None = None
        self._last_links: dict[str, _Totals] = {}
        self._last_in: dict[str, int] = {}
        self._samples = 0
        self._seen: dict[str, int] = {}
        """Node name -> the number of the last sample that had it."""
        self._seen_links: dict[str, int] = {}

    def add(self, state: Overview) -> None:
        """Take one sample (on the console's thread, from the reactor's copies)."""
        seconds = None if self._last_time is None else state.time - self._last_time
        if seconds is not None and seconds <= 0:
            return  # a clock step back: this sample cannot give a rate
        totals: dict[str, _Totals] = {}
        node_values: dict[str, dict[str, float]] = {}
        link_values: dict[str, tuple[str, dict[str, float]]] = {}
        for node in state.nodes:
            node_values[node.name] = self._node_point(node, seconds, totals, link_values)
        self._append(state.time, state.memory_used, node_values, link_values)
        self.memory_limit = state.memory_limit
        self._last_time = state.time
        self._last_links = totals
        self._last_in = {node.name: node.messages_in for node in state.nodes}

    def _node_point(self, node: NodeCopy, seconds: float | None, totals: dict[str, _Totals],
                    link_values: dict[str, tuple[str, dict[str, float]]]) -> dict[str, float]:
        sent = filtered = 0
        for link in node.links:
            counters = link.counters or {}
            now = _Totals(link.sent, link.filtered_out, counters.get("matched", 0),
                          counters.get("not_matched", 0))
            totals[link.id] = now
            before = self._last_links.get(link.id, _NEW)
            sent += _grew(now.sent, before.sent)
            filtered += _grew(now.filtered_out, before.filtered_out)
            if link.counters is not None and seconds is not None:
                link_values[link.id] = (node.name, {
                    "matched": _grew(now.matched, before.matched) / seconds,
                    "not_matched": _grew(now.not_matched, before.not_matched) / seconds})
        if seconds is None:  # the first sample: a level, no rate yet
            return {"depth": node.depth}
        return {"in": _grew(node.messages_in, self._last_in.get(node.name, 0)) / seconds,
                "out": sent / seconds, "filtered_out": filtered / seconds,
                "depth": node.depth}

    def _append(self, time: float, memory: int, node_values: dict[str, dict[str, float]],
                link_values: dict[str, tuple[str, dict[str, float]]]) -> None:
        self._samples += 1
        for name in node_values:
            if name not in self.nodes:
                self.nodes[name] = {key: self._new_series() for key in NODE_SERIES}
            self._seen[name] = self._samples
        for link_id, (node, _) in link_values.items():
            if link_id not in self.links:
                self.links[link_id] = (node, {key: self._new_series() for key in LINK_SERIES})
            self._seen_links[link_id] = self._samples
        full = len(self.times) == self.points
        self.times.append(time)
        self._shift(self.memory_used, full, memory)
        for name, series in self.nodes.items():
            values = node_values.get(name, {})
            for key, column in series.items():
                self._shift(column, full, values.get(key, _ABSENT))
        for link_id, (_, series) in self.links.items():
            values = link_values.get(link_id, (None, {}))[1]
            for key, column in series.items():
                self._shift(column, full, values.get(key, _ABSENT))
        self._forget_gone()

    def _new_series(self) -> array[float]:
        """A series absent from every point so far (the new point is appended to it next)."""
        return array("d", [_ABSENT]) * len(self.times)

    @staticmethod
    def _shift(column: array[float], full: bool, value: float) -> None:
        if full:
            del column[0]
        column.append(float(value))

    def _forget_gone(self) -> None:
        """Series without a point left in the window go (nodes and links that left)."""
        oldest = self._samples - self.points
        for name in [name for name, seen in self._seen.items() if seen <= oldest]:
            del self.nodes[name], self._seen[name]
        for link_id in [link for link, seen in self._seen_links.items() if seen <= oldest]:
            del self.links[link_id], self._seen_links[link_id]

    def as_json(self) -> dict[str, Any]:
        """``GET /api/history``: columns aligned with ``times``, null where absent."""
        return {
            "interval": self.interval, "span": self.points * self.interval,
            "times": list(self.times),
            "memory": {"limit": self.memory_limit, "used": _json_column(self.memory_used)},
            "nodes": {name: {key: _json_column(column) for key, column in series.items()}
                      for name, series in sorted(self.nodes.items())},
            "links": {link_id: {"node": node,
                                **{key: _json_column(column) for key, column in series.items()}}
                      for link_id, (node, series) in sorted(self.links.items())},
        }


def _json_column(column: array[float]) -> list[float | None]:
    return [None if math.isnan(value) else round(value, 3) for value in column]
