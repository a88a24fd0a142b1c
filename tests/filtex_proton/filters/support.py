"""Helpers shared by the filter tests: short constructors and stub filters."""

from __future__ import annotations

import time
from typing import Any

from proton import Described, symbol, ulong

from filtex_proton.amqp.view import DictMessageView, MessageView
from filtex_proton.filters.base import EvaluationContext, FilterBase
from filtex_proton.filters.registry import decode_filter
from filtex_proton.limits import DEFAULT_LIMITS, Limits


def described(descriptor: str | int, value: Any) -> Described:
    """A described filter; a str descriptor becomes a symbol, an int a ulong (AMQP 1.0 part 1
    §1.5: the two descriptor types)."""
    return Described(symbol(descriptor) if isinstance(descriptor, str) else ulong(descriptor),
                     value)


def evaluate(filter_value: Described, view: MessageView | None = None,
             ctx: EvaluationContext | None = None, limits: Limits = DEFAULT_LIMITS) -> bool | None:
    """Decode one described filter and evaluate it against one message."""
    built = decode_filter(filter_value, limits)
    return built.evaluate(view if view is not None else DictMessageView(),
                          ctx if ctx is not None else EvaluationContext())


class Fixed(FilterBase):
    """A filter with a fixed answer (NULL included), to test groups and sets in isolation."""

    __slots__ = ("calls", "result")

    def __init__(self, result: bool | None) -> None:
        super().__init__(symbol("test:fixed"), result, "test:fixed")
        self.result = result
        self.calls = 0

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        self.calls += 1
        if self.result is None:
            ctx.null(f"fixed NULL {id(self)}")
        return self.result


class Slow(FilterBase):
    """TRUE, after sleeping: spends the evaluation budget."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        super().__init__(symbol("test:slow"), seconds, "test:slow")
        self.seconds = seconds

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        time.sleep(self.seconds)
        return True


class Exploding(FilterBase):
    """Raises inside its logic: the guard must turn that into NULL."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(symbol("test:boom"), None, "test:boom")

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        raise ZeroDivisionError("boom")


class BrokenView:
    """A message view whose every read fails, like a lazily decoded corrupt message."""

    def section(self, section: Any) -> Any:
        raise ValueError("corrupt section")

    def field(self, section: Any, key: Any) -> Any:
        raise ValueError("corrupt section")

    def has_field(self, section: Any, key: Any) -> bool:
        raise ValueError("corrupt section")
