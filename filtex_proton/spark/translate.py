"""Filters to Spark expressions, only where the translation is exactly equivalent.

The engine's semantics (sql/values.py, filters/matching.py, docs/SEMANTICS.md)
are dynamic: an application property may hold any AMQP type and each operator
decides by the types it meets at run time. A :class:`Value` carries that into
Spark: the set of kinds a value can have (known at plan time for typed columns
and constants), the Column holding its AMQP type name where it varies, and one
slot per representation. Each operator becomes a CASE over the kind pairs that
can occur, with exactly the rule the engine applies to that pair; pairs that
cannot occur are dropped at plan time, so ``h.priority > 4`` stays
``coalesce(priority, 4) > 4``.

The translation relies on the invariants of *regular* archive rows
(docs/ARCHIVE.md: header/properties fields of their declared types, string
keys in application-properties and symbol/ulong keys in annotations, no
described top-level values, decimals that fit the decimal slot);
:func:`~filtex_proton.spark.apply_filter` sends every other row to the UDF.
Anything not translated raises :class:`UntranslatableError` with the reason, which
``explain`` reports; that filter (or SQL conjunct) then runs in the UDF.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from proton import Described, float32, symbol, timestamp

from filtex_proton.amqp.bid import as_decimal as bid_decimal
from filtex_proton.amqp.types import HEADER_DEFAULTS, Kind, kind_of
from filtex_proton.amqp.view import Section
from filtex_proton.archive.columns import (
    COLUMN_OF_FIELD,
    DECIMAL_SCALE,
    LONG_MAX,
    LONG_MIN,
    MAP_COLUMNS,
)
from filtex_proton.filters.apache import DirectBinding, HeadersBinding, NoLocalFilter, TopicBinding
from filtex_proton.filters.base import Filter
from filtex_proton.filters.constant import ConstantFilter
from filtex_proton.filters.group import GroupFilter, GroupOp
from filtex_proton.filters.property import PropertyFilter
from filtex_proton.filters.sql import SqlFilter
from filtex_proton.spark import ir
from filtex_proton.sql import ast, iso8601
from filtex_proton.sql.compiler import compile_expression
from filtex_proton.sql.dialects import AMQP_SQL, JMS_SELECTOR, Dialect
from filtex_proton.sql.functions import understood
from filtex_proton.sql.like import LikeError, compile_like, segments
from filtex_proton.sql.visitor import Visitor

__all__ = ["Pred", "Translator", "UntranslatableError"]


class UntranslatableError(Exception):
    """This filter (or expression) has no exactly equivalent Spark expression; why."""


# ----------------------------------------------------------------------------- values

_TYPE_NAMES: Final[dict[Kind, tuple[str, ...]]] = {
    Kind.NULL: ("null",),
    Kind.BOOLEAN: ("boolean",),
    Kind.INTEGER: ("ubyte", "ushort", "uint", "ulong", "byte", "short", "int", "long"),
    Kind.FLOAT: ("float", "double"),
    Kind.DECIMAL: ("decimal32", "decimal64", "decimal128", "decimal"),
    Kind.TIMESTAMP: ("timestamp",),
    Kind.CHAR: ("char",),
    Kind.UUID: ("uuid",),
    Kind.BINARY: ("binary",),
    Kind.STRING: ("string",),
    Kind.SYMBOL: ("symbol",),
    Kind.MAP: ("map",),
    Kind.LIST: ("list",),
    Kind.ARRAY: ("array",),
    Kind.DESCRIBED: ("described",),
}
#: The JMS dialect sees AMQP values as JMS types (dialects._jms_value): decimals are
#: doubles, timestamps longs, symbols strings, uuids bytes. The archive's slots already hold
#: those readings (a decimal's ``double`` is Python's float(Decimal)); only the grouping of
#: type names into kinds changes.
_JMS_KINDS: Final[dict[Kind, Kind]] = {Kind.DECIMAL: Kind.FLOAT, Kind.TIMESTAMP: Kind.INTEGER,
                                       Kind.SYMBOL: Kind.STRING, Kind.UUID: Kind.BINARY}
_JMS_NAMES: Final[dict[Kind, tuple[str, ...]]] = {
    kind: tuple(n for k, names in _TYPE_NAMES.items() if _JMS_KINDS.get(k, k) is kind
                for n in names)
    for kind in _TYPE_NAMES
}
_ANY: Final = frozenset(Kind) - {Kind.DESCRIBED}  # regular rows hold no top-level described value
_TEXT: Final = frozenset({Kind.STRING, Kind.SYMBOL})
_NUMERIC: Final = frozenset({Kind.INTEGER, Kind.TIMESTAMP, Kind.FLOAT, Kind.DECIMAL})
#: Kinds grouped the way the comparison rules of §6.4.2.3 tell them apart.
_GROUPS: Final[tuple[frozenset[Kind], ...]] = (
    frozenset({Kind.INTEGER}), frozenset({Kind.TIMESTAMP}), frozenset({Kind.FLOAT}),
    frozenset({Kind.DECIMAL}), _TEXT, frozenset({Kind.BOOLEAN}), frozenset({Kind.CHAR}),
    frozenset({Kind.UUID}), frozenset({Kind.BINARY}),
)
_NO_CONST: Final[Any] = object()
_NO_VIEW: Final[Any] = None  # what constant folding evaluates against (it reads nothing)
_DOUBLE_INF: Final = ir.Lit(math.inf, "double")
_DOUBLE_NINF: Final = ir.Lit(-math.inf, "double")
_QUANTUM: Final = decimal.Decimal(1).scaleb(-DECIMAL_SCALE)
_WIDE: Final = decimal.Context(prec=200, Emax=999_999, Emin=-999_999)
_FLOAT32: Final = struct.Struct("<f")
_OPS: Final = {"=": "eq", "<>": "ne", "!=": "ne", ">": "gt", ">=": "ge", "<": "lt", "<=": "le"}
_COMPARISONS: Final = frozenset(_OPS.values())


@dataclass(frozen=True, slots=True)
class Value:
    """A SQL value as Spark expressions (see the module docstring)."""

    kinds: frozenset[Kind]
    """The kinds it can have; ``Kind.NULL`` among them when it can be NULL."""
    slots: Mapping[str, ir.Expr] = field(default_factory=dict)
    """``boolean``, ``long``, ``decimal``, ``double``, ``string``, ``binary``."""
    type_name: ir.Expr | None = None
    """The Column holding the AMQP type name, when the kind varies per row."""
    struct: ir.Expr | None = None
    """The TYPED_VALUE struct it is read from (NULL when absent)."""
    const: Any = _NO_CONST
    """The Python value, for a constant."""
    int_in_long: bool = True
    """Every integer it can hold is in the ``long`` slot (a TYPED_VALUE ulong may not be)."""
    names: Mapping[Kind, tuple[str, ...]] = field(default_factory=lambda: _TYPE_NAMES)
    """The AMQP type names of each kind (the JMS view groups them differently)."""

    @property
    def is_const(self) -> bool:
        return self.const is not _NO_CONST


def _struct_value(struct_expr: ir.Expr) -> Value:
    slots = {name: ir.Field(struct_expr, name)
             for name in ("boolean", "long", "decimal", "double", "string", "binary")}
    return Value(_ANY, slots, ir.Field(struct_expr, "type"), struct_expr, int_in_long=False)


def _column_value(kind: Kind, slot: str, expr: ir.Expr, default: Any = None) -> Value:
    """A typed column (NULL when absent), or its default where the field has one."""
    if default is not None:
        spark_type = "boolean" if kind is Kind.BOOLEAN else "bigint"
        expr = ir.op("coalesce", expr, ir.Lit(int(default) if spark_type == "bigint" else
                                              default, spark_type))  # type: ignore[arg-type]
        return Value(frozenset({kind}), {slot: expr})
    return Value(frozenset({kind, Kind.NULL}), {slot: expr})


def jms_view(value: Value) -> Value:
    """A message value as the JMS dialect sees it (value_view), for non-constant values."""
    kinds = frozenset(_JMS_KINDS.get(k, k) for k in value.kinds)
    return dataclasses.replace(value, kinds=kinds, names=_JMS_NAMES)


def _predicate(expr: ir.Expr) -> Value:
    return Value(frozenset({Kind.BOOLEAN, Kind.NULL}), {"boolean": expr})


def _fits_decimal(value: decimal.Decimal) -> decimal.Decimal | None:
    if not value.is_finite() or abs(value) >= 10 ** (38 - DECIMAL_SCALE):
        return None
    scaled = value.quantize(_QUANTUM, context=_WIDE)
    return scaled if scaled == value else None


def _const_value(value: Any) -> Value:
    kind = kind_of(value)
    slots: dict[str, ir.Expr] = {}
    if kind is Kind.BOOLEAN:
        slots["boolean"] = ir.Lit(value, "boolean")
    elif kind in (Kind.INTEGER, Kind.TIMESTAMP):
        number = int(value)
        slots["long"] = ir.Lit(number if LONG_MIN <= number <= LONG_MAX else None, "bigint")
        slots["decimal"] = ir.Lit(decimal.Decimal(number), "decimal(38,18)")
        slots["double"] = ir.Lit(float(number), "double")
    elif kind is Kind.FLOAT:
        slots["double"] = ir.Lit(float(value), "double")
    elif kind is Kind.DECIMAL:
        exact = bid_decimal(value)
        slots["decimal"] = ir.Lit(_fits_decimal(exact), "decimal(38,18)")
        if not exact.is_nan():
            slots["double"] = ir.Lit(float(exact), "double")
    elif kind in (Kind.STRING, Kind.SYMBOL, Kind.CHAR):
        slots["string"] = ir.Lit(str(value), "string")
    elif kind is Kind.UUID:
        slots["binary"] = ir.Lit(value.bytes, "binary")
    elif kind is Kind.BINARY:
        slots["binary"] = ir.Lit(bytes(value), "binary")
    long_ok = kind not in (Kind.INTEGER, Kind.TIMESTAMP) or LONG_MIN <= int(value) <= LONG_MAX
    return Value(frozenset({kind}), slots, const=value, int_in_long=long_ok)


def _isnotnull(expr: ir.Expr) -> ir.Expr:
    if isinstance(expr, ir.Lit):
        return ir.FALSE if expr.value is None else ir.TRUE
    return ir.op("isnotnull", expr)


def _isnull(expr: ir.Expr) -> ir.Expr:
    if isinstance(expr, ir.Lit):
        return ir.TRUE if expr.value is None else ir.FALSE
    return ir.op("isnull", expr)


def null_test(value: Value) -> ir.Expr:
    """TRUE when the value is NULL (absent, or a present null); never NULL itself."""
    if value.is_const:
        return ir.TRUE if value.const is None else ir.FALSE
    if Kind.NULL not in value.kinds:
        return ir.FALSE
    if value.struct is not None:
        assert value.type_name is not None
        return ir.or_(_isnull(value.struct), ir.op("eq", value.type_name, ir.Lit("null", "string")))
    (slot,) = value.slots.values()
    return _isnull(slot)


def in_kinds(value: Value, kinds: frozenset[Kind], *, guard: bool = True) -> ir.Expr:
    """Whether the value is of one of ``kinds`` (a CASE condition: may be NULL for NULL).

    A typed column has one kind: its condition is "not NULL", and only needed
    (``guard``) when the result would not be NULL by itself for a NULL value.
    """
    possible = (value.kinds - {Kind.NULL}) & kinds
    if value.is_const:
        return ir.TRUE if kind_of(value.const) in kinds else ir.FALSE
    if not possible:
        return ir.FALSE
    if value.type_name is None:
        return ir.not_(null_test(value)) if guard else ir.TRUE
    names = [ir.Lit(n, "string") for k in sorted(possible) for n in value.names[k]]
    if len(names) == 1:
        return ir.op("eq", value.type_name, names[0])
    return ir.op("isin", value.type_name, *names)


def _slot(value: Value, name: str) -> ir.Expr:
    try:
        return value.slots[name]
    except KeyError:
        raise UntranslatableError(f"no {name} representation for this value") from None


def _as_double(value: Value, kind: Kind) -> ir.Expr:
    """The double the engine converts to: float(x), float(Decimal) for decimals."""
    if value.is_const or kind in (Kind.FLOAT, Kind.DECIMAL):
        return _slot(value, "double")
    long = ir.op("cast_double", _slot(value, "long"))
    if value.int_in_long or kind is Kind.TIMESTAMP:
        return long
    return ir.op("coalesce", long, _slot(value, "double"))


def _as_decimal(value: Value, kind: Kind) -> ir.Expr:
    """The exact decimal the engine compares (every integer fits decimal(38,18))."""
    if value.is_const:
        exact = _slot(value, "decimal")
        if isinstance(exact, ir.Lit) and exact.value is None:
            raise UntranslatableError(
                f"decimal constant {value.const} does not fit decimal(38,18) exactly")
        return exact
    if kind is Kind.DECIMAL:
        return _slot(value, "decimal")
    long = ir.op("cast_decimal", _slot(value, "long"))
    if value.int_in_long or kind is Kind.TIMESTAMP:
        return long
    return ir.op("coalesce", long, _slot(value, "decimal"))


def _cmp(op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.op(_OPS[op], a, b)


def _float_cmp(op: str, a: Value, ka: Kind, b: Value, kb: Kind) -> ir.Expr:
    """Doubles, where NaN is neither equal, greater nor lesser (§6.4.2.3): IEEE, not Spark,
    whose NaN equals NaN and exceeds everything."""
    x, y = _as_double(a, ka), _as_double(b, kb)
    nan_checks: list[ir.Expr] = []
    for side, kind in ((x, ka), (y, kb)):
        if isinstance(side, ir.Lit):
            if side.value is not None and math.isnan(side.value):
                return ir.Lit(op in ("<>", "!="), "boolean")
        elif kind is Kind.FLOAT:
            nan_checks.append(ir.op("isnan", side))
    if not nan_checks:
        return _cmp(op, x, y)
    return ir.case([(ir.or_(*nan_checks), ir.Lit(op in ("<>", "!="), "boolean"))], _cmp(op, x, y))


def _int_cmp(op: str, a: Value, ka: Kind, b: Value, kb: Kind) -> ir.Expr:
    """Exact integers: longs when both are longs, else decimal(38,18) (big ulongs)."""
    la, lb = _slot(a, "long"), _slot(b, "long")
    if (a.int_in_long or ka is Kind.TIMESTAMP) and (b.int_in_long or kb is Kind.TIMESTAMP):
        return _cmp(op, la, lb)
    both_long = ir.and_(_isnotnull(la), _isnotnull(lb))
    return ir.case([(both_long, _cmp(op, la, lb))], _cmp(op, _as_decimal(a, ka),
                                                         _as_decimal(b, kb)))


def _compare_kinds(op: str, a: Value, ka: Kind, b: Value, kb: Kind,
                   dialect: Dialect) -> ir.Expr:
    """values.compare for one pair of kinds, with the dialect's rules."""
    incomparable = ir.Lit(dialect.incomparable, "boolean")
    ordering = op not in ("=", "<>", "!=")
    if ka in _NUMERIC and kb in _NUMERIC:
        if ordering and (ka not in dialect.ordered or kb not in dialect.ordered):
            return incomparable
        if Kind.FLOAT in (ka, kb):
            return _float_cmp(op, a, ka, b, kb)
        if Kind.DECIMAL in (ka, kb):
            return _cmp(op, _as_decimal(a, ka), _as_decimal(b, kb))
        return _int_cmp(op, a, ka, b, kb)
    if dialect.iso_strings and {ka, kb} & {Kind.TIMESTAMP} and ({ka, kb} & _TEXT):
        stamp, text = (a, b) if ka is Kind.TIMESTAMP else (b, a)
        if text.is_const:
            millis = iso8601.to_millis(str(text.const))
            if millis is None:
                return incomparable
            converted: ir.Expr = ir.Lit(millis, "bigint")
            if not LONG_MIN <= millis <= LONG_MAX:  # beyond every timestamp: decided already
                converted = ir.Lit(decimal.Decimal(millis), "decimal(38,18)")
                stamp_side: ir.Expr = ir.op("cast_decimal", _slot(stamp, "long"))
            else:
                stamp_side = _slot(stamp, "long")
        elif text.struct is not None:  # the archive holds the engine's reading of the text
            converted = _slot(text, "long")
            stamp_side = _slot(stamp, "long")
        else:
            raise UntranslatableError("a timestamp compared with a string column needs ISO 8601 "
                                 "parsing, which only the engine does")
        pair = (stamp_side, converted) if ka is Kind.TIMESTAMP else (converted, stamp_side)
        return _cmp(op, *pair)
    if ka in _TEXT and kb in _TEXT:
        if ordering and ka not in dialect.ordered:
            return incomparable
        return _cmp(op, _slot(a, "string"), _slot(b, "string"))
    if ka is kb and ka in (Kind.BOOLEAN, Kind.CHAR, Kind.UUID, Kind.BINARY):
        if ordering and ka not in dialect.ordered:
            return incomparable
        slot = {Kind.BOOLEAN: "boolean", Kind.CHAR: "string", Kind.UUID: "binary",
                Kind.BINARY: "binary"}[ka]
        return _cmp(op, _slot(a, slot), _slot(b, slot))
    return incomparable  # NULL in AMQP SQL (§2.1), FALSE in JMS


