"""The door check in relay mode: the relay checks what its producers send as our own nodes do.

The upstream is our own broker (in this process); the relay a ``filtex-broker
--upstream`` process. A malformed message is rejected by the relay with
``amqp:decode-error`` naming the section, never forwarded upstream; the link
and the connection carry the next message on, on a named and an anonymous link.
"""

from __future__ import annotations

import itertools

import pytest
from proton import Delivery
from proton.utils import BlockingConnection, BlockingSender

from filtex_broker.server import Broker
from filtex_proton.amqp.message import RawMessageView, encode_message
from filtex_proton.amqp.view import Section

from .relay_support import RelayFactory

TIMEOUT = 20.0
_tags = itertools.count()

#: name -> (bytes, words the rejection's description must contain)
MALFORMED: dict[str, tuple[bytes, str]] = {
    "odd application-properties": (
        encode_message(properties={"to": "q"}) + b"\x00\x53\x74\xc1\x04\x03\x40\x40\x40",
        "application-properties section: map with an odd number of elements (3)"),
    "subject not UTF-8": (
        encode_message(properties={"to": "q", "subject": "ab"}).replace(b"ab", b"\xff\xfe"),
        "properties section: invalid UTF-8"),
    "a list in application-properties": (
        encode_message(properties={"to": "q"}, application_properties={"x": [1]}),
        "application-properties section: value of 'x' is a list"),
    "header ttl a string": (
        b"\x00\x53\x70\xc0\x06\x03\x40\x40\xa1\x01t" + encode_message(properties={"to": "q"}),
        "header section: field ttl is string, not uint"),
    "bad footer": (encode_message(properties={"to": "q"}, body="b")
                   + b"\x00\x53\x78\xc1\x02\x01\x40", "footer section: map with an odd number"),
    "an unknown section": (b"\x00\x53\x7a\x45", "message layout"),
}


def _send(conn: BlockingConnection, sender: BlockingSender, data: bytes) -> Delivery:
    link = sender.link
    conn.wait(lambda: link.credit > 0, timeout=TIMEOUT, msg="waiting for credit")
    delivery = link.delivery(f"m{next(_tags)}")
    link.stream(data)
    link.advance()
    conn.wait(lambda: delivery.settled, timeout=TIMEOUT, msg="waiting for the outcome")
    return delivery


@pytest.mark.parametrize("anonymous", [False, True], ids=["named link", "anonymous relay"])
def test_the_relay_rejects_malformed_messages_and_goes_on(
    upstream: Broker, relay_factory: RelayFactory, anonymous: bool
) -> None:
    host, port = upstream.addresses[0]
    relay = relay_factory(f"amqp://{host}:{port}")
    conn = BlockingConnection(relay.address, timeout=TIMEOUT)
    try:
        sender = conn.create_sender(None if anonymous else "q")
        for name, (data, words) in MALFORMED.items():
            outcome = _send(conn, sender, data)
            assert outcome.remote_state == Delivery.REJECTED, name
            condition = outcome.remote.condition
            assert condition is not None and condition.name == "amqp:decode-error", name
            assert words in condition.description, name
            good = encode_message(properties={"to": "q"}, application_properties={"n": name})
            assert _send(conn, sender, good).remote_state == Delivery.ACCEPTED, name
    finally:
        conn.close()
    # Upstream got exactly the good ones (stamped with the relay's origin annotation).
    consumer = BlockingConnection(f"{host}:{port}", timeout=TIMEOUT)
    try:
        receiver = consumer.create_receiver("q", credit=len(MALFORMED) + 1)
        names = []
        for _ in MALFORMED:
            names.append(receiver.receive(timeout=TIMEOUT).properties["n"])
            receiver.accept()
        assert names == list(MALFORMED)
        receiver.link.drain(0)
        consumer.wait(lambda: not receiver.link.draining(), timeout=TIMEOUT, msg="drain")
        assert receiver.fetcher is None or not receiver.fetcher.has_message
    finally:
        consumer.close()


def test_what_the_relay_forwards_passes_the_check_upstream() -> None:
    """The origin stamp rewrites message-annotations: the result must still be well-formed."""
    from filtex_broker.relay.origin import OriginStamp
    from filtex_proton.amqp.validate import validate_message

    data = encode_message(message_annotations={"x-opt-a": 1}, properties={"to": "q"},
                          application_properties={"n": 1}, body="b")
    stamped = OriginStamp("relay-1").stamp(RawMessageView(data), 7)
    view = validate_message(stamped)
    assert view.field(Section.APPLICATION_PROPERTIES, "n") == 1
