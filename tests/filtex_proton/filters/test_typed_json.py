"""Typed JSON (docs/TYPED_JSON.md): values, messages and filter sets by hand."""

from __future__ import annotations

import json
import math
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
    decimal128,
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

from filtex_proton.amqp.bid import as_decimal
from filtex_proton.amqp.view import MISSING, Section
from filtex_proton.filters.typed_json import (
    TypedJsonError,
    filter_set_from_json,
    from_json,
    message_from_json,
    to_json,
)

U = "9f0c8a4e-5f4b-4a57-8b7e-2d5c6f1d2e3a"

READ: list[tuple[Any, Any, type]] = [
    ("x", "x", str),
    (5, 5, int),
    (1.5, 1.5, float),
    (True, True, bool),
    (None, None, type(None)),
    ({"ubyte": 5}, ubyte(5), ubyte),
    ({"ushort": 5}, ushort(5), ushort),
    ({"uint": 5}, uint(5), uint),
    ({"ulong": "0x0000468C00000004"}, ulong(0x0000468C00000004), ulong),
    ({"byte": -1}, byte(-1), byte),
    ({"short": -1}, short(-1), short),
    ({"int": -1}, int32(-1), int32),
    ({"long": -1}, -1, int),
    ({"float": 1.5}, float32(1.5), float32),
    ({"double": "NaN"}, None, float),
    ({"timestamp": 1700000000000}, timestamp(1700000000000), timestamp),
    ({"timestamp": "1970-01-01T00:00:01Z"}, timestamp(1000), timestamp),
    ({"timestamp": "1970-01-01T01:00:00+01:00"}, timestamp(0), timestamp),
    ({"timestamp": "1970-01-01T00:00:00.250"}, timestamp(250), timestamp),
    ({"char": "x"}, char("x"), char),
    ({"uuid": U}, uuid.UUID(U), uuid.UUID),
    ({"binary": "AAEC/w=="}, b"\x00\x01\x02\xff", bytes),
    ({"string": "s"}, "s", str),
    ({"symbol": "s"}, symbol("s"), symbol),
    ({"list": [1, {"ubyte": 2}]}, [1, ubyte(2)], list),
    ({"map": {"ubyte": 1}}, {"ubyte": 1}, dict),
    ({"map": [[{"ulong": 1}, "one"]]}, {ulong(1): "one"}, dict),
    ({"a": 1, "b": {"symbol": "x"}}, {"a": 1, "b": symbol("x")}, dict),
    ({"descriptor": "amqp:true-filter", "value": True},
     Described(symbol("amqp:true-filter"), True), Described),
    ({"descriptor": 288, "value": "a = 1"}, Described(ulong(288), "a = 1"), Described),
    ({"array": {"type": "int", "values": [1, 2]}},
     Array(UNDESCRIBED, Data.INT, int32(1), int32(2)), Array),
]


@pytest.mark.parametrize(("raw", "expected", "python_type"), READ,
                         ids=[json.dumps(r) for r, _, _ in READ])
def test_from_json(raw: Any, expected: Any, python_type: type) -> None:
    value = from_json(raw)
    assert type(value) is python_type
    if expected is None and python_type is float:
        assert math.isnan(value)
    else:
        assert value == expected


@pytest.mark.parametrize(("raw", "text"), [
    ({"ubyte": 256}, "out of the range of ubyte"),
    ({"ulong": -1}, "out of the range"),
    (2**63, "out of the range of long"),
    ({"int": "x"}, "not an integer"),
    ({"boolean": 1}, "true or false"),
    ({"char": "xy"}, "exactly one character"),
    ({"symbol": "\u00e9"}, "ASCII"),
    ({"uuid": "nope"}, "not a UUID"),
    ({"binary": "!!"}, "base64"),
    ({"decimal32": "1.23456789"}, "not exactly representable"),
    ({"decimal64": "x"}, "not a decimal"),
    ({"timestamp": "yesterday"}, "ISO 8601"),
    ({"array": [1]}, "array needs"),
    ({"array": {"type": "nope", "values": []}}, "array type must be"),
    ({"map": 5}, "map needs"),
    ({"float": "x"}, "needs a number"),
])
def test_from_json_errors(raw: Any, text: str) -> None:
    with pytest.raises(TypedJsonError, match=text):
        from_json(raw)


