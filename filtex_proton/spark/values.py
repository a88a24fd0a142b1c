"""SQL values as Spark expressions: the kinds a value can have, and the engine's rules over them.

The engine's semantics (sql/values.py, filters/matching.py, docs/SEMANTICS.md)
are dynamic: an application property may hold any AMQP type and each operator
decides by the types it meets at run time. A :class:`Value` carries that into
Spark: the set of kinds a value can have (known at plan time for typed columns
and constants), the Column holding its AMQP type name where it varies, and one
slot per representation. Each operator becomes a CASE over the kind pairs that
can occur, with exactly the rule the engine applies to that pair; pairs that
cannot occur are dropped at plan time, so ``h.priority > 4`` stays
``coalesce(priority, 4) > 4``. This module is that model and the comparison
rules; the SQL visitor (sql_visitor.py) and the property filters (properties.py)
both read fields and compare through it.

It relies on the invariants of *regular* archive rows (docs/ARCHIVE.md:
header/properties fields of their declared types, string keys in
application-properties and symbol/ulong keys in annotations, no described
top-level values, decimals that fit the decimal slot);
:func:`~filtex_proton.spark.apply_filter` sends every other row to the UDF.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

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
from filtex_proton.spark import ir
from filtex_proton.sql import iso8601
from filtex_proton.sql.dialects import AMQP_SQL, Dialect

__all__ = [
    "TEXT", "UntranslatableError", "Value", "as_double", "compare", "compare_kinds",
    "const_value", "field_value", "fits_decimal", "in_kinds", "int_cmp", "jms_view", "map_key",
    "null_test", "slot_of", "truth",
]


class UntranslatableError(Exception):
    """This filter (or expression) has no exactly equivalent Spark expression; why."""


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
TEXT: Final = frozenset({Kind.STRING, Kind.SYMBOL})
_NUMERIC: Final = frozenset({Kind.INTEGER, Kind.TIMESTAMP, Kind.FLOAT, Kind.DECIMAL})
#: Kinds grouped the way the comparison rules of §6.4.2.3 tell them apart.
_GROUPS: Final[tuple[frozenset[Kind], ...]] = (
    frozenset({Kind.INTEGER}), frozenset({Kind.TIMESTAMP}), frozenset({Kind.FLOAT}),
    frozenset({Kind.DECIMAL}), TEXT, frozenset({Kind.BOOLEAN}), frozenset({Kind.CHAR}),
    frozenset({Kind.UUID}), frozenset({Kind.BINARY}),
)
_NO_CONST: Final[Any] = object()
_QUANTUM: Final = decimal.Decimal(1).scaleb(-DECIMAL_SCALE)
_WIDE: Final = decimal.Context(prec=200, Emax=999_999, Emin=-999_999)
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


def fits_decimal(value: decimal.Decimal) -> decimal.Decimal | None:
    if not value.is_finite() or abs(value) >= 10 ** (38 - DECIMAL_SCALE):
        return None
    scaled = value.quantize(_QUANTUM, context=_WIDE)
    return scaled if scaled == value else None


def const_value(value: Any) -> Value:
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
        slots["decimal"] = ir.Lit(fits_decimal(exact), "decimal(38,18)")
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


def null_test(value: Value) -> ir.Expr:
    """TRUE when the value is NULL (absent, or a present null); never NULL itself."""
    if value.is_const:
        return ir.TRUE if value.const is None else ir.FALSE
    if Kind.NULL not in value.kinds:
        return ir.FALSE
    if value.struct is not None:
        assert value.type_name is not None
        return ir.or_(ir.isnull(value.struct),
                      ir.op("eq", value.type_name, ir.Lit("null", "string")))
    (slot,) = value.slots.values()
    return ir.isnull(slot)


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


def slot_of(value: Value, name: str) -> ir.Expr:
    try:
        return value.slots[name]
    except KeyError:
        raise UntranslatableError(f"no {name} representation for this value") from None


def as_double(value: Value, kind: Kind) -> ir.Expr:
    """The double the engine converts to: float(x), float(Decimal) for decimals."""
    if value.is_const or kind in (Kind.FLOAT, Kind.DECIMAL):
        return slot_of(value, "double")
    long = ir.op("cast_double", slot_of(value, "long"))
    if value.int_in_long or kind is Kind.TIMESTAMP:
        return long
    return ir.op("coalesce", long, slot_of(value, "double"))


def _as_decimal(value: Value, kind: Kind) -> ir.Expr:
    """The exact decimal the engine compares (every integer fits decimal(38,18))."""
    if value.is_const:
        exact = slot_of(value, "decimal")
        if isinstance(exact, ir.Lit) and exact.value is None:
            raise UntranslatableError(
                f"decimal constant {value.const} does not fit decimal(38,18) exactly")
        return exact
    if kind is Kind.DECIMAL:
        return slot_of(value, "decimal")
    long = ir.op("cast_decimal", slot_of(value, "long"))
    if value.int_in_long or kind is Kind.TIMESTAMP:
        return long
    return ir.op("coalesce", long, slot_of(value, "decimal"))


def _cmp(op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.op(_OPS[op], a, b)


def _float_cmp(op: str, a: Value, ka: Kind, b: Value, kb: Kind) -> ir.Expr:
    """Doubles, where NaN is neither equal, greater nor lesser (§6.4.2.3): IEEE, not Spark,
    whose NaN equals NaN and exceeds everything."""
    x, y = as_double(a, ka), as_double(b, kb)
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


def int_cmp(op: str, a: Value, ka: Kind, b: Value, kb: Kind) -> ir.Expr:
    """Exact integers: longs when both are longs, else decimal(38,18) (big ulongs)."""
    la, lb = slot_of(a, "long"), slot_of(b, "long")
    if (a.int_in_long or ka is Kind.TIMESTAMP) and (b.int_in_long or kb is Kind.TIMESTAMP):
        return _cmp(op, la, lb)
    both_long = ir.and_(ir.isnotnull(la), ir.isnotnull(lb))
    return ir.case([(both_long, _cmp(op, la, lb))], _cmp(op, _as_decimal(a, ka),
                                                         _as_decimal(b, kb)))


def compare_kinds(op: str, a: Value, ka: Kind, b: Value, kb: Kind,
                   dialect: Dialect) -> ir.Expr:
    """values.compare for one pair of kinds, with the dialect's rules: the first rule of
    :data:`_KIND_RULES` that covers the pair decides."""
    for covers, rule in _KIND_RULES:
        if covers(ka, kb, dialect):
            return rule(op, a, ka, b, kb, dialect)
    return _incomparable(dialect)  # NULL in AMQP SQL (§2.1), FALSE in JMS


def _incomparable(dialect: Dialect) -> ir.Expr:
    return ir.Lit(dialect.incomparable, "boolean")


def _unordered(op: str, dialect: Dialect, *kinds: Kind) -> bool:
    """An ordering (not = or <>) of a kind the dialect does not order (JMS strings)."""
    return op not in ("=", "<>", "!=") and any(kind not in dialect.ordered for kind in kinds)


def _numeric_cmp(op: str, a: Value, ka: Kind, b: Value, kb: Kind, dialect: Dialect) -> ir.Expr:
    """Numbers: as doubles if either is a float, else exact decimals if either is a
    decimal, else exact integers (§6.4.2.3)."""
    if _unordered(op, dialect, ka, kb):
        return _incomparable(dialect)
    if Kind.FLOAT in (ka, kb):
        return _float_cmp(op, a, ka, b, kb)
    if Kind.DECIMAL in (ka, kb):
        return _cmp(op, _as_decimal(a, ka), _as_decimal(b, kb))
    return int_cmp(op, a, ka, b, kb)


def _timestamp_text_cmp(op: str, a: Value, ka: Kind, b: Value, kb: Kind,
                        dialect: Dialect) -> ir.Expr:
    """A timestamp and a string read as ISO 8601 (§6.3.2): a constant string is read
    here, a string column through the archive's own reading of it (its ``long`` slot)."""
    stamp, text = (a, b) if ka is Kind.TIMESTAMP else (b, a)
    if text.is_const:
        millis = iso8601.to_millis(str(text.const))
        if millis is None:
            return _incomparable(dialect)
        converted: ir.Expr = ir.Lit(millis, "bigint")
        if not LONG_MIN <= millis <= LONG_MAX:  # beyond every timestamp: decided already
            converted = ir.Lit(decimal.Decimal(millis), "decimal(38,18)")
            stamp_side: ir.Expr = ir.op("cast_decimal", slot_of(stamp, "long"))
        else:
            stamp_side = slot_of(stamp, "long")
    elif text.struct is not None:  # the archive holds the engine's reading of the text
        converted = slot_of(text, "long")
        stamp_side = slot_of(stamp, "long")
    else:
        raise UntranslatableError("a timestamp compared with a string column needs ISO 8601 "
                                  "parsing, which only the engine does")
    pair = (stamp_side, converted) if ka is Kind.TIMESTAMP else (converted, stamp_side)
    return _cmp(op, *pair)


