"""LIKE patterns (§6.4.3.2) matched without backtracking.

A pattern is split at its unescaped ``%`` into segments of literal characters
and ``_`` (:func:`segments`, public so that every reader of a pattern splits it
alike). The first segment must match at the start, the last at the end, and
each one between is found at its leftmost position after the previous one:
``%`` consumes as few characters as possible, and the greedy leftmost choice is
never wrong for this pattern language, so nothing is ever retried.

Segments without ``_`` are found with ``str.find``. A segment with ``_`` costs
more: a regular expression without quantifiers (``.`` under DOTALL for each
``_``, so it matches a newline too) tries every start position, string length
times segment length in the worst case (``%a_a_…a_b%`` on ``aaaa…``). That is
the fastest way for short segments; a segment longer than
:data:`REGEX_SEGMENT_MAX` is found by a bit-parallel Shift-And scan instead,
one step per character whatever the segment's length (the segment's bits are
one Python int: a step touches one 30-bit digit per 30 characters of it). The
budget cannot interrupt one LIKE, so that worst case is what bounds it; see
docs/PERFORMANCE.md. Segments holding ``_`` longer than
:data:`MAX_WILDCARD_SEGMENT` are refused (the SQL length limit keeps literal
patterns below it; patterns taken from a message are not otherwise bounded).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "MAX_WILDCARD_SEGMENT", "REGEX_SEGMENT_MAX", "LikeError", "Segment", "compile_like", "segments",
]

Matcher = Callable[[str], bool]

REGEX_SEGMENT_MAX: Final = 200
"""Longest ``_`` segment searched with a regular expression (the measured crossover: at 1 MB
a regex search of 201 characters and a Shift-And scan both take about 0.1 s)."""
MAX_WILDCARD_SEGMENT: Final = 8192
"""Longest segment holding ``_`` a pattern may have (the default ``max_sql_length``)."""
_CACHED_PATTERN_MAX: Final = 4096
"""Longer patterns (from messages, typically) are compiled each time, not kept in the cache."""
_SCAN_CHUNK: Final = 8192


class LikeError(ValueError):
    """A pattern or escape character that is not valid (an evaluation error)."""


@dataclass(frozen=True, slots=True)
class Segment:
    """Characters between two unescaped ``%``; ``None`` stands for ``_`` (any one code point)."""

    items: tuple[str | None, ...]

    @property
    def literal(self) -> str | None:
        """The segment's text when it holds no ``_``, else ``None``."""
        if any(item is None for item in self.items):
            return None
        return "".join(item for item in self.items if item is not None)

    def regex(self) -> re.Pattern[str]:
        return re.compile(
            "".join("." if item is None else re.escape(item) for item in self.items), re.DOTALL
        )


def segments(pattern: str, escape: str | None = None) -> tuple[Segment, ...]:
    """The pattern split at its unescaped ``%``, escapes resolved (at least one segment).

    Public so that other readers of a pattern (the Spark translation) parse it exactly as
    the engine does. Raises :class:`LikeError` for an escape that is not one character or
    a pattern that ends with the escape character.
    """
    if escape is not None and len(escape) != 1:
        raise LikeError(f"the escape must be one character, not {len(escape)}")
    found: list[Segment] = []
    current: list[str | None] = []
    chars = iter(pattern)
    for char in chars:
        if escape is not None and char == escape:
            escaped = next(chars, None)
            if escaped is None:
                raise LikeError("the pattern ends with the escape character")
            current.append(escaped)
        elif char == "%":
            found.append(Segment(tuple(current)))
            current = []
        elif char == "_":
            current.append(None)
        else:
            current.append(char)
    found.append(Segment(tuple(current)))
    return tuple(found)


def _fixed(segment: Segment) -> Matcher:
    """A whole-string match for a pattern without ``%``."""
    literal = segment.literal
    if literal is not None:
        return literal.__eq__
    regex = segment.regex()
    return lambda text: regex.fullmatch(text) is not None


