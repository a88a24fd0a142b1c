"""AST to SQL text: the normalised form of a filter.

Printing is total and the output parses back to an equal tree (the property
tests check it). Binary operands are parenthesised unless they are atoms, so
the printed text never depends on precedence rules being read the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

from proton import ulong

from filtex_proton.amqp.view import Section
from filtex_proton.sql import ast
from filtex_proton.sql.dialects import AMQP_SQL, Dialect
from filtex_proton.sql.visitor import Visitor

__all__ = ["to_sql"]

_SECTION_PREFIX = {
    Section.HEADER: "h", Section.PROPERTIES: "p", Section.APPLICATION_PROPERTIES: "a",
    Section.DELIVERY_ANNOTATIONS: "d", Section.MESSAGE_ANNOTATIONS: "m", Section.FOOTER: "f",
}
_HYPHEN_NAMES = {
    "delivery-count", "first-acquirer", "message-id", "user-id", "reply-to", "correlation-id",
    "content-type", "content-encoding", "absolute-expiry-time", "creation-time", "group-id",
    "group-sequence", "reply-to-group-id",
}
_KEYWORDS = {
    "OR", "AND", "NOT", "IS", "NULL", "LIKE", "ESCAPE", "IN", "BETWEEN", "EXISTS", "TRUE",
    "FALSE", "INF", "NAN",
}


def _name(text: str, dialect: Dialect) -> str:
    """A regular identifier when it is one in the dialect, else a [delimited] one (§6.4.4.6)."""
    if dialect.lexicon == "sql":  # <letter> {<letter> | <underscore> | <digit>}
        regular = text[:1].isalpha() and all(
            c.isalpha() or c.isdecimal() or c == "_" for c in text)
    else:
        regular = bool(text) and (text[0].isalpha() or text[0] in "_$") and all(
            c.isalnum() or c in "_$" for c in text) and text.isidentifier()
    if regular and text.upper() not in _KEYWORDS:
        return text
    return "[" + text.replace("[", "[[").replace("]", "]]") + "]"


def _literal(value: Any, dialect: Dialect) -> str:
    """A constant as SQL text, by the first of its type's classes that has a writer
    (``bool`` before ``int``, proton's ``ulong`` as ``int``, ``symbol`` as ``str``)."""
    for cls in type(value).__mro__:
        write = _LITERALS.get(cls)
        if write is not None:
            return write(value, dialect)
    raise TypeError(f"no SQL constant for {type(value).__name__}")


def _float_literal(value: float, dialect: Dialect) -> str:
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INF" if value > 0 else "(-INF)"
    text = repr(abs(value))
    mantissa, _, exponent = text.partition("e")
    if exponent.startswith("-") and dialect.lexicon == "sql":
        # §6.4.4.2.3's exponent is unsigned: shift the point instead (exact, as repr is
        # the shortest text that reads back as this double).
        mantissa, exponent = format(Decimal(text), "f"), "0"
    if "." not in mantissa:
        mantissa += ".0"
    body = f"{mantissa}E{int(exponent or 0)}"
    return body if value >= 0 else f"(-{body})"


def _decimal_literal(value: Decimal, dialect: Dialect) -> str:
    if dialect.decimal_literals == "double":
        return _float_literal(float(value), dialect)
    text = format(value.copy_abs(), "f")  # exact: abs() rounds to the context's 28 digits
    if "." not in text:
        text += ".0"
    return text if not value.is_signed() else f"(-{text})"


def _int_literal(value: int, dialect: Dialect) -> str:
    return str(int(value)) if value >= 0 else f"(-{abs(int(value))})"


_LITERALS: Final[dict[type, Callable[[Any, Dialect], str]]] = {
    type(None): lambda value, dialect: "NULL",
    bool: lambda value, dialect: "TRUE" if value else "FALSE",
    str: lambda value, dialect: "'" + value.replace("'", "''") + "'",
    bytes: lambda value, dialect: "0x" + value.hex().upper(),
    float: _float_literal,
    Decimal: _decimal_literal,
    int: _int_literal,
}
"""The writer of each Python type a literal can have."""


def _field(node: ast.Field, dialect: Dialect) -> str:
    if node.section is Section.APPLICATION_PROPERTIES:
        text = _name(node.name, dialect)
        if text == node.name and node.name in dialect.aliases:
            text = "[" + node.name + "]"  # a property that shares a JMS header's name
        if text == node.name and node.path and isinstance(node.path[0], ast.Key) and (
            node.name.lower() in _SECTION_WORDS
        ):
            text = "a." + text  # 'h.x' would read as the header section
    else:
        name = node.name if node.name in _HYPHEN_NAMES else _name(node.name, dialect)
        text = f"{_SECTION_PREFIX[node.section]}.{name}"
    for reference in node.path:
        if isinstance(reference, ast.Key):
            text += "." + _name(reference.name, dialect)
        else:
            index = _operand(reference.index, dialect)
            if index.endswith("]") or index.startswith("["):
                index = f" {index} "  # '[[x]]' would lex as one delimited name, ']]' escaped
            text += "[" + index + "]"
    return text


_SECTION_WORDS = {"h", "p", "a", "d", "m", "f", "header", "properties", "footer",
                  "application_properties", "delivery_annotations", "message_annotations"}


def _operand(node: ast.Expr, dialect: Dialect) -> str:
    text = to_sql(node, dialect)
    atomic = isinstance(node, ast.Field | ast.Alias | ast.Call | ast.Exists) or (
        isinstance(node, ast.Literal) and not text.startswith("(")
    )
    return text if atomic else f"({text})"


class _Printer(Visitor[str]):
    """Each handler returns its node's text; operands are bracketed unless atomic."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    def sub(self, node: ast.Expr) -> str:
        return _operand(node, self.dialect)

    def visit_literal(self, node: ast.Literal) -> str:
        value = node.value
        if isinstance(value, int) and not isinstance(value, bool) and value > 2**63 - 1:
            return str(int(ulong(value)))
        return _literal(value, self.dialect)

    def visit_field(self, node: ast.Field) -> str:
        return _field(node, self.dialect)

    def visit_alias(self, node: ast.Alias) -> str:
        return node.name

    def visit_exists(self, node: ast.Exists) -> str:
        return f"EXISTS({self.visit(node.field)})"

    def visit_and(self, node: ast.And) -> str:
        return " AND ".join(self.sub(o) for o in node.operands)

    def visit_or(self, node: ast.Or) -> str:
        return " OR ".join(self.sub(o) for o in node.operands)

    def visit_not(self, node: ast.Not) -> str:
        return f"NOT {self.sub(node.operand)}"

    def visit_compare(self, node: ast.Compare) -> str:
        return f"{self.sub(node.left)} {node.op} {self.sub(node.right)}"

    def visit_is_null(self, node: ast.IsNull) -> str:
        return f"{self.sub(node.operand)} IS {_not(node.negated)}NULL"

    def visit_like(self, node: ast.Like) -> str:
        text = f"{self.sub(node.operand)} {_not(node.negated)}LIKE {self.sub(node.pattern)}"
        return text if node.escape is None else f"{text} ESCAPE {self.sub(node.escape)}"

    def visit_in(self, node: ast.In) -> str:
        items = ", ".join(self.sub(i) for i in node.items)
        return f"{self.sub(node.operand)} {_not(node.negated)}IN ({items})"

    def visit_between(self, node: ast.Between) -> str:
        return (f"{self.sub(node.operand)} {_not(node.negated)}BETWEEN {self.sub(node.low)} "
                f"AND {self.sub(node.high)}")

    def visit_unary(self, node: ast.Unary) -> str:
        return f"{node.op}{self.sub(node.operand)}"

    def visit_binary(self, node: ast.Binary) -> str:
        return f"{self.sub(node.left)} {node.op} {self.sub(node.right)}"

    def visit_call(self, node: ast.Call) -> str:
        prefix = f"{node.vendor}:" if node.vendor is not None else ""
        return f"{prefix}{node.name}({', '.join(self.sub(a) for a in node.args)})"


def _not(negated: bool) -> str:
    return "NOT " if negated else ""


def to_sql(node: ast.Expr, dialect: Dialect = AMQP_SQL) -> str:
    """The normalised SQL text of an expression."""
    return _Printer(dialect).visit(node)
