"""LIKE patterns (§6.4.3.2) matched without backtracking.

A pattern is split at its unescaped ``%`` into segments of literal characters
and ``_``. The first segment must match at the start, the last at the end, and
each one between is found at its leftmost position after the previous one:
``%`` consumes as few characters as possible, and the greedy leftmost choice is
never wrong for this pattern language, so nothing is ever retried. Segments
without ``_`` are found with ``str.find``; the others with a regular expression
that has no quantifier (``.`` under DOTALL for each ``_``, so it matches a
newline too). Either way the time is linear in the length of the string for a
given pattern: a hostile pattern cannot make it exponential.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LikeError", "compile_like"]

Matcher = Callable[[str], bool]


class LikeError(ValueError):
    """A pattern or escape character that is not valid (an evaluation error)."""


@dataclass(frozen=True, slots=True)
class _Segment:
    """Characters between two ``%``; ``None`` stands for ``_`` (any one code point)."""

    items: tuple[str | None, ...]

    @property
    def literal(self) -> str | None:
        if any(item is None for item in self.items):
            return None
        return "".join(item for item in self.items if item is not None)

    def regex(self) -> re.Pattern[str]:
        return re.compile(
            "".join("." if item is None else re.escape(item) for item in self.items), re.DOTALL
        )


def _segments(pattern: str, escape: str | None) -> list[_Segment]:
    segments: list[_Segment] = []
    current: list[str | None] = []
    chars = iter(pattern)
    for char in chars:
        if escape is not None and char == escape:
            escaped = next(chars, None)
            if escaped is None:
                raise LikeError("the pattern ends with the escape character")
            current.append(escaped)
        elif char == "%":
            segments.append(_Segment(tuple(current)))
            current = []
        elif char == "_":
            current.append(None)
        else:
            current.append(char)
    segments.append(_Segment(tuple(current)))
    return segments


def _fixed(segment: _Segment) -> Matcher:
    """A whole-string match for a pattern without ``%``."""
    literal = segment.literal
    if literal is not None:
        return literal.__eq__
    regex = segment.regex()
    return lambda text: regex.fullmatch(text) is not None


def _finder(segment: _Segment) -> Callable[[str, int], int]:
    """Leftmost position at or after ``start`` where the segment matches, or -1."""
    literal = segment.literal
    if literal is not None:
        return lambda text, start: text.find(literal, start)
    regex = segment.regex()

    def find(text: str, start: int) -> int:
        found = regex.search(text, start)
        return -1 if found is None else found.start()

    return find


def _at(segment: _Segment) -> Callable[[str, int], bool]:
    """Whether the segment matches exactly at ``position``."""
    literal = segment.literal
    if literal is not None:
        return lambda text, position: text.startswith(literal, position)
    regex = segment.regex()
    return lambda text, position: regex.match(text, position) is not None


def _general(segments: list[_Segment]) -> Matcher:
    first, middle, last = segments[0], segments[1:-1], segments[-1]
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


@functools.lru_cache(maxsize=512)
def compile_like(pattern: str, escape: str | None = None) -> Matcher:
    """A function telling whether a string matches ``pattern`` (§6.4.3.2).

    ``escape`` must be a single character or ``None`` (there is no default
    escape). Raises :class:`LikeError` for an invalid escape or pattern.
    """
    if escape is not None and len(escape) != 1:
        raise LikeError(f"the escape must be one character, not {len(escape)}")
    segments = _segments(pattern, escape)
    if len(segments) == 1:
        return _fixed(segments[0])
    first, last = segments[0].literal, segments[-1].literal
    if len(segments) == 2 and first is not None and last is not None:
        if not last:
            return (lambda text: text.startswith(first)) if first else (lambda text: True)
        if not first:
            return lambda text: text.endswith(last)
    if len(segments) == 3 and first == "" and last == "":
        inner = segments[1].literal
        if inner is not None:
            return lambda text: inner in text
    return _general(segments)
