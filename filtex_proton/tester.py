"""The filter tester as data: what ``filtex check`` prints, for a program to show.

A container's management page (filtex-broker's console, docs/CONSOLE.md) lets an
operator paste a filter and see whether it is valid and where it is not, its
normalised form, what a relay would push upstream (:mod:`filtex_proton.pushdown`),
what Spark would do with it (``filtex-spark explain``), and its verdict on real
messages, TRUE, FALSE or NULL and why. Everything here is plain JSON-ready data
(dicts, lists, strings, numbers) and nothing touches a link's counters: a tested
filter set is compiled afresh, and a message is read from a copy of its bytes.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from proton import Described, symbol

from filtex_proton.amqp import DecodeError, decode_value
from filtex_proton.amqp.message import RawMessageView
from filtex_proton.amqp.view import Section
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import EvaluationContext
from filtex_proton.filters.typed_json import TypedJsonError, filter_set_from_json, to_json
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.limits import DEFAULT_LIMITS, Limits
from filtex_proton.pushdown import client_selector, pushdown

__all__ = ["KINDS", "Checked", "check", "describe", "message_json", "notes_on", "pushdown_json",
           "spark_text", "verdict"]

Kind = Literal["sql", "jms", "json"]
KINDS: Final[dict[str, str]] = {
    "sql": "amqp:sql-filter",
    "jms": "apache.org:selector-filter:string",
    "json": "a typed-JSON filter set (docs/TYPED_JSON.md)",
}
"""What a pasted text may be: a SQL filter (spec §6), a JMS selector, a filter set."""

_SECTIONS: Final = (Section.HEADER, Section.DELIVERY_ANNOTATIONS, Section.MESSAGE_ANNOTATIONS,
                    Section.PROPERTIES, Section.APPLICATION_PROPERTIES, Section.FOOTER)


@dataclass(frozen=True, slots=True)
class Checked:
    """A pasted filter: valid (with its compiled set) or not (with what and where)."""

    filter_set: FilterSet | None
    error: dict[str, Any] | None = None
    """``message`` (rendered, with the caret), ``reason``, ``line``/``column``/``offset``
    (SQL errors), ``key``, ``limit``."""
    filters: list[dict[str, Any]] = field(default_factory=list)
    """:func:`describe` of the set, when valid."""
    notes: list[str] = field(default_factory=list)
    """What a valid filter does that its writer may not mean (:func:`notes_on`)."""

    def as_json(self) -> dict[str, Any]:
        return {"valid": self.filter_set is not None, "error": self.error,
                "filters": self.filters, "notes": self.notes}


def notes_on(filters: Iterable[Any]) -> list[str]:
    """The remarks on every SQL filter of ``filters``, groups included: functions that are
    NULL (§6.4.4.3), JMS header names in AMQP SQL, forms other brokers may refuse."""
    from filtex_proton.filters.group import GroupFilter
    from filtex_proton.filters.sql import SqlFilter
    from filtex_proton.sql.portability import notes

    found: list[str] = []
    pending = list(filters)
    while pending:  # iteratively: groups nest
        item = pending.pop(0)
        if isinstance(item, GroupFilter):
            pending[:0] = item.members
        elif isinstance(item, SqlFilter):
            sql = item.compiled
            found.extend(note.render() for note in notes(sql.ast, sql.text, sql.dialect))
    return found


def check(text: str, kind: str, limits: Limits = DEFAULT_LIMITS) -> Checked:
    """Compile ``text`` as a filter of ``kind`` (:data:`KINDS`); never raises for bad input."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r} is not one of {', '.join(KINDS)}")
    try:
        if kind == "json":
            try:
                raw = json.loads(text)
                described = filter_set_from_json(raw)
            except json.JSONDecodeError as exc:
                return Checked(None, {"message": f"not JSON: {exc}", "reason": exc.msg,
                                      "line": exc.lineno, "column": exc.colno,
                                      "offset": exc.pos})
            except RecursionError:
                return Checked(None, {"message": "not JSON: nested too deeply",
                                      "reason": "nested too deeply"})
            except TypedJsonError as exc:
                return Checked(None, {"message": str(exc), "reason": str(exc)})
        else:
            described = {"filter": Described(symbol(KINDS[kind]), text)}
        filter_set = decode_filter_set(described, limits)
    except FilterError as exc:
        return Checked(None, _error(exc))
    return Checked(filter_set, None, describe(filter_set),
                   notes_on(item for _key, item in filter_set.items()))


def _error(exc: FilterError) -> dict[str, Any]:
    error: dict[str, Any] = {"message": exc.render(), "reason": exc.reason, "key": exc.key,
                             "limit": exc.limit}
    if exc.position is not None:
        error.update(line=exc.position.line, column=exc.position.column,
                     offset=exc.position.offset)
    return error


def describe(filter_set: FilterSet) -> list[dict[str, Any]]:
    """Each filter of a set: its key, its type and its normalised form (typed JSON)."""
    described = []
    for key, item in filter_set.items():
        normal = item.normalised()
        described.append({"key": key, "type": item.type_name,
                          "normalised": to_json(normal.value),
                          "descriptor": str(normal.descriptor)})
    return described


def pushdown_json(filter_set: FilterSet) -> dict[str, Any]:
    """What a relay puts on an upstream source for this set (docs/BROKER.md, relay mode)."""
    plan = pushdown(filter_set)
    selector = plan.selector or client_selector(filter_set)
    return {"selector": selector, "pushed": list(plan.pushed), "exact": plan.exact,
            "kept_local": list(plan.reasons)}


def spark_text(filter_set: FilterSet) -> str:
    """``filtex-spark explain`` for the set: per filter, Spark expressions or the engine."""
    from filtex_proton.spark.plan import explain  # needs neither PySpark nor pyarrow

    try:
        return str(explain(filter_set))
    except Exception as exc:  # an explanation must never cost the page its other answers
        return f"(no Spark plan: {type(exc).__name__}: {exc})"


def verdict(filter_set: FilterSet, data: bytes, *, origin: Hashable | None = None,
            consumer: Hashable | None = None) -> dict[str, Any]:
    """The set's verdict on one encoded message: ``result`` TRUE/FALSE/NULL and ``reason``."""
    try:
        view = RawMessageView(data)
    except DecodeError as exc:
        return {"result": "NULL", "reason": f"not an AMQP message: {exc}", "key": None}
    outcome = filter_set.evaluate(view, EvaluationContext(origin=origin, consumer=consumer,
                                                          explain=True))
    result = "NULL" if outcome.result is None else "TRUE" if outcome.result else "FALSE"
    return {"result": result, "reason": outcome.reason if result != "TRUE" else None,
            "key": outcome.key}


def message_json(data: bytes, *, body: bool = False) -> dict[str, Any]:
    """A message's sections as typed JSON (the body only if asked: it may be private)."""
    try:
        view = RawMessageView(data)
        shown: dict[str, Any] = {}
        for section in _SECTIONS:
            entries = view.section(section)
            if entries is not None:
                shown[section.value] = {str(k): to_json(v) for k, v in entries.items()}
        if body:
            shown["body"] = [to_json(decode_value(data[span.value:span.end])[0])
                             for span in view.spans if span.section is None]
    except DecodeError as exc:
        return {"error": f"not an AMQP message: {exc}"}
    return shown
