"""Spec §4.1 value matching rules, one table row per rule and edge."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest
from proton import (
    UNDESCRIBED,
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

from filtex_proton.amqp.bid import encode_decimal32, encode_decimal64
from filtex_proton.amqp.view import MISSING
from filtex_proton.errors import FilterError
from filtex_proton.filters.matching import compile_reference, count_entries

U = uuid.UUID("9f0c8a4e-5f4b-4a57-8b7e-2d5c6f1d2e3a")
D32_15 = decimal32(encode_decimal32(Decimal("1.5")))
D64_15 = decimal64(encode_decimal64(Decimal("1.50")))


def _d(descriptor: str, value: Any) -> Described:
    return Described(symbol(descriptor), value)


MATCHING: list[tuple[str, Any, Any, bool]] = [
    # (id, reference value, message field value, matches)
    ("§4.1.1 NULL reference matches a value", None, "x", True),
    ("§4.1.1 NULL reference matches an absent field", None, MISSING, True),
    ("§4.1.1 NULL reference matches a null field", None, None, True),
    ("§4.1.1 a value never matches an absent field", "x", MISSING, False),
    ("§4.1.1 a value never matches a null field", 0, None, False),
    ("§4.1.1 same type and value: boolean", True, True, True),
    ("§4.1.1 same type, other value: boolean", True, False, False),
    ("§4.1.1 same type and value: timestamp", timestamp(5), timestamp(5), True),
    ("§4.1.1 same type and value: uuid", U, U, True),
    ("§4.1.1 same type and value: binary", b"\x00\x01", b"\x00\x01", True),
    ("§4.1.1 same type, other value: binary", b"\x00", b"\x00\x01", False),
    ("§4.1.1 same type and value: char", char("x"), char("x"), True),
    ("§4.1.1 same type and value: string", "abc", "abc", True),
    ("§4.1.1 same type and value: long", 7, 7, True),
    ("§4.1.1 boolean is not an integer", True, 1, False),
    ("§4.1.1 an integer is not a boolean", 1, True, False),
    ("§4.1.1 timestamp is not an integer", timestamp(5), 5, False),
    ("§4.1.1 an integer is not a timestamp", ulong(5), timestamp(5), False),
    ("§4.1.1 char is not a string", char("a"), "a", False),
    ("§4.1.1 binary is not a string", b"a", "a", False),
    ("§4.1.1 integers across types: ubyte ref, long field", ubyte(5), 5, True),
    ("§4.1.1 integers across types: long ref, ulong field", 5, ulong(5), True),
    ("§4.1.1 integers across types: byte ref, ushort field", byte(5), ushort(5), True),
    ("§4.1.1 integers across types: short ref, int field", short(-3), int32(-3), True),
    ("§4.1.1 integers across types: uint ref, ulong field, large", uint(2**32 - 1),
     ulong(2**32 - 1), True),
    ("§4.1.1 integers across types: values differ", ubyte(5), 6, False),
    ("§4.1.1 integers across types: field outside its own range", 300, ubyte(300), False),
    ("§4.1.1 floating point: long ref, double field", 5, 5.0, True),
    ("§4.1.1 floating point: double ref, ulong field", 5.0, ulong(5), True),
    ("§4.1.1 floating point: double ref, float field", 1.5, float32(1.5), True),
    ("§4.1.1 floating point: compared in single precision with a float", 0.1,
     float32(0.1000000001), True),
    ("§4.1.1 floating point: values differ", 5, 5.5, False),
    ("§4.1.1 floating point: double outside the float range", 1e300, float32(float("inf")),
     False),
    ("§4.1.1 floating point: NaN matches nothing", float("nan"), float("nan"), False),
    ("§4.1.1 floating point: infinity equals infinity", float("inf"), float32(float("inf")),
     True),
    ("§4.1.1 floating point: integer field outside its own range", 300.0, ubyte(300), False),
    ("§4.1.1 string/symbol equivalence: string ref, symbol field", "abc", symbol("abc"), True),
    ("§4.1.1 string/symbol equivalence: symbol ref, string field", symbol("abc"), "abc", True),
    ("§4.1.1 string/symbol equivalence: case-sensitive", "abc", "ABC", False),
    ("§4.1.1 string/symbol equivalence: length must be identical", "abc", "abcd", False),
    ("§4.1.1 string/symbol equivalence: ordinal (no normalisation)", "\u00e9", "e\u0301", False),
    ("§4.1.1 string does not match a number", "5", 5, False),
    ("§4.1.1 &p: prefix matches", "&p:ord", "orders", True),
    ("§4.1.1 &p: prefix matches a symbol field", "&p:ord", symbol("orders"), True),
    ("§4.1.1 &p: prefix is case-sensitive", "&p:ord", "Orders", False),
    ("§4.1.1 &p: empty prefix matches any string", "&p:", "", True),
    ("§4.1.1 &p: prefix longer than the field", "&p:orders", "ord", False),
    ("§4.1.1 &p: prefix does not match a number", "&p:1", 12, False),
    ("§4.1.1 &s: suffix matches", "&s:.eu", "orders.eu", True),
    ("§4.1.1 &s: suffix does not match elsewhere", "&s:.eu", "eu.orders", False),
    ("§4.1.1 && escape matches a literal '&'", "&&amp", "&amp", True),
    ("§4.1.1 && escape: the field keeps one '&' only", "&&amp", "&&amp", False),
    ("§4.1.1 && escape of a modifier-like text", "&&p:x", "&p:x", True),
    ("§4.1.1 modifiers apply to string references only, not symbols", symbol("&p:x"), "&p:x",
     True),
    ("§4.1.1 decimals match across widths by value", D32_15, D64_15, True),
    ("§4.1.1 decimal ref matches a Python Decimal field", D64_15, Decimal("1.5"), True),
    ("§4.1.1 decimals: values differ", D32_15, Decimal("1.6"), False),
    ("§4.1.1 decimals do not match integers", Decimal("5"), 5, False),
    ("§4.1.2 map: every reference entry present and matching", {"a": 1},
     {"a": 1, "b": 2}, True),
    ("§4.1.2 map: order is not significant", {"b": 2, "a": 1}, {"a": 1, "b": 2}, True),
    ("§4.1.2 map: a missing key does not match", {"c": 1}, {"a": 1}, False),
    ("§4.1.2 map: a different value does not match", {"a": 2}, {"a": 1}, False),
    ("§4.1.2 map: NULL-valued reference entries need not be present", {"a": 1, "z": None},
     {"a": 1}, True),
    ("§4.1.2 map: string key finds a symbol key", {"a": 1}, {symbol("a"): 1}, True),
    ("§4.1.2 map: integer key types are one key", {ulong(1): "x"}, {1: "x"}, True),
    ("§4.1.2 map: a boolean key is not an integer key", {True: "x"}, {1: "x"}, False),
    ("§4.1.2 map: values follow the rules (modifiers)", {"a": "&p:x"}, {"a": "xyz"}, True),
    ("§4.1.2 map: values follow the rules (nested map)", {"a": {"b": 1}},
     {"a": {"b": ulong(1), "c": 2}}, True),
    ("§4.1.2 map: the field must be a map", {"a": 1}, [1], False),
    ("§4.1.2 map: empty reference map matches any map", {}, {"a": 1}, True),
    ("§4.1.3 list: positional match of a prefix", [1, 2], [1, 2, 3], True),
    ("§4.1.3 list: every reference element must be present", [1, 2, 3], [1, 2], False),
    ("§4.1.3 list: position matters", [2, 1], [1, 2], False),
    ("§4.1.3 list: a NULL element matches any value at its position", [None, 2], ["x", 2],
     True),
    ("§4.1.3 list: a NULL element still needs its position", [1, None], [1], False),
    ("§4.1.3 list: elements follow the rules (integer types)", [ubyte(1)], [ulong(1)], True),
    ("§4.1.3 list: the field must be a list", [1], Array(UNDESCRIBED, Data.LONG, 1), False),
    ("§4.1.4 array: same size and elements", Array(UNDESCRIBED, Data.INT, int32(1), int32(2)),
     Array(UNDESCRIBED, Data.LONG, 1, 2), True),
    ("§4.1.4 array: sizes differ", Array(UNDESCRIBED, Data.INT, int32(1)),
     Array(UNDESCRIBED, Data.INT, int32(1), int32(2)), False),
    ("§4.1.4 array: an element differs", Array(UNDESCRIBED, Data.STRING, "a", "b"),
     Array(UNDESCRIBED, Data.SYMBOL, symbol("a"), symbol("c")), False),
    ("§4.1.4 array: string/symbol elements", Array(UNDESCRIBED, Data.STRING, "a"),
     Array(UNDESCRIBED, Data.SYMBOL, symbol("a")), True),
    ("§4.1.4 array: the field must be an array", Array(UNDESCRIBED, Data.LONG, 1), [1], False),
    ("§4.1.5 described field matched on its base value", "x", _d("ex:t", "x"), True),
    ("§4.1.5 described field, base value differs", "x", _d("ex:t", "y"), False),
    ("§4.1.5 described reference, plain field", _d("ex:t", 5), ulong(5), True),
    ("§4.1.5 described on both sides, same descriptor", _d("ex:t", [1]), _d("ex:t", [1, 2]),
     True),
    ("§4.1.5 described on both sides, other descriptor", _d("ex:t", 1), _d("ex:u", 1), False),
    ("§4.1.5 described list (composite) field, plain list reference", [1],
     _d("ex:point", [1, 2]), True),
    ("§4.1.5 described map field, plain map reference", {"a": 1}, _d("ex:m", {"a": 1}), True),
]


@pytest.mark.parametrize(("ref", "field", "expected"),
                         [pytest.param(r, f, e, id=i) for i, r, f, e in MATCHING])
def test_value_matching(ref: Any, field: Any, expected: bool) -> None:
    assert compile_reference(ref)(field) is expected


@pytest.mark.parametrize("ref", ["&x:y", "&", "&p", "&P:x", "&ps:x", "&s", "&abc"],
                         ids=lambda r: f"§4.1.1 unknown modifier {r!r}")
def test_unknown_modifier_is_a_definitional_error(ref: str) -> None:
    with pytest.raises(FilterError, match="unknown modifier"):
        compile_reference(ref)


def test_unknown_modifier_nested_in_a_map_is_found_at_compile_time() -> None:
    with pytest.raises(FilterError, match="unknown modifier"):
        compile_reference({"a": [{"b": "&q:x"}]})


def test_modifiers_can_be_switched_off() -> None:
    assert compile_reference("&x:y", modifiers=False)("&x:y") is True
    assert compile_reference("&p:a", modifiers=False)("abc") is False


@pytest.mark.parametrize(("value", "count"), [
    (1, 1),
    ([], 1),
    ([1, 2, 3], 4),
    ({"a": 1, "b": [1, 2]}, 5),
    (Described(symbol("x"), [1]), 2),
    (Array(UNDESCRIBED, Data.INT, int32(1), int32(2)), 3),
])
def test_count_entries(value: Any, count: int) -> None:
    assert count_entries(value) == count
