"""One visitor protocol for the readers of a filter set's filters, by family.

The node matcher's decomposition, the pushdown to JMS selectors and the Spark translation
each read every filter family (SQL, property filters, groups, constants, the Apache
bindings, no-local, RabbitMQ's stream filter). Each is a subclass of :class:`FamilyVisitor` with one
``on_<snake_case_class>`` handler per family: a reader that lacks one cannot be
instantiated, and a reader that cannot use a family says so in that family's handler,
instead of a chain of ``isinstance`` tests ending in a silent catch-all
(:mod:`filtex_proton.dispatch` enforces it, as for the SQL AST's visitor).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Final, Generic, TypeVar

from filtex_proton.dispatch import check_protocol, handler_table, install_dispatch
from filtex_proton.filters.apache import DirectBinding, HeadersBinding, NoLocalFilter, TopicBinding
from filtex_proton.filters.base import Filter
from filtex_proton.filters.constant import ConstantFilter
from filtex_proton.filters.group import GroupFilter
from filtex_proton.filters.property import PropertyFilter
from filtex_proton.filters.sql import SqlFilter
from filtex_proton.filters.stream import StreamFilter

__all__ = ["FAMILIES", "FamilyVisitor"]

R = TypeVar("R")

FAMILIES: Final[tuple[type, ...]] = (
    ConstantFilter, SqlFilter, PropertyFilter, GroupFilter, DirectBinding, TopicBinding,
    HeadersBinding, NoLocalFilter, StreamFilter,
)
"""Every class the registry's decoders build (tests/filtex_proton/filters checks it)."""


class FamilyVisitor(ABC, Generic[R]):
    """A reader of filters: ``visit_family(item)`` calls the family's handler."""

    _family_handlers: ClassVar[dict[type, Callable[[Any, Any], Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._family_handlers = handler_table(cls, "on_", FAMILIES)
        install_dispatch(cls, "visit_family", cls._family_handlers,
                         refusal="not a filter of a known family")

    def visit_family(self, item: Filter) -> R:
        """The handler of ``type(item)`` applied to ``item`` (``TypeError`` if there is none)."""
        raise NotImplementedError  # each reader class gets its own (install_dispatch)

    @abstractmethod
    def on_constant_filter(self, item: ConstantFilter) -> R: ...

    @abstractmethod
    def on_sql_filter(self, item: SqlFilter) -> R: ...

    @abstractmethod
    def on_property_filter(self, item: PropertyFilter) -> R: ...

    @abstractmethod
    def on_group_filter(self, item: GroupFilter) -> R: ...

    @abstractmethod
    def on_direct_binding(self, item: DirectBinding) -> R: ...

    @abstractmethod
    def on_topic_binding(self, item: TopicBinding) -> R: ...

    @abstractmethod
    def on_headers_binding(self, item: HeadersBinding) -> R: ...

    @abstractmethod
    def on_no_local_filter(self, item: NoLocalFilter) -> R: ...

    @abstractmethod
    def on_stream_filter(self, item: StreamFilter) -> R: ...


check_protocol(FamilyVisitor, "on_", FAMILIES)
