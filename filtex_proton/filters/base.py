"""What every filter is: a compiled, immutable predicate over a message view.

A filter is built once, at attach time, from its described value; after that
it only answers ``evaluate(view, ctx)`` with TRUE, FALSE or NULL (``None``,
"unknowable", spec §2.1). It never raises: a message that makes a filter fail
is simply not eligible (spec §2.3), and one hostile message must never take the
link, or the broker, down with it.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from proton import Described, symbol

from filtex_proton.amqp.types import amqp_type_name
from filtex_proton.amqp.view import MessageView
from filtex_proton.errors import FilterError
from filtex_proton.filters.options import NO_OPTIONS, StreamOptions
from filtex_proton.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "DecodeContext", "EvaluationContext", "Filter", "FilterBase", "LeafDecoder",
    "describe_descriptor",
]

#: How much of an exception text a NULL reason keeps (spec §7.2: keep logs terse).
_REASON_CHARS: Final = 200


@dataclass(slots=True)
class EvaluationContext:
    """The per-message facts a filter may need beyond the message itself.

    ``origin`` identifies the connection the message arrived on and
    ``consumer`` the connection receiving it (no-local compares them; ``None``
    means unknown). The remaining fields are per-evaluation state that
    :class:`~filtex_proton.filterset.FilterSet` resets for every message: the
    budget deadline, and the first reason for a NULL result (spec §3: "the
    error condition of the first failing filter is propagated").
    """

    origin: Hashable | None = None
    consumer: Hashable | None = None
    explain: bool = False
    """Ask for detailed (slower to build) NULL reasons: the CLI does, the broker need not."""
    deadline: float | None = None
    """``time.perf_counter()`` value after which evaluation gives up (None: no budget)."""
    budget_exceeded: bool = False
    error: bool = False
    """An exception was caught inside a filter during this evaluation."""
    reason: str | None = None

    def begin(self, budget_ms: float | None) -> None:
        """Reset the per-message state; start the budget clock."""
        self.deadline = None if budget_ms is None else time.perf_counter() + budget_ms / 1000.0
        self.budget_exceeded = False
        self.error = False
        self.reason = None

    def over_budget(self) -> bool:
        """Whether the evaluation budget is spent (records why, the first time)."""
        if self.deadline is None or time.perf_counter() <= self.deadline:
            return False
        if not self.budget_exceeded:
            self.budget_exceeded = True
            self.null("the per-message evaluation budget was exceeded")
        return True

    def null(self, reason: str) -> None:
        """Record why the result is NULL; the first reason wins, as spec §3 asks."""
        if self.reason is None:
            self.reason = reason

    def fail(self, where: str, exc: BaseException) -> None:
        """Record an exception caught inside a filter as a NULL result."""
        self.error = True
        text = f"{type(exc).__name__}: {exc}"
        if len(text) > _REASON_CHARS:
            text = text[:_REASON_CHARS] + "..."
        self.null(f"{where}: evaluation error: {text}")


@runtime_checkable
class Filter(Protocol):
    """A compiled filter: what the engine evaluates and what the attach reply echoes."""

    descriptor: Any
    """The descriptor as the client sent it (symbol or ulong): echoed unchanged."""
    value: Any
    """The described value as the client sent it: echoed unchanged."""
    type_name: str
    """The canonical symbolic descriptor of the filter's type."""

    def evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        """TRUE, FALSE or NULL (``None``) for one message; never raises."""
        ...

    def described(self) -> Described:
        """The filter as it was received, for the attach reply."""
        ...

    def normalised(self) -> Described:
        """The filter in canonical form: symbolic descriptor, normalised value."""
        ...


class FilterBase(abc.ABC):
    """The shared machinery of the built-in filters: identity, echo, and the
    never-raise guard around :meth:`_evaluate`."""

    __slots__ = ("descriptor", "type_name", "value")

    def __init__(self, descriptor: Any, value: Any, type_name: str) -> None:
        self.descriptor = descriptor
        self.value = value
        self.type_name = type_name

    def evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        try:
            return self._evaluate(view, ctx)
        except Exception as exc:  # any failure means "not eligible" (spec §2.3)
            ctx.fail(self.type_name, exc)
            return None

    @abc.abstractmethod
    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        """The filter's logic; may raise, :meth:`evaluate` turns that into NULL."""

    def described(self) -> Described:
        return Described(self.descriptor, self.value)

    def normalised(self) -> Described:
        return Described(symbol(self.type_name), self.value)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.type_name}>"


@dataclass(frozen=True, slots=True)
class DecodeContext:
    """What a decoder is told besides the described value: the descriptor as
    received (kept for the echo), the type's canonical name, and the limits.

    Decoders raise plain :class:`FilterError`; the registry prefixes where in a
    nested group the problem is and the filter set adds the key.
    """

    descriptor: Any
    type_name: str
    limits: Limits = DEFAULT_LIMITS
    options: StreamOptions = NO_OPTIONS
    """The set's option entries (``rabbitmq:stream-match-unfiltered``), read before its filters."""

    def type_error(self, value: Any, needed: str) -> FilterError:
        """The error for a described value of the wrong AMQP type (a list for a map ...)."""
        return FilterError(f"{self.type_name} needs {needed}, not a {amqp_type_name(value)}")


#: Builds a leaf filter from its described value; raises FilterError when it cannot.
LeafDecoder = Callable[[Any, DecodeContext], Filter]


def describe_descriptor(descriptor: Any) -> str:
    """A descriptor as people write it: the symbol, or ``0x0000468c:0x00000004``."""
    if isinstance(descriptor, str):  # the client's symbol: quote a hostile one only in part
        return str(descriptor) if len(descriptor) <= 100 else f"{descriptor[:97]}..."
    if isinstance(descriptor, int) and not isinstance(descriptor, bool):
        code = int(descriptor)
        if 0 <= code < 2**64:
            return f"0x{code >> 32:08x}:0x{code & 0xFFFFFFFF:08x}"
        return str(code)
    return f"<{type(descriptor).__name__} descriptor>"
