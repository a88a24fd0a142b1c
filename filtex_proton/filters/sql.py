"""The SQL filter (spec §6) and the JMS selector (apache-filters §2.2) as filters.

Both are text compiled by :mod:`filtex_proton.sql`; they differ only in the
dialect. The engine answers NULL without saying why, so when asked to explain
(the CLI does) this adapter names the referenced fields the message lacks, the
usual reason for an unexpected NULL.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Final

from proton import Described, symbol

from filtex_proton.amqp.types import HEADER_DEFAULTS, Kind, kind_of
from filtex_proton.amqp.view import MessageView, Section
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import DecodeContext, EvaluationContext, FilterBase, LeafDecoder

if TYPE_CHECKING:
    from filtex_proton.sql import CompiledSql, Dialect

__all__ = ["SqlFilter", "sql_decoder"]

#: How many absent fields a NULL reason names at most.
_MAX_NAMED: Final = 5

log = logging.getLogger("filtex_proton.sql")
log.addHandler(logging.NullHandler())  # a library: the application decides where logs go


class SqlFilter(FilterBase):
    """A compiled SQL expression; TRUE only when the expression is TRUE."""

    __slots__ = ("compiled",)

    def __init__(self, descriptor: Any, value: Any, type_name: str,
                 compiled: CompiledSql) -> None:
        super().__init__(descriptor, value, type_name)
        self.compiled = compiled

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        result = self.compiled.evaluate_or_raise(view)  # errors are counted by evaluate()
        if result is None:
            ctx.null(self._null_reason(view) if ctx.explain else
                     f"{self.type_name} evaluated to NULL")
        return result

    def _null_reason(self, view: MessageView) -> str:
        from filtex_proton.sql import ast

        absent: list[str] = []
        for node, _depth in ast.walk(self.compiled.ast):
            if not isinstance(node, ast.Field):
                continue
            name = f"{node.section.value}.{node.name}"
            if name in absent:
                continue
            has_default = node.section is Section.HEADER and node.name in HEADER_DEFAULTS
            if not has_default and not view.has_field(node.section, node.name):
                absent.append(name)
        text = f"{self.type_name} evaluated to NULL (unknown, or an evaluation error)"
        if absent:
            shown = ", ".join(absent[:_MAX_NAMED]) + (", ..." if len(absent) > _MAX_NAMED else "")
            text += f"; absent from the message: {shown}"
        return text

    def normalised(self) -> Described:
        """The expression as the engine understood it, printed back as SQL."""
        from filtex_proton.sql.printer import to_sql

        return Described(symbol(self.type_name), to_sql(self.compiled.ast, self.compiled.dialect))


def _dialect(name: str) -> Dialect:
    from filtex_proton.sql import AMQP_SQL, JMS_SELECTOR

    dialect: Dialect = JMS_SELECTOR if name == "jms" else AMQP_SQL
    return dialect


def _log_null_functions(compiled: CompiledSql) -> None:
    """§6.4.4.3 makes a function we do not understand NULL, not an error; a filter
    with one is accepted but rarely does what its writer meant, so say so."""
    from filtex_proton.sql.portability import notes

    for note in notes(compiled.ast, compiled.text, compiled.dialect):
        if note.kind in ("null-function", "jms-habit"):
            log.warning("event=%s filter=%r %s", note.kind, compiled.text[:200], note.render())


def sql_decoder(dialect: str) -> LeafDecoder:
    """The registry's decoder for SQL text in ``dialect`` ("amqp" or "jms").

    The SQL engine is imported on first use, so that the other filter types
    work even where it cannot be.
    """

    def decode(value: Any, ctx: DecodeContext) -> SqlFilter:
        if value is None or kind_of(value) not in (Kind.STRING, Kind.SYMBOL):
            raise ctx.type_error(value, "a string")
        from filtex_proton.sql import compile_sql

        try:
            compiled = compile_sql(str(value), _dialect(dialect), ctx.limits)
        except RecursionError:
            raise FilterError("expression is too deeply nested", limit=True) from None
        _log_null_functions(compiled)
        return SqlFilter(ctx.descriptor, value, ctx.type_name, compiled)

    return decode
