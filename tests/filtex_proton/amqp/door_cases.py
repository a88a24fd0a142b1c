"""The door check's table of cases: a message with every section, messages as clients
commonly encode them and in rarer encodings, what is refused (with the section each
refusal names), and every small damage to a message. Shared by the door check's tests of
its paths (the straight line, the table loop, the general path)."""

from __future__ import annotations

import random
import uuid

import proton
from proton import Array, Data, Described, char, int32, symbol, timestamp, ubyte, uint, ulong

from filtex_proton.amqp.decode import UNDESCRIBED
from filtex_proton.amqp.encode import encode_value
from filtex_proton.amqp.message import encode_message
from filtex_proton.amqp.validate import (
    LAYOUT,
)


def section(code: int, value: bytes) -> bytes:
    return bytes((0x00, 0x53, code)) + value


def app_props(key: bytes, value: bytes) -> bytes:
    """application-properties {key: value}, both given encoded."""
    body = b"\x02" + key + value
    return section(0x74, b"\xc1" + bytes([len(body)]) + body)


def header_list(*fields: bytes) -> bytes:
    body = bytes([len(fields)]) + b"".join(fields)
    return section(0x70, b"\xc0" + bytes([len(body)]) + body)


GOOD = encode_message(
    header={"durable": True, "priority": 7, "ttl": 1000, "first-acquirer": False,
            "delivery-count": 2},
    delivery_annotations={"x-opt-d": 1},
    message_annotations={"x-opt-m": [1, {"a": Described(symbol("d"), 2)}], ulong(9): "n"},
    properties={"message-id": uuid.UUID(int=5), "user-id": b"u", "to": "q", "subject": "s",
                "reply-to": "r", "correlation-id": ulong(3), "content-type": "text/plain",
                "content-encoding": "utf-8", "absolute-expiry-time": timestamp(1),
                "creation-time": timestamp(2), "group-id": "g", "group-sequence": 4,
                "reply-to-group-id": "rg"},
    application_properties={"s": "é", "i": int32(-3), "l": 2**40, "u": ubyte(1),
                            "b": True, "n": None, "c": char("x"), "bin": b"\x00",
                            "sym": symbol("y"), "f": 1.5, "t": timestamp(5),
                            "id": uuid.UUID(int=1)},
    body=[1, 2, {"body": "anything"}],
    footer={"x-opt-sig": b"\x01"},
)

