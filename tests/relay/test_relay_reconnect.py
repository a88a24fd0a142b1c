"""Relay mode in front of our own broker: pushdown and reconnecting (no RabbitMQ needed)."""

from __future__ import annotations

import contextlib
import threading
import time

from proton import (
    Condition,
    Described,
    Endpoint,
    Event,
    Handler,
    Message,
    Session,
    Timeout,
    symbol,
)
from proton.reactor import Container, Filter
from proton.utils import BlockingConnection

from filtex_broker.config import BrokerConfig
from filtex_broker.server import Broker

from .relay_rabbit import free_port
from .relay_support import RelayFactory

SELECTOR = Filter({symbol("jms-selector"): Described(
    symbol("apache.org:selector-filter:string"), "even = TRUE")})


def _upstream(port: int) -> tuple[Broker, threading.Thread]:
    broker = Broker(BrokerConfig(listen=(("127.0.0.1", port),), container_id="upstream"))
    return broker, broker.start_in_thread()


def _stop(broker: Broker, thread: threading.Thread) -> None:
    broker.stop()
    thread.join(30)
    assert not thread.is_alive()


def _publish(port: int, start: int, count: int) -> None:
    conn = BlockingConnection(f"127.0.0.1:{port}", timeout=20)
    sender = conn.create_sender("orders")
    for i in range(start, start + count):
        sender.send(Message(id=i, body=f"m{i}", properties={"even": i % 2 == 0}))
    conn.close()


def _wait_for(predicate: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_selector_is_pushed_down_and_links_survive_an_upstream_restart(
    relay_factory: RelayFactory,
) -> None:
    port = free_port()
    upstream, thread = _upstream(port)
    relay = relay_factory(f"amqp://127.0.0.1:{port}")
    conn = BlockingConnection(relay.address, timeout=20)
    receiver = conn.create_receiver("orders", options=SELECTOR, credit=20)
    _wait_for(lambda: "relay consumer" in relay.log())
    _publish(port, 1, 10)
    got = []
    for _ in range(5):
        message = receiver.receive(timeout=10)
        got.append(message.id)
        receiver.accept()
    assert got == [2, 4, 6, 8, 10]
    assert "selector pushdown on" in relay.log()  # our broker offers APACHE.ORG:SELECTOR
    # The upstream filtered: the odd ones are still queued there, untouched.
    node = upstream.registry.nodes["orders"]
    deadline = time.monotonic() + 20
    while node.depth() != 5:  # the client's accepts go out while it processes
        assert time.monotonic() < deadline, f"depth {node.depth()}"
        with contextlib.suppress(Timeout):
            conn.wait(lambda: node.depth() == 5, timeout=0.2)

    _stop(upstream, thread)
    _wait_for(lambda: "reconnecting in" in relay.log())
    upstream, thread = _upstream(port)  # same port, empty (in-memory) broker
    try:
        _wait_for(lambda: relay.log().count("selector pushdown on") >= 2)
        _publish(port, 11, 10)
        later = []
        for _ in range(5):
            message = receiver.receive(timeout=10)
            later.append(message.id)
            receiver.accept()
        assert later == [12, 14, 16, 18, 20]  # the same downstream link, never detached
        conn.close()
    finally:
        _stop(upstream, thread)


class _EndsSessions(Handler):
    """An upstream that sends one message on every link the relay consumes from, then ends the
    first such link's session with an error while that message is unsettled (RabbitMQ ends
    each session with ``amqp:internal-error: shutdown`` before it drops its connections)."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port
        self.ended = threading.Event()
        """The relay answered the session end."""
        self.links = 0

    def on_reactor_init(self, event: Event) -> None:
        event.container.listen(f"127.0.0.1:{self.port}")

    def on_connection_remote_open(self, event: Event) -> None:
        if event.connection.state & Endpoint.LOCAL_UNINIT:
            event.connection.open()

    def on_session_remote_open(self, event: Event) -> None:
        if event.session.state & Endpoint.LOCAL_UNINIT:
            event.session.open()

    def on_link_remote_open(self, event: Event) -> None:
        link = event.link
        if link.state & Endpoint.LOCAL_UNINIT:
            link.source.copy(link.remote_source)
            link.target.copy(link.remote_target)
            link.open()

    def on_link_flow(self, event: Event) -> None:
        link = event.link
        if not link.is_sender or link.credit <= 0 or link.unsettled:
            return
        self.links += 1
        link.delivery(b"%d" % self.links)
        link.send(Message(id="m1", body="m1").encode())
        link.advance()
        if self.links == 1:  # the relay has it (and sends it on) before its session ends
            session = link.session
            event.container.schedule(0.5, _EndSession(session))

    def on_session_remote_close(self, event: Event) -> None:
        if event.session.state & Endpoint.LOCAL_ACTIVE:
            event.session.close()
        self.ended.set()


class _EndSession(Handler):
    """Ends a session, with the error RabbitMQ ends its sessions with when it stops."""

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session

    def on_timer_task(self, event: Event) -> None:
        self.session.condition = Condition("amqp:internal-error", "shutdown")
        self.session.close()


def test_a_session_the_upstream_ends_is_an_upstream_loss(relay_factory: RelayFactory) -> None:
    """The upstream ends the session of a link whose message the client holds: the client's
    outcome is settled locally only (the upstream's delivery went with its session) and the
    message comes again once the relay has reconnected."""
    port = free_port()
    upstream = _EndsSessions(port)
    container = Container(upstream)
    thread = threading.Thread(target=container.run, daemon=True)
    thread.start()
    try:
        relay = relay_factory(f"amqp://127.0.0.1:{port}")
        conn = BlockingConnection(relay.address, timeout=20)
        receiver = conn.create_receiver("orders", credit=5)
        assert receiver.receive(timeout=10).id == "m1"
        assert upstream.ended.wait(10)
        receiver.accept()  # for a delivery the upstream's session end took with it
        again = receiver.receive(timeout=15)  # once the relay has reconnected
        assert again.id == "m1"
        receiver.accept()
        assert relay.process.poll() is None, relay.log()
        assert "ended a session" in relay.log()
        conn.close()
    finally:
        container.stop()
        thread.join(10)
