"""A tiny AMQP peer for replay tests: listens, receives raw messages, settles them as told."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

from proton import Condition, Delivery, Handler
from proton.handlers import MessagingHandler
from proton.reactor import Container

#: Decides a delivery's outcome from (its bytes, how many arrived before): an outcome
#: (Delivery.ACCEPTED, RELEASED, REJECTED), "drop" to close the connection with an error
#: instead, or None to leave it unsettled.
Policy = Callable[[bytes, int], Any]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Sink(MessagingHandler):
    """Accepts everything unless ``policy`` says otherwise; records the bytes it got."""

    def __init__(self, port: int, policy: Policy | None = None) -> None:
        super().__init__(prefetch=50, auto_accept=False, auto_settle=True)
        self.url = f"127.0.0.1:{port}"
        self.policy = policy or (lambda data, seen: Delivery.ACCEPTED)
        self.received: list[bytes] = []
        self.accepted: list[bytes] = []
        self.addresses: set[str] = set()
        self.ready = threading.Event()
        self.container: Container | None = None
        self.acceptor: Any = None

    def on_start(self, event: Any) -> None:
        self.acceptor = event.container.listen(self.url)
        self.ready.set()

    def on_link_opening(self, event: Any) -> None:
        if event.link.remote_target.address:
            self.addresses.add(event.link.remote_target.address)
        event.link.target.address = event.link.remote_target.address

    def on_delivery(self, event: Any) -> None:
        delivery, link = event.delivery, event.link
        if not link.is_receiver or delivery.partial:
            return
        data = bytes(link.recv(delivery.pending))
        link.advance()
        outcome = self.policy(data, len(self.received))
        self.received.append(data)
        if outcome == "drop":
            event.connection.condition = Condition("amqp:internal-error", "test drop")
            event.connection.close()
            return
        if outcome is None:
            return
        if outcome == Delivery.ACCEPTED:
            self.accepted.append(data)
        delivery.update(outcome)
        delivery.settle()


def run_sink(sink: Sink) -> tuple[Container, threading.Thread]:
    container = Container(sink)
    thread = threading.Thread(target=container.run, name="test-sink", daemon=True)
    thread.start()
    assert sink.ready.wait(10)
    return container, thread


def stop_sink(container: Container, thread: threading.Thread, sink: Sink) -> None:
    def stop() -> None:
        sink.acceptor.close()
        container.stop()

    container.schedule(0, _Call(stop))
    thread.join(10)


class _Call(Handler):
    def __init__(self, function: Callable[[], None]) -> None:
        super().__init__()
        self.function = function

    def on_timer_task(self, event: Any) -> None:
        self.function()


class _Fetch(MessagingHandler):
    def __init__(self, url: str, address: str, idle: float, credit: int = 100,
                 count: int | None = None) -> None:
        super().__init__(prefetch=credit, auto_accept=False, auto_settle=True)
        self.url, self.address, self.idle, self.count = url, address, idle, count
        self.received: list[bytes] = []
        self.last = 0.0
        self.connection: Any = None

    def on_start(self, event: Any) -> None:
        import time

        self.connection = event.container.connect(self.url)
        event.container.create_receiver(self.connection, self.address)
        self.last = time.monotonic()
        event.container.schedule(0.1, self)

    def on_delivery(self, event: Any) -> None:
        import time

        delivery, link = event.delivery, event.link
        if delivery.partial:
            return
        self.received.append(bytes(link.recv(delivery.pending)))
        link.advance()
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
        self.last = time.monotonic()
        if self.count is not None and len(self.received) >= self.count:
            self.connection.close()
            self.idle = 0.0  # the timer stops at its next tick

    def on_timer_task(self, event: Any) -> None:
        import time

        if time.monotonic() - self.last >= self.idle:
            self.connection.close()
        else:
            event.container.schedule(0.1, self)


def fetch_raw(url: str, address: str, idle: float = 2.0, credit: int = 100,
              count: int | None = None) -> list[bytes]:
    """Every message waiting at ``address``, as raw bytes (python-qpid-proton's Message cannot
    decode every valid message: described map keys, for one), accepting each, until none came
    for ``idle`` seconds (or ``count`` came)."""
    handler = _Fetch(url, address, idle, credit, count)
    Container(handler).run()
    return handler.received