def _groups(value: Value) -> list[frozenset[Kind]]:
    if value.is_const:
        kind = kind_of(value.const)
        return [g for g in _GROUPS if kind in g]
    return [g for g in _GROUPS if g & value.kinds]


def compare(op: str, a: Value, b: Value, dialect: Dialect = AMQP_SQL) -> ir.Expr:
    """``a op b`` with §6.4.2.3's rules: one CASE branch per pair of kinds that can meet."""
    if a.is_const and b.is_const:
        return ir.Lit(dialect.compare(op, a.const, b.const), "boolean")
    incomparable = ir.Lit(dialect.incomparable, "boolean")
    # NULL on either side is NULL; two values of kinds that do not compare are `incomparable`.
    otherwise = incomparable if dialect.incomparable is None else ir.case(
        [(ir.or_(null_test(a), null_test(b)), ir.NULL)], incomparable)
    branches: list[tuple[ir.Expr, ir.Expr]] = []
    for ga in _groups(a):
        for gb in _groups(b):
            ka = min(ga) if len(ga) > 1 else next(iter(ga))
            kb = min(gb) if len(gb) > 1 else next(iter(gb))
            result = _compare_kinds(op, a, ka, b, kb, dialect)
            if result == incomparable:
                continue
            # A bare comparison of slots is NULL when a typed column is NULL; anything else
            # (a NaN branch, a constant) needs the column's "not NULL" spelled out.
            guard = not (isinstance(result, ir.Op) and result.name in _COMPARISONS)
            condition = ir.and_(in_kinds(a, ga, guard=guard), in_kinds(b, gb, guard=guard))
            branches.append((condition, result))
    return ir.case(branches, otherwise)


