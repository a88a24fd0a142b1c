"""Test clients for the broker: real python-qpid-proton connections over real sockets.

``BlockingConnection`` does the waiting (on events, with timeouts: no sleeps).
``RawReceiver`` keeps each delivery's bytes and ``send_raw`` sends bytes as
given, because ``proton.Message`` hides absent fields and has no footer.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from proton import Data, Delivery, Described, Endpoint, Handler, Message, Terminus, symbol
from proton.reactor import Filter, LinkOption
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender, LinkDetached

from filtex_broker.server import Broker
from filtex_proton.amqp.message import RawMessageView, encode_message
from filtex_proton.amqp.view import Section

TIMEOUT = 30.0
HIGH_DESCRIPTORS = 1100
"""Files a test holds open so that new sockets and pipes get descriptors above 1023."""
"""Generous: the suite must pass on a loaded two-core machine."""

_tags = itertools.count(1)


@dataclass
class RunningBroker:
    """A broker serving in a background thread; ``url`` is its first listener."""

    broker: Broker
    thread: threading.Thread

    @property
    def url(self) -> str:
        host, port = self.broker.addresses[0]
        return f"{host}:{port}"


BrokerFactory = Callable[..., RunningBroker]
LinkOptions = LinkOption | list[LinkOption] | None
"""What proton's ``create_receiver`` takes as ``options``: one option or a list."""


class TopicOption(LinkOption):
    """The Qpid JMS node capability on the source or target: this address is a topic."""

    def apply(self, link: Any) -> None:
        terminus = link.source if link.is_receiver else link.target
        terminus.capabilities.put_array(False, Data.SYMBOL)
        terminus.capabilities.enter()
        terminus.capabilities.put_symbol("topic")
        terminus.capabilities.exit()


def connect(url: str, **kwargs: Any) -> BlockingConnection:
    return BlockingConnection(url, timeout=TIMEOUT, **kwargs)


def sql(text: str, key: str = "sql") -> Filter:
    """A source filter option holding one SQL filter (python-proton takes one Filter per link)."""
    return Filter({symbol(key): Described(symbol("amqp:sql-filter"), text)})


def filters(entries: Mapping[str, Described]) -> Filter:
    """A filter option holding several filters (one map: two Filter options corrupt it)."""
    return Filter({symbol(k): v for k, v in entries.items()})


def message(body: Any = None, **properties: Any) -> Message:
    """A message with application properties."""
    return Message(body=body, properties=properties or None)


def send(sender: BlockingSender, *messages: Message) -> None:
    for m in messages:
        sender.send(m, timeout=TIMEOUT)


def send_raw(connection: BlockingConnection, sender: BlockingSender, data: bytes) -> Delivery:
    """Send bytes as one delivery and wait for the broker's outcome."""
    link = sender.link
    connection.wait(lambda: link.credit > 0, timeout=TIMEOUT, msg="waiting for credit")
    delivery = link.delivery(f"raw-{next(_tags)}")
    link.stream(data)
    link.advance()
    connection.wait(lambda: delivery.settled, timeout=TIMEOUT, msg="waiting for the outcome")
    return delivery


def bodies(receiver: BlockingReceiver, count: int) -> list[Any]:
    """Receive ``count`` messages, accept each, return their bodies in order."""
    out = []
    for _ in range(count):
        out.append(receiver.receive(timeout=TIMEOUT).body)
        receiver.accept()
    return out


def nothing_more(connection: BlockingConnection, receiver: BlockingReceiver) -> bool:
    """True when the broker has nothing more for the receiver: drain it and look.

    Drain is answered by the broker (credit consumed or returned), so this is a
    real synchronisation point, not a sleep.
    """
    link = receiver.link
    if receiver.fetcher is not None and receiver.fetcher.has_message:
        return False
    link.drain(0)
    connection.wait(lambda: not link.draining(), timeout=TIMEOUT, msg="waiting for drain")
    return receiver.fetcher is None or not receiver.fetcher.has_message


