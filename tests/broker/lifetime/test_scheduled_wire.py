"""Scheduled delivery over the wire: the message annotations x-opt-delivery-delay (ms from the
broker's arrival) and x-opt-delivery-time (a timestamp), as Artemis reads them and Qpid JMS
sends them (AMQP 1.0 part 3 §3.2.3, message annotations); with a header ttl (part 3 §3.2.1)
a scheduled message can expire before it is due. The broker offers the connection capability
DELAYED_DELIVERY (part 2 §2.7.1, open: offered-capabilities) unless it relays.

A scheduled message is held (counted in the queue's depth) and offered to no consumer or
browser until due; then it joins the end of the queue. "Not before" is checked over a window
clearly shorter than the delay, and by the wall-clock time of arrival against the due time;
"after" by waiting generously.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from proton import symbol
from proton.reactor import Copy
from proton.utils import BlockingConnection

from filtex_broker.config import BrokerConfig
from filtex_broker.nodes.queue import Queue
from filtex_broker.nodes.topic import Topic
from filtex_broker.server import Broker

from ..broker_clients import (
    TIMEOUT,
    RunningBroker,
    TopicOption,
    connect,
    nothing_more,
    send,
    wait_for,
)
from .lifetime_clients import (
    DELIVERY_DELAY,
    NODE,
    REASON,
    annotations_of,
    dead_letters,
    none_until,
    now_ms,
    serving,
    take,
    timed,
)

SLACK = 0.002
"""Seconds: the broker keeps times in whole ms, truncated."""


@pytest.fixture(scope="module")
def shared() -> Iterator[RunningBroker]:
    with serving() as running:
        yield running


def test_scheduled_messages_are_held_then_delivered_in_due_order(shared: RunningBroker) -> None:
    """Sent in this order: a delay of 1500 ms; a delivery time 1000 ms ahead; a delivery time
    in the past (at once); a plain one; a delay of 1000 ms with a ttl of 300 ms (expires while
    held: never delivered, dead-lettered). The consumer, attached first with credit, gets the
    past and the plain at once, nothing within 0.8 s, then the two in their due order."""
    case = address = "lifetime.scheduled"
    registry = shared.broker.registry
    conn = connect(shared.url)
    receiver = conn.create_receiver(address, credit=10)
    sender = conn.create_sender(address)
    began, began_wall = time.monotonic(), time.time()
    start = now_ms()
    send(sender, timed(case, "delay-1500", delay=1500), timed(case, "at-1000", at=start + 1000),
         timed(case, "at-past", at=start - 10_000), timed(case, "plain"))
    queue = registry.lookup(address)
    assert isinstance(queue, Queue)
    assert (queue.depth(), queue.held_back()) == (4, 2)  # the two held count in the depth
    send(sender, timed(case, "delay-1000-ttl-300", delay=1000, ttl=300))

    assert [m.body for m in take(receiver, 2)] == ["at-past", "plain"]
    assert none_until(receiver, began + 0.8), "a scheduled message came early"
    later = []
    for _ in range(2):
        later.append((receiver.receive(timeout=TIMEOUT), time.time()))
        receiver.accept()
    assert [m.body for m, _ in later] == ["at-1000", "delay-1500"]
    assert later[0][1] >= start / 1000 + 1.0 - SLACK
    assert later[1][1] >= began_wall + 1.5 - SLACK
    wait_for(lambda: registry.expired.get(address) == 1, "the held message did not expire")
    assert nothing_more(conn, receiver)
    assert (queue.depth(), queue.held_back()) == (0, 0)

    (dead,) = dead_letters(conn, case, 1)
    assert dead.body == "delay-1000-ttl-300"
    # The producer's annotations stay; a dead letter is not held again for them.
    assert annotations_of(dead)[DELIVERY_DELAY] == 1000
    assert (annotations_of(dead)[REASON], annotations_of(dead)[NODE]) == ("expired", address)
    conn.close()


def test_a_browser_does_not_see_a_scheduled_message_until_it_is_due(
        shared: RunningBroker) -> None:
    case = address = "lifetime.browsed"
    conn = connect(shared.url)
    began = time.monotonic()
    send(conn.create_sender(address), timed(case, "delay-1000", delay=1000),
         timed(case, "plain"))
    browser = conn.create_receiver(address, options=Copy(), credit=10, name="browser")
    assert [m.body for m in take(browser, 1)] == ["plain"]
    assert none_until(browser, began + 0.6), "the browser saw a scheduled message early"
    assert [m.body for m in take(browser, 1)] == ["delay-1000"]  # offered once due
    consumer = conn.create_receiver(address, credit=10, name="consumer")
    assert [m.body for m in take(consumer, 2)] == ["plain", "delay-1000"]  # browsing took none
    assert nothing_more(conn, consumer)
    conn.close()


def test_a_scheduled_message_published_to_a_topic_is_held_in_each_subscription(
        shared: RunningBroker) -> None:
    """Two subscribers with credit: neither gets it within 0.6 s (a drain meanwhile is answered
    at once: a held message is not one the subscriber can have), both get it once due."""
    case = address = "lifetime.scheduled.topic"
    conn = connect(shared.url)
    subscribers = [conn.create_receiver(address, options=TopicOption(), credit=10, name=name)
                   for name in ("first", "second")]
    began = time.monotonic()
    send(conn.create_sender(address, options=TopicOption()),
         timed(case, "delay-1000", delay=1000), timed(case, "plain"))
    for receiver in subscribers:
        assert [m.body for m in take(receiver, 1)] == ["plain"]
        assert nothing_more(conn, receiver)
        receiver.flow(10)  # the drain took the credit
    topic = shared.broker.registry.lookup(address)
    assert isinstance(topic, Topic)
    assert [s.queue.held_back() for s in topic.subscriptions] == [1, 1]
    assert all(none_until(receiver, began + 0.6) for receiver in subscribers)
    for receiver in subscribers:
        assert [m.body for m in take(receiver, 1)] == ["delay-1000"]
        assert nothing_more(conn, receiver)
    conn.close()


def offered(conn: BlockingConnection) -> list[symbol]:
    """The capabilities the broker's open offered."""
    assert conn.conn is not None
    return list(conn.conn.remote_offered_capabilities or [])


def test_the_broker_offers_delayed_delivery(shared: RunningBroker) -> None:
    conn = connect(shared.url)
    capabilities = offered(conn)
    assert "DELAYED_DELIVERY" in capabilities
    assert all(isinstance(c, symbol) for c in capabilities)
    conn.close()


def test_a_relay_does_not_offer_delayed_delivery(shared: RunningBroker) -> None:
    """A relay leaves scheduling to the broker it relays to, which decides for itself."""
    relay = Broker(BrokerConfig(listen=(("127.0.0.1", 0),), upstream=f"amqp://{shared.url}",
                                shutdown_grace=0.5))
    thread = relay.start_in_thread()
    try:
        host, port = relay.addresses[0]
        conn = connect(f"{host}:{port}")
        capabilities = offered(conn)
        assert "ANONYMOUS-RELAY" in capabilities
        assert "DELAYED_DELIVERY" not in capabilities
        conn.close()
    finally:
        relay.stop()
        thread.join(60)
    assert not thread.is_alive()
