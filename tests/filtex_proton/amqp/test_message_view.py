"""The section scanner, the lazy RawMessageView and encode_message, against real proton."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from decimal import Decimal
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
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
from filtex_proton.amqp.decode import UNDESCRIBED, DecodeError
from filtex_proton.amqp.encode import encode_value
from filtex_proton.amqp.message import (
    NO_BODY,
    RawMessageView,
    SectionSpan,
    encode_message,
    scan_sections,
)
from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS
from filtex_proton.amqp.view import MISSING, DictMessageView, MessageView, Section

from .filtex_amqp_strategies import (
    ANNOTATIONS,
    APPLICATION,
    HEADER_VALUES,
    PROPERTY_VALUES,
    SCALARS,
    composite_fields,
    from_proton,
    optional,
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


# --------------------------------------------------------------------------- proton -> view


def test_view_of_a_rich_proton_message_has_exact_values_and_types() -> None:
    view = RawMessageView(bytes(rich_proton_message().encode()))
    assert isinstance(view, MessageView)
    exact(
        view.section(H),
        {
            "durable": True,
            "priority": ubyte(9),
            "ttl": uint(1500),
            "first-acquirer": True,
            "delivery-count": uint(3),
        },
    )
    exact(
        view.section(P),
        {
            "message-id": MESSAGE_ID,
            "user-id": b"alice",
            "to": "queue://orders",
            "subject": "order.created",
            "reply-to": "queue://replies",
            "correlation-id": ulong(42),
            "content-type": symbol("application/json"),
            "content-encoding": symbol("gzip"),
            "absolute-expiry-time": timestamp(1_700_000_100_250),
            "creation-time": timestamp(1_700_000_000_500),
            "group-id": "group",
            "group-sequence": uint(5),
            "reply-to-group-id": "reply-group",
        },
    )
    exact(view.section(DA), {symbol("x-opt-delivery"): "d"})
    exact(view.section(MA), NESTED_ANNOTATIONS)
    exact(
        view.section(AP),
        {**EVERY_TYPE, **{k: value for k, (_, value) in DECIMALS.items()}},
    )
    assert view.section(F) is None
    # Keys of annotation maps are symbols; a str key finds them too (symbol is a str).
    assert type(next(iter(view.section(MA) or {}))) is symbol


@pytest.mark.parametrize(
    ("correlation_id", "expected"),
    [
        (ulong(7), ulong(7)),
        (MESSAGE_ID, MESSAGE_ID),
        (b"\x01\x02", b"\x01\x02"),
        ("text-id", "text-id"),
    ],
)
def test_every_message_id_type(correlation_id: Any, expected: Any) -> None:
    msg = Message(correlation_id=correlation_id, id=correlation_id)
    view = RawMessageView(bytes(msg.encode()))
    assert same(view.field(P, "correlation-id"), expected)
    assert same(view.field(P, "message-id"), expected)


def test_field_and_has_field_on_a_proton_message() -> None:
    view = RawMessageView(bytes(rich_proton_message().encode()))
    assert view.field(H, "priority") == 9
    assert view.has_field(H, "priority")
    assert view.field(AP, "null") is None  # a map entry with a null value is present
    assert view.has_field(AP, "null")
    assert view.field(AP, "nope") is MISSING
    assert not view.has_field(AP, "nope")
    assert view.field(F, "anything") is MISSING
    assert not view.has_field(F, "anything")
    assert view.field(MA, "x-opt-list") == [1, [2, []], {}]


def test_a_default_proton_message_has_empty_header_and_properties() -> None:
    # proton always writes header and properties, as empty lists when nothing is set.
    raw = bytes(Message(body="x").encode())
    assert raw.startswith(bytes.fromhex("0053704500537345"))
    view = RawMessageView(raw)
    assert view.section(H) == {}
    assert view.section(P) == {}
    assert view.field(H, "priority") is MISSING
    assert view.section(AP) is None


def test_proton_omits_fields_equal_to_their_default() -> None:
    # proton.Message cannot say "priority 4" or "durable false": it leaves them out.
    msg = Message(body="x", priority=4, durable=False, first_acquirer=False, delivery_count=0)
    view = RawMessageView(bytes(msg.encode()))
    assert view.section(H) == {}
    msg = Message(body="x", priority=5)
    assert RawMessageView(bytes(msg.encode())).section(H) == {"priority": ubyte(5)}


def test_a_priority_less_message_reports_priority_absent() -> None:
    raw = encode_message(header={"durable": True}, body="x")
    view = RawMessageView(raw)
    assert view.field(H, "priority") is MISSING
    assert not view.has_field(H, "priority")
    assert view.field(H, "durable") is True
    # proton.Message hides the absence behind the default.
    msg = Message()
    msg.decode(raw)
    assert msg.priority == 4
    assert msg.durable is True


def test_a_header_less_message_built_with_proton_data() -> None:
    data = Data()
    data.put_object(Described(ulong(0x73), [None, None, None, "subject"]))
    data.put_object(Described(ulong(0x77), "body"))
    raw = bytes(data.encode())
    view = RawMessageView(raw)
    assert view.section(H) is None
    assert view.field(H, "priority") is MISSING
    assert view.section(P) == {"subject": "subject"}
    msg = Message()
    msg.decode(raw)
    assert msg.priority == 4
    assert msg.subject == "subject"


# --------------------------------------------------------------------------- view -> proton


def test_proton_decodes_encode_message_output() -> None:
    header = {
        "durable": True,
        "priority": 7,
        "ttl": 2500,
        "first-acquirer": True,
        "delivery-count": 2,
    }
    properties = {
        "message-id": 99,
        "user-id": b"bob",
        "to": "topic://t",
        "subject": "s",
        "reply-to": "queue://r",
        "correlation-id": MESSAGE_ID,
        "content-type": "text/plain",
        "content-encoding": "utf-8",
        "absolute-expiry-time": 1_700_000_100_250,
        "creation-time": 1_700_000_000_500,
        "group-id": "g",
        "group-sequence": 9,
        "reply-to-group-id": "rg",
    }
    application = {**EVERY_TYPE, "decimal": Decimal("-1.5E-10")}
    raw = encode_message(
        header=header,
        delivery_annotations={"x-opt-d": 1},
        message_annotations=dict(NESTED_ANNOTATIONS),
        properties=properties,
        application_properties=application,
        body=["body", 1],
    )
    msg = Message()
    msg.decode(raw)
    assert (msg.durable, msg.priority, msg.ttl) == (True, 7, 2.5)
    assert (msg.first_acquirer, msg.delivery_count) == (True, 2)
    assert msg.id == 99  # proton.Message gives a plain int; our view keeps ulong (below)
    assert msg.user_id == b"bob"
    assert (msg.address, msg.subject, msg.reply_to) == ("topic://t", "s", "queue://r")
    assert msg.correlation_id == MESSAGE_ID
    assert msg.content_type == "text/plain"
    assert msg.content_encoding == "utf-8"
    assert msg.expiry_time == 1_700_000_100.25
    assert msg.creation_time == 1_700_000_000.5
    assert (msg.group_id, msg.group_sequence, msg.reply_to_group_id) == ("g", 9, "rg")
    assert msg.instructions == {symbol("x-opt-d"): 1}
    assert type(next(iter(msg.instructions))) is symbol
    assert msg.body == ["body", 1]
    assert msg.annotations == NESTED_ANNOTATIONS
    # proton gives binaries as memoryviews and decimals as raw bits: normalise those.
    got = {k: from_proton(v) for k, v in msg.properties.items()}
    assert got.pop("decimal") == Decimal("-1.5E-10")
    for key, value in EVERY_TYPE.items():
        assert same(got[key], value), (key, got[key], value)
    # ... and our own view reads back exactly what was written, with the field types.
    view = RawMessageView(raw)
    assert view.section(H) == header
    assert [type(v) for v in (view.section(H) or {}).values()] == [bool, ubyte, uint, bool, uint]
    assert type(view.field(P, "message-id")) is ulong
    assert type(view.field(P, "content-type")) is symbol
    assert type(view.field(P, "creation-time")) is timestamp
    assert type(view.field(P, "group-sequence")) is uint


def test_encode_message_keeps_explicit_nulls_and_omits_trailing_fields() -> None:
    raw = encode_message(header={"ttl": None}, properties={"subject": "s"})
    spans = scan_sections(raw)
    header = raw[spans[0].value : spans[0].end]
    properties = raw[spans[1].value : spans[1].end]
    assert header == encode_value([None, None, None])  # durable, priority, ttl: all null
    assert properties == encode_value([None, None, None, "s"])
    view = RawMessageView(raw)
    assert view.section(H) == {}  # null is no value
    assert view.section(P) == {"subject": "s"}


def test_encode_message_refuses_unknown_fields_and_body_kinds() -> None:
    with pytest.raises(ValueError, match="unknown header field"):
        encode_message(header={"prio": 1})
    with pytest.raises(ValueError, match="unknown properties field"):
        encode_message(properties={"subjekt": "s"})
    with pytest.raises(ValueError, match="body kind"):
        encode_message(body=1, body_kind="stream")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_message(body=["not binary"], body_kind="data")
    with pytest.raises(TypeError):
        encode_message(body=["not a list"], body_kind="sequence")


def test_encode_message_body_kinds() -> None:
    assert encode_message() == b""
    assert encode_message(body=None) == bytes.fromhex("00537740")
    assert encode_message(body=b"ab", body_kind="data") == bytes.fromhex("005375a0026162")
    two = encode_message(body=[b"a", b"b"], body_kind="data")
    assert two == bytes.fromhex("005375a00161005375a00162")
    seq = encode_message(body=[[1], []], body_kind="sequence")
    assert seq == bytes.fromhex("005376c00301550100537645")
    msg = Message()
    msg.decode(encode_message(body=b"payload", body_kind="data"))
    assert bytes(msg.body) == b"payload"


# --------------------------------------------------------------------------- scanning


def every_section_message() -> bytes:
    return encode_message(
        header={"priority": 1},
        delivery_annotations={"d": 1},
        message_annotations={"m": 2},
        properties={"subject": "s"},
        application_properties={"a": 3},
        body=[b"x" * 300, b"y"],
        body_kind="data",
        footer={"f": 4},
    )


def test_scan_finds_every_section_and_the_body() -> None:
    raw = every_section_message()
    spans = scan_sections(raw)
    assert [s.section for s in spans] == [H, DA, MA, P, AP, None, None, F]
    assert [s.code for s in spans] == [0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x75, 0x78]
    assert spans[0].start == 0
    assert all(a.end == b.start for a, b in pairwise(spans))
    assert spans[-1].end == len(raw)
    assert all(s.value == s.start + 3 for s in spans)
    view = RawMessageView(raw)
    assert view.spans == spans
    assert view.data is raw
    assert (view.body_offset, view.body_end) == (spans[5].start, spans[6].end)
    assert raw[view.body_offset : view.body_end] == encode_message(
        body=[b"x" * 300, b"y"], body_kind="data"
    )
    assert view.field(F, "f") == 4
    assert view.field(F, symbol("f")) == 4


def test_body_offsets_without_a_body() -> None:
    raw = encode_message(header={}, footer={"f": 1})
    view = RawMessageView(raw)
    footer_start = scan_sections(raw)[-1].start
    assert view.body_offset == view.body_end == footer_start
    raw = encode_message(properties={})
    view = RawMessageView(raw)
    assert view.body_offset == view.body_end == len(raw)


def test_empty_bytes_are_a_message_with_nothing() -> None:
    view = RawMessageView(b"")
    assert all(view.section(s) is None for s in Section)
    assert view.spans == []


def symbolic(name: str, value: Any) -> bytes:
    return b"\x00" + encode_value(symbol(name)) + encode_value(value)


def ulong_descriptor(code: int, value: Any) -> bytes:
    return b"\x00\x80" + struct.pack(">Q", code) + encode_value(value)


def test_symbolic_and_long_descriptors_are_accepted() -> None:
    raw = (
        symbolic("amqp:header:list", [True, ubyte(3)])
        + ulong_descriptor(0x71, {symbol("d"): 1})
        + symbolic("amqp:message-annotations:map", {symbol("m"): 1})
        + symbolic("amqp:properties:list", [None, None, None, "s"])
        + symbolic("amqp:application-properties:map", {"a": 1})
        + symbolic("amqp:data:binary", b"d1")
        + symbolic("amqp:data:binary", b"d2")
        + symbolic("amqp:footer:map", {symbol("f"): 1})
    )
    view = RawMessageView(raw)
    assert view.section(H) == {"durable": True, "priority": 3}
    assert view.section(DA) == {"d": 1}
    assert view.section(P) == {"subject": "s"}
    assert view.field(AP, "a") == 1
    assert view.field(F, "f") == 1
    assert [s.code for s in view.spans] == [0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x75, 0x78]
    for name, code in [("amqp:amqp-sequence:list", 0x76), ("amqp:amqp-value:*", 0x77)]:
        body = symbolic(name, [1])
        assert scan_sections(body)[0].code == code
    long_symbol = b"\x00\xb3" + struct.pack(">I", 16) + b"amqp:header:list" + b"\x45"
    assert scan_sections(long_symbol)[0].section is H
    # proton.Message (0.40) silently ignores sections with symbolic descriptors.
    msg = Message()
    msg.decode(raw)
    assert msg.priority == 4
    assert msg.subject is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\x40", "expected a described message section"),
        (encode_value([1]), "expected a described"),
        (b"\x00\x53\x69\x45", "not a message section"),
        (b"\x00\x53\x79\x45", "not a message section"),
        (b"\x00\x44\x45", "not a message section"),
        (symbolic("amqp:other:list", []), "unknown section descriptor"),
        (b"\x00\xa1\x01x\x45", "section descriptor of format code 0xa1"),
        (encode_message(properties={}) + encode_message(header={}), "out of order"),
        (encode_message(header={}) + encode_message(header={}), "repeated"),
        (encode_message(body=1, footer={}) + encode_message(body=2), "out of order"),
        (encode_message(footer={}) + encode_message(footer={}), "repeated"),
        (b"\x00\x53\x70\xc1\x01\x00", "cannot hold format code 0xc1"),
        (b"\x00\x53\x74\x45", "cannot hold format code 0x45"),
        (b"\x00\x53\x75\xa1\x00", "cannot hold format code 0xa1"),
        (b"\x00\x53\x76\xc1\x01\x00", "cannot hold"),
        (b"\x00\x53\x70\x00\x53\x01\x45", "cannot hold format code 0x00"),
        (b"\x00\x53\x70\xc0\x05\x00", "runs past the end"),
        (b"\x00\x53\x77\xb1\x00\x00\x01\x00", "runs past the end"),
        (b"\x00\x53\x77\x00\x53", "truncated"),
        (b"\x00\x53\x77\x99", "unknown format code"),
        (b"\x00", "truncated"),
        (b"\x00\x53", "truncated"),
        (b"\x00\x53\x70", "truncated"),
        (b"\x00\xa3\x10amqp:hea", "truncated|unknown section descriptor"),
    ],
)
def test_what_is_not_a_message_is_refused_at_scan_time(raw: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        scan_sections(raw)
    with pytest.raises(DecodeError, match=reason):
        RawMessageView(raw)


def test_multiple_body_sections_of_a_kind_are_accepted() -> None:
    raw = encode_message(body=[[1], [2], []], body_kind="sequence")
    assert [s.code for s in scan_sections(raw)] == [0x76] * 3


def test_null_section_values_are_empty_sections() -> None:
    raw = b"".join(bytes((0, 0x53, code, 0x40)) for code in (0x70, 0x71, 0x72, 0x73, 0x74))
    view = RawMessageView(raw + b"\x00\x53\x78\x40")
    for section in Section:
        assert view.section(section) == {}


def test_extra_composite_fields_are_ignored() -> None:
    raw = b"\x00\x53\x70" + encode_value([True, ubyte(1), None, None, None, "future field"])
    view = RawMessageView(raw)
    assert view.section(H) == {"durable": True, "priority": 1}


# --------------------------------------------------------------------------- laziness


def test_sections_are_decoded_lazily_and_cached() -> None:
    bad_map = b"\xc1\x03\x02\x40\x99"  # sizes right, a value with an unknown format code
    raw = encode_message(header={"priority": 2}) + b"\x00\x53\x74" + bad_map
    view = RawMessageView(raw)  # the scan does not look inside sections
    assert view.field(H, "priority") == 2
    for _ in range(2):
        with pytest.raises(DecodeError, match="unknown format code 0x99"):
            view.field(AP, "anything")
        with pytest.raises(DecodeError):
            view.has_field(AP, "anything")
        with pytest.raises(DecodeError):
            view.section(AP)
    header = view.section(H)
    assert view.section(H) is header


def test_the_body_is_never_decoded() -> None:
    garbage_value = b"\xb0\x00\x00\x00\x04\xff\xff\xff\xff"  # a binary: never looked inside
    raw = encode_message(properties={"subject": "s"}) + b"\x00\x53\x77" + garbage_value
    raw += b"\x00\x53\x77\xc0\x03\x01\x99\x99"  # a second amqp-value, with garbage in a list
    view = RawMessageView(raw)
    assert view.field(P, "subject") == "s"
    assert view.body_end == len(raw)


def test_view_accepts_bytearray_and_memoryview() -> None:
    raw = every_section_message()
    for buf in (bytearray(raw), memoryview(raw)):
        view = RawMessageView(buf)
        assert type(view.data) is bytes
        assert view.field(AP, "a") == 3


def test_view_agrees_with_a_dict_view_of_the_same_message() -> None:
    raw = bytes(rich_proton_message().encode())
    raw_view = RawMessageView(raw)
    dict_view = DictMessageView(
        **{s.name.lower(): raw_view.section(s) for s in Section}  # type: ignore[arg-type]
    )
    for section in Section:
        entries = raw_view.section(section) or {}
        for key in [*entries, "missing", "priority", "subject"]:
            assert same(raw_view.field(section, key), dict_view.field(section, key))
            assert raw_view.has_field(section, key) == dict_view.has_field(section, key)


def test_section_span_is_a_named_tuple() -> None:
    span = scan_sections(encode_message(body=1))[0]
    assert span == SectionSpan(None, 0x77, 0, 3, 5)
    assert NO_BODY is not None
    assert repr(NO_BODY) == "NO_BODY"
    assert "body(0x77)" in repr(RawMessageView(encode_message(body=1)))


# --------------------------------------------------------------------------- properties


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    header=optional(composite_fields(HEADER_VALUES)),
    properties=optional(composite_fields(PROPERTY_VALUES)),
    delivery=optional(ANNOTATIONS),
    annotations=optional(ANNOTATIONS),
    application=optional(APPLICATION),
    footer=optional(ANNOTATIONS),
    body=st.one_of(st.just(NO_BODY), SCALARS),
)
def test_random_messages_read_back_exactly(
    header: dict[str, Any] | None,
    properties: dict[str, Any] | None,
    delivery: dict[Any, Any] | None,
    annotations: dict[Any, Any] | None,
    application: dict[str, Any] | None,
    footer: dict[Any, Any] | None,
    body: Any,
) -> None:
    raw = encode_message(
        header=header,
        delivery_annotations=delivery,
        message_annotations=annotations,
        properties=properties,
        application_properties=application,
        body=body,
        footer=footer,
    )
    view = RawMessageView(raw)
    for section, given_fields, names in (
        (H, header, [n for n, _ in HEADER_FIELDS]),
        (P, properties, [n for n, _ in PROPERTIES_FIELDS]),
    ):
        if given_fields is None:
            assert view.section(section) is None
            continue
        expected = {n: given_fields[n] for n in names if given_fields.get(n) is not None}
        exact(view.section(section), expected)
        for name in names:
            assert view.has_field(section, name) == (name in expected)
    for section, entries in ((DA, delivery), (MA, annotations), (AP, application), (F, footer)):
        if entries is None:
            assert view.section(section) is None
        else:
            exact(view.section(section), entries)
    # proton agrees on what it can express.
    msg = Message()
    msg.decode(raw)
    if header is not None and header.get("priority") is not None:
        assert msg.priority == header["priority"]
    else:
        assert msg.priority == 4
    subject = (properties or {}).get("subject")
    if subject is not None and "\x00" not in subject:  # proton cuts strings at a NUL
        assert msg.subject == subject
    if application:
        got = msg.properties
        assert list(got) == list(application)


def refuse_or_read_everything(raw: bytes) -> None:
    """A message from hostile bytes either reads or raises DecodeError; nothing else."""
    try:
        view = RawMessageView(raw)
    except DecodeError:
        return
    assert 0 <= view.body_offset <= view.body_end <= len(raw)
    for section in Section:
        try:
            view.section(section)
            view.field(section, "priority")
            view.has_field(section, "subject")
        except DecodeError:
            pass


@settings(max_examples=1500)
@given(raw=st.binary(max_size=80))
def test_random_bytes_make_no_view_or_only_decode_errors(raw: bytes) -> None:
    refuse_or_read_everything(raw)


@settings(max_examples=1500)
@given(
    code=st.integers(0x70, 0x78),
    descriptor=st.sampled_from([b"\x00\x53", b"\x00\x80" + bytes(7)]),
    rest=st.binary(max_size=60),
)
def test_random_section_contents_only_raise_decode_errors(
    code: int, descriptor: bytes, rest: bytes
) -> None:
    refuse_or_read_everything(descriptor + bytes((code,)) + rest)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_messages_only_raise_decode_errors(data: st.DataObject) -> None:
    raw = bytearray(
        data.draw(st.sampled_from([every_section_message(), bytes(rich_proton_message().encode())]))
    )
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        how = data.draw(st.sampled_from(["flip", "set", "truncate", "delete"]))
        if how == "flip":
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif how == "set":
            raw[at] = data.draw(st.integers(0, 255))
        elif how == "truncate":
            del raw[at:]
        else:
            del raw[at]
        if not raw:
            break
    refuse_or_read_everything(bytes(raw))


def test_every_truncation_of_a_message_is_refused_or_shorter() -> None:
    raw = bytes(rich_proton_message().encode())
    boundaries = {s.end for s in scan_sections(raw)}
    for cut in range(1, len(raw)):
        if cut in boundaries:
            assert len(RawMessageView(raw[:cut]).spans) >= 1  # a shorter, valid message
        else:
            with pytest.raises(DecodeError):
                RawMessageView(raw[:cut])
