"""RawMessageView and encode_message against real proton: a proton message read through the
view keeps exact values and types, and proton decodes what encode_message writes."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from proton import (
    Data,
    Described,
    Message,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
)

from filtex_proton.amqp.encode import encode_value
from filtex_proton.amqp.message import (
    RawMessageView,
    encode_message,
    scan_sections,
)
from filtex_proton.amqp.view import MISSING, MessageView

from .filtex_amqp_strategies import (
    from_proton,
    same,
)
from .view_cases import (  # the shared cases
    AP,
    DA,
    DECIMALS,
    EVERY_TYPE,
    MA,
    MESSAGE_ID,
    NESTED_ANNOTATIONS,
    F,
    H,
    P,
    exact,
    rich_proton_message,
)

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
