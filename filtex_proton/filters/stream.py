"""RabbitMQ's stream filter: the message annotation ``x-stream-filter-value`` is one of the values.

``rabbitmq:stream-filter`` carries a string or a list of strings. A message matches when its
``x-stream-filter-value`` annotation is a string (or symbol) equal to one of them; a message
without one (absent or null) matches only when the filter set also says
``rabbitmq:stream-match-unfiltered`` true (an option of the set, read before the filters are
decoded: :mod:`filtex_proton.filters.options`). A value of another type matches nothing.
"""

from __future__ import annotations

from typing import Any, Final

from proton import Array

from filtex_proton.amqp.types import kind_of
from filtex_proton.amqp.view import MISSING, MessageView, Section
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import DecodeContext, EvaluationContext, FilterBase
from filtex_proton.filters.wire import TEXT_KINDS

__all__ = ["FILTER_VALUE", "StreamFilter", "decode_stream_filter"]

FILTER_VALUE: Final = "x-stream-filter-value"
"""The message annotation a stream filter reads."""


class StreamFilter(FilterBase):
    """TRUE when ``x-stream-filter-value`` is one of ``values``; when it is absent or null,
    ``match_unfiltered``."""

    __slots__ = ("match_unfiltered", "values")

    def __init__(self, descriptor: Any, value: Any, type_name: str, values: frozenset[str],
                 match_unfiltered: bool) -> None:
        super().__init__(descriptor, value, type_name)
        self.values = values
        self.match_unfiltered = match_unfiltered

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        found = view.field(Section.MESSAGE_ANNOTATIONS, FILTER_VALUE)
        if found is MISSING or found is None:
            return self.match_unfiltered
        if kind_of(found) in TEXT_KINDS:
            return str(found) in self.values
        return False


def decode_stream_filter(value: Any, ctx: DecodeContext) -> StreamFilter:
    """A string, or a list (or array) of strings, at least one."""
    items = list(value.elements) if isinstance(value, Array) else value
    if value is not None and kind_of(value) in TEXT_KINDS:
        items = [value]
    if not isinstance(items, list):
        raise ctx.type_error(value, "a string or a list of strings")
    if not items:
        raise FilterError(f"{ctx.type_name} needs at least one value")
    limit = ctx.limits.max_property_entries
    if len(items) > limit:
        raise FilterError(f"{ctx.type_name} has more than {limit} values "
                          "(limit max_property_entries)", limit=True)
    for item in items:
        if item is None or kind_of(item) not in TEXT_KINDS:
            raise ctx.type_error(item, "strings as its values")
    return StreamFilter(ctx.descriptor, value, ctx.type_name,
                        frozenset(str(item) for item in items), ctx.options.match_unfiltered)
