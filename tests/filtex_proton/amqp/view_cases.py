"""The messages and values the message-view tests read back: the sections' short names, a
message id, application properties of every AMQP scalar type and the decimals proton carries as
raw bits."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from proton import (
    Array,
    Data,
    Described,
    Message,
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

from filtex_proton.amqp.bid import encode_decimal128
from filtex_proton.amqp.decode import UNDESCRIBED
from filtex_proton.amqp.view import Section

from .filtex_amqp_strategies import (
    same,
)

H = Section.HEADER
DA = Section.DELIVERY_ANNOTATIONS
MA = Section.MESSAGE_ANNOTATIONS
P = Section.PROPERTIES
AP = Section.APPLICATION_PROPERTIES
F = Section.FOOTER

MESSAGE_ID = uuid.UUID("6f1c1f3e-35a4-4b8e-9d77-0f3a6b0f1d2e")

# Application properties of every AMQP scalar type, written with proton's marker classes.
EVERY_TYPE: dict[str, Any] = {
    "null": None,
    "true": True,
    "false": False,
    "ubyte": ubyte(255),
    "ushort": ushort(65535),
    "uint0": uint(0),
    "uint_small": uint(200),
    "uint": uint(2**32 - 1),
    "ulong0": ulong(0),
    "ulong_small": ulong(7),
    "ulong": ulong(2**64 - 1),
    "byte": byte(-128),
    "short": short(-32768),
    "int_small": int32(-5),
    "int": int32(-(2**31)),
    "long_small": -1,
    "long": 2**63 - 1,
    "float": float32(0.5),
    "double": -1.25e300,
    "char": char("€"),
    "timestamp": timestamp(1_700_000_000_123),
    "uuid": MESSAGE_ID,
    "binary": b"\x00\xff",
    "long_binary": bytes(range(256)) * 2,
    "string": "héllo",
    "long_string": "ß" * 300,
    "symbol": symbol("sym"),
}
# The decimals proton carries as raw bits, and what they are.
DECIMALS: dict[str, tuple[Any, Decimal]] = {
    "decimal32": (decimal32(0xB2000019), Decimal("-2.5")),
    "decimal64": (decimal64(0x31A0000000000005), Decimal("0.5")),
    "decimal128": (decimal128(encode_decimal128(Decimal("1.000"))), Decimal("1.000")),
}
NESTED_ANNOTATIONS: dict[Any, Any] = {
    symbol("x-opt-map"): {symbol("a"): [ulong(1), "two", {"three": None}]},
    symbol("x-opt-list"): [int32(1), [short(2), []], {}],
    symbol("x-opt-array"): Array(UNDESCRIBED, Data.INT, int32(1), int32(2)),
    symbol("x-opt-described-array"): Array(symbol("d"), Data.STRING, "a", "b"),
    symbol("x-opt-array-of-maps"): Array(UNDESCRIBED, Data.MAP, {"k": 1}),
    symbol("x-opt-described"): Described(symbol("org:x"), [True]),
    ulong(77): "numeric key",
}


def rich_proton_message() -> Message:
    msg = Message(body={"order": 1})
    msg.durable = True
    msg.priority = 9
    msg.ttl = 1.5
    msg.first_acquirer = True
    msg.delivery_count = 3
    msg.id = MESSAGE_ID
    msg.user_id = b"alice"
    msg.address = "queue://orders"
    msg.subject = "order.created"
    msg.reply_to = "queue://replies"
    msg.correlation_id = ulong(42)
    msg.content_type = symbol("application/json")
    msg.content_encoding = symbol("gzip")
    msg.expiry_time = 1_700_000_100.25
    msg.creation_time = 1_700_000_000.5
    msg.group_id = "group"
    msg.group_sequence = 5
    msg.reply_to_group_id = "reply-group"
    msg.instructions = {symbol("x-opt-delivery"): "d"}
    msg.annotations = dict(NESTED_ANNOTATIONS)
    msg.properties = {**EVERY_TYPE, **{k: raw for k, (raw, _) in DECIMALS.items()}}
    return msg


def exact(mapping: Mapping[Any, Any] | None, expected: Mapping[Any, Any]) -> None:
    """Same keys in the same order, and values identical in type and value."""
    assert mapping is not None
    assert list(mapping) == list(expected)
    for key, value in expected.items():
        assert same(mapping[key], value), (key, mapping[key], value)
