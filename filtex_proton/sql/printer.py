"""AST to SQL text: the normalised form of a filter.

Printing is total and the output parses back to an equal tree (the property
tests check it). Binary operands are parenthesised unless they are atoms, so
the printed text never depends on precedence rules being read the same way.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from proton import ulong

from filtex_proton.amqp.view import Section
from filtex_proton.sql import ast
from filtex_proton.sql.dialects import AMQP_SQL, Dialect

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
    if value is None:
        return "NULL"
    if value is True:
        return "TRUE"
    if value is False:
        return "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bytes):
        return "0x" + value.hex().upper()
    if isinstance(value, float):
        if math.isnan(value):
            return "NAN"
        if math.isinf(value):
            return "INF" if value > 0 else "(-INF)"
        text = repr(abs(value))
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        body = f"{mantissa}E{int(exponent or 0)}"
        return body if value >= 0 else f"(-{body})"
    if isinstance(value, Decimal):
        if dialect.decimal_literals == "double":
            return _literal(float(value), dialect)
        text = format(value.copy_abs(), "f")  # exact: abs() rounds to the context's 28 digits
        if "." not in text:
            text += ".0"
        return text if not value.is_signed() else f"(-{text})"
    if isinstance(value, int):
        return str(int(value)) if value >= 0 else f"(-{abs(int(value))})"
    raise TypeError(f"no SQL constant for {type(value).__name__}")


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


def to_sql(node: ast.Expr, dialect: Dialect = AMQP_SQL) -> str:
    """The normalised SQL text of an expression."""
    def sub(n: ast.Expr) -> str:
        return _operand(n, dialect)

    not_ = "NOT " if getattr(node, "negated", False) else ""
    match node:
        case ast.Literal(value=value):
            if isinstance(value, int) and not isinstance(value, bool) and value > 2**63 - 1:
                return str(int(ulong(value)))
            return _literal(value, dialect)
        case ast.Field():
            return _field(node, dialect)
        case ast.Alias(name=name):
            return name
        case ast.Exists(field=target):
            return f"EXISTS({to_sql(target, dialect)})"
        case ast.And(operands=operands):
            return " AND ".join(sub(o) for o in operands)
        case ast.Or(operands=operands):
            return " OR ".join(sub(o) for o in operands)
        case ast.Not(operand=operand):
            return f"NOT {sub(operand)}"
        case ast.Compare(op=op, left=left, right=right):
            return f"{sub(left)} {op} {sub(right)}"
        case ast.IsNull(operand=operand):
            return f"{sub(operand)} IS {not_}NULL"
        case ast.Like(operand=operand, pattern=pattern, escape=escape):
            text = f"{sub(operand)} {not_}LIKE {sub(pattern)}"
            return text if escape is None else f"{text} ESCAPE {sub(escape)}"
        case ast.In(operand=operand, items=items):
            return f"{sub(operand)} {not_}IN ({', '.join(sub(i) for i in items)})"
        case ast.Between(operand=operand, low=low, high=high):
            return f"{sub(operand)} {not_}BETWEEN {sub(low)} AND {sub(high)}"
        case ast.Unary(op=op, operand=operand):
            return f"{op}{sub(operand)}"
        case ast.Binary(op=op, left=left, right=right):
            return f"{sub(left)} {op} {sub(right)}"
        case ast.Call(name=name, args=args, vendor=vendor):
            prefix = f"{vendor}:" if vendor is not None else ""
            return f"{prefix}{name}({', '.join(sub(a) for a in args)})"
    raise TypeError(f"not an expression: {node!r}")