def truth(value: Value) -> ir.Expr:
    """A value used as a predicate: a boolean is itself, anything else NULL."""
    if value.is_const:
        return ir.Lit(value.const if isinstance(value.const, bool) else None, "boolean")
    if Kind.BOOLEAN not in value.kinds:
        return ir.NULL
    if value.type_name is None:
        return value.slots["boolean"]
    return ir.case([(in_kinds(value, frozenset({Kind.BOOLEAN})), value.slots["boolean"])])


# ----------------------------------------------------------------------------- LIKE


def _java_regex_char(char: str) -> str:
    return char if char.isascii() and char.isalnum() else f"\\x{{{ord(char):X}}}"


def _like(text: ir.Expr, pattern: str, escape: str | None) -> ir.Expr:
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
                return ir.case([(_isnotnull(text), ir.TRUE)], ir.NULL)
            return ir.and_(*parts)
        if not first and not last and len(middle) == 1:
            return ir.op("contains", text, ir.Lit(middle[0], "string"))
    regex = ".*".join(
        "".join("." if item is None else _java_regex_char(item) for item in segment.items)
        for segment in parsed
    )
    return ir.op("rlike", text, ir.Lit(f"(?s)\\A{regex}\\z", "string"))


# ----------------------------------------------------------------------------- SQL

