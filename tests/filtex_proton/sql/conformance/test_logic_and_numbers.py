"""Conformance table: three-valued logic (§6.4.2.1-2), every pair of numeric types (§6.3.1,
§6.4.2.3, §6.4.4.1.2), and equality and ordering at the edges of the integer ranges, NULL and NaN
(§6.4.2.3).

Rows are checked as ``rows.py`` says.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from proton import (
    byte,
    decimal32,
    float32,
    int32,
    short,
    ubyte,
    uint,
    ulong,
    ushort,
)

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.sql import compile_sql

from ..support import bid32, bid64, bid128, evaluate
from .rows import (
    ROW_ARGS,
    A,
    F,
    J,
    N,
    T,
    check,
    row,
)

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