def _finder(segment: Segment) -> Callable[[str, int], int]:
    """Leftmost position at or after ``start`` where the segment matches, or -1."""
    literal = segment.literal
    if literal is not None:
        return lambda text, start: text.find(literal, start)
    if len(segment.items) > REGEX_SEGMENT_MAX:
        return _shift_and(segment)
    regex = segment.regex()

    def find(text: str, start: int) -> int:
        found = regex.search(text, start)
        return -1 if found is None else found.start()

    return find


def _shift_and(segment: Segment) -> Callable[[str, int], int]:
    """The Shift-And finder: bit ``j`` of ``state`` says the segment's first ``j + 1`` items
    match the characters ending here; a match ends where bit ``m - 1`` is set. Linear in
    the characters scanned, which are copied in chunks (never the whole rest of the string)."""
    items = segment.items
    width = len(items)
    wild = sum(1 << j for j, item in enumerate(items) if item is None)
    masks: dict[str, int] = {}
    for j, item in enumerate(items):
        if item is not None:
            masks[item] = masks.get(item, wild) | (1 << j)
    hit = 1 << (width - 1)
    get = masks.get

    def find(text: str, start: int) -> int:
        state = 0
        for base in range(start, len(text), _SCAN_CHUNK):
            for index, char in enumerate(text[base:base + _SCAN_CHUNK], base):
                state = ((state << 1) | 1) & get(char, wild)
                if state & hit:
                    return index - width + 1
        return -1

    return find


def _at(segment: Segment) -> Callable[[str, int], bool]:
    """Whether the segment matches exactly at ``position``."""
    literal = segment.literal
    if literal is not None:
        return lambda text, position: text.startswith(literal, position)
    regex = segment.regex()
    return lambda text, position: regex.match(text, position) is not None


def _general(parts: tuple[Segment, ...]) -> Matcher:
    first, middle, last = parts[0], parts[1:-1], parts[-1]
    first_len, last_len = len(first.items), len(last.items)
    first_at, last_at = _at(first), _at(last)
    finders = [(_finder(s), len(s.items)) for s in middle if s.items]
    minimum = first_len + last_len + sum(length for _, length in finders)

    def match(text: str) -> bool:
        if len(text) < minimum or not first_at(text, 0):
            return False
        position = first_len
        end = len(text) - last_len
        for find, length in finders:
            found = find(text, position)
            if found < 0 or found + length > end:
                return False
            position = found + length
        return last_at(text, end)

    return match


def _compile(pattern: str, escape: str | None = None) -> Matcher:
    parts = segments(pattern, escape)
    for segment in parts:
        if len(segment.items) > MAX_WILDCARD_SEGMENT and segment.literal is None:
            raise LikeError(f"a segment holding '_' is {len(segment.items)} characters long, "
                            f"more than {MAX_WILDCARD_SEGMENT}")
    if len(parts) == 1:
        return _fixed(parts[0])
    first, last = parts[0].literal, parts[-1].literal
    if len(parts) == 2 and first is not None and last is not None:
        if not last:
            return (lambda text: text.startswith(first)) if first else (lambda text: True)
        if not first:
            return lambda text: text.endswith(last)
    if len(parts) == 3 and first == "" and last == "":
        inner = parts[1].literal
        if inner is not None:
            return lambda text: inner in text
    return _general(parts)


_compile_cached = functools.lru_cache(maxsize=512)(_compile)


def compile_like(pattern: str, escape: str | None = None) -> Matcher:
    """A function telling whether a string matches ``pattern`` (§6.4.3.2).

    ``escape`` must be a single character or ``None`` (there is no default
    escape). Raises :class:`LikeError` for an invalid escape or pattern.
    Patterns up to a few KiB are compiled once and cached; longer ones (which
    only messages can supply) are not, so hostile messages cannot fill memory.
    """
    if len(pattern) <= _CACHED_PATTERN_MAX:
        return _compile_cached(pattern, escape)
    return _compile(pattern, escape)


# ``compile_like.__wrapped__`` compiles afresh, uncached, as it did under ``lru_cache``.
functools.update_wrapper(compile_like, _compile, assigned=(), updated=())