#: Header and properties fields: (kind, slot) of their typed column.
_FIELD_KINDS: Final[dict[str, tuple[Kind, str]]] = {
    "durable": (Kind.BOOLEAN, "boolean"),
    "priority": (Kind.INTEGER, "long"),
    "ttl": (Kind.INTEGER, "long"),
    "first-acquirer": (Kind.BOOLEAN, "boolean"),
    "delivery-count": (Kind.INTEGER, "long"),
    "user-id": (Kind.BINARY, "binary"),
    "to": (Kind.STRING, "string"),
    "subject": (Kind.STRING, "string"),
    "reply-to": (Kind.STRING, "string"),
    "content-type": (Kind.SYMBOL, "string"),
    "content-encoding": (Kind.SYMBOL, "string"),
    "absolute-expiry-time": (Kind.TIMESTAMP, "long"),
    "creation-time": (Kind.TIMESTAMP, "long"),
    "group-id": (Kind.STRING, "string"),
    "group-sequence": (Kind.INTEGER, "long"),
    "reply-to-group-id": (Kind.STRING, "string"),
}
#: The key type a regular row's map section uses for names (application-properties:
#: string keys; annotations and footer: symbol keys, AMQP 1.0 §3.2).
_NAME_KEY: Final[dict[Section, str]] = {
    Section.APPLICATION_PROPERTIES: "string",
    Section.DELIVERY_ANNOTATIONS: "symbol",
    Section.MESSAGE_ANNOTATIONS: "symbol",
    Section.FOOTER: "symbol",
}


