"""The relay's origin mark (no sockets): added losslessly, replaced not duplicated, read back."""

from __future__ import annotations

import pytest
from proton import Message, byte, symbol

from filtex_broker.relay.origin import ORIGIN_KEY, OriginStamp
from filtex_proton.amqp import DecodeError
from filtex_proton.amqp.message import RawMessageView


def _decode(data: bytes) -> Message:
    message = Message()
    message.decode(data)
    return message


def test_a_message_without_annotations_gets_a_section_after_the_header() -> None:
    stamp = OriginStamp()
    original = Message(id=1, body="x", durable=True, properties={"a": 1})
    data = stamp.stamp(RawMessageView(original.encode()), 7)
    decoded = _decode(data)
    assert decoded.annotations == {ORIGIN_KEY: f"{stamp.instance}:7"}
    assert (decoded.durable, decoded.id, decoded.body, decoded.properties) == (
        True, 1, "x", {"a": 1})
    assert stamp.origin(RawMessageView(data)) == 7


def test_existing_annotations_keep_their_types_and_a_second_stamp_replaces_the_first() -> None:
    stamp = OriginStamp()
    original = Message(body=b"\x00\x01", annotations={symbol("x-opt-jms-msg-type"): byte(5)})
    once = stamp.stamp(RawMessageView(original.encode()), 1)
    twice = stamp.stamp(RawMessageView(once), 2)
    annotations = _decode(twice).annotations
    assert annotations == {symbol("x-opt-jms-msg-type"): 5, ORIGIN_KEY: f"{stamp.instance}:2"}
    assert isinstance(annotations[symbol("x-opt-jms-msg-type")], byte)
    assert stamp.origin(RawMessageView(twice)) == 2


def test_another_relays_mark_names_nobody_here() -> None:
    data = OriginStamp("elsewhere").stamp(RawMessageView(Message(body=1).encode()), 3)
    assert OriginStamp("here").origin(RawMessageView(data)) is None
    assert OriginStamp("here").origin(RawMessageView(Message(body=1).encode())) is None


def test_annotations_that_are_not_a_map_are_a_decode_error() -> None:
    # message-annotations (0x72) holding a null is allowed; a truncated map is not
    null_section = b"\x00\x53\x72\x40" + b"\x00\x53\x77\xa1\x01x"
    data = OriginStamp("s").stamp(RawMessageView(null_section), 4)
    assert OriginStamp("s").origin(RawMessageView(data)) == 4
    broken = b"\x00\x53\x72\xc1\x05\x02\xa3\x01k" + b"\x00\x53\x77\x40"
    with pytest.raises(DecodeError):
        OriginStamp("s").stamp(RawMessageView(broken), 4)


def test_the_mark_is_read_back_wherever_the_map_holds_it() -> None:
    # Our entry is the last one as the relay sends it; an upstream that re-encodes the map
    # may move it or add entries after it.
    stamp = OriginStamp("relay-a")
    sent = stamp.stamp(RawMessageView(Message(body=1, annotations={
        symbol("x-before"): "relay-a:9"}).encode()), 12)
    assert stamp.origin(RawMessageView(sent)) == 12
    moved = Message(body=1, annotations={ORIGIN_KEY: "relay-a:5", symbol("x-after"): 1})
    assert stamp.origin(RawMessageView(moved.encode())) == 5
    # a value that merely ends like our entry, under another key, is not our mark
    other = Message(body=1, annotations={symbol("x-other"): "relay-a:5"})
    assert stamp.origin(RawMessageView(other.encode())) is None
    assert OriginStamp("relay-b").origin(RawMessageView(sent)) is None


def test_each_connection_gets_its_own_mark() -> None:
    stamp = OriginStamp("relay-a")
    view = RawMessageView(Message(body=1).encode())
    marks = [stamp.origin(RawMessageView(stamp.stamp(view, n))) for n in (1, 2, 1, 30)]
    assert marks == [1, 2, 1, 30]
