"""A small expression language between the filter translation and Spark Columns.

Why not build Columns directly: a Column needs a live SparkContext, and
:func:`~filtex_proton.spark.explain` must work without one; plain frozen
dataclasses can also be simplified (TRUE/FALSE/NULL folded away) and printed
as readable Spark SQL for ``explain``. :func:`to_column` is the only place
that touches PySpark.
"""

from __future__ import annotations

import decimal
import operator
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, NamedTuple, TypeAlias, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "FALSE", "NULL", "TRUE", "Col", "Expr", "Get", "Lit", "Op", "and_", "case", "isnotnull",
    "isnull", "not_", "op", "or_", "to_column", "to_text",
]

_M = TypeVar("_M")

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
    write = _NODE_TEXT.get(type(expr))
    if write is None:
        raise TypeError(f"not an expression: {expr!r}")
    return write(expr)


class _Form(NamedTuple, Generic[_M]):
    """What one operator becomes, ``make``, for an argument count in ``arity``."""

    arity: range
    make: _M


_ANY_COUNT: Final = range(sys.maxsize)
_ONE: Final = range(1, 2)
_TWO: Final = range(2, 3)
_SOME: Final = range(1, sys.maxsize)


def _col_text(col: Col) -> str:
    return ".".join(f"`{part}`" if not part.isidentifier() else part
                    for part in (col.name, *col.fields))


def _op_text(expr: Op) -> str:
    """An operator in its own syntax; a function, or an operator given an argument count
    its syntax has no place for, as a call."""
    form = _OP_TEXT.get(expr.name)
    if form is None and expr.name.startswith("cast_"):
        form = _CAST_TEXT
    if form is None or len(expr.args) not in form.arity:
        return f"{expr.name}({', '.join(to_text(a) for a in expr.args)})"
    return form.make(expr)


def _case_text(expr: Op) -> str:
    args = expr.args
    parts = ["CASE"]
    for i in range(0, len(args) - 1, 2):
        parts.append(f"WHEN {to_text(args[i])} THEN {to_text(args[i + 1])}")
    parts.append(f"ELSE {to_text(args[-1])} END")
    return " ".join(parts)


def _joined_text(joiner: str) -> Callable[[Op], str]:
    return lambda expr: "(" + joiner.join(to_text(a) for a in expr.args) + ")"


def _infix_text(expr: Op) -> str:
    left, right = expr.args
    return f"({to_text(left)} {_INFIX[expr.name]} {to_text(right)})"


_NODE_TEXT: Final[dict[type, Callable[[Any], str]]] = {
    Lit: _literal_text,
    Col: _col_text,
    Get: lambda get: f"{to_text(get.map)}[{_literal_text(Lit(get.key, 'string'))}]",
    Field: lambda field: f"{to_text(field.struct)}.{field.name}",
    Op: _op_text,
}
_OP_TEXT: Final[dict[str, _Form[Callable[[Op], str]]]] = {
    "and": _Form(_ANY_COUNT, _joined_text(" AND ")),
    "or": _Form(_ANY_COUNT, _joined_text(" OR ")),
    "not": _Form(_ONE, lambda expr: f"NOT {to_text(expr.args[0])}"),
    **{name: _Form(_TWO, _infix_text) for name in _INFIX},
    "isnull": _Form(_ONE, lambda expr: f"({to_text(expr.args[0])} IS NULL)"),
    "isnotnull": _Form(_ONE, lambda expr: f"({to_text(expr.args[0])} IS NOT NULL)"),
    "isin": _Form(_SOME, lambda expr: f"({to_text(expr.args[0])} IN "
                                      f"({', '.join(to_text(i) for i in expr.args[1:])}))"),
    "case": _Form(_ANY_COUNT, _case_text),
    "rlike": _Form(_TWO, lambda expr: f"({to_text(expr.args[0])} RLIKE {to_text(expr.args[1])})"),
}
"""Operators printed in their own syntax; any other is printed as a function call."""
_CAST_TEXT: Final[_Form[Callable[[Op], str]]] = _Form(
    _ANY_COUNT, lambda expr: f"CAST({to_text(expr.args[0])} AS {expr.name[5:].upper()})")
"""``cast_<type>``: a CAST to that type."""


# ----------------------------------------------------------------------------- Spark

#: Python types whose ``F.lit`` is already of this Spark type (a str is a string, a bool a
#: boolean, a float a double, a bytearray binary); an int is not (small ones are int).
_NATURAL: Final[dict[type, SparkType]] = {str: "string", bool: "boolean", float: "double",
                                          bytearray: "binary"}


def to_column(expr: Expr) -> Column:
    """The PySpark Column for an expression (needs an active SparkContext)."""
    return _Columns().build(expr)


