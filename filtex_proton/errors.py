"""The one error type for a filter that cannot be accepted (spec §2.3, definitional errors).

Everything that is wrong with a filter at attach time (syntax, unknown field,
wrong source type, a limit hit) becomes a :class:`FilterError`; the broker turns
it into ``amqp:invalid-field``. Evaluation errors never raise: they make the
message ineligible (spec §2.3), which the engine reports as NULL.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GENERIC_LIMIT_TEXT", "FilterError", "SourcePosition"]

#: What a client is told when a security limit is hit (spec §7.1: mask it, log the reason).
GENERIC_LIMIT_TEXT = "filter rejected: it exceeds a limit set by the server administrator"

#: Filter names and descriptors come from the client: texts quote at most this much of them.
_NAME_CHARS = 80


def _clip(text: str) -> str:
    return text if len(text) <= _NAME_CHARS else text[: _NAME_CHARS - 3] + "..."


@dataclass(frozen=True, slots=True)
class SourcePosition:
    """Where in a SQL text something is: 1-based line and column, 0-based offset."""

    line: int
    column: int
    offset: int

    def __str__(self) -> str:
        return f"line {self.line}, column {self.column}"


class FilterError(Exception):
    """A filter that cannot be accepted, with what is wrong and where.

    ``reason`` says what is wrong, for the developer who wrote the filter.
    ``key`` and ``descriptor`` name the filter in its filter set (filled in by
    the filter-set decoder). ``position`` and ``source`` locate SQL errors; the
    rendered message then shows the offending line with a caret under it.
    ``limit`` marks security-limit refusals: the client sees only
    :data:`GENERIC_LIMIT_TEXT`, the log sees everything (spec §7.1).
    """

    def __init__(
        self,
        reason: str,
        *,
        position: SourcePosition | None = None,
        source: str | None = None,
        key: str | None = None,
        descriptor: str | None = None,
        limit: bool = False,
    ) -> None:
        self.reason = reason
        self.position = position
        self.source = source
        self.key = key
        self.descriptor = descriptor
        self.limit = limit
        super().__init__(self.render())

    def located(self, *, key: str | None, descriptor: str | None) -> FilterError:
        """The same error, naming the filter it belongs to (keeps the innermost names)."""
        return FilterError(
            self.reason,
            position=self.position,
            source=self.source,
            key=self.key if self.key is not None else key,
            descriptor=self.descriptor if self.descriptor is not None else descriptor,
            limit=self.limit,
        )

    def caret(self) -> str:
        """The offending source line with a caret under the position, or ''."""
        if self.position is None or self.source is None:
            return ""
        lines = self.source.splitlines() or [""]
        index = min(self.position.line, len(lines)) - 1
        text = lines[index]
        column = max(1, self.position.column)
        # Keep very long lines readable: show a window around the position.
        start = max(0, column - 60)
        prefix = "..." if start else ""
        window = text[start : start + 120]
        suffix = "..." if start + 120 < len(text) else ""
        # Tabs stay tabs under the text so the caret lines up however they render.
        lead = window[: column - 1 - start]
        pointer = " " * len(prefix) + "".join(c if c == "\t" else " " for c in lead) + "^"
        return f"{prefix}{window}{suffix}\n{pointer}"

    def render(self) -> str:
        """The full, developer-facing text: who, what, where, and the caret."""
        parts = []
        if self.key is not None:
            who = f"filter {_clip(self.key)!r}"
            if self.descriptor is not None:
                who += f" ({_clip(self.descriptor)})"
            parts.append(who + ": ")
        parts.append(self.reason)
        if self.position is not None:
            parts.append(f" at {self.position}")
        text = "".join(parts)
        caret = self.caret()
        return f"{text}\n{caret}" if caret else text

    def client_text(self) -> str:
        """What the remote peer is told: everything, except for limits (spec §7.1)."""
        if self.limit:
            who = f"filter {_clip(self.key)!r}: " if self.key is not None else ""
            return who + GENERIC_LIMIT_TEXT
        return self.render()

    def __str__(self) -> str:
        return self.render()
