"""A small expression language between the filter translation and Spark Columns.

Why not build Columns directly: a Column needs a live SparkContext, and
:func:`~filtex_proton.spark.explain` must work without one; plain frozen
dataclasses can also be simplified (TRUE/FALSE/NULL folded away) and printed
as readable Spark SQL for ``explain``. :func:`to_column` is the only place
that touches PySpark.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "FALSE", "NULL", "TRUE", "Col", "Expr", "Get", "Lit", "Op", "and_", "case", "isnotnull",
    "isnull", "not_", "op", "or_", "to_column", "to_text",
]

SparkType = Literal["boolean", "bigint", "double", "string", "binary", "decimal(38,18)"]


@dataclass(frozen=True, slots=True)
class Lit:
    """A constant of a Spark type; ``None`` is that type's NULL."""

    value: Any
    type: SparkType


@dataclass(frozen=True, slots=True)
class Col:
    """A column of the archive, and struct fields inside it."""

    name: str
    fields: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Get:
    """``map[key]``: NULL when the key is absent."""

    map: Expr
    key: str


@dataclass(frozen=True, slots=True)
class Field:
    """``struct.name`` of a struct-valued expression (NULL when the struct is)."""

    struct: Expr
    name: str


@dataclass(frozen=True, slots=True)
class Op:
    """An operator or function; see ``_OPS`` for the names and their Spark meaning."""

    name: str
    args: tuple[Expr, ...]


Expr: TypeAlias = Lit | Col | Get | Field | Op

TRUE: Final = Lit(True, "boolean")
FALSE: Final = Lit(False, "boolean")
NULL: Final = Lit(None, "boolean")


def op(name: str, *args: Expr) -> Op:
    return Op(name, args)


def and_(*parts: Expr) -> Expr:
    """SQL AND (three-valued), with TRUE dropped and FALSE short-circuiting."""
    flat: list[Expr] = []
    for part in parts:
        if part == FALSE:
            return FALSE
        if part == TRUE:
            continue
        flat.extend(part.args if isinstance(part, Op) and part.name == "and" else (part,))
    return _joined("and", flat, TRUE)


def _joined(name: str, flat: list[Expr], empty: Expr) -> Expr:
    """AND/OR of what is left: one NULL is as good as many (x AND NULL AND NULL = x AND NULL)."""
    if NULL in flat:
        flat = [part for part in flat if part != NULL] + [NULL]
    if not flat:
        return empty
    return flat[0] if len(flat) == 1 else Op(name, tuple(flat))


def or_(*parts: Expr) -> Expr:
    """SQL OR (three-valued), with FALSE dropped and TRUE short-circuiting."""
    flat: list[Expr] = []
    for part in parts:
        if part == TRUE:
            return TRUE
        if part == FALSE:
            continue
        flat.extend(part.args if isinstance(part, Op) and part.name == "or" else (part,))
    return _joined("or", flat, FALSE)


def not_(part: Expr) -> Expr:
    """SQL NOT: NULL stays NULL."""
    if isinstance(part, Lit):
        return part if part.value is None else Lit(not part.value, "boolean")
    if isinstance(part, Op) and part.name == "not":
        return part.args[0]
    return Op("not", (part,))


def isnull(part: Expr) -> Expr:
    """``part IS NULL`` (never NULL itself), decided at plan time for a constant."""
    if isinstance(part, Lit):
        return TRUE if part.value is None else FALSE
    return Op("isnull", (part,))


def isnotnull(part: Expr) -> Expr:
    """``part IS NOT NULL`` (never NULL itself), decided at plan time for a constant."""
    if isinstance(part, Lit):
        return FALSE if part.value is None else TRUE
    return Op("isnotnull", (part,))


def case(branches: list[tuple[Expr, Expr]], default: Expr = NULL) -> Expr:
    """``CASE WHEN c THEN v ... ELSE default END``; a NULL condition is not taken."""
    kept: list[tuple[Expr, Expr]] = []
    for condition, value in branches:
        if condition == FALSE or (isinstance(condition, Lit) and condition.value is None):
            continue
        if condition == TRUE:
            if not kept:
                return value
            default = value
            break
        kept.append((condition, value))
    if not kept:
        return default
    if all(value == default for _, value in kept):
        return default
    args: list[Expr] = []
    for condition, value in kept:
        args.extend((condition, value))
    args.append(default)
    return Op("case", tuple(args))


# ----------------------------------------------------------------------------- printing

_INFIX: Final = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _literal_text(lit: Lit) -> str:
    value = lit.value
    if value is None:
        return "NULL" if lit.type == "boolean" else f"CAST(NULL AS {lit.type.upper()})"
    if lit.type == "boolean":
        return "TRUE" if value else "FALSE"
    if lit.type == "string":
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    if lit.type == "binary":
        return "X'" + bytes(value).hex().upper() + "'"
    if lit.type == "double":
        text = repr(float(value))
        return f"CAST('{text}' AS DOUBLE)" if text in ("nan", "inf", "-inf") else f"{text}D"
    if lit.type == "decimal(38,18)":
        return f"{value}BD"
    return f"{value}L"