def field_value(section: Section, name: Any) -> Value:
    """What the engine reads for a field without a path: the header's defaults apply."""
    if section in (Section.HEADER, Section.PROPERTIES):
        column = ir.Col(COLUMN_OF_FIELD[str(name)])
        if str(name) in ("message-id", "correlation-id"):
            return _struct_value(column)
        kind, slot = _FIELD_KINDS[str(name)]
        default = HEADER_DEFAULTS.get(str(name)) if section is Section.HEADER else None
        return _column_value(kind, slot, column, default)
    return _struct_value(ir.Get(ir.Col(MAP_COLUMNS[section]), _map_key(section, name)))


def _map_key(section: Section, key: Any) -> str:
    """The typed key under which a regular row holds the entry ``dict.get(key)`` finds."""
    kind = kind_of(key)
    if kind in _TEXT:
        return f"{_NAME_KEY[section]}:{key}"
    if kind is Kind.INTEGER and section is not Section.APPLICATION_PROPERTIES:
        return f"ulong:{int(key)}"  # regular annotation keys are symbols or ulongs
    raise UntranslatableError(f"map key {key!r} of type {kind.name.lower()}")


def _alias(name: str) -> Value:
    """A JMS header name (dialects.JMS_HEADERS), already as the JMS type it converts to."""
    def column(field_name: str) -> ir.Expr:
        return ir.Col(COLUMN_OF_FIELD[field_name])

    def defaulted(field_name: str, default: int) -> ir.Expr:
        return ir.op("coalesce", column(field_name), ir.Lit(default, "bigint"))

    integer, string = frozenset({Kind.INTEGER}), frozenset({Kind.STRING})
    nullable_integer = integer | {Kind.NULL}
    nullable_string = string | {Kind.NULL}
    priority = HEADER_DEFAULTS["priority"]
    match name:
        case "JMSPriority":
            return Value(integer, {"long": defaulted("priority", int(priority))})
        case "JMSDeliveryMode":
            durable = ir.op("coalesce", column("durable"), ir.FALSE)
            return Value(string, {"string": ir.case([(durable, ir.Lit("PERSISTENT", "string"))],
                                                    ir.Lit("NON_PERSISTENT", "string"))})
        case "JMSTimestamp":
            return Value(nullable_integer, {"long": column("creation-time")})
        case "JMSExpiration":
            return Value(integer, {"long": defaulted("absolute-expiry-time", 0)})
        case "JMSRedelivered":
            return Value(frozenset({Kind.BOOLEAN}), {"boolean": ir.op(
                "gt", defaulted("delivery-count", 0), ir.Lit(0, "bigint"))})
        case "JMSDestination" | "JMSReplyTo" | "JMSXGroupID":
            field_name = {"JMSDestination": "to", "JMSReplyTo": "reply-to",
                          "JMSXGroupID": "group-id"}[name]
            return Value(nullable_string, {"string": column(field_name)})
        case "JMSXGroupSeq":
            return Value(nullable_integer, {"long": column("group-sequence")})
        case "JMSXDeliveryCount":
            return Value(integer, {"long": ir.op("add", defaulted("delivery-count", 0),
                                                 ir.Lit(1, "bigint"))})
    raise UntranslatableError(f"{name} is converted by the engine (its text form or the "
                              "first of two fields)")


def _exists(section: Section, name: str) -> ir.Expr:
    if section in (Section.HEADER, Section.PROPERTIES):
        return _isnotnull(ir.Col(COLUMN_OF_FIELD[name]))  # a composite's null field is absent
    return _isnotnull(ir.Get(ir.Col(MAP_COLUMNS[section]), _map_key(section, name)))


def _substitute_utc(node: Any, now: timestamp) -> Any:
    """The AST with ``UTC()`` replaced by one instant (Spark reads the clock once per plan)."""
    if isinstance(node, ast.Call) and node.vendor is None and node.name == "UTC":
        return ast.Literal(now, pos=node.pos)
    if not dataclasses.is_dataclass(node):
        return node
    changes: dict[str, Any] = {}
    for item in dataclasses.fields(node):
        if item.name == "pos":
            continue
        old = getattr(node, item.name)
        new = tuple(_substitute_utc(x, now) for x in old) if isinstance(old, tuple) else \
            _substitute_utc(old, now)
        if new is not old and new != old:
            changes[item.name] = new
    return dataclasses.replace(cast(Any, node), **changes) if changes else node


def _reads_message(node: ast.Expr | ast.Reference) -> bool:
    for part, _ in ast.walk(node):  # type: ignore[arg-type]
        if isinstance(part, ast.Field | ast.Alias | ast.Exists):
            return True
        if isinstance(part, ast.Call):
            function = understood(part.name, part.vendor)
            if function is not None and not function.deterministic:
                return True
    return False


_ARITHMETIC: Final = ("arithmetic on message fields (overflow to NaN, exact decimals) is "
                      "evaluated by the engine")