class _Columns:
    """The Columns of one expression's nodes, each built once: the same sub-expression
    recurs in every CASE branch, and each Column costs a round trip to the JVM."""

    def __init__(self) -> None:
        from pyspark.sql import functions

        self.functions = functions
        self.built: dict[Expr, Column] = {}

    def build(self, node: Expr) -> Column:
        column = self.built.get(node)
        if column is None:
            make = _NODE_COLUMN.get(type(node))
            if make is None:
                raise TypeError(f"cannot build a Column for {node!r}")
            column = self.built[node] = make(self, node)
        return column

    def lit(self, value: Lit) -> Column:
        # Types by name: a DataType object costs one more round trip to the JVM per cast (the
        # JVM parses its JSON), a name is parsed with the cast itself.
        raw: Any = value.value
        if isinstance(raw, decimal.Decimal):
            raw = raw.quantize(decimal.Decimal(1).scaleb(-18), context=decimal.Context(prec=60))
        if isinstance(raw, bytes):
            raw = bytearray(raw)
        column = self.functions.lit(raw)
        if raw is not None and _NATURAL.get(type(raw)) == value.type:
            return column  # already of that Spark type: a cast would change nothing
        return column.cast(value.type)

    def col(self, node: Col) -> Column:
        column = self.functions.col(f"`{node.name}`")
        for part in node.fields:
            column = column.getField(part)
        return column

    def op(self, node: Op) -> Column:
        form = _OP_COLUMN.get(node.name)
        if form is None or len(node.args) not in form.arity:
            raise TypeError(f"cannot build a Column for {node!r}")
        return form.make(self, node)

    def fold(self, combine: Callable[[Column, Column], Column], node: Op) -> Column:
        """``a & b & c`` (or ``|``), left to right."""
        result = self.build(node.args[0])
        for arg in node.args[1:]:
            result = combine(result, self.build(arg))
        return result

    def case(self, node: Op) -> Column:
        build, args = self.build, node.args
        result = self.functions.when(build(args[0]), build(args[1]))
        for i in range(2, len(args) - 1, 2):
            result = result.when(build(args[i]), build(args[i + 1]))
        return result.otherwise(build(args[-1]))


_ColumnMaker: TypeAlias = Callable[[_Columns, Op], "Column"]


def _method(name: str) -> _ColumnMaker:
    """``arg.<name>()``: isNull, isNotNull."""
    return lambda columns, node: getattr(columns.build(node.args[0]), name)()


def _cast(*spark_types: str) -> _ColumnMaker:
    """``arg.cast(t)`` for each type in turn (a float is cast to float, then double)."""
    def make(columns: _Columns, node: Op) -> Column:
        column = columns.build(node.args[0])
        for spark_type in spark_types:
            column = column.cast(spark_type)
        return column
    return make


def _binary(combine: Callable[[Column, Column], Column]) -> _ColumnMaker:
    return lambda columns, node: combine(columns.build(node.args[0]), columns.build(node.args[1]))


def _with_text(method: str) -> _ColumnMaker:
    """``arg.<method>(text)`` with the text a string constant (startswith, rlike)."""
    def make(columns: _Columns, node: Op) -> Column:
        inner, pattern = node.args
        if not isinstance(pattern, Lit):
            raise TypeError(f"cannot build a Column for {node!r}")
        return getattr(columns.build(inner), method)(pattern.value)  # type: ignore[no-any-return]
    return make


def _function(name: str) -> _ColumnMaker:
    """``F.<name>(args...)``: coalesce, concat, isnan, length."""
    return lambda columns, node: getattr(columns.functions, name)(
        *(columns.build(arg) for arg in node.args))


_NODE_COLUMN: Final[dict[type, Callable[[_Columns, Any], Column]]] = {
    Lit: _Columns.lit,
    Col: _Columns.col,
    Get: lambda columns, get: columns.build(get.map)[get.key],
    Field: lambda columns, field: columns.build(field.struct).getField(field.name),
    Op: _Columns.op,
}
_OP_COLUMN: Final[dict[str, _Form[_ColumnMaker]]] = {
    "and": _Form(_ANY_COUNT, lambda columns, node: columns.fold(operator.and_, node)),
    "or": _Form(_ANY_COUNT, lambda columns, node: columns.fold(operator.or_, node)),
    "not": _Form(_ONE, lambda columns, node: ~columns.build(node.args[0])),
    "eq": _Form(_TWO, _binary(operator.eq)),
    "ne": _Form(_TWO, _binary(operator.ne)),
    "lt": _Form(_TWO, _binary(operator.lt)),
    "le": _Form(_TWO, _binary(operator.le)),
    "gt": _Form(_TWO, _binary(operator.gt)),
    "ge": _Form(_TWO, _binary(operator.ge)),
    "add": _Form(_TWO, _binary(operator.add)),
    "isnull": _Form(_ONE, _method("isNull")),
    "isnotnull": _Form(_ONE, _method("isNotNull")),
    "isnan": _Form(_ONE, _function("isnan")),
    "length": _Form(_ONE, _function("length")),
    "coalesce": _Form(_ANY_COUNT, _function("coalesce")),
    "concat": _Form(_ANY_COUNT, _function("concat")),
    "cast_double": _Form(_ONE, _cast("double")),
    "cast_float": _Form(_ONE, _cast("float", "double")),
    "cast_decimal": _Form(_ONE, _cast("decimal(38,18)")),
    "isin": _Form(_SOME, lambda columns, node: columns.build(node.args[0]).isin(
        [columns.build(item) for item in node.args[1:]])),
    "startswith": _Form(_TWO, _with_text("startswith")),
    "endswith": _Form(_TWO, _with_text("endswith")),
    "contains": _Form(_TWO, _with_text("contains")),
    "rlike": _Form(_TWO, _with_text("rlike")),
    "case": _Form(_ANY_COUNT, _Columns.case),
}
"""Each operator's Column: every name :mod:`filtex_proton.spark` builds (an Op of any other
name, or of an argument count not listed, raises ``TypeError``)."""