def to_text(expr: Expr) -> str:
    """Spark SQL text for an expression (for people: ``explain`` prints it)."""
    match expr:
        case Lit():
            return _literal_text(expr)
        case Col(name=name, fields=fields):
            return ".".join(f"`{part}`" if not part.isidentifier() else part
                            for part in (name, *fields))
        case Get(map=inner, key=key):
            return f"{to_text(inner)}[{_literal_text(Lit(key, 'string'))}]"
        case Field(struct=inner, name=name):
            return f"{to_text(inner)}.{name}"
        case Op(name="and" | "or", args=args):
            joiner = " AND " if expr.name == "and" else " OR "
            return "(" + joiner.join(to_text(a) for a in args) + ")"
        case Op(name="not", args=(inner,)):
            return f"NOT {to_text(inner)}"
        case Op(name=name, args=(left, right)) if name in _INFIX:
            return f"({to_text(left)} {_INFIX[name]} {to_text(right)})"
        case Op(name="isnull", args=(inner,)):
            return f"({to_text(inner)} IS NULL)"
        case Op(name="isnotnull", args=(inner,)):
            return f"({to_text(inner)} IS NOT NULL)"
        case Op(name="isin", args=(inner, *items)):
            return f"({to_text(inner)} IN ({', '.join(to_text(i) for i in items)}))"
        case Op(name="case", args=args):
            parts = ["CASE"]
            for i in range(0, len(args) - 1, 2):
                parts.append(f"WHEN {to_text(args[i])} THEN {to_text(args[i + 1])}")
            parts.append(f"ELSE {to_text(args[-1])} END")
            return " ".join(parts)
        case Op(name="rlike", args=(inner, pattern)):
            return f"({to_text(inner)} RLIKE {to_text(pattern)})"
        case Op(name=name, args=args) if name.startswith("cast_"):
            return f"CAST({to_text(args[0])} AS {name[5:].upper()})"
        case Op(name=name, args=args):
            return f"{name}({', '.join(to_text(a) for a in args)})"
    raise TypeError(f"not an expression: {expr!r}")


# ----------------------------------------------------------------------------- Spark

#: Python types whose ``F.lit`` is already of this Spark type (a str is a string, a bool a
#: boolean, a float a double, a bytearray binary); an int is not (small ones are int).
_NATURAL: Final[dict[type, SparkType]] = {str: "string", bool: "boolean", float: "double",
                                          bytearray: "binary"}


def to_column(expr: Expr) -> Column:
    """The PySpark Column for an expression (needs an active SparkContext)."""
    from pyspark.sql import functions as F  # noqa: N812 (PySpark's own convention)

    # Types by name: a DataType object costs one more round trip to the JVM per cast (the
    # JVM parses its JSON), a name is parsed with the cast itself.
    def lit(value: Lit) -> Column:
        raw: Any = value.value
        if isinstance(raw, decimal.Decimal):
            raw = raw.quantize(decimal.Decimal(1).scaleb(-18), context=decimal.Context(prec=60))
        if isinstance(raw, bytes):
            raw = bytearray(raw)
        column = F.lit(raw)
        if raw is not None and _NATURAL.get(type(raw)) == value.type:
            return column  # already of that Spark type: a cast would change nothing
        return column.cast(value.type)

    built: dict[Expr, Column] = {}

    def build(node: Expr) -> Column:
        # The same sub-expression recurs in every CASE branch; each Column costs a round
        # trip to the JVM, so build it once.
        column = built.get(node)
        if column is None:
            column = built[node] = make(node)
        return column

    def make(node: Expr) -> Column:
        match node:
            case Lit():
                return lit(node)
            case Col(name=name, fields=fields):
                column = F.col(f"`{name}`")
                for part in fields:
                    column = column.getField(part)
                return column
            case Get(map=inner, key=key):
                return build(inner)[key]
            case Field(struct=inner, name=name):
                return build(inner).getField(name)
            case Op(name="and", args=args):
                result = build(args[0])
                for arg in args[1:]:
                    result = result & build(arg)
                return result
            case Op(name="or", args=args):
                result = build(args[0])
                for arg in args[1:]:
                    result = result | build(arg)
                return result
            case Op(name="not", args=(inner,)):
                return ~build(inner)
            case Op(name="eq", args=(a, b)):
                return build(a) == build(b)
            case Op(name="ne", args=(a, b)):
                return build(a) != build(b)
            case Op(name="lt", args=(a, b)):
                return build(a) < build(b)
            case Op(name="le", args=(a, b)):
                return build(a) <= build(b)
            case Op(name="gt", args=(a, b)):
                return build(a) > build(b)
            case Op(name="ge", args=(a, b)):
                return build(a) >= build(b)
            case Op(name="isnull", args=(inner,)):
                return build(inner).isNull()
            case Op(name="isnotnull", args=(inner,)):
                return build(inner).isNotNull()
            case Op(name="isnan", args=(inner,)):
                return F.isnan(build(inner))
            case Op(name="coalesce", args=args):
                return F.coalesce(*(build(a) for a in args))
            case Op(name="cast_double", args=(inner,)):
                return build(inner).cast("double")
            case Op(name="cast_float", args=(inner,)):
                return build(inner).cast("float").cast("double")
            case Op(name="cast_decimal", args=(inner,)):
                return build(inner).cast("decimal(38,18)")
            case Op(name="isin", args=(inner, *items)):
                return build(inner).isin([build(i) for i in items])
            case Op(name="startswith", args=(inner, Lit(value=text))):
                return build(inner).startswith(text)
            case Op(name="endswith", args=(inner, Lit(value=text))):
                return build(inner).endswith(text)
            case Op(name="contains", args=(inner, Lit(value=text))):
                return build(inner).contains(text)
            case Op(name="rlike", args=(inner, Lit(value=pattern))):
                return build(inner).rlike(pattern)
            case Op(name="length", args=(inner,)):
                return F.length(build(inner))
            case Op(name="concat", args=args):
                return F.concat(*(build(a) for a in args))
            case Op(name="add", args=(a, b)):
                return build(a) + build(b)
            case Op(name="case", args=args):
                result = F.when(build(args[0]), build(args[1]))
                for i in range(2, len(args) - 1, 2):
                    result = result.when(build(args[i]), build(args[i + 1]))
                return result.otherwise(build(args[-1]))
        raise TypeError(f"cannot build a Column for {node!r}")

    return build(expr)