class SqlTranslator(Visitor[Value]):
    """One SQL filter's AST (AMQP SQL dialect) to a three-valued Spark predicate."""

    def __init__(self, dialect: Dialect, now_ms: int) -> None:
        if dialect not in (AMQP_SQL, JMS_SELECTOR):
            raise UntranslatableError(f"the {dialect.name} dialect is evaluated by the engine")
        self.dialect = dialect
        self.now = timestamp(now_ms)
        self.uses_utc = False

    def predicate(self, root: ast.Expr) -> ir.Expr:
        substituted = _substitute_utc(root, self.now)
        self.uses_utc = substituted != root
        return truth(self.value(substituted))

    def value(self, node: ast.Expr) -> Value:
        if isinstance(node, ast.Call) and understood(node.name, node.vendor) is None:
            return _const_value(None)  # §6.4.4.3: NULL whatever its arguments read; exact
        if not _reads_message(node):
            try:
                return _const_value(compile_expression(node, self.dialect)(_NO_VIEW))
            except Exception as exc:  # would be an evaluation error: NULL for the whole filter
                raise UntranslatableError(f"constant expression fails: {exc}") from None
        return self.visit(node)

    # One handler per node class; what Spark cannot evaluate exactly raises
    # UntranslatableError (the engine evaluates that filter), never a guess.

    def visit_literal(self, node: ast.Literal) -> Value:
        return _const_value(node.value)  # folded in value(); here for completeness

    def visit_field(self, node: ast.Field) -> Value:
        if node.path:
            raise UntranslatableError("map and list references (a.x.y, a.x[0]) read nested "
                                      "values, which the archive keeps encoded")
        read = field_value(node.section, node.name)
        return jms_view(read) if self.dialect.value_view is not None else read

    def visit_alias(self, node: ast.Alias) -> Value:
        return _alias(node.name)

    def visit_exists(self, node: ast.Exists) -> Value:
        target = node.field
        if isinstance(target, ast.Alias):
            return _predicate(ir.or_(*(_exists(s, n)
                                       for s, n in self.dialect.aliases[target.name].reads)))
        if target.path:
            raise UntranslatableError("Exists is evaluated by the engine")
        return _predicate(_exists(target.section, target.name))

    def visit_and(self, node: ast.And) -> Value:
        return _predicate(ir.and_(*(truth(self.value(o)) for o in node.operands)))

    def visit_or(self, node: ast.Or) -> Value:
        return _predicate(ir.or_(*(truth(self.value(o)) for o in node.operands)))

    def visit_not(self, node: ast.Not) -> Value:
        return _predicate(ir.not_(truth(self.value(node.operand))))

    def visit_compare(self, node: ast.Compare) -> Value:
        return _predicate(compare(node.op, self.value(node.left), self.value(node.right),
                                  self.dialect))

    def visit_is_null(self, node: ast.IsNull) -> Value:
        test = null_test(self.value(node.operand))
        return _predicate(ir.not_(test) if node.negated else test)

    def visit_like(self, node: ast.Like) -> Value:
        return _predicate(self._like(node))

    def visit_in(self, node: ast.In) -> Value:
        found = self._in(self.value(node.operand), [self.value(i) for i in node.items])
        return _predicate(ir.not_(found) if node.negated else found)

    def visit_between(self, node: ast.Between) -> Value:
        subject = self.value(node.operand)
        inside = ir.and_(compare(">=", subject, self.value(node.low), self.dialect),
                         compare("<=", subject, self.value(node.high), self.dialect))
        return _predicate(ir.not_(inside) if node.negated else inside)

    def visit_unary(self, node: ast.Unary) -> Value:
        raise UntranslatableError(_ARITHMETIC)

    def visit_binary(self, node: ast.Binary) -> Value:
        raise UntranslatableError(_ARITHMETIC)

    def visit_call(self, node: ast.Call) -> Value:
        raise UntranslatableError(
            f"function {node.name}() on message fields is evaluated by the engine")

    def _like(self, node: ast.Like) -> ir.Expr:
        pattern = self.value(node.pattern)
        escape = None if node.escape is None else self.value(node.escape)
        if not pattern.is_const or (escape is not None and not escape.is_const):
            raise UntranslatableError("LIKE with a pattern read from the message")
        # As the compiler: a constant that is a str (char included) is the pattern;
        # anything else makes LIKE NULL.
        if not isinstance(pattern.const, str) or (
                escape is not None and not isinstance(escape.const, str)):
            return ir.NULL
        escape_text = None if escape is None else str(escape.const)
        try:
            compile_like(str(pattern.const), escape_text)
        except LikeError:
            return ir.NULL
        operand = self.value(node.operand)
        if operand.is_const:
            raise UntranslatableError("LIKE on a constant")  # folded by the engine; not reached
        text = ir.case([(in_kinds(operand, _TEXT, guard=False), _slot(operand, "string"))],
                       ir.Lit(None, "string")) if operand.type_name is not None else (
            _slot(operand, "string") if operand.kinds & _TEXT else ir.Lit(None, "string"))
        matched = _like(text, str(pattern.const), escape_text)
        return ir.not_(matched) if node.negated else matched

    def _in(self, subject: Value, items: list[Value]) -> ir.Expr:
        dialect = self.dialect
        texts = [str(i.const) for i in items if i.is_const and kind_of(i.const) in _TEXT]
        if len(texts) != len(items) or subject.is_const or dialect is not AMQP_SQL:
            return ir.or_(*(compare("=", subject, item, dialect) for item in items))
        # All constant strings: one isin() for text values; timestamps compare with the
        # ISO readings; every other kind is NULL (incomparable).
        branches: list[tuple[ir.Expr, ir.Expr]] = []
        if subject.kinds & _TEXT:
            condition = in_kinds(subject, _TEXT, guard=False)
            string = _slot(subject, "string")
            found: ir.Expr = (ir.op("eq", string, ir.Lit(texts[0], "string")) if len(texts) == 1
                              else ir.op("isin", string, *(ir.Lit(t, "string") for t in texts)))
            branches.append((condition, found))
        if Kind.TIMESTAMP in subject.kinds and self.dialect.iso_strings:
            results = [_compare_kinds("=", subject, Kind.TIMESTAMP, item, Kind.STRING,
                                      self.dialect) for item in items]
            branches.append((in_kinds(subject, frozenset({Kind.TIMESTAMP})), ir.or_(*results)))
        return ir.case(branches, ir.NULL)


