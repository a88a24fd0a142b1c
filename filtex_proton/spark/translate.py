"""Filters to Spark expressions, only where the translation is exactly equivalent.

The planner's one entry (plan.py): :class:`Translator` turns a whole filter of
any family into a :class:`Pred`, one handler per family (the filter families'
visitor, filters/visitor.py).
SQL filters go to the AST visitor (sql_visitor.py), property filters and the
Apache bindings to properties.py; both build on the value model of values.py
(LIKE in regex.py), which relies on the invariants of *regular* archive rows;
:func:`~filtex_proton.spark.apply_filter` sends every other row to the UDF.
Anything not translated raises :class:`UntranslatableError` with the reason,
which ``explain`` reports; that filter (or SQL conjunct) then runs in the UDF.
"""

from __future__ import annotations

from dataclasses import dataclass

from proton import Described, symbol

from filtex_proton.filters.apache import DirectBinding, HeadersBinding, NoLocalFilter, TopicBinding
from filtex_proton.filters.base import Filter
from filtex_proton.filters.constant import ConstantFilter
from filtex_proton.filters.group import GroupFilter, GroupOp
from filtex_proton.filters.property import PropertyFilter
from filtex_proton.filters.sql import SqlFilter
from filtex_proton.filters.stream import StreamFilter
from filtex_proton.filters.visitor import FAMILIES, FamilyVisitor
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


class Translator(FamilyVisitor[Pred]):
    """Whole filters (of any type) to :class:`Pred`; raises :class:`UntranslatableError`."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.uses_utc = False

    def translate(self, item: Filter) -> Pred:
        if type(item) not in FAMILIES:  # a plugin's filter type: only the engine knows it
            raise UntranslatableError(f"{item.type_name} is evaluated by the engine")
        return self.visit_family(item)

    def sql(self, root: ast.Expr, dialect: Dialect) -> ir.Expr:
        translator = SqlTranslator(dialect, self.now_ms)
        result = translator.predicate(root)
        self.uses_utc |= translator.uses_utc
        return result

    def on_constant_filter(self, item: ConstantFilter) -> Pred:
        return Pred(ir.Lit(item.result, "boolean"), False)

    def on_property_filter(self, item: PropertyFilter) -> Pred:
        return Pred(property_predicate(item), False)

    def on_sql_filter(self, item: SqlFilter) -> Pred:
        return Pred(self.sql(item.compiled.ast, item.compiled.dialect), True)

    def on_group_filter(self, item: GroupFilter) -> Pred:
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

    def on_direct_binding(self, item: DirectBinding) -> Pred:
        return Pred(direct_predicate(item), False)

    def on_headers_binding(self, item: HeadersBinding) -> Pred:
        return Pred(headers_predicate(item), False)

    def on_topic_binding(self, item: TopicBinding) -> Pred:
        return Pred(topic_predicate(str(item.value)), False)

    def on_stream_filter(self, item: StreamFilter) -> Pred:
        # The archive keeps message annotations only in the raw message: the engine reads them.
        raise UntranslatableError(f"{item.type_name} reads a message annotation: evaluated by "
                                  "the engine")

    def on_no_local_filter(self, item: NoLocalFilter) -> Pred:
        # An archived message has no connection of origin: no-local keeps it (origin None).
        return Pred(ir.TRUE, False)


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
