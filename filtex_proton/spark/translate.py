"""Filters to Spark expressions, only where the translation is exactly equivalent.

The planner's one entry (plan.py): :class:`Translator` turns a whole filter of
any family into a :class:`Pred` through a table keyed by the family's class.
SQL filters go to the AST visitor (sql_visitor.py), property filters and the
Apache bindings to properties.py; both build on the value model of values.py
(LIKE in regex.py), which relies on the invariants of *regular* archive rows;
:func:`~filtex_proton.spark.apply_filter` sends every other row to the UDF.
Anything not translated raises :class:`UntranslatableError` with the reason,
which ``explain`` reports; that filter (or SQL conjunct) then runs in the UDF.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from proton import Described, symbol

from filtex_proton.filters.apache import DirectBinding, HeadersBinding, NoLocalFilter, TopicBinding
from filtex_proton.filters.base import Filter
from filtex_proton.filters.constant import ConstantFilter
from filtex_proton.filters.group import GroupFilter, GroupOp
from filtex_proton.filters.property import PropertyFilter
from filtex_proton.filters.sql import SqlFilter
from filtex_proton.spark import ir
from filtex_proton.spark.properties import (
    direct_predicate,
    headers_predicate,
    property_predicate,
    topic_predicate,
)
from filtex_proton.spark.sql_visitor import SqlTranslator
from filtex_proton.spark.values import UntranslatableError
from filtex_proton.sql import ast
from filtex_proton.sql.dialects import Dialect

__all__ = ["Pred", "Translator", "UntranslatableError", "residual_sql"]


@dataclass(frozen=True, slots=True)
class Pred:
    """A filter as a Spark predicate: TRUE, FALSE, or NULL where the filter is NULL."""

    expr: ir.Expr
    nullable: bool


class Translator:
    """Whole filters (of any type) to :class:`Pred`; raises :class:`UntranslatableError`."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.uses_utc = False

    def translate(self, item: Filter) -> Pred:
        for family in type(item).__mro__:
            handler = _FAMILIES.get(family)
            if handler is not None:
                return handler(self, item)
        raise UntranslatableError(f"{item.type_name} is evaluated by the engine")

    def sql(self, root: ast.Expr, dialect: Dialect) -> ir.Expr:
        translator = SqlTranslator(dialect, self.now_ms)
        result = translator.predicate(root)
        self.uses_utc |= translator.uses_utc
        return result

    def _constant(self, item: ConstantFilter) -> Pred:
        return Pred(ir.Lit(item.result, "boolean"), False)

    def _property(self, item: PropertyFilter) -> Pred:
        return Pred(property_predicate(item), False)

    def _sql(self, item: SqlFilter) -> Pred:
        return Pred(self.sql(item.compiled.ast, item.compiled.dialect), True)

    def _group(self, item: GroupFilter) -> Pred:
        members = [self.translate(m) for m in item.members]
        exprs = [m.expr for m in members]
        if item.op is GroupOp.ALL:
            combined = ir.and_(*exprs)
        elif item.op is GroupOp.ANY:
            combined = ir.or_(*exprs)
        else:
            combined = ir.not_(ir.or_(*exprs))
        nullable = [m.expr for m in members if m.nullable]
        if not nullable:
            return Pred(combined, False)
        # §3: one NULL member makes the group NULL, whatever the others say.
        any_null = ir.or_(*(ir.isnull(e) for e in nullable))
        return Pred(ir.case([(any_null, ir.NULL)], combined), True)

    def _direct(self, item: DirectBinding) -> Pred:
        return Pred(direct_predicate(item), False)

    def _headers(self, item: HeadersBinding) -> Pred:
        return Pred(headers_predicate(item), False)

    def _topic(self, item: TopicBinding) -> Pred:
        return Pred(topic_predicate(str(item.value)), False)

    def _no_local(self, item: NoLocalFilter) -> Pred:
        # An archived message has no connection of origin: no-local keeps it (origin None).
        return Pred(ir.TRUE, False)


_FAMILIES: Final[dict[type, Callable[[Translator, Any], Pred]]] = {
    ConstantFilter: Translator._constant,
    PropertyFilter: Translator._property,
    SqlFilter: Translator._sql,
    GroupFilter: Translator._group,
    DirectBinding: Translator._direct,
    HeadersBinding: Translator._headers,
    TopicBinding: Translator._topic,
    NoLocalFilter: Translator._no_local,
}
"""The families translated, by class (a subclass takes its base's handler); any other
family (a plugin's, say) is evaluated by the engine."""


def residual_sql(type_name: str, node: ast.Expr, dialect: Dialect) -> Described | None:
    """A conjunct the engine must evaluate, as a SQL filter of its own; ``None`` when its
    printed text does not parse back to the same tree (then the filter is not split)."""
    from filtex_proton.sql.parser import parse
    from filtex_proton.sql.printer import to_sql

    text = to_sql(node, dialect)
    try:
        if parse(text, dialect) != node:
            return None
    except Exception:
        return None
    return Described(symbol(type_name), text)
