"""The JSON the API answers with (docs/CONSOLE.md), built from the reactor thread's copies.

Runs on the console's thread: normalising filter sets (cached per compiled set: a link's
filters never change), decoding peeked messages and evaluating a tested filter on them
need nothing the reactor is using. Message bodies are left out unless asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from filtex_broker.console.snapshot import LinkCopy, NodeCopy, Overview, PeekedMessage
from filtex_broker.streams.node import StreamFigures
from filtex_proton.limits import Limits
from filtex_proton.plugin import FilterSet
from filtex_proton.tester import KINDS, check, describe, message_json, pushdown_json, verdict

__all__ = ["DEFAULT_PEEK", "MAX_PEEK", "MAX_TEXT", "Describer", "TestRequest", "messages_json",
           "overview_json", "test_json"]

DEFAULT_PEEK: Final = 20
MAX_PEEK: Final = 500
"""At most this many messages are peeked per request (a console must not cost the broker)."""
MAX_TEXT: Final = 64 * 1024
"""The longest filter text the tester takes (the broker's own limits apply inside)."""
MAX_BODY: Final = 16 * 1024
"""Bodies longer than this (encoded) are shown as their size only."""


class Describer:
    """Each compiled filter set's description, made once (sets are immutable once compiled)."""

    def __init__(self) -> None:
        self._cache: dict[int, tuple[FilterSet, list[dict[str, Any]]]] = {}

    def __call__(self, filter_set: FilterSet) -> list[dict[str, Any]]:
        cached = self._cache.get(id(filter_set))
        if cached is not None and cached[0] is filter_set:
            return cached[1]
        described = describe(filter_set)
        self._cache[id(filter_set)] = (filter_set, described)
        return described

    def keep_only(self, live: set[int]) -> None:
        """Forget the sets no link has any more (called after each overview)."""
        for key in [key for key in self._cache if key not in live]:
            del self._cache[key]


def _link_json(link: LinkCopy, describer: Describer) -> dict[str, Any]:
    return {
        "id": link.id, "name": link.name, "node": link.node, "connection": link.connection,
        "peer": link.peer, "role": link.role, "durable": link.durable,
        "attached": link.attached, "presettled": link.presettled, "credit": link.credit,
        "sent": link.sent, "unsettled": link.unsettled,
        "filtered": link.filter_set is not None,
        "filters": describer(link.filter_set) if link.filter_set is not None else [],
        "counters": link.counters, "pushed_down": link.pushed_down, "received": link.received,
        "position": link.position, "lag": link.lag,
    }


def _node_json(node: NodeCopy, describer: Describer) -> dict[str, Any]:
    links = [_link_json(link, describer) for link in node.links]
    out = sum(link.sent for link in node.links)
    filtered_out = sum(link.filtered_out for link in node.links)
    return {"name": node.name, "kind": node.kind, "depth": node.depth, "bytes": node.bytes,
            "in": node.messages_in, "out": out, "filtered_out": filtered_out,
            "expired": node.expired, "scheduled": node.scheduled,
            "consumers": node.consumers, "producers": node.producers, "links": links,
            "stream": _stream_json(node.stream)}


def _stream_json(figures: StreamFigures | None) -> dict[str, Any] | None:
    if figures is None:
        return None
    held = figures.messages > 0
    return {"first_offset": figures.first_offset if held else None,
            "last_offset": figures.last_offset,
            "next_offset": figures.next_offset, "segments": figures.segments,
            "segments_dropped": figures.dropped_segments, "skipped": figures.skipped}


def overview_json(state: Overview, describer: Describer) -> dict[str, Any]:
    """``GET /api/overview``."""
    nodes = sorted(state.nodes, key=lambda node: node.name)
    answer = {
        "time": state.time, "broker": {"container_id": state.container_id,
                                       "version": state.version,
                                       "connections": state.connections,
                                       "connections_closed_idle":
                                           state.connections_closed_idle,
                                       "memory": {"used": state.memory_used,
                                                  "limit": state.memory_limit}},
        "nodes": [_node_json(node, describer) for node in nodes],
        "refusals": {"counts": state.refusal_counts, "recent": [
            {"time": r.at, "link": r.link, "address": r.address, "reason": r.reason,
             "detail": r.detail} for r in reversed(state.refusals)]},
        "upstream": state.upstream,
    }
    describer.keep_only({id(link.filter_set) for node in state.nodes for link in node.links
                         if link.filter_set is not None})
    return answer


def _message_json(message: PeekedMessage, body: bool) -> dict[str, Any]:
    shown = message_json(message.data, body=body and len(message.data) <= MAX_BODY)
    if body and len(message.data) > MAX_BODY:
        shown["body"] = {"not_shown": f"{len(message.data)} bytes, more than {MAX_BODY}"}
    return {"position": message.position, "state": message.state, "size": len(message.data),
            "origin": message.origin if isinstance(message.origin, int | str) else None,
            "message": shown}


def messages_json(node: str, messages: list[PeekedMessage], body: bool) -> dict[str, Any]:
    """``GET /api/messages``: a peek, oldest first."""
    return {"node": node, "body_shown": body,
            "messages": [_message_json(message, body) for message in messages]}


@dataclass(frozen=True, slots=True)
class TestRequest:
    """``POST /api/test``, checked: what to compile, and where to try it."""

    text: str
    kind: str
    node: str | None
    limit: int
    body: bool

    @classmethod
    def parse(cls, raw: Any) -> TestRequest:
        """Raises ``ValueError`` with a message for the page."""
        if not isinstance(raw, dict):
            raise ValueError("the request is a JSON object")
        text, kind = raw.get("text"), raw.get("kind", "sql")
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text: the filter to test (a non-empty string)")
        if len(text) > MAX_TEXT:
            raise ValueError(f"text: at most {MAX_TEXT} characters")
        if kind not in KINDS:
            raise ValueError(f"kind: one of {', '.join(KINDS)}")
        node = raw.get("node")
        if node is not None and not isinstance(node, str):
            raise ValueError("node: a node name or null")
        return cls(text, kind, node or None, _limit(raw.get("limit", DEFAULT_PEEK)),
                   bool(raw.get("body", False)))


def _limit(value: Any) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_PEEK:
        raise ValueError(f"limit: a number of messages from 0 to {MAX_PEEK}")
    return value


def parse_limit(value: Any) -> int:
    """A ``limit`` query parameter; ``ValueError`` with a message for the page."""
    return _limit(value)


def test_json(request: TestRequest, limits: Limits,
              messages: list[PeekedMessage] | None) -> dict[str, Any]:
    """``POST /api/test``: validity, normalised form, pushdown, Spark, verdicts."""
    from filtex_proton.tester import spark_text

    checked = check(request.text, request.kind, limits)
    answer: dict[str, Any] = {"check": checked.as_json(), "pushdown": None, "spark": None,
                              "node": request.node, "messages": None}
    filter_set = checked.filter_set
    if filter_set is None:
        return answer
    answer["pushdown"] = pushdown_json(filter_set)
    answer["spark"] = spark_text(filter_set)
    if messages is not None:
        answer["messages"] = [
            {**_message_json(message, request.body),
             **verdict(filter_set, message.data, origin=message.origin)}
            for message in messages]
    return answer