ROUND_TRIP: list[Any] = [
    None, True, 5, -(2**63), 1.5, float("inf"), float32(0.5), ubyte(1), ushort(2), uint(3),
    ulong(2**64 - 1), byte(-4), short(-5), int32(-6), timestamp(7), char("c"),
    uuid.UUID(U), b"bin", "str", symbol("sym"), [1, [2]], {"a": 1}, {symbol("a"): 1},
    {"ubyte": 1}, {"descriptor": 1, "value": 2}, {ulong(1): [None]},
    Described(symbol("ex:d"), {"k": [1]}), Described(ulong(0x120), "a = 1"),
    Array(UNDESCRIBED, Data.INT, int32(1)), Array(symbol("ex:a"), Data.STRING, "x"),
]


@pytest.mark.parametrize("value", ROUND_TRIP, ids=repr)
def test_to_json_round_trips(value: Any) -> None:
    text = json.dumps(to_json(value))
    back = from_json(json.loads(text))
    assert back == value
    assert type(back) is type(value)


@pytest.mark.parametrize("value", [decimal32(0x3200000F), decimal64(0x31C000000000000F),
                                   Decimal("1.25")])
def test_decimals_round_trip_by_value(value: Any) -> None:
    back = from_json(json.loads(json.dumps(to_json(value))))
    assert as_decimal(back) == as_decimal(value)
    assert isinstance(back, decimal32 | decimal64 | decimal128)


def test_message_sections() -> None:
    view = message_from_json({
        "header": {"priority": 9, "durable": True, "ttl": None},
        "message-annotations": {"x-opt-a": 1},
        "delivery-annotations": {"map": [[{"ulong": 7}, "seven"]]},
        "properties": {"message-id": 42, "correlation-id": "abc", "creation-time": 1000,
                       "content-type": "text/plain", "user-id": {"binary": "Ym9i"},
                       "group-sequence": 3, "to": {"symbol": "q"}},
        "application-properties": {"region": "eu"},
        "footer": {"f": {"uint": 1}},
    })
    assert view.field(Section.HEADER, "priority") == 9
    assert type(view.field(Section.HEADER, "priority")) is ubyte
    assert view.field(Section.HEADER, "ttl") is MISSING  # null: absent (composite section)
    assert type(view.field(Section.PROPERTIES, "message-id")) is ulong
    assert type(view.field(Section.PROPERTIES, "correlation-id")) is str
    assert type(view.field(Section.PROPERTIES, "creation-time")) is timestamp
    assert type(view.field(Section.PROPERTIES, "content-type")) is symbol
    assert type(view.field(Section.PROPERTIES, "group-sequence")) is uint
    assert view.field(Section.PROPERTIES, "user-id") == b"bob"
    assert type(view.field(Section.PROPERTIES, "to")) is symbol  # typed values kept as written
    section = view.section(Section.MESSAGE_ANNOTATIONS)
    assert section is not None and all(type(k) is symbol for k in section)
    app = view.section(Section.APPLICATION_PROPERTIES)
    assert app is not None and all(type(k) is str for k in app)
    assert view.field(Section.DELIVERY_ANNOTATIONS, ulong(7)) == "seven"
    assert view.section(Section.FOOTER) == {symbol("f"): uint(1)}


@pytest.mark.parametrize(("raw", "text"), [
    ([], "a message is a JSON object"),
    ({"body": "x"}, "unknown section"),
    ({"application_properties": {}}, "unknown section"),
    ({"header": {"prio": 1}}, "has no field 'prio'"),
    ({"header": {"priority": 300}}, "out of the range of ubyte"),
    ({"header": [1]}, "needs an object"),
    ({"footer": [1]}, "needs an object"),
])
def test_message_errors(raw: Any, text: str) -> None:
    with pytest.raises(TypedJsonError, match=text):
        message_from_json(raw)


def test_absent_sections_are_absent() -> None:
    view = message_from_json({"application-properties": None})
    for section in Section:
        assert view.section(section) is None


def test_filter_set() -> None:
    described = filter_set_from_json({"a": {"descriptor": 288, "value": "x = 1"}})
    assert described == {"a": Described(ulong(288), "x = 1")}
    with pytest.raises(TypedJsonError):
        filter_set_from_json([1])
