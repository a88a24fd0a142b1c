"""Message lifetime in relay mode: the relay forwards ttl, priority (AMQP 1.0 part 3 §3.2.1),
absolute-expiry-time (§3.2.4) and the schedule annotations untouched, holds nothing back itself
and does not offer DELAYED_DELIVERY: the upstream applies its own rules. The upstream is our own
broker (in this process), which does apply them."""

from __future__ import annotations

import time

import pytest
from proton import Message, symbol
from proton.utils import BlockingConnection

from filtex_broker.server import Broker

from .relay_support import RelayFactory

TIMEOUT = 20.0
DELAY = symbol("x-opt-delivery-delay")


def test_the_relay_forwards_lifetime_fields_untouched_and_schedules_nothing(
    upstream: Broker, relay_factory: RelayFactory,
) -> None:
    host, port = upstream.addresses[0]
    relay = relay_factory(f"amqp://{host}:{port}")
    conn = BlockingConnection(relay.address, timeout=TIMEOUT)
    try:
        offered = conn.conn.remote_offered_capabilities or []
        assert symbol("DELAYED_DELIVERY") not in offered
        sender = conn.create_sender("q")
        expiry = int(time.time() * 1000) + 600_000
        sent = Message(body="later", ttl=300.0, priority=7, expiry_time=expiry / 1000,
                       annotations={DELAY: 1500})
        sent_at = time.monotonic()
        sender.send(sent, timeout=TIMEOUT)
    finally:
        conn.close()
    deadline = time.monotonic() + TIMEOUT
    while "q" not in upstream.registry.nodes or upstream.registry.nodes["q"].held_back() != 1:
        assert time.monotonic() < deadline, "the upstream never held the scheduled message"
        time.sleep(0.02)
    consumer = BlockingConnection(f"{host}:{port}", timeout=TIMEOUT)
    try:
        receiver = consumer.create_receiver("q")
        got = receiver.receive(timeout=TIMEOUT)
        took = time.monotonic() - sent_at
        receiver.accept()
    finally:
        consumer.close()
    assert (got.body, got.priority) == ("later", 7)
    # The upstream held it for its delay: it sends the ttl left (§3.2.1), the relay added none.
    assert 300.0 - took - 0.002 <= got.ttl <= 300.0 - 1.5 + 0.002
    assert got.expiry_time == pytest.approx(expiry / 1000)
    assert got.annotations is not None and got.annotations[DELAY] == 1500
