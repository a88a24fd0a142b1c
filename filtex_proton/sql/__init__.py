"""SQL filter expressions (spec §6) and the JMS selector dialect.

>>> from filtex_proton.amqp.view import DictMessageView
>>> f = compile_sql("color = 'blue' AND p.priority IS NULL")
Traceback (most recent call last):
...
filtex_proton.errors.FilterError: 'priority' is not a field of the properties section ...
>>> f = compile_sql("color = 'blue' AND h.priority > 4")
>>> f.evaluate(DictMessageView(header={"priority": 7}, application_properties={"color": "blue"}))
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from filtex_proton.amqp.view import MessageView
from filtex_proton.errors import FilterError
from filtex_proton.limits import DEFAULT_LIMITS, Limits
from filtex_proton.sql import ast
from filtex_proton.sql.compiler import Evaluator, compile_expression
from filtex_proton.sql.dialects import AMQP_SQL, JMS_SELECTOR, Dialect
from filtex_proton.sql.parser import check_filter, parse

__all__ = ["AMQP_SQL", "JMS_SELECTOR", "CompiledSql", "Dialect", "compile_sql", "parse"]


@dataclass(frozen=True, slots=True)
class CompiledSql:
    """A SQL filter ready for the hot path: evaluate it once per message."""

    text: str
    ast: ast.Expr
    dialect: Dialect
    _evaluate: Evaluator = field(repr=False, compare=False)

    def evaluate(self, view: MessageView) -> bool | None:
        """TRUE, FALSE or NULL (``None``: unknown or an evaluation error, §2.3).

        Never raises: a message that makes evaluation fail is simply not TRUE.
        """
        try:
            result = self._evaluate(view)
        except Exception:
            return None
        return result if result is True or result is False else None

    def evaluate_or_raise(self, view: MessageView) -> bool | None:
        """As :meth:`evaluate`, but an exception (a section that does not decode)
        propagates, for callers that count evaluation errors (spec §7.2)."""
        result = self._evaluate(view)
        return result if result is True or result is False else None

    def matches(self, view: MessageView) -> bool:
        """Whether the message is eligible: only TRUE matches (three-valued logic)."""
        return self.evaluate(view) is True


def compile_sql(
    text: str, dialect: Dialect = AMQP_SQL, limits: Limits = DEFAULT_LIMITS
) -> CompiledSql:
    """Parse, check and compile a SQL filter; raises :class:`FilterError` when invalid.

    What a whole filter must be in its dialect is checked too (a JMS selector is a
    conditional expression), so this accepts exactly what the filter types accept on the
    wire; :func:`parse` reads any expression."""
    root = parse(text, dialect, limits)
    check_filter(root, text, dialect)
    try:
        evaluator = compile_expression(root, dialect)
    except RecursionError:  # only reachable if limits allow absurd depths
        raise FilterError("expression is too deeply nested", limit=True, source=text) from None
    return CompiledSql(text, root, dialect, evaluator)