def _text_cmp(op: str, a: Value, ka: Kind, b: Value, kb: Kind, dialect: Dialect) -> ir.Expr:
    """Strings and symbols, by their text."""
    if _unordered(op, dialect, ka):
        return _incomparable(dialect)
    return _cmp(op, slot_of(a, "string"), slot_of(b, "string"))


_SAME_KIND_SLOTS: Final[dict[Kind, str]] = {
    Kind.BOOLEAN: "boolean", Kind.CHAR: "string", Kind.UUID: "binary", Kind.BINARY: "binary",
}
"""Kinds compared only with their own kind, and the slot that holds their value."""


def _same_kind_cmp(op: str, a: Value, ka: Kind, b: Value, kb: Kind,
                   dialect: Dialect) -> ir.Expr:
    if _unordered(op, dialect, ka):
        return _incomparable(dialect)
    slot = _SAME_KIND_SLOTS[ka]
    return _cmp(op, slot_of(a, slot), slot_of(b, slot))


_KindRule: TypeAlias = Callable[[str, Value, Kind, Value, Kind, Dialect], ir.Expr]

_KIND_RULES: Final[tuple[tuple[Callable[[Kind, Kind, Dialect], bool], _KindRule], ...]] = (
    (lambda ka, kb, dialect: ka in _NUMERIC and kb in _NUMERIC, _numeric_cmp),
    (lambda ka, kb, dialect: dialect.iso_strings and (
        (ka is Kind.TIMESTAMP and kb in TEXT) or (kb is Kind.TIMESTAMP and ka in TEXT)),
     _timestamp_text_cmp),
    (lambda ka, kb, dialect: ka in TEXT and kb in TEXT, _text_cmp),
    (lambda ka, kb, dialect: ka is kb and ka in _SAME_KIND_SLOTS, _same_kind_cmp),
)
"""Which pairs of kinds compare, and how: §6.4.2.3's bullets in order, each a test of the
pair and the rule for pairs it covers. A pair no rule covers is incomparable."""


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
            result = compare_kinds(op, a, ka, b, kb, dialect)
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
    return _struct_value(ir.Get(ir.Col(MAP_COLUMNS[section]), map_key(section, name)))


def map_key(section: Section, key: Any) -> str:
    """The typed key under which a regular row holds the entry ``dict.get(key)`` finds."""
    kind = kind_of(key)
    if kind in TEXT:
        return f"{_NAME_KEY[section]}:{key}"
    if kind is Kind.INTEGER and section is not Section.APPLICATION_PROPERTIES:
        return f"ulong:{int(key)}"  # regular annotation keys are symbols or ulongs
    raise UntranslatableError(f"map key {key!r} of type {kind.name.lower()}")