#: name -> (bytes, the section the refusal names, words its reason contains)
REFUSED: dict[str, tuple[bytes, str, str]] = {
    # application-properties
    "odd count": (section(0x74, b"\xc1\x04\x03\x40\x40\x40"), "application-properties",
                  "odd number of elements"),
    "odd count, map32": (section(0x74, b"\xd1\x00\x00\x00\x05\x00\x00\x00\x01\x40"),
                         "application-properties", "odd number"),
    "invalid UTF-8 value": (app_props(b"\xa1\x01a", b"\xa1\x03\xed\xa0\x80"),
                            "application-properties", "UTF-8"),
    "invalid UTF-8 key": (app_props(b"\xa1\x02\xc3\x28", b"\x40"), "application-properties",
                          "UTF-8"),
    "str32 not UTF-8": (app_props(b"\xa1\x01a", b"\xb1\x00\x00\x00\x01\xff"),
                        "application-properties", "UTF-8"),
    "symbol not ASCII": (app_props(b"\xa1\x01a", b"\xa3\x01\xe9"), "application-properties",
                         "ASCII"),
    "list value": (encode_message(application_properties={"a": [1]}),
                   "application-properties", "list, not a simple type"),
    "map value": (encode_message(application_properties={"a": {"b": 1}}),
                  "application-properties", "map, not a simple type"),
    "array value": (encode_message(application_properties={"a": Array(None, Data.INT, 1)}),
                    "application-properties", "array, not a simple type"),
    "described value": (encode_message(application_properties={"a": Described(ulong(1), 2)}),
                        "application-properties", "described value, not a simple type"),
    "symbol key": (app_props(b"\xa3\x01a", b"\x40"), "application-properties",
                   "key of type symbol, not string"),
    "integer key": (app_props(b"\x54\x01", b"\x40"), "application-properties",
                    "key of type int, not string"),
    "count beyond the size": (section(0x74, b"\xd1\x00\x00\x00\x06\x7f\xff\xff\xfe\x40\x40"),
                              "application-properties", "cannot fit"),
    "size short of the content": (section(0x74, b"\xc1\x04\x02\xa1\x01a"),
                                  "application-properties", "truncated"),
    "elements short of the size": (section(0x74, b"\xc1\x06\x02\xa1\x01a\x40\x40"),
                                   "application-properties", "fill its size"),
    "string beyond the message": (app_props(b"\xa1\x01a", b"\xb1\x7f\xff\xff\xff"),
                                  "application-properties", ""),
    "char beyond U+10FFFF": (app_props(b"\xa1\x01a", b"\x73\x00\x11\x00\x00"),
                             "application-properties", "code point"),
    "unknown format code": (app_props(b"\xa1\x01a", b"\x3f"), "application-properties",
                            "format code"),
    # header
    "durable a string": (header_list(b"\xa1\x03yes"), "header", "durable is string"),
    "priority a uint": (header_list(b"\x40", b"\x52\x05"), "header", "priority is uint"),
    "ttl a long": (header_list(b"\x40", b"\x40", b"\x55\x05"), "header", "ttl is long"),
    "delivery-count a list": (header_list(b"\x40", b"\x40", b"\x40", b"\x40", b"\x45"),
                              "header", "delivery-count is list"),
    "header count beyond its size": (section(0x70, b"\xc0\x02\x02\x40"), "header",
                                     "cannot fit"),
    # properties
    "subject not UTF-8": (encode_message(properties={"subject": "ab"}).replace(b"ab", b"\xff\xfe"),
                          "properties", "UTF-8"),
    "to a symbol": (encode_message(properties={"to": symbol("q")}), "properties",
                    "to is symbol, not string"),
    "message-id a long": (encode_message(properties={"message-id": 5}).replace(
        b"\x53\x05", b"\x55\x05"), "properties", "message-id is long"),
    "content-type a string": (encode_message(properties={"content-type": "t"}).replace(
        b"\xa3\x01t", b"\xa1\x01t"), "properties", "content-type is string, not symbol"),
    "creation-time a uint": (encode_message(properties={"creation-time": uint(1)}),
                             "properties", "creation-time is uint, not timestamp"),
    # annotations and footer
    "annotation key a string": (encode_message(message_annotations={"k": 1}).replace(
        b"\xa3\x01k", b"\xa1\x01k"), "message-annotations", "key of type string"),
    "annotation symbol not ASCII": (encode_message(message_annotations={"k": 1}).replace(
        b"\xa3\x01k", b"\xa3\x01\xe9"), "message-annotations", "ASCII"),
    "described value with a string descriptor": (
        section(0x72, b"\xc1\x09\x02\xa3\x01k\x00\xa1\x01d\x40"), "message-annotations",
        "descriptor of type string"),
    "nested described with a list descriptor": (
        encode_message(delivery_annotations={"k": [Described([1], 2)]}),
        "delivery-annotations", "descriptor of type list"),
    "footer of one element": (encode_message(body="x") + section(0x78, b"\xc1\x02\x01\x40"),
                              "footer", "odd number"),
    "footer key an int": (encode_message(body="x") + section(0x78, b"\xc1\x04\x02\x54\x01\x40"),
                          "footer", "key of type int"),
    # the layout (what the scan refuses)
    "no bytes": (b"", LAYOUT, "no sections"),
    "not described": (b"\x45", LAYOUT, "described"),
    "unknown section descriptor": (section(0x79, b"\x45"), LAYOUT, "not a message section"),
    "descriptor a string": (b"\x00\xa1\x10amqp:header:list\x45", LAYOUT, "descriptor"),
    "header holding a map": (section(0x70, b"\xc1\x01\x00"), LAYOUT, "cannot hold"),
    "section beyond the message": (section(0x74, b"\xd1\x7f\xff\xff\xff"), LAYOUT,
                                   "past the end"),
}


