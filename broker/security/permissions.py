"""Per-user address permissions: which addresses a user may send to, receive from, browse.

Patterns work on address *segments*, split at ``.`` or ``/`` (RabbitMQ/AMQP
topic style, so ``orders.eu`` and ``queue/orders`` both read naturally):

* ``*`` matches exactly one segment (``orders.*`` matches ``orders.eu``, not
  ``orders`` nor ``orders.eu.paris``);
* ``#`` matches zero or more segments (``orders.#`` matches ``orders``,
  ``orders.eu`` and ``orders.eu.paris``; ``#`` alone matches every address);
* anything else is literal and case-sensitive.

Wildcards stand for whole segments only: ``ord*`` is refused when the users
file is loaded (a clear error beats a pattern that silently matches nothing).
``receive`` implies ``browse`` (who may consume may look).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Final

__all__ = ["Action", "Grants", "PatternError", "Principal", "compile_pattern"]

_SEPARATORS: Final = re.compile(r"([./])")
_ONE_SEGMENT: Final = "[^./]+"


class PatternError(ValueError):
    """An address pattern that cannot be used; the message says why."""


class Action(Enum):
    """What a link (or a message on an anonymous relay) wants to do with an address."""

    SEND = "send"
    RECEIVE = "receive"
    BROWSE = "browse"


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The regular expression (full match) for one address pattern."""
    if not pattern:
        raise PatternError("an empty address pattern matches nothing; use '#' for everything")
    parts = _SEPARATORS.split(pattern)
    segments, separators = parts[0::2], parts[1::2]
    out: list[str] = []
    for i, segment in enumerate(segments):
        if segment not in ("*", "#") and ("*" in segment or "#" in segment):
            raise PatternError(f"pattern {pattern!r}: wildcards must be whole segments "
                               f"('*' or '#' between separators), not {segment!r}")
        if segment == "" and len(segments) > 1:
            raise PatternError(f"pattern {pattern!r} has an empty segment")
        before = re.escape(separators[i - 1]) if i > 0 else ""
        after_leading_hash = i == 1 and segments[0] == "#"
        if segment == "#":
            if len(segments) == 1:
                out.append(".*")
            elif i == 0:
                out.append(f"(?:.*{re.escape(separators[0])})?")
            else:
                out.append(f"(?:{before}.*)?")
        else:
            prefix = "" if after_leading_hash else before
            out.append(prefix + (_ONE_SEGMENT if segment == "*" else re.escape(segment)))
    return re.compile("".join(out), re.DOTALL)


class _PatternSet:
    """Several patterns as one compiled alternation (one regex call per check)."""

    __slots__ = ("_regex", "patterns")

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        compiled = [compile_pattern(p).pattern for p in self.patterns]
        self._regex = re.compile("|".join(f"(?:{c})" for c in compiled), re.DOTALL) \
            if compiled else None

    def matches(self, address: str) -> bool:
        return self._regex is not None and self._regex.fullmatch(address) is not None


class Grants:
    """The address patterns one user holds for each action."""

    __slots__ = ("_browse", "_receive", "_send")

    def __init__(self, send: Iterable[str] = (), receive: Iterable[str] = (),
                 browse: Iterable[str] = ()) -> None:
        self._send = _PatternSet(send)
        self._receive = _PatternSet(receive)
        self._browse = _PatternSet(browse)

    def allows(self, action: Action, address: str) -> bool:
        if action is Action.SEND:
            return self._send.matches(address)
        if action is Action.RECEIVE:
            return self._receive.matches(address)
        return self._browse.matches(address) or self._receive.matches(address)

    def describe(self) -> str:
        return "; ".join(f"{name}={list(s.patterns)}" for name, s in
                         (("send", self._send), ("receive", self._receive),
                          ("browse", self._browse)))


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a connection authenticated as, and what it may do (``grants`` None: everything)."""

    name: str
    mechanism: str
    grants: Grants | None

    def allows(self, action: Action, address: str) -> bool:
        return self.grants is None or self.grants.allows(action, address)

