"""Table-driven conformance tests for SQL filter expressions (OASIS filtex CSD01 §6) and the
JMS selector dialect (apache-filters §2.2). Every row id names the spec section it checks.

Every row is evaluated by the compiled evaluator *and* by the reference interpreter
(tests/filtex_proton/sql/support.py asserts they agree), then compared with the expected
TRUE / FALSE / NULL (None) written out by hand.
"""

from __future__ import annotations

import itertools
import math
import uuid
from collections.abc import Callable
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from proton import (
    Array,
    Data,
    Described,
    byte,
    char,
    decimal32,
    decimal64,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

from filtex_proton.amqp.view import DictMessageView, Section
from filtex_proton.errors import FilterError
from filtex_proton.sql import AMQP_SQL, JMS_SELECTOR, ast, compile_sql, functions, parse

from .support import bid32, bid64, bid128, evaluate, same_tree

A = AMQP_SQL
J = JMS_SELECTOR
T, F, N = True, False, None

EPOCH_2020 = 1577836800000  # 2020-01-01T00:00:00Z in ms
U1 = uuid.UUID("12345678-1234-5678-1234-567812345678")
U_LOW = uuid.UUID("00000000-0000-0000-0000-000000000001")
U_HIGH = uuid.UUID("ffffffff-0000-0000-0000-000000000000")


def undescribed_array(element_type: int, *elements: Any) -> Array:
    from proton import UNDESCRIBED

    return Array(UNDESCRIBED, element_type, *elements)


def message() -> dict[str, Any]:
    """A message with every section and a field of every AMQP type (fresh for each use)."""
    return {
        "header": {
            "durable": True, "priority": ubyte(7), "ttl": uint(1000),
            "first-acquirer": False, "delivery-count": uint(2),
        },
        "properties": {
            "message-id": "msg-1", "user-id": b"bob", "to": "queue://orders",
            "subject": "order.created", "reply-to": "replies", "correlation-id": U1,
            "content-type": symbol("text/plain"), "content-encoding": symbol("utf-8"),
            "absolute-expiry-time": timestamp(EPOCH_2020 + 3_600_000),
            "creation-time": timestamp(EPOCH_2020), "group-id": "g1",
            "group-sequence": uint(3), "reply-to-group-id": "rg",
        },
        "application_properties": {
            "s": "abc", "sym": symbol("abc"), "e": "", "i": 5, "neg": -5, "t": True, "f": False,
            "n": None, "d": Decimal("1.5"), "dbl": 2.5, "nan": math.nan, "inf": math.inf,
            "u": ubyte(200), "ul": ulong(2**64 - 1), "lmax": 2**63 - 1, "lmin": -(2**63),
            "c": char("a"), "id": U1, "bin": b"\x0a\x0b", "ts": timestamp(EPOCH_2020),
            "m": {"k": "v", "nul": None, "inner": {"deep": 1}, "x y": 2},
            "l": [1, None, [10, 20], {"k": "w"}],
            "arr": undescribed_array(Data.INT, int32(1), int32(2), int32(3)),
            "desc": Described(symbol("d"), [7, 8]),
            "nl": "a\nb", "astral": "\U0001d538", "pct": "100%", "under": "a_b",
            "iso": "2020-01-01T00:00:00Z", "dur": "PT1H", "date": "2020-01-01",
            "zero": 0, "one": ubyte(1), "two": 2,
        },
        "message_annotations": {
            symbol("x-opt-jms-type"): "mytype", symbol("x-opt-list"): [1, 2],
            symbol("x-opt-null"): None, symbol("x-opt-sym"): symbol("text/plain"),
        },
        "delivery_annotations": {symbol("x-opt-d"): 1},
        "footer": {symbol("x-opt-f"): "sig"},
    }


def row(
    section: str, text: str, expected: bool | None, *, dialect: Any = A,
    msg: dict[str, Any] | None = None,
) -> Any:
    """One conformance row; ``section`` is the pytest id and starts with the spec section."""
    assert section.startswith(("§", "apache")), section
    return pytest.param(text, dialect, message() if msg is None else msg, expected, id=section)


def check(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    assert evaluate(text, dialect, **msg) is expected


ROW_ARGS = ("text", "dialect", "msg", "expected")


# =============================================================================================
# §6.4.2.1-2: three-valued logic, all nine pairs, as constants (folded) and as fields (run time)

_AND = {(T, T): T, (T, F): F, (T, N): N, (F, T): F, (F, F): F, (F, N): F,
        (N, T): N, (N, F): F, (N, N): N}
_OR = {(T, T): T, (T, F): T, (T, N): T, (F, T): T, (F, F): F, (F, N): N,
       (N, T): T, (N, F): N, (N, N): N}
_NOT = {T: F, F: T, N: N}
_CONST = {T: "TRUE", F: "FALSE", N: "NULL"}
_FIELD = {T: "t", F: "f", N: "n"}  # a.n is a present NULL; absent fields are covered below
_WORD = {T: "TRUE", F: "FALSE", N: "NULL"}

LOGIC_ROWS = [
    row(f"§6.4.2.2 {_WORD[a]} {op} {_WORD[b]} is {_WORD[table[a, b]]} ({form})",
        f"{names[a]} {op} {names[b]}", table[a, b])
    for op, table in (("AND", _AND), ("OR", _OR))
    for a, b in itertools.product((T, F, N), repeat=2)
    for form, names in (("constants", _CONST), ("fields", _FIELD))
] + [
    row(f"§6.4.2.1 NOT {_WORD[a]} is {_WORD[_NOT[a]]} ({form})", f"NOT {names[a]}", _NOT[a])
    for a in (T, F, N)
    for form, names in (("constants", _CONST), ("fields", _FIELD))
] + [
    row("§6.4.2.2 AND chain with FALSE is FALSE", "t AND n AND f", F),
    row("§6.4.2.2 AND chain of TRUE and NULL is NULL", "t AND n AND t", N),
    row("§6.4.2.2 AND chain all TRUE", "t AND TRUE AND t", T),
    row("§6.4.2.2 OR chain with TRUE is TRUE", "f OR n OR t", T),
    row("§6.4.2.2 OR chain of FALSE and NULL is NULL", "n OR f OR f", N),
    row("§6.4.2.2 OR chain all FALSE", "f OR FALSE OR f", F),
    row("§6.4.2.2 absent field in AND is NULL", "t AND absent", N),
    row("§6.4.2.2 absent field in OR with TRUE", "absent OR t", T),
    row("§6.4.2.1 NOT NOT TRUE", "NOT NOT t", T),
    row("§6.4.2.1 NOT of an absent field is NULL", "NOT absent", N),
    row("§6.4.2.1 NOT of a comparison with NULL is NULL", "NOT (i = n)", N),
    row("§6.4.1 non-boolean value as predicate is NULL", "i", N),
    row("§6.4.1 string as predicate is NULL", "s", N),
    row("§6.4.1 non-boolean operand of AND is NULL", "t AND i", N),
    row("§6.4.1 non-boolean operand of AND with FALSE is FALSE", "i AND f", F),
    row("§6.4.1 NOT of a non-boolean is NULL", "NOT s", N),
    row("§6.4.1 precedence: OR binds looser than AND", "t OR f AND f", T),
    row("§6.4.1 parentheses regroup", "(t OR f) AND f", F),
    row("§6.4.1 NOT binds tighter than AND", "NOT f AND f", F),
    row("§6.4.1 NOT applies to the comparison", "NOT i = 6", T),
    row("§6.4.1 predicate compared with a boolean", "(i = 5) = TRUE", T),
    row("§6.4.1 IS NULL of a NULL predicate", "(i = n) IS NULL", T),
]


@pytest.mark.parametrize(ROW_ARGS, LOGIC_ROWS)
def test_logic(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


@pytest.mark.parametrize("dialect", [A, J], ids=["§6.4.2 AMQP SQL", "apache §2.2 JMS"])
def test_only_true_matches(dialect: Any) -> None:
    """§2.1, §2.3: a message is eligible only when the filter is TRUE; NULL is not a match."""
    view = DictMessageView(application_properties={"x": 1})
    assert compile_sql("x = 1", dialect).matches(view) is True
    assert compile_sql("x = 2", dialect).matches(view) is False
    assert compile_sql("y = 1", dialect).matches(view) is False
    assert compile_sql("y = 1", dialect).evaluate(view) is None


# =============================================================================================
# §6.3.1 / §6.4.2.3 / §6.4.4.1.2: every pair of numeric types

NUMERIC_TYPES: dict[str, Callable[[int], Any]] = {
    "ubyte": ubyte, "ushort": ushort, "uint": uint, "ulong": ulong,
    "byte": byte, "short": short, "int32": int32, "long": int,
    "float32": lambda v: float32(float(v)), "double": float,
    "Decimal": Decimal,
    "decimal32": bid32,
    "decimal64": lambda v: bid64(v * 10, -1),  # 5.0: a different quantum, the same value
    "decimal128": lambda v: bid128(v * 100, -2),
}
INTEGER_TYPES = {"ubyte", "ushort", "uint", "ulong", "byte", "short", "int32", "long"}
PAIRS = list(itertools.product(NUMERIC_TYPES, repeat=2))


@pytest.mark.parametrize(
    ("left", "right"), PAIRS, ids=[f"§6.4.2.3 §6.3.1 {a} vs {b}" for a, b in PAIRS])
def test_numeric_pair_amqp(left: str, right: str) -> None:
    five, six = NUMERIC_TYPES[left](5), NUMERIC_TYPES[right](6)
    other_five = NUMERIC_TYPES[right](5)
    msg = {"application_properties": {"x": five, "y": other_five, "z": six}}
    for text, expected in (
        ("x = y", T), ("y = x", T), ("x <> y", F), ("x != y", F), ("x < z", T), ("z > x", T),
        ("x <= y", T), ("x >= y", T), ("x > z", F), ("z <= x", F), ("x = z", F), ("x <> z", T),
        ("x + y = 10", T), ("z - x = 1", T), ("x - z = -1", T), ("x * z = 30", T),
        ("x IN (z, y)", T), ("x BETWEEN y AND z", T), ("-x = -5", T), ("x = 5", T),
        ("x = 5.0", T), ("x = 5.0E0", T), ("x < 5.5", T), ("x < 5.5E0", T),
    ):
        assert evaluate(text, A, **msg) is expected, text
    both_integers = left in INTEGER_TYPES and right in INTEGER_TYPES
    assert evaluate("z % x = 1", A, **msg) is (T if both_integers else N)
    # 6/5: integer division truncates; any float or decimal gives 1.2
    assert evaluate("z / x = 1", A, **msg) is both_integers
    assert evaluate("z / x > 1.19 AND z / x < 1.21", A, **msg) is (not both_integers)


@pytest.mark.parametrize(
    ("left", "right"), PAIRS, ids=[f"apache §2.2 JMS {a} vs {b}" for a, b in PAIRS])
def test_numeric_pair_jms(left: str, right: str) -> None:
    """JMS reads decimals as doubles (apache-filters §2.2) and orders all numbers."""
    five, six = NUMERIC_TYPES[left](5), NUMERIC_TYPES[right](6)
    msg = {"application_properties": {"x": five, "y": NUMERIC_TYPES[right](5), "z": six}}
    for text, expected in (
        ("x = y", T), ("x <> y", F), ("x < z", T), ("z >= x", T), ("x + y = 10", T),
        ("x BETWEEN y AND z", T), ("x NOT BETWEEN y AND z", F), ("x = 5.0", T), ("x < 5.5", T),
    ):
        assert evaluate(text, J, **msg) is expected, text


# =============================================================================================
# §6.4.2.3 equality and ordering at the edges of the integer ranges, NULL and NaN

_BIG = {
    "ul": ulong(2**64 - 1), "u63": ulong(2**63), "lmax": 2**63 - 1, "lmin": -(2**63),
    "m1": -1, "ub": ubyte(255), "b": byte(-128), "ui": uint(2**32 - 1),
}
EDGE_ROWS = [
    row(f"§6.4.2.3 {d}", text, exp, msg={"application_properties": dict(_BIG)})
    for d, text, exp in [
        ("2^64-1 equals its constant", "ul = 18446744073709551615", T),
        ("2^63 equals its constant (ulong)", "u63 = 9223372036854775808", T),
        ("2^63-1 equals its constant", "lmax = 9223372036854775807", T),
        ("-2^63 equals its constant", "lmin = -9223372036854775808", T),
        ("ulong 2^63 > long 2^63-1", "u63 > lmax", T),
        ("long 2^63-1 < ulong 2^63", "lmax < u63", T),
        ("ulong 2^63 <> long 2^63-1", "u63 <> lmax", T),
        ("ulong 2^64-1 is not -1 (exact value, no wrap-around)", "ul = m1", F),
        ("ulong 2^64-1 > long -1", "ul > m1", T),
        ("ulong 2^64-1 > long -2^63", "ul > lmin", T),
        ("long -2^63 < ubyte 255", "lmin < ub", T),
        ("ubyte 255 > byte -128", "ub > b", T),
        ("uint 2^32-1 = its long value", "ui = 4294967295", T),
        ("2^64-1 vs 2^64-2", "ul > 18446744073709551614", T),
        ("2^63 constant > 2^63-1 constant", "9223372036854775808 > 9223372036854775807", T),
        ("ulong max as double equals 1.8446744073709552E19 (double conversion)",
         "ul = 1.8446744073709552E19", T),
        ("long max as double equals 2^63 as double", "lmax = 9.223372036854775808E18", T),
        ("long max vs decimal: exact", "lmax = 9223372036854775807.0", T),
        ("long max vs decimal one tenth less: exact, not double",
         "lmax = 9223372036854775806.9", F),
        ("long max > decimal just below", "lmax > 9223372036854775806.9", T),
        ("ulong max vs decimal: exact", "ul = 18446744073709551615.0", T),
        ("ulong max vs decimal + 0.5", "ul < 18446744073709551615.5", T),
    ]
] + [
    row("§6.4.2.3 NULL = NULL is NULL", "NULL = NULL", N),
    row("§6.4.2.3 NULL <> NULL is NULL", "NULL <> NULL", N),
    row("§6.4.2.3 value = NULL is NULL", "i = NULL", N),
    row("§6.4.2.3 value <> NULL is NULL", "i <> NULL", N),
    row("§6.4.2.3 value > NULL is NULL", "i > n", N),
    row("§6.4.2.3 absent field = value is NULL", "absent = 1", N),
    row("§6.4.2.3 absent field <> value is NULL", "absent <> 1", N),
    row("§6.4.2.3 present-null = value is NULL", "n = 1", N),
    row("§6.4.2.3 NaN = NaN is FALSE", "NAN = NAN", F),
    row("§6.4.2.3 NaN <> NaN is TRUE", "NAN <> NAN", T),
    row("§6.4.2.3 NaN != 1 is TRUE", "NAN != 1", T),
    row("§6.4.2.3 NaN > 1 is FALSE", "NAN > 1", F),
    row("§6.4.2.3 NaN < 1 is FALSE", "NAN < 1", F),
    row("§6.4.2.3 NaN >= NaN is FALSE", "NAN >= NAN", F),
    row("§6.4.2.3 NaN <= 1.5 is FALSE", "NAN <= 1.5", F),
    row("§6.4.2.3 NaN field = itself is FALSE", "nan = nan", F),
    row("§6.4.2.3 NaN field <> itself is TRUE", "nan <> nan", T),
    row("§6.4.2.3 NaN field = integer constant is FALSE", "nan = 1", F),
    row("§6.4.2.3 NaN field <> integer constant is TRUE", "nan <> 1", T),
    row("§6.4.2.3 NaN field < float constant is FALSE", "nan < 1.0E0", F),
    row("§6.4.2.3 NaN field <> decimal constant is TRUE", "nan <> 1.5", T),
    row("§6.4.2.3 integer constant > NaN field is FALSE", "1 > nan", F),
    row("§6.4.2.3 NaN is not NULL", "nan IS NULL", F),
    row("§6.4.2.3 NaN <> NULL is NULL", "nan <> NULL", N),
    row("§6.4.2.3 NaN IN (NaN) is FALSE", "nan IN (nan, NAN)", F),
    row("§6.4.2.3 NaN NOT IN (NaN) is TRUE", "nan NOT IN (NAN)", T),
    row("§6.4.2.3 NaN BETWEEN -INF AND INF is FALSE", "nan BETWEEN -INF AND INF", F),
    row("§6.4.2.3 NaN NOT BETWEEN is TRUE", "nan NOT BETWEEN -INF AND INF", T),
    row("§6.4.2.3 INF > max double", "INF > 1.7976931348623157E308", T),
    row("§6.4.2.3 -INF < -max double", "-INF < -1.7976931348623157E308", T),
    row("§6.4.2.3 INF = INF", "INF = inf", T),
    row("§6.4.2.3 INF > ulong max", "INF > 18446744073709551615", T),
    row("§6.4.2.3 decimal NaN <> itself is TRUE", "x <> x", T,
        msg={"application_properties": {"x": decimal32(0x7C000000)}}),
    row("§6.4.2.3 decimal NaN = 1 is FALSE", "x = 1", F,
        msg={"application_properties": {"x": decimal32(0x7C000000)}}),
    row("§6.4.2.3 decimal NaN < 1.0E0 is FALSE", "x < 1.0E0", F,
        msg={"application_properties": {"x": decimal32(0x7C000000)}}),
]


@pytest.mark.parametrize(ROW_ARGS, EDGE_ROWS)
def test_edges_null_nan(
    text: str, dialect: Any, msg: dict[str, Any], expected: bool | None
) -> None:
    check(text, dialect, msg, expected)


# =============================================================================================
# §6.2, §6.3.1: decimal32/64/128 in the BID encoding proton hands over

BID_ROWS = [
    row("§6.2 BID decimal32 1.5", "x = 1.5", T,
        msg={"application_properties": {"x": bid32(15, -1)}}),
    row("§6.2 BID decimal32 -7.5 (sign bit)", "x = -7.5", T,
        msg={"application_properties": {"x": decimal32(0xB200004B)}}),
    row("§6.2 BID decimal32 1 (hand-written bits)", "x = 1", T,
        msg={"application_properties": {"x": decimal32(0x32800001)}}),
    row("§6.2 BID decimal32 form 2 coefficient 9999999", "x = 9999999", T,
        msg={"application_properties": {
            "x": decimal32((0b11 << 29) | (101 << 21) | (9999999 & ((1 << 21) - 1)))}}),
    row("§6.2 BID decimal32 non-canonical coefficient is zero", "x = 0", T,
        msg={"application_properties": {
            "x": decimal32((0b11 << 29) | (101 << 21) | ((1 << 21) - 1))}}),
    row("§6.2 BID decimal32 +Infinity > any double", "x > 1.0E308", T,
        msg={"application_properties": {"x": decimal32(0x78000000)}}),
    row("§6.2 BID decimal32 -Infinity < any integer", "x < -9223372036854775808", T,
        msg={"application_properties": {"x": decimal32(0xF8000000)}}),
    row("§6.2 BID decimal64 1 (hand-written bits)", "x = 1", T,
        msg={"application_properties": {"x": decimal64(0x31C0000000000001)}}),
    row("§6.2 BID decimal64 0.001", "x = 0.001", T,
        msg={"application_properties": {"x": bid64(1, -3)}}),
    row("§6.2 BID decimal64 16 digits exact", "x = 1234567890.123456", T,
        msg={"application_properties": {"x": bid64(1234567890123456, -6)}}),
    row("§6.2 BID decimal64 NaN <> itself", "x <> x", T,
        msg={"application_properties": {"x": decimal64(0x7C00000000000000)}}),
    row("§6.2 BID decimal128 1 (hand-written bits)", "x = 1", T,
        msg={"application_properties": {
            "x": bid128(1)}}),
    row("§6.2 BID decimal128 34 digits exact (beyond double)",
        "x = 1234567890123456789012345678901.234", T,
        msg={"application_properties": {
            "x": bid128(1234567890123456789012345678901234, -3)}}),
    row("§6.2 BID decimal128 34 digits differs in the last digit",
        "x = 1234567890123456789012345678901.235", F,
        msg={"application_properties": {
            "x": bid128(1234567890123456789012345678901234, -3)}}),
    row("§6.2 BID decimal128 negative", "x = -0.5", T,
        msg={"application_properties": {"x": bid128(5, -1, negative=True)}}),
    row("§6.3.1 decimal32 = decimal128 of the same value", "x = y", T,
        msg={"application_properties": {"x": bid32(25, -1), "y": bid128(2500, -3)}}),
    row("§6.3.1 decimal32 < decimal64", "x < y", T,
        msg={"application_properties": {"x": bid32(25, -1), "y": bid64(2501, -3)}}),
    row("§6.3.1 decimal + decimal is exact", "x + y = 0.3", T,
        msg={"application_properties": {"x": bid64(1, -1), "y": bid128(2, -1)}}),
    row("§6.3.1 decimal + double is a double", "x + 0.2E0 = 0.30000000000000004E0", T,
        msg={"application_properties": {"x": bid64(1, -1)}}),
    row("§6.3.1 negating a 34-digit decimal128 is exact",
        "x = -1234567890123456789012345678901.234", T,
        msg={"application_properties": {
            "x": bid128(1234567890123456789012345678901234, -3, negative=True)}}),
    row("§6.3.1 negating a 34-digit decimal128 field is exact",
        "-x = 1234567890123456789012345678901.234", T,
        msg={"application_properties": {
            "x": bid128(1234567890123456789012345678901234, -3, negative=True)}}),
    row("§6.3.1 34-digit decimal subtraction is exact",
        "x = 0 - 1234567890123456789012345678901.234", T,
        msg={"application_properties": {
            "x": bid128(1234567890123456789012345678901234, -3, negative=True)}}),
    row("§6.3.1 decimal overflow beyond decimal128 is NaN", "x * x <> x * x", T,
        msg={"application_properties": {"x": Decimal("9.99E6144")}}),
    row("§6.3.1 decimal overflow is not NULL", "(x * x) IS NULL", F,
        msg={"application_properties": {"x": Decimal("9.99E6144")}}),
    row("apache §2.2 JMS reads decimal32 as double", "x = 1.5", T, dialect=J,
        msg={"application_properties": {"x": bid32(15, -1)}}),
    row("apache §2.2 JMS reads decimal128 as double (rounded)", "x = 0.1", T, dialect=J,
        msg={"application_properties": {"x": bid128(1, -1)}}),
]


@pytest.mark.parametrize(ROW_ARGS, BID_ROWS)
def test_bid_decimals(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


# =============================================================================================
# §6.4.4.1: arithmetic, overflow, NaN, INF, division, concatenation

ARITH_ROWS = [
    row("§6.4.4.1.2 int/int truncates toward zero", "7 / 2 = 3", T),
    row("§6.4.4.1.2 negative int/int truncates toward zero", "-7 / 2 = -3", T),
    row("§6.4.4.1.2 int/negative int truncates toward zero", "7 / -2 = -3", T),
    row("§6.4.4.1.2 negative/negative truncates", "-7 / -2 = 3", T),
    row("§6.4.4.1.2 field int/int truncates", "neg / two = -2", T),
    row("§6.4.4.1.2 % takes the dividend's sign (+,+)", "7 % 3 = 1", T),
    row("§6.4.4.1.2 % takes the dividend's sign (-,+)", "-7 % 3 = -1", T),
    row("§6.4.4.1.2 % takes the dividend's sign (+,-)", "7 % -3 = 1", T),
    row("§6.4.4.1.2 % takes the dividend's sign (-,-)", "-7 % -3 = -1", T),
    row("§6.4.4.1.2 % of fields", "neg % two = -1", T),
    row("§6.4.4.1.2 % needs an integer right operand", "(7 % 2.0) IS NULL", T),
    row("§6.4.4.1.2 % needs an integer left operand", "(7.5 % 2) IS NULL", T),
    row("§6.4.4.1.2 % of doubles is NULL", "(dbl % 2) IS NULL", T),
    row("§6.4.4.1.2 % by zero is NaN", "(7 % 0) <> (7 % 0)", T),
    row("§6.4.4.1.2 % by zero is not NULL", "(7 % zero) IS NULL", F),
    row("§6.4.4.1.2 integer / 0 is NaN (= is FALSE)", "(7 / 0) = (7 / 0)", F),
    row("§6.4.4.1.2 integer / 0 is NaN (<> is TRUE)", "i / zero <> 0", T),
    row("§6.4.4.1.2 0 / 0 is NaN", "0 / 0 = 0", F),
    row("§6.4.4.1.2 double / 0 is NaN, not INF", "dbl / 0 = INF", F),
    row("§6.4.4.1.2 double / 0.0 is NaN", "dbl / 0.0E0 <> 1", T),
    row("§6.4.4.1.2 decimal / 0 is NaN", "d / 0 = d / 0", F),
    row("§6.4.4.1.2 int / double is double", "7 / 2.0E0 = 3.5", T),
    row("§6.4.4.1.2 int / decimal is decimal", "7 / 2.0 = 3.5", T),
    row("§6.4.4.1.2 decimal arithmetic is exact", "0.1 + 0.2 = 0.3", T),
    row("§6.4.4.1.2 double arithmetic is binary", "0.1E0 + 0.2E0 = 0.3E0", F),
    row("§6.4.4.1.2 multiplication", "i * neg = -25", T),
    row("§6.4.4.1.2 precedence: * before +", "1 + 2 * 3 = 7", T),
    row("§6.4.4.1.2 left associativity of -", "10 - 3 - 2 = 5", T),
    row("§6.4.4.1.2 left associativity of /", "100 / 10 / 5 = 2", T),
    row("§6.4.4.1.2 parentheses", "(1 + 2) * 3 = 9", T),
    row("§6.3.1 ubyte + ubyte expands", "u + u = 400", T),
    row("§6.3.1 long max + 1 expands to ulong", "9223372036854775807 + 1 = 9223372036854775808", T),
    row("§6.3.1 ulong max + 1 overflows to NaN", "ul + 1 = ul + 1", F),
    row("§6.3.1 ulong max + 1 <> anything", "ul + one <> 0", T),
    row("§6.3.1 overflow is not NULL", "(ul + 1) IS NULL", F),
    row("§6.3.1 long min - 1 overflows", "lmin - 1 < 0", F),
    row("§6.3.1 2^32 * 2^32 overflows", "4294967296 * 4294967296 > 0", F),
    row("§6.3.1 (2^32-1)(2^32+1) = 2^64-1 fits", "4294967295 * 4294967297 = ul", T),
    row("§6.3.1 negating an unsigned gives a signed value", "-u = -200", T),
    row("§6.3.1 negating 2^63 gives long min", "-9223372036854775808 = lmin", T),
    row("§6.3.1 negating 2^64-1 overflows", "-ul < 0", F),
    row("§6.3.1 negating long min expands", "-lmin = 9223372036854775808", T),
    row("§6.3.1 double overflow is NaN, not INF", "1.7976931348623157E308 * 10 = INF", F),
    row("§6.3.1 double overflow <> anything", "1.7976931348623157E308 * 2 <> 0", T),
    row("§6.3.1 INF arithmetic stays INF", "INF + 1 = INF", T),
    row("§6.3.1 INF * -1 is -INF", "inf * -1 = -INF", T),
    row("§6.3.1 INF - INF is NaN", "INF - INF = 0", F),
    row("§6.3.1 INF - INF <> INF - INF", "inf - inf <> inf - inf", T),
    row("§6.3.1 NaN + 1 is NaN", "NAN + 1 = NAN + 1", F),
    row("§6.3.1 NaN propagates through decimals", "nan + d <> 0", T),
    row("§6.4.4.1.2 NULL + 1 is NULL", "(n + 1) IS NULL", T),
    row("§6.4.4.1.2 absent + 1 is NULL", "absent + 1 = 1", N),
    row("§6.4.4.1.2 boolean arithmetic is NULL", "(t + 1) IS NULL", T),
    row("§6.4.4.1.2 string * integer is NULL", "(s * 2) IS NULL", T),
    row("§6.4.4.1.2 string - string is NULL", "(s - s) IS NULL", T),
    row("§6.4.4.1.1 unary + is identity", "+i = 5", T),
    row("§6.4.4.1.1 unary - on a double", "-dbl = -2.5", T),
    row("§6.4.4.1.1 unary - on a decimal", "-d = -1.5", T),
    row("§6.4.4.1.1 unary - twice", "- -i = 5", T),
    row("§6.4.4.1.1 unary - on a string is NULL", "(-s) IS NULL", T),
    row("§6.4.4.1.1 unary + on a string is NULL", "(+s) IS NULL", T),
    row("§6.4.4.1.1 unary - on a boolean is NULL", "(-t) IS NULL", T),
    row("§6.4.4.1.2 string concatenation", "s + 'def' = 'abcdef'", T),
    row("§6.4.4.1.2 symbol + string concatenation", "sym + '!' = 'abc!'", T),
    row("§6.4.4.1.2 string + symbol concatenation",
        "'type: ' + p.content-type = 'type: text/plain'", T),
    row("§6.4.4.1.2 concatenation with empty string", "e + s + e = s", T),
    row("§6.4.4.1.2 concatenation of astral code points",
        "astral + astral = '\U0001d538\U0001d538'", T),
    row("§6.4.4.1.2 string + number is NULL", "(s + 1) IS NULL", T),
    row("§6.4.4.1.2 string + NULL is NULL", "(s + n) IS NULL", T),
    row("§6.4.4.1.2 char + string is NULL", "(c + s) IS NULL", T),
    row("§6.4.4.1.2 binary + binary is NULL", "(bin + bin) IS NULL", T),
]


@pytest.mark.parametrize(ROW_ARGS, ARITH_ROWS)
def test_arithmetic(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


# =============================================================================================
# §6.4.2.3: strings, symbols, char, uuid, binary, boolean; kinds that cannot be compared

KIND_ROWS = [
    row("§6.4.2.3 string = symbol", "p.content-type = 'text/plain'", T),
    row("§6.4.2.3 symbol = symbol", "m.[x-opt-sym] = p.content-type", T),
    row("§6.4.2.3 string field = symbol field", "s = sym", T),
    row("§6.4.2.3 string < symbol orders by code point", "'abb' < sym", T),
    row("§6.4.2.3 string equality is case sensitive", "s = 'ABC'", F),
    row("§6.4.2.3 strings of different length differ", "s = 'abcd'", F),
    row("§6.4.2.3 prefix orders first", "s < 'abcd'", T),
    row("§6.4.2.3 empty string = ''", "e = ''", T),
    row("§6.4.2.3 empty string < any", "e < 'a'", T),
    row("§6.4.2.3 'Z' < 'a' by code point", "'Z' < 'a'", T),
    row("§6.4.2.3 astral > BMP by code point (not UTF-16)", "astral > '\uff21'", T),
    row("§6.4.2.3 double-quoted string constant", 's = "abc"', T),
    row("§6.4.2.3 string <> string", "s <> 'abd'", T),
    row("§6.4.2.3 string >= string", "s >= 'abc'", T),
    # §6.4.4.2.5 keeps control characters out of AMQP SQL strings (LEXICAL_ROWS below);
    # Java strings, and so JMS selectors, may hold them
    row("§6.4.2.3 newline in a string (JMS)", "nl = 'a\nb'", T, dialect=J),
    row("§6.4.2.3 char = char", "c = y", T,
        msg={"application_properties": {"c": char("a"), "y": char("a")}}),
    row("§6.4.2.3 char < char", "c < y", T,
        msg={"application_properties": {"c": char("a"), "y": char("b")}}),
    row("§6.4.2.3 char vs string cannot be compared", "c = 'a'", N),
    row("§6.4.2.3 uuid = same uuid", "id = p.correlation-id", T),
    row("§6.4.2.3 uuid <> other uuid", "id <> y", T,
        msg={"application_properties": {"id": U1, "y": U_LOW}}),
    row("§6.4.2.3 uuid ordering by bytes", "lo < hi", T,
        msg={"application_properties": {"lo": U_LOW, "hi": U_HIGH}}),
    row("§6.4.2.3 uuid vs its string form cannot be compared",
        "id = '12345678-1234-5678-1234-567812345678'", N),
    row("§6.4.4.2.6 binary = binary constant", "bin = 0x0A0B", T),
    row("§6.4.2.3 binary < binary", "bin < 0x0A0C", T),
    row("§6.4.2.3 shorter binary prefix orders first", "0x00 < 0x0000", T),
    row("§6.4.2.3 binary <> binary", "bin <> 0x0A", T),
    row("§6.4.2.3 binary vs string cannot be compared", "p.user-id = 'bob'", N),
    row("§6.4.2.3 boolean = boolean", "t = TRUE", T),
    row("§6.4.2.3 boolean <> boolean", "t <> f", T),
    row("§6.4.2.3 boolean ordering in AMQP SQL", "t > f", T),
    row("§6.4.2.3 boolean vs integer cannot be compared", "t = 1", N),
    row("§2.1 string vs integer cannot be compared: NULL", "s = 1", N),
    row("§2.1 string vs integer <> is NULL too", "s <> 1", N),
    row("§2.1 NOT of an incomparable is NULL", "NOT (s = 1)", N),
    row("§2.1 string vs boolean", "s = TRUE", N),
    row("§2.1 binary vs integer", "bin > 1", N),
    row("§2.1 uuid vs integer", "id = 1", N),
    row("§2.1 map vs integer", "m = 1", N),
    row("§2.1 list vs list", "l = l", N),
    row("§2.1 timestamp vs non-ISO string", "p.creation-time = 'soon'", N),
    row("§2.1 char vs integer", "c = 97", N),
    row("§2.1 decimal vs string", "d = '1.5'", N),
]


@pytest.mark.parametrize(ROW_ARGS, KIND_ROWS)
def test_kinds(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


# =============================================================================================
# §6.3.2, §6.4.4.3.6-7: timestamps

TS_ROWS = [
    row("§6.3.2 timestamp = integer", "p.creation-time = 1577836800000", T),
    row("§6.3.2 timestamp > integer", "p.creation-time > 1577836799999", T),
    row("§6.3.2 integer < timestamp", "1577836799999 < p.creation-time", T),
    row("§6.3.2 timestamp = ulong constant range", "ts < 18446744073709551615", T),
    row("§6.3.2 timestamp vs ubyte field", "ts > one", T),
    row("§6.3.2 timestamp = double (as double)", "ts = 1577836800000.0E0", T),
    row("§6.3.2 timestamp = decimal (exact)", "ts = 1577836800000.0", T),
    row("§6.3.2 timestamp = timestamp", "ts = p.creation-time", T),
    row("§6.3.2 timestamp < timestamp", "p.creation-time < p.absolute-expiry-time", T),
    row("§6.3.2 ISO date-time with Z", "p.creation-time = '2020-01-01T00:00:00Z'", T),
    row("§6.3.2 ISO date-time with offset", "p.creation-time = '2020-01-01T01:00:00+01:00'", T),
    row("§6.3.2 ISO date-time without zone is UTC", "p.creation-time = '2020-01-01T00:00:00'", T),
    row("§6.3.2 ISO date only", "p.creation-time = '2020-01-01'", T),
    row("§6.3.2 ISO date-time with milliseconds", "p.creation-time < '2020-01-01T00:00:00.001Z'",
        T),
    row("§6.3.2 ISO string on the left", "'2019-12-31T23:59:59Z' < p.creation-time", T),
    row("§6.3.2 ISO string field vs timestamp", "iso = p.creation-time", T),
    row("§6.3.2 ISO string IN list", "p.creation-time IN ('2020-01-01T00:00:00Z', 'x')", T),
    row("§6.3.2 ISO strings in BETWEEN", "p.creation-time BETWEEN '2019-12-31' AND '2020-01-02'",
        T),
    row("§6.3.2 ISO duration: timestamp 1000 ms = PT1S", "DATE('1970-01-01T00:00:01Z') = 'PT1S'",
        T),
    row("§6.3.2 ISO duration P1D", "DATE('1970-01-02') = 'P1D'", T),
    row("§6.3.2 ISO duration with fraction", "DATE('1970-01-01T00:00:00.5Z') = 'PT0.5S'", T),
    row("§6.3.2 ISO duration field", "p.creation-time > dur", T),
    row("§6.3.2 not ISO: NULL", "p.creation-time < 'tomorrow'", N),
    row("§6.3.2 ISO strings are strings when compared with strings",
        "'2020-01-01' = '2020-01-01T00:00:00Z'", F),
    row("§6.3.2 ISO string vs integer is not converted", "iso = 1577836800000", N),
    row("§6.3.2 timestamp + integer is a timestamp",
        "p.creation-time + 3600000 = p.absolute-expiry-time", T),
    row("§6.3.2 timestamp + integer compares with ISO",
        "p.creation-time + 3600000 = '2020-01-01T01:00:00Z'", T),
    row("§6.3.2 integer + timestamp is a timestamp",
        "3600000 + p.creation-time = '2020-01-01T01:00:00Z'", T),
    row("§6.3.2 timestamp - integer", "p.creation-time - 1 < '2020-01-01'", T),
    row("§6.3.2 timestamp - timestamp is a long",
        "p.absolute-expiry-time - p.creation-time = 3600000", T),
    row("§6.3.2 a long is not read as ISO",
        "p.absolute-expiry-time - p.creation-time = 'PT1H'", N),
    row("§6.3.2 timestamp % integer", "p.creation-time % 1000 = 0", T),
    row("§6.3.2 timestamp before 1970", "DATE('1969-12-31T23:59:59Z') = -1000", T),
    row("§6.4.4.3.7 DATE() of a date-time", "DATE('2020-01-01T00:00:00Z') = p.creation-time", T),
    row("§6.4.4.3.7 DATE() without zone is UTC", "DATE('2020-01-01T00:00:00') = ts", T),
    row("§6.4.4.3.7 DATE() with offset", "DATE('2020-01-01T00:00:00-01:00') = ts + 3600000", T),
    row("§6.4.4.3.7 DATE() of a date", "DATE('2020-01-01') = ts", T),
    row("§6.4.4.3.7 DATE() of a field", "DATE(iso) = ts", T),
    row("§6.4.4.3.7 DATE() of a bad field value is NULL", "DATE(s) IS NULL", T),
    row("§6.4.4.3.7 DATE() of a number is NULL", "DATE(i) IS NULL", T),
    row("§6.4.4.3.7 DATE() forces date comparison of an ISO string field", "iso = DATE(date)", T),
    row("§6.4.4.3.7 DATE() = DATE()", "DATE('2020-01-01') = DATE('2020-01-01T00:00:00Z')", T),
    row("§6.4.4.3.7 DATE() + integer", "DATE('1970-01-01T00:00:00Z') + 1000 = 1000", T),
]


@pytest.mark.parametrize(ROW_ARGS, TS_ROWS)
def test_timestamps(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> int:
    now = EPOCH_2020 + 10 * 3_600_000
    monkeypatch.setattr(functions, "time", SimpleNamespace(time_ns=lambda: now * 1_000_000))
    return now


UTC_ROWS = [
    row("§6.4.4.3.6 UTC() is now", "UTC() = DATE('2020-01-01T10:00:00Z')", T),
    row("§6.4.4.3.6 UTC() is a timestamp", "UTC() = '2020-01-01T10:00:00Z'", T),
    row("§6.4.4.3.6 UTC() vs integer", "UTC() = 1577872800000", T),
    row("§6.4.4.3.6 creation-time within the last hour (blog filter)",
        "p.creation-time > UTC() - 3600000", F),
    row("§6.4.4.3.6 creation-time within the last 11 hours",
        "p.creation-time > UTC() - 39600000", T),
    row("§6.4.4.3.6 expired", "p.absolute-expiry-time < UTC()", T),
    row("§6.4.4.3.6 UTC() minus a timestamp is a long", "UTC() - ts = 36000000", T),
    row("apache §2.2 UTC() in JMS is a long", "UTC() > 1577872799999", T, dialect=J),
    row("apache §2.2 UTC() in JMS vs double", "UTC() < 1.6E12", T, dialect=J),
    row("apache §2.2 JMSTimestamp vs UTC()", "JMSTimestamp > UTC() - 39600000", T, dialect=J),
]


@pytest.mark.parametrize(ROW_ARGS, UTC_ROWS)
def test_utc(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None,
             frozen_clock: int) -> None:
    check(text, dialect, msg, expected)


def test_utc_is_evaluated_per_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """§6.4.4.3.6: UTC() is the time of evaluation, not of compilation."""
    clock = {"now": 1000}
    monkeypatch.setattr(functions, "time",
                        SimpleNamespace(time_ns=lambda: clock["now"] * 1_000_000))
    compiled = compile_sql("UTC() > 1500")
    view = DictMessageView()
    assert compiled.evaluate(view) is False
    clock["now"] = 2000
    assert compiled.evaluate(view) is True


# =============================================================================================
# §6.4.3.2 LIKE

LIKE_ROWS = [
    row(f"§6.4.3.2 {d}", text, exp) for d, text, exp in [
        ("exact match", "s LIKE 'abc'", T),
        ("case sensitive", "s LIKE 'ABC'", F),
        ("% suffix", "s LIKE 'a%'", T),
        ("% prefix", "s LIKE '%c'", T),
        ("% inside", "s LIKE 'a%c'", T),
        ("% matches empty", "s LIKE 'abc%'", T),
        ("_ matches one", "s LIKE 'a_c'", T),
        ("_ does not match two", "s LIKE 'a_'", F),
        ("_ does not match zero", "s LIKE 'abc_'", F),
        ("%% is %", "s LIKE '%%'", T),
        ("%% matches empty", "e LIKE '%%'", T),
        ("a%%c", "s LIKE 'a%%c'", T),
        ("empty pattern matches empty string", "e LIKE ''", T),
        ("empty pattern does not match text", "s LIKE ''", F),
        ("% matches empty string", "e LIKE '%'", T),
        ("_ does not match empty string", "e LIKE '_'", F),
        ("_ matches a newline", "nl LIKE 'a_b'", T),
        ("% matches across a newline", "nl LIKE 'a%'", T),
        ("%b after a newline", "nl LIKE '%b'", T),
        ("_ matches one astral code point", "astral LIKE '_'", T),
        ("__ does not match one astral code point", "astral LIKE '__'", F),
        ("astral literal", "astral LIKE '%\U0001d538%'", T),
        ("unicode combining text", "'e\u0301' LIKE '__'", T),
        ("regex metacharacters are literal", "'a.c' LIKE 'a.c'", T),
        ("dot is not a wildcard", "s LIKE 'a.c'", F),
        ("star is literal", "'a*' LIKE 'a*'", T),
        ("brackets are literal", "'[a]' LIKE '[a]'", T),
        ("brackets are not a class", "'a' LIKE '[a]'", F),
        ("backslash is literal without ESCAPE", "'a\\b' LIKE 'a\\b'", T),
        ("backslash is no escape by default", "'a%' LIKE 'a\\%'", F),
        ("minimal % with repeated segment", "'abcabc' LIKE '%abc'", T),
        ("several % segments", "'aXbXc' LIKE 'a%b%c'", T),
        ("segments must not overlap", "'aba' LIKE '%ab%ba%'", F),
        ("segments in order", "'abba' LIKE '%ab%ba%'", T),
        ("_ inside a floating segment", "'xxaya' LIKE '%a_a'", T),
        ("_% needs one char", "'a' LIKE 'a_%'", F),
        ("_%_ needs two chars", "'ab' LIKE '_%_'", T),
        ("NOT LIKE", "s NOT LIKE 'x%'", T),
        ("NOT LIKE of a match", "s NOT LIKE 'a%'", F),
        ("ESCAPE %", "pct LIKE '100!%' ESCAPE '!'", T),
        ("escaped % is literal", "'1000' LIKE '100!%' ESCAPE '!'", F),
        ("ESCAPE _", "under LIKE 'a!_b' ESCAPE '!'", T),
        ("escaped _ is literal", "'axb' LIKE 'a!_b' ESCAPE '!'", F),
        ("escaped escape", "'a!b' LIKE 'a!!b' ESCAPE '!'", T),
        ("escape + ordinary char is that char", "s LIKE 'a!bc' ESCAPE '!'", T),
        ("% as the escape char", "'a%' LIKE 'a%%' ESCAPE '%'", T),
        ("% as escape: %% is a literal %", "'ab' LIKE 'a%%' ESCAPE '%'", F),
        ("_ as the escape char", "'a_' LIKE 'a__' ESCAPE '_'", T),
        ("backslash as the escape char", "pct LIKE '100\\%' ESCAPE '\\'", T),
        ("astral escape char", "pct LIKE '100\U0001d538%' ESCAPE '\U0001d538'", T),
        ("escaped % in a floating segment", "'x50%y' LIKE '%0!%%' ESCAPE '!'", T),
        ("symbol operand", "p.content-type LIKE 'text/%'", T),
        ("pattern from a field", "s LIKE y", T),
        ("escape from a field", "pct LIKE '100#%' ESCAPE esc", T),
        ("field pattern ending in the escape is NULL", "s LIKE '%' + esc ESCAPE esc", N),
        ("folded pattern ending in the escape is NULL", "s LIKE 'a' + '!' ESCAPE '!'", N),
        ("folded two-char escape is NULL", "s LIKE 'a%' ESCAPE '!' + '!'", N),
        ("field escape of two chars is NULL", "s LIKE 'a%' ESCAPE s", N),
        ("NULL operand", "n LIKE 'a%'", N),
        ("absent operand", "absent LIKE 'a%'", N),
        ("NOT LIKE of NULL is NULL", "n NOT LIKE 'a%'", N),
        ("NULL pattern", "s LIKE NULL", N),
        ("NULL escape", "s LIKE 'a%' ESCAPE NULL", N),
        ("number operand is NULL", "i LIKE '5'", N),
        ("char operand is NULL", "c LIKE 'a'", N),
        ("binary operand is NULL", "bin LIKE '%'", N),
        ("number pattern is NULL", "s LIKE 5", N),
    ]
]
for _row in LIKE_ROWS:
    _row.values[2]["application_properties"].update({"y": "a%", "esc": "#"})


@pytest.mark.parametrize(ROW_ARGS, LIKE_ROWS)
def test_like(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


def test_like_is_linear_for_hostile_patterns() -> None:
    """§6.4.3.2 + §7.1: many % and _ against a long non-matching text finishes quickly."""
    import time

    text = "a" * 20000
    pattern = "%a" * 40 + "%b"
    compiled = compile_sql(f"x LIKE '{pattern}'")
    start = time.perf_counter()
    assert compiled.evaluate(DictMessageView(application_properties={"x": text})) is False
    assert compile_sql("x LIKE '" + "_%" * 60 + "b'").evaluate(
        DictMessageView(application_properties={"x": text})) is False
    assert time.perf_counter() - start < 2.0


# =============================================================================================
# §6.4.3.1 IS NULL, §6.4.3.3 IN, BETWEEN (JMS, accepted in both dialects)

PREDICATE_ROWS = [
    row("§6.4.3.1 absent map entry IS NULL", "absent IS NULL", T),
    row("§6.4.3.1 present-null map entry IS NULL", "n IS NULL", T),
    row("§6.4.3.1 present value IS NOT NULL", "s IS NOT NULL", T),
    row("§6.4.3.1 absent IS NOT NULL is FALSE", "absent IS NOT NULL", F),
    row("§6.4.3.1 present-null IS NOT NULL is FALSE", "n IS NOT NULL", F),
    row("§6.4.3.1 NaN IS NOT NULL", "nan IS NOT NULL", T),
    row("§6.4.3.1 empty string IS NOT NULL", "e IS NOT NULL", T),
    row("§6.4.3.1 nested absent entry IS NULL", "a.m.missing IS NULL", T),
    row("§6.4.3.1 nested present-null entry IS NULL", "a.m.nul IS NULL", T),
    row("§6.4.3.1 absent properties field IS NULL", "p.subject IS NULL", T,
        msg={"properties": {"to": "x"}}),
    row("§6.4.3.1 properties field given as None counts as absent", "p.subject IS NULL", T,
        msg={"properties": {"subject": None}}),
    row("§6.4.3.1 absent properties section IS NULL", "p.message-id IS NULL", T, msg={}),
    row("§6.4.3.1 absent header priority takes its default 4", "h.priority IS NULL", F, msg={}),
    row("§6.4.3.1 absent header priority = 4", "h.priority = 4", T, msg={}),
    row("§6.4.3.1 header priority given as None takes its default", "h.priority = 4", T,
        msg={"header": {"priority": None}}),
    row("§6.4.3.1 absent durable is FALSE", "h.durable = FALSE", T, msg={"header": {}}),
    row("§6.4.3.1 absent first-acquirer is FALSE", "h.first-acquirer = FALSE", T, msg={}),
    row("§6.4.3.1 absent delivery-count is 0", "h.delivery-count = 0", T, msg={}),
    row("§6.4.3.1 absent ttl has no default", "h.ttl IS NULL", T, msg={}),
    row("§6.4.3.1 expression IS NULL", "(i + n) IS NULL", T),
    row("§6.4.3.1 vendor function IS NULL", "acme:anything(i) IS NULL", T),
    row("§6.4.3.3 IN matches", "s IN ('x', 'abc')", T),
    row("§6.4.3.3 IN does not match", "s IN ('x', 'y')", F),
    row("§6.4.3.3 single-item IN", "i IN (5)", T),
    row("§6.4.3.3 NOT IN", "s NOT IN ('x', 'y')", T),
    row("§6.4.3.3 NOT IN of a member", "s NOT IN ('x', 'abc')", F),
    row("§6.4.3.3 IN with a NULL member and a match is TRUE", "i IN (NULL, 5)", T),
    row("§6.4.3.3 IN with a NULL member and no match is NULL", "i IN (NULL, 6)", N),
    row("§6.4.3.3 NOT IN with a NULL member and no match is NULL", "i NOT IN (NULL, 6)", N),
    row("§6.4.3.3 NOT IN with a NULL member and a match is FALSE", "i NOT IN (6, NULL, 5)", F),
    row("§6.4.3.3 NULL IN (...) is NULL", "n IN (1, 2)", N),
    row("§6.4.3.3 absent IN (...) is NULL", "absent IN ('a')", N),
    row("§6.4.3.3 absent NOT IN (...) is NULL", "absent NOT IN ('a')", N),
    row("§6.4.3.3 IN with field members", "i IN (two, neg, 5)", T),
    row("§6.4.3.3 IN with expression members", "i IN (1 + 1, two * 2 + 1)", T),
    row("§6.4.3.3 IN across numeric types", "i IN (5.0)", T),
    row("§6.4.3.3 IN across integer types", "u IN (200)", T),
    row("§6.4.3.3 IN of ulong max", "ul IN (18446744073709551615)", T),
    row("§6.4.3.3 symbol IN strings", "sym IN ('abc')", T),
    row("§6.4.3.3 string IN with a symbol member", "'text/plain' IN (p.content-type)", T),
    row("§6.4.3.3 incomparable members are NULL", "i IN ('5')", N),
    row("§6.4.3.3 incomparable and matching members", "i IN ('5', 5)", T),
    row("§6.4.3.3 NOT IN with incomparable members", "i NOT IN ('5')", N),
    row("§6.4.3.3 mixed strings and a non-string operand", "i IN ('a', 'b')", N),
    row("§6.4.3.3 IN of booleans", "t IN (FALSE, TRUE)", T),
    row("§6.4.3.3 IN of binary", "bin IN (0x00, 0x0A0B)", T),
    row("§6.4.3.3 IN of uuids", "id IN (p.correlation-id)", T),
    row("§6.4.3.3 case sensitive IN", "s IN ('ABC')", F),
    row("§6.4.3.3 astral IN", "astral IN ('\U0001d538')", T),
    row("§6.4.3 BETWEEN inside (JMS §3.8.1.2 syntax)", "i BETWEEN 1 AND 10", T),
    row("§6.4.3 BETWEEN inclusive low", "i BETWEEN 5 AND 10", T),
    row("§6.4.3 BETWEEN inclusive high", "i BETWEEN 1 AND 5", T),
    row("§6.4.3 BETWEEN below", "i BETWEEN 6 AND 10", F),
    row("§6.4.3 BETWEEN empty range", "i BETWEEN 10 AND 1", F),
    row("§6.4.3 NOT BETWEEN", "i NOT BETWEEN 6 AND 10", T),
    row("§6.4.3 NOT BETWEEN inside", "i NOT BETWEEN 1 AND 10", F),
    row("§6.4.3 BETWEEN NULL operand", "n BETWEEN 1 AND 10", N),
    row("§6.4.3 NOT BETWEEN NULL operand", "n NOT BETWEEN 1 AND 10", N),
    row("§6.4.3 BETWEEN with NULL low, above high is FALSE", "i BETWEEN NULL AND 4", F),
    row("§6.4.3 BETWEEN with NULL low, below high is NULL", "i BETWEEN NULL AND 10", N),
    row("§6.4.3 NOT BETWEEN with NULL low, above high is TRUE", "i NOT BETWEEN NULL AND 4", T),
    row("§6.4.3 BETWEEN with NULL high, below low is FALSE", "i BETWEEN 6 AND NULL", F),
    row("§6.4.3 BETWEEN mixed numeric types", "d BETWEEN 1 AND 2.0E0", T),
    row("§6.4.3 BETWEEN strings in AMQP SQL", "s BETWEEN 'abb' AND 'abd'", T),
    row("§6.4.3 BETWEEN binds its own AND", "i BETWEEN 1 AND 10 AND t", T),
    row("§6.4.3 BETWEEN with expressions", "i + 1 BETWEEN two * 3 AND 6", T),
    row("§6.4.3 BETWEEN incomparable is NULL", "s BETWEEN 1 AND 2", N),
    row("apache §2.2 BETWEEN in JMS", "i BETWEEN 1 AND 10", T, dialect=J),
    row("apache §2.2 NOT BETWEEN in JMS", "i NOT BETWEEN 1 AND 10", F, dialect=J),
    row("apache §2.2 BETWEEN strings in JMS is FALSE", "s BETWEEN 'abb' AND 'abd'", F,
        dialect=J),
    row("apache §2.2 NOT BETWEEN strings in JMS is TRUE", "s NOT BETWEEN 'abb' AND 'abd'", T,
        dialect=J),
]


@pytest.mark.parametrize(ROW_ARGS, PREDICATE_ROWS)
def test_predicates(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


# =============================================================================================
# §6.4.3.4 EXISTS on all six sections and nested references; §6.4.4.5 references

EXISTS_ROWS = [
    row("§6.4.3.4 EXISTS header field present", "EXISTS(h.priority)", T),
    row("§6.4.3.4 EXISTS header field absent (despite its default)", "EXISTS(h.priority)", F,
        msg={"header": {"durable": True}}),
    row("§6.4.3.4 EXISTS header field in absent header", "EXISTS(header.durable)", F, msg={}),
    row("§6.4.3.4 EXISTS header field given as None", "EXISTS(h.ttl)", F,
        msg={"header": {"ttl": None}}),
    row("§6.4.3.4 EXISTS properties field present", "EXISTS(p.subject)", T),
    row("§6.4.3.4 EXISTS properties field absent", "EXISTS(p.subject)", F,
        msg={"properties": {"to": "q"}}),
    row("§6.4.3.4 EXISTS properties field given as None", "EXISTS(properties.reply_to)", F,
        msg={"properties": {"reply-to": None}}),
    row("§6.4.3.4 EXISTS application property", "EXISTS(s)", T),
    row("§6.4.3.4 EXISTS present-null application property", "EXISTS(n)", T),
    row("§6.4.3.4 EXISTS absent application property", "EXISTS(absent)", F),
    row("§6.4.3.4 EXISTS qualified application property", "EXISTS(a.s)", T),
    row("§6.4.3.4 EXISTS in an absent application-properties section", "EXISTS(x)", F, msg={}),
    row("§6.4.3.4 EXISTS delivery annotation", "EXISTS(d.[x-opt-d])", T),
    row("§6.4.3.4 EXISTS absent delivery annotation", "EXISTS(delivery_annotations.[x-opt-e])",
        F),
    row("§6.4.3.4 EXISTS message annotation", "EXISTS(m.[x-opt-jms-type])", T),
    row("§6.4.3.4 EXISTS present-null message annotation", "EXISTS(m.[x-opt-null])", T),
    row("§6.4.3.4 EXISTS absent message annotation", "EXISTS(message_annotations.[x-opt-q])",
        F),
    row("§6.4.3.4 EXISTS footer entry", "EXISTS(f.[x-opt-f])", T),
    row("§6.4.3.4 EXISTS absent footer entry", "EXISTS(footer.[x-opt-g])", F),
    row("§6.4.3.4 EXISTS in an absent footer", "EXISTS(f.[x-opt-f])", F,
        msg={"application_properties": {}}),
    row("§6.4.3.4 EXISTS nested map entry", "EXISTS(a.m.k)", T),
    row("§6.4.3.4 EXISTS nested present-null map entry", "EXISTS(a.m.nul)", T),
    row("§6.4.3.4 EXISTS nested absent map entry", "EXISTS(a.m.zz)", F),
    row("§6.4.3.4 EXISTS two levels deep", "EXISTS(a.m.inner.deep)", T),
    row("§6.4.3.4 EXISTS below an absent entry", "EXISTS(a.m.zz.deep)", F),
    row("§6.4.3.4 EXISTS below a present null", "EXISTS(a.m.nul.deep)", F),
    row("§6.4.3.4 EXISTS below a scalar", "EXISTS(a.s.k)", F),
    row("§6.4.3.4 EXISTS list element", "EXISTS(l[0])", T),
    row("§6.4.3.4 EXISTS null list element", "EXISTS(l[1])", T),
    row("§6.4.3.4 EXISTS list element out of range", "EXISTS(l[4])", F),
    row("§6.4.3.4 EXISTS negative position", "EXISTS(l[-1])", F),
    row("§6.4.3.4 EXISTS with a non-integer position", "EXISTS(l[1.0])", F),
    row("§6.4.3.4 EXISTS with a NULL position", "EXISTS(l[n])", F),
    row("§6.4.3.4 EXISTS nested list element", "EXISTS(l[2][1])", T),
    row("§6.4.3.4 EXISTS map in a list", "EXISTS(l[3].k)", T),
    row("§6.4.3.4 EXISTS array element", "EXISTS(arr[2])", T),
    row("§6.4.3.4 EXISTS array element out of range", "EXISTS(arr[3])", F),
    row("§6.4.3.4 EXISTS described list element", "EXISTS(desc[1])", T),
    row("§6.4.3.4 EXISTS described list out of range", "EXISTS(desc[2])", F),
    row("§6.4.3.4 EXISTS message annotation list element", "EXISTS(m.[x-opt-list][1])", T),
    row("§6.4.3.4 EXISTS position computed from a field", "EXISTS(l[one])", T),
    row("§6.4.3.4 NOT EXISTS", "NOT EXISTS(absent)", T),
    row("§6.4.3.4 EXISTS is never NULL", "EXISTS(absent) IS NULL", F),
    row("§6.4.3.4 EXISTS combined", "EXISTS(s) AND s = 'abc'", T),
]

REFERENCE_ROWS = [
    row("§6.4.4.5 map reference", "a.m.k = 'v'", T),
    row("§6.4.4.5 map reference with a delimited key", "a.m.[x y] = 2", T),
    row("§6.4.4.5 two-level map reference", "a.m.inner.deep = 1", T),
    row("§6.4.4.5 absent map entry is NULL", "a.m.zz = 'v'", N),
    row("§6.4.4.5 map reference on a scalar is NULL", "a.s.k IS NULL", T),
    row("§6.4.4.5 map reference on a list is NULL", "a.l.k IS NULL", T),
    row("§6.4.4.5 map reference below NULL is NULL", "a.m.nul.x IS NULL", T),
    row("§6.4.4.5 positional reference (0-based)", "l[0] = 1", T),
    row("§6.4.4.5 positional reference to a null element", "l[1] IS NULL", T),
    row("§6.4.4.5 nested positional references", "l[2][1] = 20", T),
    row("§6.4.4.5 positional then map reference", "l[3].k = 'w'", T),
    row("§6.4.4.5 out of range is NULL", "l[4] = 1", N),
    row("§6.4.4.5 far out of range is NULL", "l[18446744073709551615] IS NULL", T),
    row("§6.4.4.5 negative position is NULL", "l[-1] IS NULL", T),
    row("§6.4.4.5 non-integer position is NULL", "l[0.0] IS NULL", T),
    row("§6.4.4.5 string position is NULL", "l['0'] IS NULL", T),
    row("§6.4.4.5 boolean position is NULL", "l[FALSE] IS NULL", T),
    row("§6.4.4.5 NULL position is NULL", "l[n] IS NULL", T),
    row("§6.4.4.5 computed position", "l[1 + 1][0] = 10", T),
    row("§6.4.4.5 position from an unsigned field", "l[one] IS NULL", T),
    row("§6.4.4.5 position from an ubyte field", "l[one + one][one] = 20", T),
    row("§6.4.4.5 positional reference on a map is NULL", "m[0] IS NULL", T),
    row("§6.4.4.5 positional reference on a string is NULL", "s[0] IS NULL", T),
    row("§6.4.4.5 array element", "arr[2] = 3", T),
    row("§6.4.4.5 array element out of range", "arr[3] IS NULL", T),
    row("§6.4.4.5 described list element", "desc[0] = 7", T),
    row("§6.4.4.5 message annotation list element", "m.[x-opt-list][1] = 2", T),
    row("§6.4.4.4 a map value is not a simple value", "m = m", N),
    row("§6.4.4.4 a map value is not NULL", "m IS NULL", F),
    row("§6.4.4.4 header field with a path is NULL", "h.priority.x IS NULL", T),
    row("§6.4.4.4 absent header field with a path is NULL (no default)", "h.priority[0] IS NULL",
        T, msg={}),
]


@pytest.mark.parametrize(ROW_ARGS, EXISTS_ROWS + REFERENCE_ROWS)
def test_exists_and_references(
    text: str, dialect: Any, msg: dict[str, Any], expected: bool | None
) -> None:
    check(text, dialect, msg, expected)


def test_exists_on_array_of_nulls() -> None:
    """§6.4.3.4: an element that is there but null exists, in lists and arrays alike."""
    values = {"arr": undescribed_array(Data.NULL, None, None),
              "darr": Described(symbol("d"), undescribed_array(Data.NULL, None))}
    assert evaluate("EXISTS(arr[1])", application_properties=values) is True
    assert evaluate("EXISTS(arr[2])", application_properties=values) is False
    assert evaluate("EXISTS(darr[0])", application_properties=values) is True


# =============================================================================================
# §6.4.4.3 functions

FUNCTION_ROWS = [
    row(f"§6.4.4.3 {d}", text, exp) for d, text, exp in [
        (".1 LOWER", "LOWER('ÀBC') = 'àbc'", T),
        (".1 LOWER of a symbol", "LOWER(p.content-type) = 'text/plain'", T),
        (".1 LOWER is locale-neutral by default (I -> i)", "LOWER('I') = 'i'", T),
        (".1 LOWER tr: I -> dotless i", "LOWER('I', 'tr') = '\u0131'", T),
        (".1 LOWER tr: dotted I -> i", "LOWER('\u0130', 'tr') = 'i'", T),
        (".1 LOWER az-Latn-AZ is Turkic", "LOWER('I', 'az-Latn-AZ') = '\u0131'", T),
        (".1 LOWER TR_tr tag is Turkic", "LOWER('I', 'TR_tr') = '\u0131'", T),
        (".1 LOWER en is neutral", "LOWER('I', 'en') = 'i'", T),
        (".1 LOWER of a number is NULL", "LOWER(i) IS NULL", T),
        (".1 LOWER of NULL is NULL", "LOWER(n) IS NULL", T),
        (".1 LOWER with a NULL tag is NULL", "LOWER(s, n) IS NULL", T),
        (".1 LOWER with a number tag is NULL", "LOWER(s, 1) IS NULL", T),
        (".1 function names are case-insensitive", "lower('A') = 'a'", T),
        (".2 UPPER", "UPPER(s) = 'ABC'", T),
        (".2 UPPER sharp s (full case mapping)", "UPPER('ß') = 'SS'", T),
        (".2 UPPER is locale-neutral by default (i -> I)", "UPPER('i') = 'I'", T),
        (".2 UPPER tr: i -> dotted I", "UPPER('i', 'tr-TR') = '\u0130'", T),
        (".2 UPPER az: dotless i -> I", "UPPER('\u0131', 'az') = 'I'", T),
        (".2 UPPER of a number is NULL", "UPPER(i) IS NULL", T),
        (".2 UPPER for case-insensitive comparison", "UPPER(s) = UPPER('AbC')", T),
        (".3 LEFT", "LEFT(s, 2) = 'ab'", T),
        (".3 LEFT 0", "LEFT(s, 0) = ''", T),
        (".3 LEFT beyond the length", "LEFT(s, 99) = 'abc'", T),
        (".3 LEFT counts code points", "LEFT(astral + 'x', 1) = astral", T),
        (".3 LEFT negative count is an error: NULL", "LEFT(s, -1) IS NULL", T),
        (".3 LEFT negative count from a field: NULL", "LEFT(s, neg) IS NULL", T),
        (".3 LEFT non-integer count: NULL", "LEFT(s, 1.0) IS NULL", T),
        (".3 LEFT string count: NULL", "LEFT(s, '1') IS NULL", T),
        (".3 LEFT of a number: NULL", "LEFT(i, 1) IS NULL", T),
        (".3 LEFT with an unsigned count", "LEFT(s, one) = 'a'", T),
        (".3 LEFT with a ulong count", "LEFT(s, ul) = 'abc'", T),
        (".4 RIGHT", "RIGHT(s, 2) = 'bc'", T),
        (".4 RIGHT 0", "RIGHT(s, 0) = ''", T),
        (".4 RIGHT beyond the length", "RIGHT(s, 5) = 'abc'", T),
        (".4 RIGHT counts code points", "RIGHT('x' + astral, 1) = astral", T),
        (".4 RIGHT negative count: NULL", "RIGHT(s, -2) IS NULL", T),
        (".4 RIGHT NULL count: NULL", "RIGHT(s, n) IS NULL", T),
        (".5 SUBSTRING start 1", "SUBSTRING(s, 1, 2) = 'ab'", T),
        (".5 SUBSTRING middle", "SUBSTRING(s, 2, 1) = 'b'", T),
        (".5 SUBSTRING count beyond the end", "SUBSTRING(s, 2, 99) = 'bc'", T),
        (".5 SUBSTRING start past the end is empty", "SUBSTRING(s, 5, 1) = ''", T),
        (".5 SUBSTRING count 0", "SUBSTRING(s, 1, 0) = ''", T),
        (".5 SUBSTRING two arguments: to the end", "SUBSTRING(s, 2) = 'bc'", T),
        (".5 SUBSTRING start 0: NULL", "SUBSTRING(s, 0, 1) IS NULL", T),
        (".5 SUBSTRING negative start: NULL", "SUBSTRING(s, -1, 1) IS NULL", T),
        (".5 SUBSTRING negative count: NULL", "SUBSTRING(s, 1, -1) IS NULL", T),
        (".5 SUBSTRING non-integer start: NULL", "SUBSTRING(s, 1.5, 1) IS NULL", T),
        (".5 SUBSTRING of a number: NULL", "SUBSTRING(i, 1, 1) IS NULL", T),
        (".5 SUBSTRING counts code points", "SUBSTRING('a' + astral + 'c', 2, 1) = astral", T),
        (" vendor function is NULL", "acme:f(s) IS NULL", T),
        (" vendor function without arguments is NULL", "acme:now() IS NULL", T),
        (" vendor function named like a standard one is NULL", "acme:UPPER(s) IS NULL", T),
        (" vendor function in a comparison is NULL", "acme:f() = 1", N),
        (" NOT of a vendor function comparison is NULL", "NOT (acme:f() = 1)", N),
        (" vendor function with many arguments", "x:y(1, 'a', NULL, s, l[0]) IS NULL", T),
        (" functions compose", "LOWER(LEFT(UPPER(s), 2)) = 'ab'", T),
        (" function in an arithmetic expression", "LEFT(s, 1 + 1) = 'ab'", T),
    ]
]


@pytest.mark.parametrize(ROW_ARGS, FUNCTION_ROWS)
def test_functions(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


# =============================================================================================
# §6.4.4.4, §6.4.4.6: identifiers, sections, well-known names, keywords

IDENT_MSG = {
    "application_properties": {
        "my field": 1, "a]b": 2, "a[b": 3, "]": 4, "[": 5, "and": 6, "größe": 7, "$x": 8,
        "_x": 9, "x.y": 10, "x": {"y": 11}, "\U0001d538": 12, "1st": 13, "[]": 14, "NULL": 15,
        "h": 16, "a": {"b": 17}, "color": "blue", "Or": 18,
    },
    "header": {"priority": ubyte(9), "durable": True, "first-acquirer": True,
               "delivery-count": uint(3), "ttl": uint(60)},
    "properties": {"reply-to": "r", "to": "t", "content-type": symbol("text/plain")},
    "message_annotations": {symbol("x-opt-foo"): [42], symbol("k"): "mk"},
    "delivery_annotations": {symbol("k"): "dk"},
    "footer": {symbol("k"): "fk"},
}
IDENT_ROWS = [
    row(f"§6.4.4.6 {d}", text, exp, msg=IDENT_MSG) for d, text, exp in [
        ("delimited identifier with a space", "[my field] = 1", T),
        ("]] escapes ]", "[a]]b] = 2", T),
        ("[[ escapes [", "[a[[b] = 3", T),
        ("only ]]", "[]]] = 4", T),
        ("only [[", "[[[] = 5", T),
        ("[[]] is '[]'", "[[[]]] = 14", T),
        ("delimited reserved word", "[and] = 6", T),
        ("delimited NULL is a name", "[NULL] = 15", T),
        ("delimited name starting with a digit", "[1st] = 13", T),
        ("delimited astral name", "[\U0001d538] = 12", T),
        ("delimited name with a dot is one key", "[x.y] = 10", T),
        ("dotted name is a map reference", "x.y = 11", T),
        ("unicode letters in a regular identifier", "größe = 7", T),
        ("$ in a delimited identifier", "[$x] = 8", T),
        ("leading underscore in a delimited identifier", "[_x] = 9", T),
        ("a name 'h' without a dot is an application property", "h = 16", T),
        ("'a.b' is the application property b", "a.b IS NULL", T),
        ("'a.a.b' reaches into the application property a", "a.a.b = 17", T),
        ("delimited message annotation key", "m.[x-opt-foo][0] = 42", T),
        ("unqualified names are application properties (§6.1)", "color = 'blue'", T),
        ("qualified application-properties (§6.1)", "application-properties.color = 'blue'", T),
        ("application_properties qualifier", "application_properties.color = 'blue'", T),
        ("a. qualifier", "a.color = 'blue'", T),
        ("section qualifiers are case-insensitive", "APPLICATION_PROPERTIES.color = 'blue'", T),
        ("H. qualifier", "H.priority = 9", T),
        ("header. qualifier", "header.priority = 9", T),
        ("Header. qualifier", "Header.priority = 9", T),
        ("p. qualifier", "p.to = 't'", T),
        ("properties. qualifier", "properties.to = 't'", T),
        ("PROPERTIES. qualifier", "PROPERTIES.to = 't'", T),
        ("d. qualifier", "d.k = 'dk'", T),
        ("delivery_annotations. qualifier", "delivery_annotations.k = 'dk'", T),
        ("delivery-annotations. qualifier", "delivery-annotations.k = 'dk'", T),
        ("m. qualifier", "m.k = 'mk'", T),
        ("message_annotations. qualifier", "message_annotations.k = 'mk'", T),
        ("message-annotations. qualifier", "message-annotations.k = 'mk'", T),
        ("f. qualifier", "f.k = 'fk'", T),
        ("footer. qualifier", "footer.k = 'fk'", T),
        ("FOOTER. qualifier", "FOOTER.k = 'fk'", T),
        ("the spec's p.to example (§6.1)", "p.to = 't'", T),
        ("the spec's camelCase p.contentType example", "p.contentType = 'text/plain'", T),
        ("hyphenated p.reply-to", "p.reply-to = 'r'", T),
        ("underscore p.reply_to", "p.reply_to = 'r'", T),
        ("camelCase p.replyTo", "p.replyTo = 'r'", T),
        ("hyphenated h.first-acquirer", "h.first-acquirer", T),
        ("underscore h.delivery_count", "h.delivery_count = 3", T),
        ("camelCase h.deliveryCount", "h.deliveryCount = 3", T),
        ("keywords are case-insensitive: and/or/not", "NOT (h.durable and FALSE) or FALSE", T),
        ("keywords are case-insensitive: is not null", "p.to is not null", T),
        ("keywords are case-insensitive: like/escape", "p.to like 't!%' escape '!' OR TRUE", T),
        ("keywords are case-insensitive: in/between", "h.ttl in (60) AnD h.ttl between 1 and 99",
         T),
        ("keywords are case-insensitive: exists", "exists(p.to)", T),
        ("keywords are case-insensitive: true/false/null", "true AND NOT false AND null IS Null",
         T),
        ("keywords are case-insensitive: inf/nan", "inf > 1 AND nan <> nan", T),
        ("whitespace: tabs and newlines", "p.to\t=\n't'", T),
    ]
]


@pytest.mark.parametrize(ROW_ARGS, IDENT_ROWS)
def test_identifiers(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


def _well_known(section: Section, canonical: str) -> list[Any]:
    words = canonical.split("-")
    spellings = {
        "hyphenated": canonical, "underscore": "_".join(words),
        "camelCase": words[0] + "".join(w.capitalize() for w in words[1:]),
    }
    prefix = "h" if section is Section.HEADER else "p"
    return [
        pytest.param(f"{prefix}.{spelling}", section, canonical,
                     id=f"§6.4.4.4 {prefix}.{spelling} ({style})")
        for style, spelling in spellings.items()
    ]


WELL_KNOWN = [
    param
    for section, names in (
        (Section.HEADER, ["durable", "priority", "ttl", "first-acquirer", "delivery-count"]),
        (Section.PROPERTIES, [
            "message-id", "user-id", "to", "subject", "reply-to", "correlation-id",
            "content-type", "content-encoding", "absolute-expiry-time", "creation-time",
            "group-id", "group-sequence", "reply-to-group-id"]),
    )
    for canonical in names
    for param in _well_known(section, canonical)
]


@pytest.mark.parametrize(("text", "section", "canonical"), WELL_KNOWN)
def test_well_known_field_spellings(text: str, section: Section, canonical: str) -> None:
    assert same_tree(parse(text), ast.Field(section, canonical))
    assert same_tree(parse(f"EXISTS({text})"), ast.Exists(ast.Field(section, canonical)))


@pytest.mark.parametrize("text", [
    pytest.param("p.ReplyTo = 'r'", id="§6.4.4.4 PascalCase is not a spelling"),
    pytest.param("p.REPLY_TO = 'r'", id="§6.4.4.4 upper-case underscore is not a spelling"),
    pytest.param("p.Reply-To = 'r'", id="§6.4.4.4 field names are case-sensitive"),
    pytest.param("h.Priority = 4", id="§6.4.4.4 h.Priority is not a field"),
    pytest.param("p.replyto = 'r'", id="§6.4.4.4 run-together lower case is not a spelling"),
    pytest.param("p.colour = 'r'", id="§6.4.4.4 unknown properties field"),
    pytest.param("h.subject IS NULL", id="§6.4.4.4 properties field under header"),
    pytest.param("p.ttl IS NULL", id="§6.4.4.4 header field under properties"),
    pytest.param("EXISTS(h.colour)", id="§6.4.4.4 unknown field inside EXISTS"),
    pytest.param("p.[reply-to] = 'r' AND p.[x] = 1", id="§6.4.4.4 delimited unknown name"),
])
def test_unknown_well_known_names_are_definitional_errors(text: str) -> None:
    with pytest.raises(FilterError, match="is not a field of the"):
        compile_sql(text)


def test_delimited_well_known_name_is_accepted() -> None:
    """§6.4.4.6: a delimited identifier is the same name as the regular one."""
    assert same_tree(parse("p.[reply-to]"), ast.Field(Section.PROPERTIES, "reply-to"))
    assert same_tree(parse("p.[subject]"), ast.Field(Section.PROPERTIES, "subject"))


# =============================================================================================
# §6.2, §6.4.4.2: constants and their AMQP types, per dialect

CONSTANT_ROWS = [
    pytest.param(text, dialect, value, id=ident) for ident, text, dialect, value in [
        ("§6.4.4.2.1 small integer is a long", "1", A, 1),
        ("§6.4.4.2.1 0", "0", A, 0),
        ("§6.4.4.2.1 2^63-1 is a long", "9223372036854775807", A, 2**63 - 1),
        ("§6.4.4.2.1 2^63 is a ulong", "9223372036854775808", A, ulong(2**63)),
        ("§6.4.4.2.1 2^64-1 is a ulong", "18446744073709551615", A, ulong(2**64 - 1)),
        ("§6.4.4.2.1 leading zeros", "007", A, 7),
        ("§6.4.4.2.2 decimal constant is a decimal (AMQP)", "1.5", A, Decimal("1.5")),
        ("§6.4.4.2.2 decimal keeps its digits", "0.10", A, Decimal("0.10")),
        ("§6.4.4.2.2 decimal with 34 digits", "1.234567890123456789012345678901234", A,
         Decimal("1.234567890123456789012345678901234")),
        ("§6.4.4.2.3 approximate number is a double", "1.5E3", A, 1500.0),
        ("§6.4.4.2.3 lower-case e", "1.5e3", A, 1500.0),
        ("§6.4.4.2.3 negative exponent", "2.5E-3", A, 0.0025),
        ("§6.4.4.2.3 INF", "INF", A, math.inf),
        ("§6.4.4.2.3 NAN", "NAN", A, math.nan),
        ("§6.4.4.2.4 TRUE", "TRUE", A, True),
        ("§6.4.4.2.4 FALSE", "FALSE", A, False),
        ("§6.4.4.2.5 single-quoted string", "'abc'", A, "abc"),
        ("§6.4.4.2.5 double-quoted string", '"abc"', A, "abc"),
        ("§6.4.4.2.5 doubled single quote", "'it''s'", A, "it's"),
        ("§6.4.4.2.5 doubled double quote", '"say ""hi"""', A, 'say "hi"'),
        ("§6.4.4.2.5 the other quote needs no escape", "'say \"hi\"'", A, 'say "hi"'),
        ("§6.4.4.2.5 empty string", "''", A, ""),
        ("§6.4.4.2.5 empty double-quoted string", '""', A, ""),
        ("§6.4.4.2.5 unicode string", "'\U0001d538\u00e9'", A, "\U0001d538\u00e9"),
        ("§6.4.4.2.6 binary constant", "0x0A0B", A, b"\x0a\x0b"),
        ("§6.4.4.2 NULL", "NULL", A, None),
        ("apache §2.2 JMS: 1.5 is a double", "1.5", J, 1.5),
        ("apache §2.2 JMS: 0x1F is an integer", "0x1F", J, 31),
        ("apache §2.2 JMS: odd hex digits are fine for an integer", "0x123", J, 0x123),
        ("apache §2.2 JMS: a decimal above 2^63-1 is a ulong (hex is refused there)",
         "18446744073709551615", J, ulong(2**64 - 1)),
        ("apache §2.2 JMS: integer", "42", J, 42),
        ("apache §2.2 JMS: 1.5E3 is a double", "1.5E3", J, 1500.0),
    ]
]


@pytest.mark.parametrize(("text", "dialect", "value"), CONSTANT_ROWS)
def test_constants(text: str, dialect: Any, value: Any) -> None:
    assert same_tree(parse(text, dialect), ast.Literal(value))


# =============================================================================================
# §6.4: every production of the grammar, as the AST it builds

def _f(name: str, *path: Any) -> ast.Field:
    return ast.Field(Section.APPLICATION_PROPERTIES, name, tuple(path))


def _lit(value: Any) -> ast.Literal:
    return ast.Literal(value)


_a, _b, _c = _f("a"), _f("b"), _f("c")
PRODUCTIONS = [
    pytest.param(text, tree, id=ident) for ident, text, tree in [
        ("§6.4.1 boolean constant", "TRUE", _lit(True)),
        ("§6.4.1 boolean-valued expression", "a", _a),
        ("§6.4.2.3 =", "a = 1", ast.Compare("=", _a, _lit(1))),
        ("§6.4.2.3 <>", "a <> 1", ast.Compare("<>", _a, _lit(1))),
        ("§6.4.2.3 !=", "a != 1", ast.Compare("!=", _a, _lit(1))),
        ("§6.4.2.3 >", "a > 1", ast.Compare(">", _a, _lit(1))),
        ("§6.4.2.3 >=", "a >= 1", ast.Compare(">=", _a, _lit(1))),
        ("§6.4.2.3 <", "a < 1", ast.Compare("<", _a, _lit(1))),
        ("§6.4.2.3 <=", "a <= 1", ast.Compare("<=", _a, _lit(1))),
        ("§6.4.2.3 comparison without spaces", "a<=1", ast.Compare("<=", _a, _lit(1))),
        ("§6.4.3.1 IS NULL", "a IS NULL", ast.IsNull(_a)),
        ("§6.4.3.1 IS NOT NULL", "a IS NOT NULL", ast.IsNull(_a, negated=True)),
        ("§6.4.3.2 LIKE", "a LIKE 'x%'", ast.Like(_a, _lit("x%"))),
        ("§6.4.3.2 NOT LIKE ESCAPE", "a NOT LIKE 'x' ESCAPE '!'",
         ast.Like(_a, _lit("x"), _lit("!"), negated=True)),
        ("§6.4.3.2 LIKE with expression pattern", "a LIKE b + '%'",
         ast.Like(_a, ast.Binary("+", _b, _lit("%")))),
        ("§6.4.3.3 IN", "a IN (1, 'b', c)", ast.In(_a, (_lit(1), _lit("b"), _c))),
        ("§6.4.3.3 NOT IN", "a NOT IN (1)", ast.In(_a, (_lit(1),), negated=True)),
        ("§6.4.3 BETWEEN", "a BETWEEN 1 AND 2", ast.Between(_a, _lit(1), _lit(2))),
        ("§6.4.3 NOT BETWEEN", "a NOT BETWEEN b AND c",
         ast.Between(_a, _b, _c, negated=True)),
        ("§6.4.3.4 EXISTS", "EXISTS(a)", ast.Exists(_a)),
        ("§6.4.3.4 EXISTS of a qualified field", "EXISTS(p.subject)",
         ast.Exists(ast.Field(Section.PROPERTIES, "subject"))),
        ("§6.4.3.4 EXISTS of a nested reference", "EXISTS(a.m.k[0])",
         ast.Exists(_f("m", ast.Key("k"), ast.Index(_lit(0))))),
        ("§6.4.2.1 NOT", "NOT a", ast.Not(_a)),
        ("§6.4.2.1 NOT NOT", "NOT NOT a", ast.Not(ast.Not(_a))),
        ("§6.4.2.2 AND (flattened)", "a AND b AND c", ast.And((_a, _b, _c))),
        ("§6.4.2.2 OR (flattened)", "a OR b OR c", ast.Or((_a, _b, _c))),
        ("§6.4.2.2 AND binds tighter than OR", "a OR b AND c", ast.Or((_a, ast.And((_b, _c))))),
        ("§6.4.2.2 parenthesised OR", "(a OR b) AND c", ast.And((ast.Or((_a, _b)), _c))),
        ("§6.4.2.2 right-nested parenthesised AND is kept", "a AND (b AND c)",
         ast.And((_a, ast.And((_b, _c))))),
        ("§6.4.2.1 NOT binds tighter than AND", "NOT a AND b", ast.And((ast.Not(_a), _b))),
        ("§6.4.2.1 NOT over a comparison", "NOT a = 1", ast.Not(ast.Compare("=", _a, _lit(1)))),
        ("§6.4.1 parentheses vanish", "((a))", _a),
        ("§6.4.1 comparison of predicates", "(a = 1) = TRUE",
         ast.Compare("=", ast.Compare("=", _a, _lit(1)), _lit(True))),
        ("§6.4.4.1.1 unary -", "-a", ast.Unary("-", _a)),
        ("§6.4.4.1.1 unary +", "+a", ast.Unary("+", _a)),
        # A sign on a numeric constant is folded into it at parse time (the same value the
        # evaluation gives), so that every reader of the tree sees one literal.
        ("§6.4.4.1.1 negative constant is one literal", "-1", _lit(-1)),
        ("§6.4.4.1.1 signed constants fold", "- -1", _lit(1)),
        ("§6.4.4.1.1 a sign on a string stays an operator", "-'x'", ast.Unary("-", _lit("x"))),
        ("§6.4.4.1.1 a sign on NULL stays an operator", "-NULL", ast.Unary("-", _lit(None))),
        ("§6.4.4.1.1 double unary", "- -a", ast.Unary("-", ast.Unary("-", _a))),
        ("§6.4.4.1.2 + and * precedence", "a + b * c",
         ast.Binary("+", _a, ast.Binary("*", _b, _c))),
        ("§6.4.4.1.2 - is left-associative", "a - b - c",
         ast.Binary("-", ast.Binary("-", _a, _b), _c)),
        ("§6.4.4.1.2 / and % same level", "a / b % c",
         ast.Binary("%", ast.Binary("/", _a, _b), _c)),
        ("§6.4.4.1.2 unary binds tighter than *", "-a * b",
         ast.Binary("*", ast.Unary("-", _a), _b)),
        ("§6.4.4.1.2 arithmetic binds tighter than comparison", "a + 1 = b",
         ast.Compare("=", ast.Binary("+", _a, _lit(1)), _b)),
        ("§6.4.4.3.1 LOWER", "LOWER(a)", ast.Call("LOWER", (_a,))),
        ("§6.4.4.3.1 LOWER with a tag", "lower(a, 'tr')", ast.Call("LOWER", (_a, _lit("tr")))),
        ("§6.4.4.3.2 UPPER", "UPPER(a)", ast.Call("UPPER", (_a,))),
        ("§6.4.4.3.3 LEFT", "LEFT(a, 1)", ast.Call("LEFT", (_a, _lit(1)))),
        ("§6.4.4.3.4 RIGHT", "RIGHT(a, 1)", ast.Call("RIGHT", (_a, _lit(1)))),
        ("§6.4.4.3.5 SUBSTRING/3", "SUBSTRING(a, 1, 2)",
         ast.Call("SUBSTRING", (_a, _lit(1), _lit(2)))),
        ("§6.4.4.3.5 SUBSTRING/2", "SUBSTRING(a, 1)", ast.Call("SUBSTRING", (_a, _lit(1)))),
        ("§6.4.4.3.6 UTC", "UTC()", ast.Call("UTC", ())),
        ("§6.4.4.3.7 DATE", "DATE('2020-01-01')", ast.Call("DATE", (_lit("2020-01-01"),))),
        ("§6.4.4.3 vendor function", "acme:f(1, a)",
         ast.Call("f", (_lit(1), _a), vendor="acme")),
        ("§6.4.4.3 vendor function without arguments", "acme:f()",
         ast.Call("f", (), vendor="acme")),
        ("§6.4.4.3 function argument in parentheses may be a predicate", "LOWER((a = 1))",
         ast.Call("LOWER", (ast.Compare("=", _a, _lit(1)),))),
        ("§6.4.4.4 header field", "h.priority", ast.Field(Section.HEADER, "priority")),
        ("§6.4.4.4 properties field", "p.reply-to", ast.Field(Section.PROPERTIES, "reply-to")),
        ("§6.4.4.4 delivery annotation", "d.k", ast.Field(Section.DELIVERY_ANNOTATIONS, "k")),
        ("§6.4.4.4 message annotation", "m.[x-opt-a]",
         ast.Field(Section.MESSAGE_ANNOTATIONS, "x-opt-a")),
        ("§6.4.4.4 footer entry", "f.k", ast.Field(Section.FOOTER, "k")),
        ("§6.4.4.4 qualified application property", "a.x", _f("x")),
        ("§6.4.4.5 map reference", "a.m.k", _f("m", ast.Key("k"))),
        ("§6.4.4.5 delimited map key", "a.m.[k k]", _f("m", ast.Key("k k"))),
        ("§6.4.4.5 positional reference", "l[0]", _f("l", ast.Index(_lit(0)))),
        ("§6.4.4.5 computed position and key", "l[1 + 1].k",
         _f("l", ast.Index(ast.Binary("+", _lit(1), _lit(1))), ast.Key("k"))),
        ("§6.4.4.5 nested positions", "l[0][1]", _f("l", ast.Index(_lit(0)), ast.Index(_lit(1)))),
        ("§6.4.4.5 annotation with a position", "m.[x-opt-foo][0]",
         ast.Field(Section.MESSAGE_ANNOTATIONS, "x-opt-foo", (ast.Index(_lit(0)),))),
        ("§6.4.4.5 position given by a field", "l[[i]]", _f("l", ast.Index(_f("i")))),
        ("§6.4.4.6 delimited identifier", "[a b]", _f("a b")),
        ("§6.4.4.6 ]] escape", "[a]]b]", _f("a]b")),
        ("§6.4.4.6 [[ escape", "[a[[b]", _f("a[b")),
        ("§6.4.4.6 empty delimited identifier", "[]", _f("")),
    ]
]


@pytest.mark.parametrize(("text", "tree"), PRODUCTIONS)
def test_productions(text: str, tree: Any) -> None:
    assert same_tree(parse(text), tree), parse(text)


def test_positions_are_recorded() -> None:
    """The AST carries source positions (line/column) for error messages."""
    tree = parse("a = 1 AND\n  b LIKE 'x'")
    assert isinstance(tree, ast.And)
    like = tree.operands[1]
    assert like.pos is not None and (like.pos.line, like.pos.column) == (2, 5)


# =============================================================================================
# apache-filters §2.2: the JMS selector dialect

def jms_msg(**sections: Any) -> dict[str, Any]:
    return sections


JMS_ROWS = [
    row(f"apache §2.2 {d}", text, exp, dialect=J, msg=msg) for d, text, exp, msg in [
        ("JMSMessageID of a string id gets AMQP_NO_PREFIX",
         "JMSMessageID = 'ID:AMQP_NO_PREFIX:abc'", T, jms_msg(properties={"message-id": "abc"})),
        ("JMSMessageID of an 'ID:' string is itself", "JMSMessageID = 'ID:abc'", T,
         jms_msg(properties={"message-id": "ID:abc"})),
        ("JMSMessageID of a uuid", "JMSMessageID = 'ID:AMQP_UUID:" + str(U1) + "'", T,
         jms_msg(properties={"message-id": U1})),
        ("JMSMessageID of a ulong", "JMSMessageID = 'ID:AMQP_ULONG:42'", T,
         jms_msg(properties={"message-id": ulong(42)})),
        ("JMSMessageID of a binary (upper-case hex)", "JMSMessageID = 'ID:AMQP_BINARY:0AFF'", T,
         jms_msg(properties={"message-id": b"\x0a\xff"})),
        ("JMSMessageID absent is NULL", "JMSMessageID IS NULL", T, jms_msg()),
        ("JMSMessageID LIKE", "JMSMessageID LIKE 'ID:%'", T,
         jms_msg(properties={"message-id": "x"})),
        ("JMSCorrelationID of a string is itself", "JMSCorrelationID = 'abc'", T,
         jms_msg(properties={"correlation-id": "abc"})),
        ("JMSCorrelationID of a uuid", "JMSCorrelationID = 'ID:AMQP_UUID:" + str(U1) + "'", T,
         jms_msg(properties={"correlation-id": U1})),
        ("JMSCorrelationID of a ulong", "JMSCorrelationID = 'ID:AMQP_ULONG:7'", T,
         jms_msg(properties={"correlation-id": ulong(7)})),
        ("JMSCorrelationID of a binary", "JMSCorrelationID = 'ID:AMQP_BINARY:01'", T,
         jms_msg(properties={"correlation-id": b"\x01"})),
        ("JMSType from x-opt-jms-type", "JMSType = 'mytype'", T,
         jms_msg(message_annotations={symbol("x-opt-jms-type"): "mytype"})),
        ("JMSType from a symbol x-opt-jms-type", "JMSType = 'mytype'", T,
         jms_msg(message_annotations={symbol("x-opt-jms-type"): symbol("mytype")})),
        ("JMSType from the subject", "JMSType = 'subj'", T,
         jms_msg(properties={"subject": "subj"})),
        ("JMSType prefers x-opt-jms-type to the subject", "JMSType = 'mytype'", T,
         jms_msg(properties={"subject": "subj"},
                 message_annotations={symbol("x-opt-jms-type"): "mytype"})),
        ("JMSType absent is NULL", "JMSType IS NULL", T, jms_msg()),
        ("JMSPriority", "JMSPriority = 9", T, jms_msg(header={"priority": ubyte(9)})),
        ("JMSPriority ordering", "JMSPriority > 4", T, jms_msg(header={"priority": ubyte(9)})),
        ("JMSPriority absent is 4", "JMSPriority = 4", T, jms_msg()),
        ("JMSPriority BETWEEN", "JMSPriority BETWEEN 0 AND 4", T, jms_msg()),
        ("JMSDeliveryMode of a durable message", "JMSDeliveryMode = 'PERSISTENT'", T,
         jms_msg(header={"durable": True})),
        ("JMSDeliveryMode of a non-durable message", "JMSDeliveryMode = 'NON_PERSISTENT'", T,
         jms_msg(header={"durable": False})),
        ("JMSDeliveryMode with durable absent", "JMSDeliveryMode = 'NON_PERSISTENT'", T,
         jms_msg()),
        ("JMSDeliveryMode is a string, not a boolean", "JMSDeliveryMode = TRUE", F,
         jms_msg(header={"durable": True})),
        ("JMSRedelivered FALSE when delivery-count is 0", "JMSRedelivered = FALSE", T,
         jms_msg(header={"delivery-count": uint(0)})),
        ("JMSRedelivered FALSE when delivery-count is absent", "NOT JMSRedelivered", T,
         jms_msg()),
        ("JMSRedelivered TRUE when delivery-count > 0", "JMSRedelivered", T,
         jms_msg(header={"delivery-count": uint(1)})),
        ("JMSXDeliveryCount is delivery-count + 1", "JMSXDeliveryCount = 3", T,
         jms_msg(header={"delivery-count": uint(2)})),
        ("JMSXDeliveryCount is 1 when absent", "JMSXDeliveryCount = 1", T, jms_msg()),
        ("JMSTimestamp is creation-time as a long", "JMSTimestamp = 1577836800000", T,
         jms_msg(properties={"creation-time": timestamp(EPOCH_2020)})),
        ("JMSTimestamp ordering", "JMSTimestamp > 1577836799999", T,
         jms_msg(properties={"creation-time": timestamp(EPOCH_2020)})),
        ("JMSTimestamp absent is NULL", "JMSTimestamp IS NULL", T, jms_msg()),
        ("JMSExpiration is absolute-expiry-time", "JMSExpiration = 1577836800000", T,
         jms_msg(properties={"absolute-expiry-time": timestamp(EPOCH_2020)})),
        ("JMSExpiration absent is 0", "JMSExpiration = 0", T, jms_msg()),
        ("JMSDestination", "JMSDestination = 'queue://a'", T,
         jms_msg(properties={"to": "queue://a"})),
        ("JMSReplyTo", "JMSReplyTo = 'r'", T, jms_msg(properties={"reply-to": "r"})),
        ("JMSXUserID decodes user-id as UTF-8", "JMSXUserID = 'bøb'", T,
         jms_msg(properties={"user-id": "bøb".encode()})),
        ("JMSXUserID of invalid UTF-8 is NULL", "JMSXUserID IS NULL", T,
         jms_msg(properties={"user-id": b"\xff"})),
        ("JMSXGroupID", "JMSXGroupID = 'g'", T, jms_msg(properties={"group-id": "g"})),
        ("JMSXGroupSeq", "JMSXGroupSeq = 3", T, jms_msg(properties={"group-sequence": uint(3)})),
        ("JMSXGroupSeq ordering", "JMSXGroupSeq < 4", T,
         jms_msg(properties={"group-sequence": uint(3)})),
        ("EXISTS(JMSPriority) is about presence", "EXISTS(JMSPriority)", F, jms_msg()),
        ("EXISTS(JMSType) via subject", "EXISTS(JMSType)", T,
         jms_msg(properties={"subject": "s"})),
        ("a delimited JMS header name is an application property", "[JMSPriority] = 1", T,
         jms_msg(application_properties={"JMSPriority": 1})),
        ("JMS header names are case-sensitive", "jmspriority = 1", T,
         jms_msg(application_properties={"jmspriority": 1})),
        ("unqualified names are application properties", "color = 'blue'", T,
         jms_msg(application_properties={"color": "blue"})),
        ("qualified AMQP fields work too", "h.priority = 4 AND p.subject = 's'", T,
         jms_msg(properties={"subject": "s"})),
        ("string ordering is FALSE", "s > 'a'", F, jms_msg(application_properties={"s": "b"})),
        ("NOT of a string ordering is TRUE", "NOT (s > 'a')", T,
         jms_msg(application_properties={"s": "b"})),
        ("string ordering between fields is FALSE", "s < y", F,
         jms_msg(application_properties={"s": "a", "y": "b"})),
        ("string equality works", "s = 'b' AND s <> 'c'", T,
         jms_msg(application_properties={"s": "b"})),
        ("boolean ordering is FALSE", "TRUE > FALSE", F, jms_msg()),
        ("boolean equality works", "t = TRUE", T, jms_msg(application_properties={"t": True})),
        ("char ordering is FALSE", "c < y", F,
         jms_msg(application_properties={"c": char("a"), "y": char("b")})),
        ("string vs number is FALSE", "s = 1", F, jms_msg(application_properties={"s": "1"})),
        ("string vs number <> is FALSE", "s <> 1", F, jms_msg(application_properties={"s": "1"})),
        ("NOT of an incomparable is TRUE", "NOT (s = 1)", T,
         jms_msg(application_properties={"s": "1"})),
        ("boolean vs number is FALSE", "t = 1", F, jms_msg(application_properties={"t": True})),
        ("IN with incomparable members is FALSE", "i IN ('1')", F,
         jms_msg(application_properties={"i": 1})),
        ("NOT IN with incomparable members is TRUE", "i NOT IN ('1')", T,
         jms_msg(application_properties={"i": 1})),
        ("NULL comparisons are still unknown", "absent = 1", N, jms_msg()),
        ("NOT of unknown is unknown", "NOT (absent = 1)", N, jms_msg()),
        ("symbol is a String", "s = 'abc'", T,
         jms_msg(application_properties={"s": symbol("abc")})),
        ("timestamp is a long", "ts = 1000 AND ts > 999", T,
         jms_msg(application_properties={"ts": timestamp(1000)})),
        ("timestamp is not read as ISO 8601", "ts = '1970-01-01T00:00:01Z'", F,
         jms_msg(application_properties={"ts": timestamp(1000)})),
        ("DATE() orders like a long", "DATE(s) > 999", T,
         jms_msg(application_properties={"s": "1970-01-01T00:00:01Z"})),
        ("decimal is a double", "d = 0.5", T,
         jms_msg(application_properties={"d": Decimal("0.5")})),
        ("ubyte is a number", "u = 200", T, jms_msg(application_properties={"u": ubyte(200)})),
        ("float32 is a number", "x < 1.5", T,
         jms_msg(application_properties={"x": float32(1.25)})),
        ("0x1F is an integer", "i = 0x1F", T, jms_msg(application_properties={"i": 31})),
        ("1.5 is a double", "x = 1.5", T, jms_msg(application_properties={"x": 1.5})),
        ("uuid is byte[16]: equal to itself", "u = y", T,
         jms_msg(application_properties={"u": U1, "y": U1})),
        ("LIKE", "s LIKE 'a%' AND s NOT LIKE '%z'", T,
         jms_msg(application_properties={"s": "abc"})),
        ("LIKE ESCAPE", "s LIKE 'a\\_%' ESCAPE '\\'", T,
         jms_msg(application_properties={"s": "a_c"})),
        ("IN of strings", "s IN ('x', 'abc')", T, jms_msg(application_properties={"s": "abc"})),
        ("IS NULL", "s IS NULL AND y IS NOT NULL", T,
         jms_msg(application_properties={"y": 1})),
        ("arithmetic", "i * 2 + 1 = 7 AND i / 2 = 1", T, jms_msg(application_properties={"i": 3})),
        ("NaN rules", "x <> x AND NOT x = x", T, jms_msg(application_properties={"x": math.nan})),
        ("blog-style filter", "JMSPriority > 4 OR (region IN ('EU', 'US') AND price >= 99.99)", T,
         jms_msg(application_properties={"region": "EU", "price": 100})),
    ]
]


@pytest.mark.parametrize(ROW_ARGS, JMS_ROWS)
def test_jms(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


@pytest.mark.parametrize("name", [
    "JMSMessageID", "JMSCorrelationID", "JMSType", "JMSPriority", "JMSDeliveryMode",
    "JMSTimestamp", "JMSExpiration", "JMSRedelivered", "JMSDestination", "JMSReplyTo",
    "JMSXUserID", "JMSXGroupID", "JMSXGroupSeq", "JMSXDeliveryCount",
])
def test_jms_header_names_are_aliases_only_in_jms(name: str) -> None:
    """apache §2.2: JMS header names mean AMQP fields in JMS; in AMQP SQL they are just names."""
    assert same_tree(parse(name, J), ast.Alias(name))
    assert same_tree(parse(name, A), _f(name))
    view = DictMessageView(application_properties={name: "app"})
    assert compile_sql(f"{name} = 'app'", A).evaluate(view) is True
    assert compile_sql(f"{name} = 'app'", J).evaluate(view) is not True


def test_jms_alias_has_no_entries() -> None:
    with pytest.raises(FilterError, match="single value"):
        compile_sql("JMSPriority.x = 1", J)


def test_dialects_parse_literals_differently() -> None:
    """apache §2.2 vs §6.4.4.2: the same text, different constants, different results."""
    view = DictMessageView(application_properties={"x": 31, "b": b"\x1f"})
    assert compile_sql("x = 0x1F", J).evaluate(view) is True
    assert compile_sql("x = 0x1F", A).evaluate(view) is None
    assert compile_sql("b = 0x1F", A).evaluate(view) is True
    assert compile_sql("b = 0x1F", J).evaluate(view) is False


# =============================================================================================
# §6.4.4.2, §6.4.4.6 against JMS §3.8.1.1: what each dialect's lexical rules accept.
# A filter accepted in AMQP SQL is one the spec's grammar accepts, so that it is portable.

LEXICAL_ROWS = [
    pytest.param(text, dialect, accepted, id=ident) for ident, text, dialect, accepted in [
        ("§6.4.4.2.2 7. has no digit after the point", "x = 7.", A, False),
        ("§6.4.4.2.2 .5 has no digit before the point", "x = .5", A, False),
        ("§6.4.4.2.2 7.0 and 0.5", "x = 7.0 OR x = 0.5", A, True),
        ("§6.4.4.2.3 7E3 needs a decimal coefficient", "x = 7E3", A, False),
        ("§6.4.4.2.3 .5E3 needs a digit before the point", "x = .5E3", A, False),
        ("§6.4.4.2.3 7.0E3", "x = 7.0E3", A, True),
        ("§6.4.4.2.3 a signed exponent stays accepted", "x = 7.0E-3", A, True),
        ("§6.4.4.2.1 10L is Java's", "x = 10L", A, False),
        ("§6.4.4.2.3 1.5f is Java's", "x = 1.5f", A, False),
        ("§6.4.4.2.6 lower-case hex digits", "b = 0x0a", A, False),
        ("§6.4.4.2.6 0X prefix", "b = 0X0A", A, False),
        ("§6.4.4.2.6 upper-case hex digits", "b = 0x0A", A, True),
        ("§6.4.4.2.5 LF in a string", "s = 'a\nb'", A, False),
        ("§6.4.4.2.5 CR in a string", "s = 'a\rb'", A, False),
        ("§6.4.4.2.5 TAB in a string", "s = 'a\tb'", A, False),
        ("§6.4.4.2.5 DEL in a string", "s = 'a\x7fb'", A, False),
        ("§6.4.4.2.5 C1 control in a string", 's = "a\x85b"', A, False),
        ("§6.4.4.2.5 a format character is no control character", "s = 'a\u200db'", A, True),
        ("§6.4.4.6 identifier starting with $", "$x = 1", A, False),
        ("§6.4.4.6 identifier holding $", "x$ = 1", A, False),
        ("§6.4.4.6 identifier starting with _", "_x = 1", A, False),
        ("§6.4.4.6 identifier holding _ after a letter", "x_1 = 1", A, True),
        ("§6.4.4.6 identifier holding a non-decimal digit", "x\u00b2 = 1", A, False),
        ("§6.4.4.6 delimited $ and _", "[$x] = 1 AND [_x] = 1", A, True),
        ("§6.4.4.6 reserved word as a name", "Or = 1", A, False),
        ("§6.4.4.6 reserved word as a map key", "m.and = 1", A, False),
        ("§6.4.4.6 delimited reserved word", "[Or] = 1 AND m.[and] = 1", A, True),
        ("§6.4.4.6 control character in a delimited identifier", "[a\rb] = 1", A, False),
        ("§6.4.4.6 vendor prefix is an identifier", "$acme:f() IS NULL", A, False),
        ("JMS §3.8.1.1 7. and .5", "x = 7. OR x = .5", J, True),
        ("JMS §3.8.1.1 7E3", "x = 7E3", J, True),
        ("JMS §3.8.1.1 10L and 10l", "x = 10L OR x = 10l", J, True),
        ("JMS §3.8.1.1 1.5f, 1.5D, 1e3d, 2f", "x = 1.5f OR x = 1.5D OR x = 1e3d OR x = 2f", J,
         True),
        ("JMS §3.8.1.1 0x1f and 0X1FL", "x = 0x1f OR x = 0X1FL", J, True),
        ("JMS §3.8.1.1 010 is octal", "x = 010", J, True),
        ("JMS §3.8.1.1 08 is no octal number", "x = 08", J, False),
        ("JMS §3.8.1.1 0x7FFFFFFFFFFFFFFF, the largest hex long", "x = 0x7FFFFFFFFFFFFFFF", J,
         True),
        ("JMS §3.8.1.1 0x8000000000000000 fits no Java long", "x = 0x8000000000000000", J, False),
        ("JMS §3.8.1.1 0777777777777777777777, the largest octal long",
         "x = 0777777777777777777777", J, True),
        ("JMS §3.8.1.1 1.5L", "x = 1.5L", J, False),
        ("JMS §3.8.1.1 $ and _ start Java identifiers", "$x = 1 AND _y = 2", J, True),
        ("JMS §3.8.1.1 control characters in strings", "s = 'a\nb'", J, True),
        *[(f"JMS §3.8.1.1 {word} is not an identifier", f"x = 1 OR {word} = 1", J, False)
          for word in ("Or", "and", "Between", "like", "In", "is", "Escape")],
        ("JMS §3.8.1.1 NULL is not an identifier", "x = 1 OR x = Null", J, True),  # the literal
        ("JMS §3.8.1.1 reserved word as a map key", "m.is = 1", J, False),
    ]
]


@pytest.mark.parametrize(("text", "dialect", "accepted"), LEXICAL_ROWS)
def test_lexical_rules(text: str, dialect: Any, accepted: bool) -> None:
    if accepted:
        parse(text, dialect)
    else:
        with pytest.raises(FilterError):
            parse(text, dialect)


JAVA_LITERALS = [
    pytest.param(text, value, id=f"JMS §3.8.1.1 {text}") for text, value in [
        ("010", 8), ("0", 0), ("00", 0), ("0777", 511), ("10L", 10), ("010L", 8),
        ("0x1f", 31), ("0X1FL", 31), ("09.5", 9.5), ("010e1", 100.0), ("1.5d", 1.5),
        ("1.1f", 1.100000023841858), ("2f", 2.0), ("1e3", 1000.0), (".5", 0.5), ("7.", 7.0),
    ]
]


@pytest.mark.parametrize(("text", "value"), JAVA_LITERALS)
def test_java_literals(text: str, value: Any) -> None:
    """Java's literal syntax, as JMS §3.8.1.1 says selectors write numbers: 010 is 8, not 10."""
    assert same_tree(parse(text, J), ast.Literal(value))


def test_jms_selector_must_be_a_conditional_expression() -> None:
    """JMS §3.8.1.1: "A selector is a conditional expression"; an expression is not."""
    from filtex_proton.filters.registry import decode_filter

    selector = symbol("apache.org:selector-filter:string")
    for text in ("3 + 5", "'a'", "NULL", "x = 1 AND 3", "NOT 5", "(1)"):
        with pytest.raises(FilterError, match="not a condition"):
            decode_filter(Described(selector, text))
    for text in ("x", "TRUE", "NOT x", "x AND (y = 1)", "x IS NULL"):
        decode_filter(Described(selector, text))
    decode_filter(Described(symbol("amqp:sql-filter"), "3 + 5"))  # NULL in AMQP SQL, not refused


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_jms_selector_matches_everything(text: str) -> None:
    """JMS §3.8.1.1: an empty selector is no selector; in AMQP SQL an empty filter is an error."""
    from filtex_proton.filters.base import EvaluationContext
    from filtex_proton.filters.registry import decode_filter

    built = decode_filter(Described(symbol("apache.org:selector-filter:string"), text))
    assert built.evaluate(DictMessageView(), EvaluationContext()) is True
    with pytest.raises(FilterError, match="empty"):
        decode_filter(Described(symbol("amqp:sql-filter"), text))


DIALECT_MSG = {
    "application_properties": {
        "a": 1, "s": "x", "dm": Described(symbol("d"), {"k": 1, symbol("sk"): 2}),
        "dl": Described(symbol("d"), [7]), "when": "2024-05-01",
    },
    "properties": {"creation-time": timestamp(1714521600000)},  # 2024-05-01T00:00:00Z
}
DIALECT_ROWS = [
    row(f"{sec} {d}", text, exp, dialect=dia, msg=DIALECT_MSG) for sec, d, text, dia, exp in [
        # §6.4.4.3: "If a function is not understood by an implementation, it MUST be
        # evaluated as NULL"; its arguments are not evaluated (1/0 would not be an error anyway)
        ("§6.4.4.3", "unknown function is NULL", "foo(a) IS NULL", A, T),
        ("§6.4.4.3", "unknown function compares as NULL", "foo() = 1", A, N),
        ("§6.4.4.3", "unknown function with arguments", "Foo(a, 'x', 1 / 0) IS NULL", A, T),
        ("§6.4.4.3", "inside a known one", "LOWER(foo(s)) IS NULL", A, T),
        ("§6.4.4.3", "OR TRUE still matches", "bar(a) = 1 OR a = 1", A, T),
        ("§6.4.4.3", "vendor function is NULL", "acme:f(a) IS NULL", A, T),
        ("§6.4.4.3", "unknown function in JMS", "foo(a) IS NULL", J, T),
        ("§6.4.4.3", "known function name any case", "lower(s) = 'x'", A, T),
        # §6.4.4.3.7, §6.3.2: ISO 8601 forms beyond fromisoformat
        ("§6.4.4.3.7", "ordinal date", "p.creation-time = DATE('2024-122')", A, T),
        ("§6.4.4.3.7", "basic ordinal date", "p.creation-time = DATE('2024122')", A, T),
        ("§6.4.4.3.7", "ordinal date with a time", "DATE('2024-122T10:00Z') > p.creation-time",
         A, T),
        ("§6.4.4.3.7", "reduced precision: month", "p.creation-time = DATE('2024-05')", A, T),
        ("§6.4.4.3.7", "reduced precision: year", "DATE('2024') < p.creation-time", A, T),
        ("§6.4.4.3.7", "24:00 ends the day", "p.creation-time = DATE('2024-04-30T24:00')", A, T),
        ("§6.4.4.3.7", "24:00:00Z ends the day", "p.creation-time = DATE('2024-04-30T24:00:00Z')",
         A, T),
        ("§6.4.4.3.7", "24:00:01 is no time", "DATE(s + '2024-04-30T24:00:01') IS NULL", A, T),
        ("§6.4.4.3.7", "day 366 of a common year", "DATE(s + '2023-366') IS NULL", A, T),
        ("§6.4.4.3.7", "week date", "p.creation-time = DATE('2024-W18-3')", A, T),
        ("§6.3.2", "ordinal string vs timestamp", "p.creation-time = '2024-122'", A, T),
        ("§6.3.2", "reduced string vs timestamp", "p.creation-time = '2024-05'", A, T),
        ("§6.3.2", "24:00 string vs timestamp", "p.creation-time = '2024-04-30T24:00Z'", A, T),
        # §6.4.4.5: a map reference looks through a described map, as [n] through a list
        ("§6.4.4.5", "map reference through a described map", "dm.k = 1", A, T),
        ("§6.4.4.5", "symbol key through a described map", "dm.sk = 2", A, T),
        ("§6.4.4.5", "missing key of a described map", "dm.z IS NULL", A, T),
        ("§6.4.4.5", "EXISTS through a described map", "EXISTS(dm.k) AND NOT EXISTS(dm.z)", A, T),
        ("§6.4.4.5", "positional through a described list", "dl[0] = 7", A, T),
        ("§6.4.4.5", "no named field of a described list", "dl.k IS NULL", A, T),
        ("§6.4.4.5", "described map in JMS", "dm.k = 1", J, T),
    ]
]


@pytest.mark.parametrize(ROW_ARGS, DIALECT_ROWS)
def test_each_dialect_reads_what_its_rules_accept(
    text: str, dialect: Any, msg: dict[str, Any], expected: bool | None,
) -> None:
    check(text, dialect, msg, expected)


def test_dates_read_the_same_in_date_and_in_comparisons() -> None:
    """§6.4.4.3.7 and §6.3.2 use one reader (the Spark archive too): they cannot disagree."""
    from filtex_proton.sql.iso8601 import parse_datetime, to_millis

    for text in ("2024-122", "2024-05", "2024", "2024-04-30T24:00", "2024-366T23:59:59.5Z"):
        assert parse_datetime(text) is not None
        assert to_millis(text) == parse_datetime(text)
        fn = functions.FUNCTIONS["DATE"].apply(text)
        assert fn is not None and int(fn) == parse_datetime(text)
