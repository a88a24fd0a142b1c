"""The Apache filter registry's bindings and no-local (apache-filters §1, §2.1).

Legacy exchange bindings let AMQP 0-x style routing keys select messages by
``properties.subject`` (direct, topic) or by application properties (headers).
No-local drops messages that arrived on the consumer's own connection; the
engine cannot know connections, so the broker passes both identities in the
:class:`~filtex_proton.filters.base.EvaluationContext`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from filtex_proton.amqp.types import Kind, amqp_type_name, kind_of
from filtex_proton.amqp.view import MISSING, MessageView, Section
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import DecodeContext, EvaluationContext, FilterBase
from filtex_proton.filters.matching import (
    Matcher,
    Reference,
    check_entry_limit,
    read_reference,
    reference_matcher,
)
from filtex_proton.filters.wire import TEXT_KINDS, summarise

__all__ = [
    "DirectBinding", "HeadersBinding", "NoLocalFilter", "TopicBinding", "decode_direct",
    "decode_headers", "decode_no_local", "decode_topic",
]

#: How many candidate positions a topic search tries between two budget checks.
_BUDGET_STRIDE: Final = 256


def _subject(view: MessageView) -> str | None:
    value = view.field(Section.PROPERTIES, "subject")
    if value is MISSING or value is None or kind_of(value) not in TEXT_KINDS:
        return None
    return str(value)


def _text_value(value: Any, ctx: DecodeContext) -> str:
    if value is None or kind_of(value) not in TEXT_KINDS:
        raise ctx.type_error(value, "a string")
    limit = ctx.limits.max_sql_length
    if len(value) > limit:
        raise FilterError(
            f"{ctx.type_name} is {len(value)} characters long, more than {limit} "
            "(limit max_sql_length)",
            limit=True,
        )
    return str(value)


class DirectBinding(FilterBase):
    """§1.1: the subject equals the binding key exactly; no subject, no match."""

    __slots__ = ("key",)

    def __init__(self, descriptor: Any, value: Any, type_name: str, key: str) -> None:
        super().__init__(descriptor, value, type_name)
        self.key = key

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        return _subject(view) == self.key


def decode_direct(value: Any, ctx: DecodeContext) -> DirectBinding:
    return DirectBinding(ctx.descriptor, value, ctx.type_name, _text_value(value, ctx))


def _words(text: str) -> list[str]:
    """Dot-separated words; the empty string has none (so only '#' patterns match it)."""
    return text.split(".") if text else []


def _fits(segment: Sequence[str], words: Sequence[str], at: int) -> bool:
    return all(p == "*" or p == words[at + i] for i, p in enumerate(segment))


class TopicBinding(FilterBase):
    """§1.2: ``*`` matches exactly one word, ``#`` zero or more, words split on '.'.

    The pattern is split at its '#' words into segments of literal and '*'
    words: the first segment is anchored at the start, the last at the end,
    and each one in between is found at its leftmost position (which is
    optimal, since '#' absorbs anything). No regular expressions, no
    exponential backtracking; long searches check the evaluation budget.
    """

    __slots__ = ("hash_only", "segments")

    def __init__(self, descriptor: Any, value: Any, type_name: str, pattern: str) -> None:
        super().__init__(descriptor, value, type_name)
        self.hash_only = pattern == "#"
        segments: list[list[str]] = [[]]
        for word in _words(pattern):
            if word == "#":
                segments.append([])
            else:
                segments[-1].append(word)
        self.segments = tuple(tuple(s) for s in segments)

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        subject = _subject(view)
        if subject is None:
            return self.hash_only  # §1.2: without a subject only "#" matches
        words = _words(subject)
        first, last = self.segments[0], self.segments[-1]
        if len(self.segments) == 1:  # no '#': the pattern must cover every word
            return len(words) == len(first) and _fits(first, words, 0)
        end = len(words) - len(last)
        if end < len(first) or not _fits(first, words, 0) or not _fits(last, words, end):
            return False
        position = len(first)
        for segment in self.segments[1:-1]:
            found = self._find(segment, words, position, end, ctx)
            if found is None:
                return None
            if found < 0:
                return False
            position = found + len(segment)
        return True

    @staticmethod
    def _find(segment: Sequence[str], words: Sequence[str], start: int, end: int,
              ctx: EvaluationContext) -> int | None:
        """Leftmost position in ``[start, end - len(segment)]`` where ``segment``
        fits, -1 if none, ``None`` if the budget ran out while looking."""
        for tries, at in enumerate(range(start, end - len(segment) + 1)):
            if tries % _BUDGET_STRIDE == _BUDGET_STRIDE - 1 and ctx.over_budget():
                return None
            if _fits(segment, words, at):
                return at
        return -1


def decode_topic(value: Any, ctx: DecodeContext) -> TopicBinding:
    return TopicBinding(ctx.descriptor, value, ctx.type_name, _text_value(value, ctx))


class HeadersBinding(FilterBase):
    """§1.3: application properties against a map, ``x-match`` all (default) or any.

    A NULL value in the binding matches any value of a present key; other
    values match by §4.1.1's rules without modifiers (the legacy binding has
    none, so a leading '&' is literal).
    """

    __slots__ = ("entries", "match_all", "references")

    def __init__(self, descriptor: Any, value: Any, type_name: str, match_all: bool,
                 entries: tuple[tuple[Any, Matcher | None], ...],
                 references: tuple[tuple[str, Reference | None], ...]) -> None:
        super().__init__(descriptor, value, type_name)
        self.match_all = match_all
        self.entries = entries
        self.references = references
        """Each entry's value typed once (None: any value of a present key), in the order
        of ``entries``: what the node matcher, the pushdown and Spark read."""

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        for key, matcher in self.entries:
            value = view.field(Section.APPLICATION_PROPERTIES, key)
            ok = value is not MISSING and (matcher is None or matcher(value))
            if ok != self.match_all:
                return ok  # the first miss decides "all", the first hit decides "any"
        return self.match_all


_COMPOSITES: Final = frozenset({Kind.MAP, Kind.LIST, Kind.ARRAY, Kind.DESCRIBED})


def decode_headers(value: Any, ctx: DecodeContext) -> HeadersBinding:
    if not isinstance(value, dict):
        raise ctx.type_error(value, "a map")
    check_entry_limit(value, ctx.limits.max_property_entries, ctx.type_name)
    match_all = True
    entries: list[tuple[Any, Matcher | None]] = []
    references: list[tuple[str, Reference | None]] = []
    for key, reference in value.items():
        if kind_of(key) not in TEXT_KINDS:
            raise FilterError(f"key {summarise(key)} is a {amqp_type_name(key)}; "
                              f"{ctx.type_name} keys are strings")
        if key == "x-match":
            if reference not in ("all", "any") or kind_of(reference) not in TEXT_KINDS:
                raise FilterError(
                    f"x-match must be the symbol 'all' or 'any', not {summarise(reference)}"
                )
            match_all = reference == "all"
            continue
        if str(key).startswith("x-"):
            continue  # §1.3: other "x-" keys are ignored
        if reference is not None and kind_of(reference) in _COMPOSITES:
            raise FilterError(
                f"value of {summarise(key)} is a {amqp_type_name(reference)}; "
                f"{ctx.type_name} values are simple types only"
            )
        typed = None if reference is None else read_reference(reference, modifiers=False)
        entries.append((str(key), None if typed is None
                        else reference_matcher(typed, modifiers=False)))
        references.append((str(key), typed))
    return HeadersBinding(ctx.descriptor, value, ctx.type_name, match_all, tuple(entries),
                          tuple(references))


class NoLocalFilter(FilterBase):
    """§2.1: only messages that arrived on another connection than the consumer's.

    A message whose origin is unknown (``ctx.origin`` is ``None``: made by the
    broker itself, or from an upstream) did not arrive on the consumer's
    connection, so it matches.
    """

    __slots__ = ()

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        return ctx.origin is None or ctx.origin != ctx.consumer


def decode_no_local(value: Any, ctx: DecodeContext) -> NoLocalFilter:
    # The registry calls it a list (a composite without fields), but Qpid JMS,
    # ActiveMQ and the .NET clients send the string "NoLocalFilter{}": accept both.
    if not isinstance(value, list) and (value is None or kind_of(value) not in TEXT_KINDS):
        raise ctx.type_error(value, "a list (or the string Qpid JMS sends)")
    return NoLocalFilter(ctx.descriptor, value, ctx.type_name)
