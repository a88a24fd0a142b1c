"""The door check's table of cases: a message with every section, and what is refused
(with the section each refusal names). Shared by the door check's tests of both paths."""

from __future__ import annotations

import uuid

from proton import Array, Data, Described, char, int32, symbol, timestamp, ubyte, uint, ulong

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