# ----------------------------------------------------------------------------- property filters


def _as_float32(value: float) -> float | None:
    try:
        result: float = _FLOAT32.unpack(_FLOAT32.pack(value))[0]
    except OverflowError:
        return None
    return result


def _isinf(expr: ir.Expr) -> ir.Expr:
    return ir.or_(ir.op("eq", expr, _DOUBLE_INF), ir.op("eq", expr, _DOUBLE_NINF))


def _type_is(value: Value, name: str) -> ir.Expr:
    assert value.type_name is not None
    return ir.op("eq", value.type_name, ir.Lit(name, "string"))


def _float_field_equal(value: Value, ref: float, ref32: bool) -> ir.Expr:
    """§4.1.1's floating-point rule for a float or double field value (matching.py's
    ``_float_equal``): single precision when either side is a float."""
    double = _slot(value, "double")
    # The reference rounded to single precision (a float32 object given by a program may
    # hold any double: the engine rounds it too); None when it overflows: no match.
    single = _as_float32(ref)
    branches: list[tuple[ir.Expr, ir.Expr]] = []
    # A float field: its (decoded) value is already single precision.
    branches.append((_type_is(value, "float"), ir.FALSE if single is None else
                     ir.op("eq", double, ir.Lit(single, "double"))))
    if ref32 and single is None:
        branches.append((_type_is(value, "double"), ir.FALSE))
    elif ref32:
        # A double field is rounded to single precision; one that overflows it matches nothing.
        narrowed = ir.op("cast_float", double)
        overflow = ir.and_(_isinf(narrowed), ir.not_(_isinf(double)))
        branches.append((_type_is(value, "double"),
                         ir.case([(overflow, ir.FALSE)],
                                 ir.op("eq", narrowed, ir.Lit(single, "double")))))
    else:
        branches.append((_type_is(value, "double"), ir.op("eq", double, ir.Lit(ref, "double"))))
    return ir.case(branches, ir.FALSE)


def match_reference(ref: Any, value: Value, *, modifiers: bool = True) -> ir.Expr:
    """matching.compile_reference(ref) applied to a field value; TRUE/FALSE (NULL = FALSE)."""
    kind = kind_of(ref)
    if kind is Kind.STRING and modifiers and ref.startswith("&"):
        text = str(ref)
        if text.startswith("&&"):
            return _text_match(value, "eq", text[1:])
        if text.startswith("&p:"):
            return _text_match(value, "startswith", text[3:])
        if text.startswith("&s:"):
            return _text_match(value, "endswith", text[3:])
        raise UntranslatableError(f"unknown modifier in {text!r}")  # refused at decode already
    if kind in _TEXT:
        return _text_match(value, "eq", str(ref))
    if kind is Kind.INTEGER:
        exact = int(ref)
        integers = frozenset({Kind.INTEGER})
        branches = [(in_kinds(value, integers),
                     _int_cmp("=", value, Kind.INTEGER, _const_value(ref), Kind.INTEGER)
                     if value.kinds & integers else ir.FALSE)]
        if Kind.FLOAT in value.kinds:
            branches.append((in_kinds(value, frozenset({Kind.FLOAT})),
                             _float_field_equal(value, float(exact), False)))
        return _definitely(ir.case(branches, ir.FALSE))
    if kind is Kind.FLOAT:
        number, single = float(ref), isinstance(ref, float32)
        if math.isnan(number):
            return ir.FALSE
        branches = []
        if Kind.FLOAT in value.kinds:
            branches.append((in_kinds(value, frozenset({Kind.FLOAT})),
                             _float_field_equal(value, number, single)))
        if Kind.INTEGER in value.kinds:
            as_double = _as_double(value, Kind.INTEGER)
            target: float | None = number
            if single:  # both rounded to single precision (an integer's never overflows)
                as_double = ir.op("cast_float", as_double)
                target = _as_float32(number)
            branches.append((in_kinds(value, frozenset({Kind.INTEGER})),
                             ir.FALSE if target is None else
                             ir.op("eq", as_double, ir.Lit(target, "double"))))
        return _definitely(ir.case(branches, ir.FALSE))
    if kind is Kind.DECIMAL:
        expected = bid_decimal(ref)
        fits = _fits_decimal(expected) if not expected.is_nan() else None
        if fits is None or Kind.DECIMAL not in value.kinds:
            return ir.FALSE  # a regular row's decimals all fit: none equals this one
        return _definitely(ir.case([(in_kinds(value, frozenset({Kind.DECIMAL})),
                                     ir.op("eq", _slot(value, "decimal"),
                                           ir.Lit(fits, "decimal(38,18)")))], ir.FALSE))
    same: dict[Kind, tuple[str, Any]] = {
        Kind.BOOLEAN: ("boolean", ref), Kind.TIMESTAMP: ("long", int(ref) if kind is
                                                         Kind.TIMESTAMP else None),
        Kind.CHAR: ("string", str(ref)), Kind.UUID: ("binary", getattr(ref, "bytes", None)),
        Kind.BINARY: ("binary", ref if kind is Kind.BINARY else None),
    }
    if kind in same:
        if kind not in value.kinds:
            return ir.FALSE
        slot, expected = same[kind]
        spark_type = {"boolean": "boolean", "long": "bigint", "string": "string",
                      "binary": "binary"}[slot]
        return _definitely(ir.case([(in_kinds(value, frozenset({kind})),
                                     ir.op("eq", _slot(value, slot),
                                           ir.Lit(expected, spark_type)))],  # type: ignore[arg-type]
                                   ir.FALSE))
    raise UntranslatableError(
        f"{kind.name.lower()} reference values (§4.1.2-§4.1.5) are matched by the engine")