class RawReceiver(Handler):
    """A receiver link handler that keeps deliveries as bytes (and leaves them unsettled)."""

    def __init__(self, *, settle: bool = True) -> None:
        self.settle = settle
        self.received: list[tuple[bytes, Delivery]] = []
        self.events: list[str] = []
        self.remote_source_type: int | None = None

    def on_link_remote_open(self, event: Any) -> None:
        self.events.append("attach")
        self.remote_source_type = event.link.remote_source.type

    def on_link_remote_close(self, event: Any) -> None:
        self.events.append("detach")
        if event.link.state & Endpoint.LOCAL_ACTIVE:
            event.link.close()

    def on_link_remote_detach(self, event: Any) -> None:
        self.events.append("detach (not closed)")

    def on_delivery(self, event: Any) -> None:
        delivery = event.delivery
        if not delivery.readable or delivery.partial:
            return
        link = event.link
        data = link.recv(delivery.pending)
        link.advance()
        self.received.append((bytes(data), delivery))
        if self.settle:
            delivery.update(Delivery.ACCEPTED)
            delivery.settle()

    def views(self) -> list[RawMessageView]:
        return [RawMessageView(data) for data, _ in self.received]


def raw_receiver(
    connection: BlockingConnection,
    address: str | None,
    *,
    credit: int = 0,
    options: LinkOptions = None,
    settle: bool = True,
    name: str | None = None,
    dynamic: bool = False,
) -> tuple[BlockingReceiver, RawReceiver]:
    handler = RawReceiver(settle=settle)
    receiver = connection.create_receiver(
        address, credit=credit, handler=handler, options=options, name=name, dynamic=dynamic
    )
    return receiver, handler


def wait_received(
    connection: BlockingConnection, handler: RawReceiver, count: int, *, flow: int | None = None,
    link: Any = None,
) -> list[tuple[bytes, Delivery]]:
    if flow is not None and link is not None:
        link.flow(flow)
    connection.wait(lambda: len(handler.received) >= count, timeout=TIMEOUT,
                    msg=f"waiting for {count} messages")
    return handler.received


def refusal_of(
    connection: BlockingConnection,
    address: str | None,
    options: LinkOptions = None,
    *,
    name: str | None = None,
) -> tuple[RawReceiver, Any]:
    """Attach a receiver that the broker should refuse; the events seen and the link."""
    handler = RawReceiver()
    try:
        receiver = connection.create_receiver(address, handler=handler, options=options, name=name)
    except LinkDetached as exc:
        link = exc.link
    else:
        link = receiver.link
        connection.wait(lambda: "detach" in handler.events, timeout=TIMEOUT,
                        msg="waiting for the refusal's detach")
    return handler, link


def is_null_source(handler: RawReceiver) -> bool:
    unspecified: int = Terminus.UNSPECIFIED
    return handler.remote_source_type == unspecified


def decoded_bodies(received: Iterable[tuple[bytes, Delivery]]) -> list[Any]:
    """The bodies of raw deliveries (decoded with proton.Message, for convenience)."""
    out = []
    for data, _ in received:
        m = Message()
        m.decode(data)
        out.append(m.body)
    return out


def encoded(**sections: Any) -> bytes:
    """``encode_message`` with exact control over which fields are present."""
    return encode_message(**sections)


def app_property(view: RawMessageView, name: str) -> Any:
    return view.field(Section.APPLICATION_PROPERTIES, name)


POISON = "poison"
"""The application property that makes every SQL filter fail under :func:`failing_filters`."""


def failing_filters(monkeypatch: Any) -> None:
    """Make every SQL filter raise on a message that has the application property POISON.

    The broker's door check rejects every message a filter could fail to read,
    so no real message induces an evaluation error any more; the
    error accounting (spec §7.2) is tested with this stand-in. The broker runs
    in this process, so patching the class reaches it.
    """
    from filtex_proton.filters.sql import SqlFilter

    real = SqlFilter._evaluate

    def failing(self: SqlFilter, view: Any, ctx: Any) -> bool | None:
        if view.has_field(Section.APPLICATION_PROPERTIES, POISON):
            raise RuntimeError("an induced evaluation error")
        return real(self, view, ctx)

    monkeypatch.setattr(SqlFilter, "_evaluate", failing)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    """Poll ``condition`` until it holds; fail with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@dataclass
class DiskFull:
    """While ``full``, the durable store's fsync fails with ENOSPC (the ``disk_full`` fixture)."""

    full: bool = False
