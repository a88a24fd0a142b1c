"""What the stream tests over sockets share: a broker with streams, publishing raw messages,
consumers with RabbitMQ's entries, and reading what they got (number and x-stream-offset)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from proton import Delivery, Described, Message, symbol
from proton.utils import BlockingConnection, BlockingReceiver

from filtex_broker.streams.node import Stream

from ..broker_clients import (
    TIMEOUT,
    BrokerFactory,
    RawReceiver,
    RunningBroker,
    connect,
    filters,
    raw_receiver,
    send_raw,
)
from .stream_helpers import message, number_of, offset_of

STREAMS = ("events.*", "audit")
"""The ``--stream`` patterns every test broker here has."""


def stream_broker(broker_factory: BrokerFactory, **overrides: Any) -> RunningBroker:
    overrides.setdefault("streams", STREAMS)
    return broker_factory(**overrides)


def stream_of(running: RunningBroker, address: str) -> Stream:
    """The broker's node at ``address`` (the broker runs in this process), which must be a
    stream; read only between exchanges the test waits for."""
    node = running.broker.registry.lookup(address)
    assert isinstance(node, Stream), node
    return node


def offset_spec(value: Any) -> Described:
    return Described(symbol("rabbitmq:stream-offset-spec"), value)


def stream_filter(values: Any) -> Described:
    return Described(symbol("rabbitmq:stream-filter"), values)


def match_unfiltered(value: bool) -> Described:
    return Described(symbol("rabbitmq:stream-match-unfiltered"), value)


def publish(connection: BlockingConnection, address: str, numbers: Iterable[int],
            padding: int = 0, **annotations: Any) -> None:
    """Send messages numbered ``numbers`` (application properties ``n`` and ``region``, EU for
    odd numbers), each accepted before the next is sent."""
    sender = connection.create_sender(address)
    for n in numbers:
        delivery = send_raw(connection, sender, message(n, padding, **annotations))
        assert delivery.remote_state == Delivery.ACCEPTED
    sender.close()


def consumer(connection: BlockingConnection, address: str, credit: int = 0,
             name: str | None = None, **entries: Described,
             ) -> tuple[BlockingReceiver, RawReceiver]:
    """A receiver on ``address`` with these filter-set entries (none: no filter map); two on
    one connection and address need their own ``name``."""
    options = filters(entries) if entries else None
    return raw_receiver(connection, address, credit=credit, options=options, name=name)


def received(connection: BlockingConnection, handler: RawReceiver,
             count: int) -> list[tuple[int, int]]:
    """Wait for ``count`` deliveries; (number, x-stream-offset) of each so far."""
    connection.wait(lambda: len(handler.received) >= count, timeout=TIMEOUT,
                    msg=f"waiting for {count} messages")
    return [(number_of(data), offset_of(data)) for data, _ in handler.received]


def drained(connection: BlockingConnection, receiver: BlockingReceiver,
            handler: RawReceiver) -> list[tuple[int, int]]:
    """Drain the link (the broker sends what it has, then gives the rest of the credit back):
    (number, x-stream-offset) of everything received."""
    link = receiver.link
    link.drain(0)
    connection.wait(lambda: not link.draining(), timeout=TIMEOUT, msg="waiting for drain")
    return [(number_of(data), offset_of(data)) for data, _ in handler.received]


def read_all(url: str, address: str, **entries: Described) -> list[tuple[int, int]]:
    """Everything a new consumer with these entries gets now, on a connection of its own."""
    connection = connect(url)
    try:
        receiver, handler = consumer(connection, address, **entries)
        receiver.link.flow(1000)
        return drained(connection, receiver, handler)
    finally:
        connection.close()


def decoded(handler: RawReceiver, index: int) -> Message:
    data, _ = handler.received[index]
    decoded_message = Message()
    decoded_message.decode(data)
    return decoded_message


def read_everything(url: str, address: str, **entries: Described) -> list[tuple[int, int]]:
    """Everything a new consumer with these entries gets, in rounds of drained credit until a
    round brings nothing (more than :func:`read_all`'s one round)."""
    connection = connect(url)
    try:
        receiver, handler = consumer(connection, address, **entries)
        link = receiver.link
        while True:
            before = len(handler.received)
            link.drain(500)
            connection.wait(lambda: not link.draining(), timeout=TIMEOUT,
                            msg="waiting for drain")
            if len(handler.received) == before:
                break
        return [(number_of(data), offset_of(data)) for data, _ in handler.received]
    finally:
        connection.close()


def restart(broker_factory: BrokerFactory, running: RunningBroker,
            **overrides: Any) -> RunningBroker:
    """Stop a broker cleanly and start another with ``overrides`` (its data directory)."""
    running.broker.stop()
    running.thread.join(TIMEOUT)
    assert not running.thread.is_alive()
    return stream_broker(broker_factory, **overrides)


def four_read(running: RunningBroker, address: str = "events.v", **connection: Any,
              ) -> tuple[BlockingConnection, BlockingReceiver, RawReceiver]:
    """Offsets 0-9 in ``address``; a consumer ``reader`` from ``first`` that took 0-3 with its
    four credits and waits with none (position 4, lag 6). The connection (``connect``'s
    keywords) is left open, so that the consumer stays attached."""
    opened = connect(running.url, **connection)
    publish(opened, address, range(10))
    receiver, handler = consumer(opened, address, credit=4, name="reader",
                                o=offset_spec("first"))
    assert [offset for _, offset in received(opened, handler, 4)] == [0, 1, 2, 3]
    opened.wait(lambda: stream_of(running, address).delivered == 4, timeout=TIMEOUT)
    return opened, receiver, handler
