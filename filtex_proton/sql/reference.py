"""A plain tree-walking interpreter: the executable reading of §6, kept simple.

It is the baseline the compiler is measured against and the oracle it is
tested against: no folding, no fast paths, one visitor handler per node, every
operator through :mod:`filtex_proton.sql.values`. Field references are
followed here independently of the compiler.
"""

from __future__ import annotations

from typing import Any

from filtex_proton.amqp.types import HEADER_DEFAULTS, Kind, kind_of
from filtex_proton.amqp.view import MISSING, MessageView, Section
from filtex_proton.sql import ast, values
from filtex_proton.sql.dialects import AMQP_SQL, Dialect
from filtex_proton.sql.functions import understood
from filtex_proton.sql.like import LikeError, compile_like
from filtex_proton.sql.visitor import Visitor

__all__ = ["interpret", "interpret_truth"]

_MISS = object()


def _element(value: Any, position: Any) -> Any:
    """The element at ``position`` of a list, array or described list, or ``_MISS``."""
    if value is None or position is None or kind_of(position) is not Kind.INTEGER:
        return _MISS
    if kind_of(value) is Kind.DESCRIBED:
        value = value.value
    if kind_of(value) is Kind.ARRAY:
        value = value.elements
    if not isinstance(value, list | tuple) or not 0 <= position < len(value):
        return _MISS
    return value[position]


def _follow(node: ast.Field, view: MessageView, dialect: Dialect) -> Any:
    """The referenced value, or ``_MISS`` when the field or an entry on the path is absent."""
    value = view.field(node.section, node.name)
    if value is MISSING:
        return _MISS
    for reference in node.path:
        if isinstance(reference, ast.Key):
            if kind_of(value) is Kind.DESCRIBED:  # as _element does for a described list
                value = value.value
            if not isinstance(value, dict) or reference.name not in value:
                return _MISS
            value = value[reference.name]
        else:
            value = _element(value, interpret(reference.index, view, dialect))
            if value is _MISS:
                return _MISS
    return value


def _jms(value: Any, dialect: Dialect) -> Any:
    return value if value is None or dialect.value_view is None else dialect.value_view(value)


def _alias(name: str, view: MessageView, dialect: Dialect) -> Any:
    def lookup(section: Section, field: str) -> Any:
        found = view.field(section, field)
        if found is MISSING and section is Section.HEADER:
            return HEADER_DEFAULTS.get(field, MISSING)
        return found

    return _jms(dialect.aliases[name].resolve(lookup), dialect)


def _and(parts: list[bool | None]) -> bool | None:
    if any(p is False for p in parts):
        return False
    return True if all(p is True for p in parts) else None


def _or(parts: list[bool | None]) -> bool | None:
    if any(p is True for p in parts):
        return True
    return False if all(p is False for p in parts) else None


def _not(value: bool | None) -> bool | None:
    return None if value is None else not value


class _Interpreter(Visitor[Any]):
    """One message's values of expressions: each handler evaluates its node."""

    def __init__(self, view: MessageView, dialect: Dialect) -> None:
        self.view = view
        self.dialect = dialect
        self.compare = dialect.compare

    def truth(self, node: ast.Expr) -> bool | None:
        return values.truth(self.visit(node))

    def visit_literal(self, node: ast.Literal) -> Any:
        return node.value

    def visit_field(self, node: ast.Field) -> Any:
        found = _follow(node, self.view, self.dialect)
        if found is _MISS:
            found = HEADER_DEFAULTS.get(node.name) \
                if node.section is Section.HEADER and not node.path else None
        return _jms(found, self.dialect)

    def visit_alias(self, node: ast.Alias) -> Any:
        return _alias(node.name, self.view, self.dialect)

    def visit_exists(self, node: ast.Exists) -> Any:
        target = node.field
        if isinstance(target, ast.Alias):
            reads = self.dialect.aliases[target.name].reads
            return any(self.view.has_field(s, f) for s, f in reads)
        return _follow(target, self.view, self.dialect) is not _MISS

    def visit_and(self, node: ast.And) -> Any:
        return _and([self.truth(o) for o in node.operands])

    def visit_or(self, node: ast.Or) -> Any:
        return _or([self.truth(o) for o in node.operands])

    def visit_not(self, node: ast.Not) -> Any:
        return _not(self.truth(node.operand))

    def visit_compare(self, node: ast.Compare) -> Any:
        return self.compare(node.op, self.visit(node.left), self.visit(node.right))

    def visit_is_null(self, node: ast.IsNull) -> Any:
        return (self.visit(node.operand) is None) is not node.negated

    def visit_like(self, node: ast.Like) -> Any:
        escape = node.escape
        text = values.text_of(self.visit(node.operand))
        pattern_text = values.text_of(self.visit(node.pattern))
        escape_text = None if escape is None else values.text_of(self.visit(escape))
        if text is None or pattern_text is None or (escape is not None and escape_text is None):
            return None
        try:
            return compile_like(pattern_text, escape_text)(text) is not node.negated
        except LikeError:
            return None

    def visit_in(self, node: ast.In) -> Any:
        subject = self.visit(node.operand)
        if subject is None:
            return None
        found = _or([self.compare("=", subject, self.visit(i)) for i in node.items])
        return _not(found) if node.negated else found

    def visit_between(self, node: ast.Between) -> Any:
        subject = self.visit(node.operand)
        inside = _and([
            self.compare(">=", subject, self.visit(node.low)),
            self.compare("<=", subject, self.visit(node.high)),
        ])
        return _not(inside) if node.negated else inside

    def visit_unary(self, node: ast.Unary) -> Any:
        return values.negate(node.op, self.visit(node.operand))

    def visit_binary(self, node: ast.Binary) -> Any:
        left, right = self.visit(node.left), self.visit(node.right)
        if node.op == "+":
            return values.concat_or_add(left, right)
        return values.arithmetic(node.op, left, right)

    def visit_call(self, node: ast.Call) -> Any:
        function = understood(node.name, node.vendor)
        if function is None:  # §6.4.4.3: not understood, NULL; arguments not evaluated
            return None
        evaluated = [self.visit(a) for a in node.args]
        if any(v is None for v in evaluated):
            return None
        return function.apply(*evaluated)


def interpret(node: ast.Expr, view: MessageView, dialect: Dialect = AMQP_SQL) -> Any:
    """The value of an expression for one message."""
    return _Interpreter(view, dialect).visit(node)


def interpret_truth(node: ast.Expr, view: MessageView, dialect: Dialect = AMQP_SQL) -> bool | None:
    """TRUE, FALSE or NULL for a whole filter, as :meth:`CompiledSql.evaluate` answers."""
    try:
        return values.truth(interpret(node, view, dialect))
    except Exception:
        return None
