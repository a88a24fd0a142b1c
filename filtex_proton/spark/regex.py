"""LIKE patterns as Spark predicates, split by the engine's own parser (sql/like.py).

A pattern of literal segments becomes ``=``, ``startswith``/``endswith`` or
``contains``, which Spark evaluates (and pushes down) without a regex; anything
else one anchored Java regex. :func:`java_regex_char` quotes a character for
that regex; the topic binding (properties.py) builds its regex with it too.
"""

from __future__ import annotations

from filtex_proton.spark import ir
from filtex_proton.sql.like import segments

__all__ = ["java_regex_char", "like_predicate"]


def java_regex_char(char: str) -> str:
    """``char`` as a Java regex literal: ASCII letters and digits as they are, else ``\\x{…}``."""
    return char if char.isascii() and char.isalnum() else f"\\x{{{ord(char):X}}}"


def like_predicate(text: ir.Expr, pattern: str, escape: str | None) -> ir.Expr:
    """The engine's LIKE (§6.4.3.2) on a non-NULL string: ``%`` any sequence, ``_`` one code
    point, newlines included. Literal segments use startswith/endswith/contains; anything
    else an anchored Java regex under DOTALL, whose ``.`` is one code point."""
    parsed = segments(pattern, escape)
    literals = [s.literal for s in parsed]
    if len(parsed) == 1 and literals[0] is not None:
        return ir.op("eq", text, ir.Lit(literals[0], "string"))
    if all(lit is not None for lit in literals):
        first, last = literals[0] or "", literals[-1] or ""
        middle = [lit for lit in literals[1:-1] if lit]
        if not middle:
            parts: list[ir.Expr] = []
            if first:
                parts.append(ir.op("startswith", text, ir.Lit(first, "string")))
            if last:
                parts.append(ir.op("endswith", text, ir.Lit(last, "string")))
            if first and last:  # the two must not overlap
                parts.append(ir.op("ge", ir.op("length", text),
                                   ir.Lit(len(first) + len(last), "bigint")))
            if not parts:  # '%' alone: every string
                return ir.case([(ir.isnotnull(text), ir.TRUE)], ir.NULL)
            return ir.and_(*parts)
        if not first and not last and len(middle) == 1:
            return ir.op("contains", text, ir.Lit(middle[0], "string"))
    regex = ".*".join(
        "".join("." if item is None else java_regex_char(item) for item in segment.items)
        for segment in parsed
    )
    return ir.op("rlike", text, ir.Lit(f"(?s)\\A{regex}\\z", "string"))