def _proton_message() -> bytes:
    """A message as proton encodes it: header, annotations, properties, application
    properties as map32, a string body."""
    msg = proton.Message(body="x" * 60, durable=True, priority=6, id=uuid.UUID(int=7),
                         address="queue://orders", subject="orders.created",
                         content_type=symbol("application/json"), creation_time=1_700_000_000.0,
                         properties={"region": "eu-west", "amount": 1234, "currency": "EUR",
                                     "express": True, "weight": 2.5})
    msg.annotations = {symbol("x-opt-jms-msg-type"): proton.byte(5),
                       symbol("x-opt-jms-dest"): proton.byte(0)}
    return bytes(msg.encode())


#: Messages as clients commonly encode them: what the door check's fast paths are for.
COMMON: list[bytes] = [
    encode_message(properties={"message-id": ulong(3)},
                   application_properties={"k": int32(3), "region": "r3"},
                   body=b"x" * 100, body_kind="data"),
    encode_message(header={"durable": True, "priority": 4, "ttl": 1000, "delivery-count": 0},
                   message_annotations={"x-opt-a": "v", "x-opt-n": 5, ulong(2): None},
                   properties={"message-id": "id-1", "to": "q", "subject": "s",
                               "content-type": "text/plain", "creation-time": timestamp(7),
                               "correlation-id": uuid.UUID(int=9), "group-sequence": 2},
                   application_properties={"s": "é", "n": None, "l": 2**40, "b": False,
                                           "u": ubyte(200), "i": int32(-100), "f": 0.5,
                                           "c": char("x"), "sym": symbol("y"), "bin": b"\x01"},
                   body="hello", footer={"x-opt-sig": b"\x01"}),
    encode_message(delivery_annotations={"d": 1}, body=[1, "two"]),
    encode_message(body=[[1], [2]], body_kind="sequence"),
    encode_message(body=[b"a", b"b" * 300], body_kind="data"),
    encode_message(application_properties={"k": "v" * 300, "w": 7}),
    encode_message(header={}, properties={}, application_properties={}, footer={}),
    encode_message(footer={"x-opt-f": 1}),
    _proton_message(),
]

#: A header with a field after the known ones (a later version's: decoded, not type-checked).
EXTRA_HEADER_FIELD = header_list(b"\x41", b"\x40", b"\x40", b"\x40", b"\x40", b"\xa1\x01z")

#: Valid messages in rarer encodings, most of them the table loop's or the general path's.
UNCOMMON: list[bytes] = [
    GOOD,
    EXTRA_HEADER_FIELD,
    encode_message(message_annotations={"a": Array(UNDESCRIBED, Data.INT, 1)}),
    encode_message(message_annotations={"k": Described(ulong(1), 2)}),
    encode_message(properties={"group-sequence": uint(2**31)}),
    encode_message(application_properties={"k" * 300: "v", "w": 7}),
    _proton_message().replace(b"\x00\x53\x73", b"\x00\xa3\x14amqp:properties:list", 1),
]

#: Empty and null sections, and a message of a body alone.
EMPTY_SECTIONS: list[bytes] = [
    section(0x70, b"\x45") + section(0x73, b"\x40") + section(0x74, b"\x40"),
    section(0x77, encode_value([{"a": [1]}])),
    encode_message(application_properties={}, body="x", footer={}),
]


def mutants(data: bytes, rng: random.Random) -> list[bytes]:
    """Truncations, and bytes replaced by boundary values, random ones or their neighbours."""
    out = [data[:i] for i in range(len(data))]
    for i in range(len(data)):
        for b in (0x00, 0x01, 0x40, 0x7F, 0x80, 0xA1, 0xFF, (data[i] + 1) & 0xFF,
                  (data[i] - 1) & 0xFF, rng.randrange(256)):
            out.append(data[:i] + bytes([b]) + data[i + 1:])
    return out
