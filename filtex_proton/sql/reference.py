"""A plain tree-walking interpreter: the executable reading of §6, kept simple.

It is the baseline the compiler is measured against and the oracle it is
tested against: no folding, no fast paths, one ``match`` per node, every
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


def interpret(node: ast.Expr, view: MessageView, dialect: Dialect = AMQP_SQL) -> Any:
    """The value of an expression for one message."""
    compare = dialect.compare

    def value(n: ast.Expr) -> Any:
        return interpret(n, view, dialect)

    def truth(n: ast.Expr) -> bool | None:
        return values.truth(value(n))

    match node:
        case ast.Literal(value=constant):
            return constant
        case ast.Field(section=section, name=name):
            found = _follow(node, view, dialect)
            if found is _MISS:
                found = HEADER_DEFAULTS.get(name) if section is Section.HEADER and not node.path \
                    else None
            return _jms(found, dialect)
        case ast.Alias(name=name):
            return _alias(name, view, dialect)
        case ast.Exists(field=ast.Alias(name=name)):
            return any(view.has_field(s, f) for s, f in dialect.aliases[name].reads)
        case ast.Exists(field=ast.Field() as target):
            return _follow(target, view, dialect) is not _MISS
        case ast.And(operands=operands):
            return _and([truth(o) for o in operands])
        case ast.Or(operands=operands):
            return _or([truth(o) for o in operands])
        case ast.Not(operand=operand):
            return _not(truth(operand))
        case ast.Compare(op=op, left=left, right=right):
            return compare(op, value(left), value(right))
        case ast.IsNull(operand=operand, negated=negated):
            return (value(operand) is None) is not negated
        case ast.Like(operand=operand, pattern=pattern, escape=escape, negated=negated):
            text, pattern_text = values.text_of(value(operand)), values.text_of(value(pattern))
            escape_text = None if escape is None else values.text_of(value(escape))
            if text is None or pattern_text is None or (escape is not None and escape_text is None):
                return None
            try:
                return compile_like(pattern_text, escape_text)(text) is not negated
            except LikeError:
                return None
        case ast.In(operand=operand, items=items, negated=negated):
            subject = value(operand)
            if subject is None:
                return None
            found = _or([compare("=", subject, value(i)) for i in items])
            return _not(found) if negated else found
        case ast.Between(operand=operand, low=low, high=high, negated=negated):
            subject = value(operand)
            inside = _and([
                compare(">=", subject, value(low)),
                compare("<=", subject, value(high)),
            ])
            return _not(inside) if negated else inside
        case ast.Unary(op=op, operand=operand):
            return values.negate(op, value(operand))
        case ast.Binary(op="+", left=left, right=right):
            return values.concat_or_add(value(left), value(right))
        case ast.Binary(op=op, left=left, right=right):
            return values.arithmetic(op, value(left), value(right))
        case ast.Call(name=name, vendor=vendor, args=args):
            function = understood(name, vendor)
            if function is None:  # §6.4.4.3: not understood, NULL; arguments not evaluated
                return None
            evaluated = [value(a) for a in args]
            if any(v is None for v in evaluated):
                return None
            return function.apply(*evaluated)
    raise TypeError(f"not an expression: {node!r}")


def interpret_truth(node: ast.Expr, view: MessageView, dialect: Dialect = AMQP_SQL) -> bool | None:
    """TRUE, FALSE or NULL for a whole filter, as :meth:`CompiledSql.evaluate` answers."""
    try:
        return values.truth(interpret(node, view, dialect))
    except Exception:
        return None