def _text_match(value: Value, how: str, text: str) -> ir.Expr:
    if not value.kinds & _TEXT:
        return ir.FALSE
    return _definitely(ir.case([(in_kinds(value, _TEXT), ir.op(how, _slot(value, "string"),
                                                                ir.Lit(text, "string")))],
                               ir.FALSE))


def _definitely(expr: ir.Expr) -> ir.Expr:
    """TRUE or FALSE, never NULL: a property filter entry either matches or it does not."""
    if isinstance(expr, ir.Lit):
        return ir.FALSE if expr.value is None else expr
    return ir.op("coalesce", expr, ir.FALSE)


# ----------------------------------------------------------------------------- filters


@dataclass(frozen=True, slots=True)
class Pred:
    """A filter as a Spark predicate: TRUE, FALSE, or NULL where the filter is NULL."""

    expr: ir.Expr
    nullable: bool


class Translator:
    """Whole filters (of any type) to :class:`Pred`; raises :class:`UntranslatableError`."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.uses_utc = False

    def translate(self, item: Filter) -> Pred:
        if isinstance(item, ConstantFilter):
            return Pred(ir.Lit(item.result, "boolean"), False)
        if isinstance(item, PropertyFilter):
            return Pred(self._property(item), False)
        if isinstance(item, SqlFilter):
            return Pred(self.sql(item.compiled.ast, item.compiled.dialect), True)
        if isinstance(item, GroupFilter):
            return self._group(item)
        if isinstance(item, DirectBinding):
            subject = ir.Col(COLUMN_OF_FIELD["subject"])
            return Pred(_definitely(ir.op("eq", subject, ir.Lit(item.key, "string"))), False)
        if isinstance(item, HeadersBinding):
            return Pred(self._headers(item), False)
        if isinstance(item, TopicBinding):
            return Pred(_topic(str(item.value)), False)
        if isinstance(item, NoLocalFilter):
            # An archived message has no connection of origin: no-local keeps it (origin None).
            return Pred(ir.TRUE, False)
        raise UntranslatableError(f"{item.type_name} is evaluated by the engine")

    def sql(self, root: ast.Expr, dialect: Dialect) -> ir.Expr:
        translator = SqlTranslator(dialect, self.now_ms)
        result = translator.predicate(root)
        self.uses_utc |= translator.uses_utc
        return result

    def _property(self, item: PropertyFilter) -> ir.Expr:
        section = item.section
        parts: list[ir.Expr] = []
        for key, reference in item.value.items():
            if reference is None:
                continue  # §4.1.1: a NULL reference matches anything
            parts.append(match_reference(reference, field_value(section, key)))
        return ir.and_(*parts)

    def _headers(self, item: HeadersBinding) -> ir.Expr:
        oks: list[ir.Expr] = []
        for key, reference in item.value.items():
            if key == "x-match" or str(key).startswith("x-"):
                continue
            value = field_value(Section.APPLICATION_PROPERTIES, str(key))
            assert value.struct is not None
            present = _isnotnull(value.struct)
            if reference is None:
                oks.append(present)
            else:
                oks.append(ir.and_(present, match_reference(reference, value, modifiers=False)))
        return ir.and_(*oks) if item.match_all else ir.or_(*oks)

    def _group(self, item: GroupFilter) -> Pred:
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
        any_null = ir.or_(*(_isnull(e) for e in nullable))
        return Pred(ir.case([(any_null, ir.NULL)], combined), True)


def _topic(pattern: str) -> ir.Expr:
    """The legacy topic binding (apache-filters §1.2) as one anchored regex.

    The subject's words, each followed by a dot ("a.b" -> "a.b.", "" -> no words),
    are matched by one unit per pattern word: a literal word and its dot, ``*`` any
    one word (``[^.]*\\.``), ``#`` any number of words. That is the language the
    engine's segment search decides; without a subject only ``#`` matches.
    """
    units = []
    for word in pattern.split(".") if pattern else []:
        if word == "#":
            units.append("(?:[^.]*\\.)*")
        elif word == "*":
            units.append("[^.]*\\.")
        else:
            units.append("".join(_java_regex_char(c) for c in word) + "\\.")
    subject = ir.Col(COLUMN_OF_FIELD["subject"])
    dotted = ir.case([(ir.op("eq", subject, ir.Lit("", "string")), ir.Lit("", "string"))],
                     ir.op("concat", subject, ir.Lit(".", "string")))
    matched = ir.op("rlike", dotted, ir.Lit(f"(?s)\\A{''.join(units)}\\z", "string"))
    return ir.case([(_isnull(subject), ir.Lit(pattern == "#", "boolean"))], matched)


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
