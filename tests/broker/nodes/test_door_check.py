"""The door check: a message that is malformed in any section but the body is rejected at the door.

Raw bytes over real sockets: each malformed message is rejected with
``amqp:decode-error``, the description naming the section and the problem; it
is never stored, so no consumer (and no consumer's filter) ever sees it; the
producer's link and connection carry the next message as if nothing happened.
"""

from __future__ import annotations

import pytest
from proton import Delivery, symbol

from filtex_broker.nodes.consumer import Consumer
from filtex_broker.nodes.queue import Queue
from filtex_proton.amqp.message import encode_message

from ..broker_clients import (
    RunningBroker,
    connect,
    nothing_more,
    raw_receiver,
    send_raw,
    sql,
    wait_received,
)

DECODE_ERROR = "amqp:decode-error"


def section(code: int, value: bytes) -> bytes:
    return bytes((0x00, 0x53, code)) + value


def app_props(key: bytes, value: bytes) -> bytes:
    body = b"\x02" + key + value
    return section(0x74, b"\xc1" + bytes([len(body)]) + body)


#: name -> (bytes, the words the rejection's description must contain)
MALFORMED: dict[str, tuple[bytes, str]] = {
    "odd application-properties count": (
        section(0x74, b"\xc1\x05\x03\xa1\x01x\x40"),
        "application-properties section: map with an odd number of elements"),
    "invalid UTF-8 in a string": (
        app_props(b"\xa1\x01x", b"\xa1\x03\xed\xa0\x80"), "application-properties section"),
    "invalid UTF-8 in a subject": (
        encode_message(properties={"subject": "ab"}, body="b").replace(b"ab", b"\xc3\x28"),
        "properties section: invalid UTF-8"),
    "a symbol not ASCII": (
        encode_message(message_annotations={"k": 1}).replace(b"\xa3\x01k", b"\xa3\x01\xe9"),
        "message-annotations section: invalid UTF-8 in string or non-ASCII symbol"),
    "an unknown section descriptor": (section(0x7A, b"\x45"), "message layout: descriptor 0x7a"),
    "a section descriptor that is a string": (
        b"\x00\xa1\x10amqp:header:list\x45", "message layout"),
    "a described annotation with a string descriptor": (
        section(0x72, b"\xc1\x09\x02\xa3\x01k\x00\xa1\x01d\x40"),
        "message-annotations section: value of 'k': descriptor of type string"),
    "a map in application-properties": (
        encode_message(application_properties={"x": {"y": 1}}),
        "application-properties section: value of 'x' is a map, not a simple type"),
    "a list in application-properties": (
        encode_message(application_properties={"x": [1]}, body="b"),
        "application-properties section: value of 'x' is a list"),
    "a header durable that is a string": (
        section(0x70, b"\xc0\x06\x01\xa1\x03yes"), "header section: field durable is string"),
    "a header priority that is an int": (
        section(0x70, b"\xc0\x04\x02\x40\x54\x05"), "header section: field priority is int"),
    "a count beyond the section": (
        section(0x74, b"\xd1\x00\x00\x00\x06\x7f\xff\xff\xfe\x40\x40"),
        "application-properties section: count 2147483646 cannot fit"),
    "a string size beyond the message": (
        app_props(b"\xa1\x01x", b"\xb1\x7f\xff\xff\xff"), "application-properties section"),
    "a section size beyond the message": (
        section(0x70, b"\xd0\xff\xff\xff\xff\x00\x00\x00\x01\x40"),
        "message layout: section 0x70 runs past the end"),
    "a footer of one element": (
        encode_message(body="b") + section(0x78, b"\xc1\x02\x01\x40"),
        "footer section: map with an odd number of elements (1)"),
    "a footer key that is a string": (
        encode_message(body="b") + section(0x78, b"\xc1\x05\x02\xa1\x01k\x40"),
        "footer section: key of type string, not symbol or ulong"),
}


def good(n: int) -> bytes:
    return encode_message(header={"priority": 5}, message_annotations={"x-opt-n": n},
                          properties={"subject": "ok"},
                          application_properties={"x": 1, "n": n}, body=f"good {n}",
                          footer={symbol("x-opt-sig"): b"s"})


@pytest.mark.parametrize(("data", "words"), MALFORMED.values(), ids=MALFORMED.keys())
def test_rejected_naming_the_section_and_nothing_else_is_disturbed(
    broker: RunningBroker, data: bytes, words: str
) -> None:
    consumers = connect(broker.url)
    filtered, seen = raw_receiver(consumers, "q", options=sql("x = 1 AND p.subject = 'ok'"),
                                  name="filtered")
    everything, all_seen = raw_receiver(consumers, "t", name="everything")
    producer = connect(broker.url)
    to_q = producer.create_sender("q")
    to_t = producer.create_sender("t")
    assert send_raw(producer, to_q, good(0)).remote_state == Delivery.ACCEPTED

    refused = send_raw(producer, to_q, data)
    assert refused.remote_state == Delivery.REJECTED
    condition = refused.remote.condition
    assert condition is not None and condition.name == DECODE_ERROR
    assert condition.description.startswith("malformed message: ")
    assert words in condition.description
    again = send_raw(producer, to_t, data)  # another link of the same connection: the same
    assert again.remote.condition is not None and again.remote.condition.name == DECODE_ERROR

    # The link and the connection go on.
    assert send_raw(producer, to_q, good(1)).remote_state == Delivery.ACCEPTED
    assert send_raw(producer, to_t, good(2)).remote_state == Delivery.ACCEPTED
    received = wait_received(consumers, seen, 2, flow=10, link=filtered.link)
    assert [d for d, _ in received] == [good(0), good(1)]  # forwarded byte for byte
    assert [d for d, _ in wait_received(consumers, all_seen, 1, flow=10,
                                        link=everything.link)] == [good(2)]
    assert nothing_more(consumers, filtered)
    assert nothing_more(consumers, everything)
    # The filtered consumer never met the malformed message: no evaluation error.
    errors = [consumer.filter.filter_set.stats.errors for consumer in _consumers(broker, "q")
              if consumer.filter is not None]
    assert errors == [0]
    producer.close()
    consumers.close()


def _consumers(broker: RunningBroker, queue: str) -> list[Consumer]:
    """A queue's consumers (white-box: the filters' error counts are not on the wire)."""
    node = broker.broker.registry.nodes[queue]
    assert isinstance(node, Queue)
    return node.consumers


def test_many_malformed_messages_in_a_row_on_one_link(broker: RunningBroker) -> None:
    producer = connect(broker.url)
    sender = producer.create_sender("q")
    for data, words in MALFORMED.values():
        outcome = send_raw(producer, sender, data)
        assert outcome.remote.condition is not None
        assert words in outcome.remote.condition.description
    assert send_raw(producer, sender, good(9)).remote_state == Delivery.ACCEPTED
    consumers = connect(broker.url)
    _, seen = raw_receiver(consumers, "q", credit=10)
    assert [d for d, _ in wait_received(consumers, seen, 1)] == [good(9)]
    producer.close()
    consumers.close()
