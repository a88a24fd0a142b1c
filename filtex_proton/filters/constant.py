"""Constant filters (spec §5): the true-filter and the false-filter.

They exist where a filter is required but the answer is fixed. Their source
type is boolean; the descriptor alone decides the result, so a true-filter
carrying ``false`` is still TRUE (the value is validated and echoed, not used).
"""

from __future__ import annotations

from typing import Any

from filtex_proton.amqp.view import MessageView
from filtex_proton.filters.base import DecodeContext, EvaluationContext, FilterBase, LeafDecoder

__all__ = ["ConstantFilter", "constant_decoder"]


class ConstantFilter(FilterBase):
    """Always the same answer, whatever the message."""

    __slots__ = ("result",)

    def __init__(self, descriptor: Any, value: Any, type_name: str, result: bool) -> None:
        super().__init__(descriptor, value, type_name)
        self.result = result

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        return self.result


def constant_decoder(result: bool) -> LeafDecoder:
    """The registry's decoder for the constant filter answering ``result``."""

    def decode(value: Any, ctx: DecodeContext) -> ConstantFilter:
        if not isinstance(value, bool):
            raise ctx.type_error(value, "a boolean")
        return ConstantFilter(ctx.descriptor, value, ctx.type_name, result)

    return decode
