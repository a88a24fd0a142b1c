"""Relay mode in front of our own broker: pushdown and reconnecting (no RabbitMQ needed)."""

from __future__ import annotations

import contextlib
import threading
import time

from proton import Described, Message, Timeout, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection

from broker.config import BrokerConfig
from broker.server import Broker

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
