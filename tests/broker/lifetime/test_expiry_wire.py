"""Expiry over the wire: AMQP 1.0 part 3 §3.2.1 (header ttl, counted from the broker's arrival)
and §3.2.4 (properties absolute-expiry-time); part 3 §3.4.4 (released) for a message that
expires while delivered.

An expired message is never delivered; it leaves its queue or topic subscription at its expiry
whether or not anyone consumes, dead-lettered (message annotations x-opt-dead-letter-reason
``expired``, -description, -node) or, with ``--dead-letter-address ''``, dropped; counted in
``registry.expired``. Two brokers serve the module: one dead-lettering to ``DLQ`` (the
default), one dropping.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from proton import Delivery, Message

from filtex_broker.nodes.budget import PER_ENTRY, bytes_cost
from filtex_broker.nodes.queue import Queue
from filtex_broker.nodes.topic import Topic
from filtex_proton.amqp import RawMessageView, Section

from ..broker_clients import (
    RunningBroker,
    TopicOption,
    connect,
    decoded_bodies,
    nothing_more,
    raw_receiver,
    send,
    wait_for,
    wait_received,
)
from .lifetime_clients import (
    DEAD_LETTERS,
    DESCRIPTION,
    NODE,
    REASON,
    annotations_of,
    dead_letters,
    detach,
    drained,
    expired_at,
    now_ms,
    same_message,
    serving,
    take,
    timed,
)


@pytest.fixture(scope="module")
def shared() -> Iterator[RunningBroker]:
    """Dead-letters to DLQ (the default)."""
    with serving() as running:
        yield running


@pytest.fixture(scope="module")
def dropping() -> Iterator[RunningBroker]:
    """``--dead-letter-address ''``: expired messages are dropped."""
    with serving(dead_letter_address="") as running:
        yield running


def queue_of(running: RunningBroker, address: str) -> Queue:
    node = running.broker.registry.lookup(address)
    assert isinstance(node, Queue)
    return node


def the_mix(case: str, start: int) -> list[Message]:
    """No ttl; ttl 500 ms; ttl 60 s; absolute-expiry-time 10 s ago; and 60 s ahead."""
    return [timed(case, "plain"), timed(case, "ttl-500", ttl=500),
            timed(case, "ttl-60s", ttl=60_000), timed(case, "expiry-past", expiry=start - 10_000),
            timed(case, "expiry-ahead", expiry=start + 60_000)]


def test_expired_messages_are_never_delivered_and_are_dead_lettered(
        shared: RunningBroker) -> None:
    case = address = "lifetime.mix"
    registry = shared.broker.registry
    conn = connect(shared.url)
    start = now_ms()
    sent = the_mix(case, start)
    send(conn.create_sender(address), *sent)
    sent_by = now_ms()
    # No consumer meanwhile: the broker expires them on its own.
    wait_for(lambda: registry.expired.get(address) == 2, "the two expired messages stayed")

    receiver = conn.create_receiver(address, credit=10)
    assert [m.body for m in take(receiver, 3)] == ["plain", "ttl-60s", "expiry-ahead"]
    assert nothing_more(conn, receiver)

    dead = dead_letters(conn, case, 2)
    # The one already past its absolute expiry goes at the broker's next tick, the ttl one at
    # 500 ms; a dead letter loses its ttl and absolute-expiry-time: it never expires again.
    assert [m.body for m in dead] == ["expiry-past", "ttl-500"]
    by_body = {m.body: m for m in sent}
    for m in dead:
        same_message(m, by_body[m.body])
        assert {k: v for k, v in annotations_of(m).items() if k != DESCRIPTION} == {
            REASON: "expired", NODE: address}
    past, ttl = expired_at(dead[0]), expired_at(dead[1])
    assert past == round(by_body["expiry-past"].expiry_time * 1000)  # §3.2.4: as sent
    assert start + 500 <= ttl <= sent_by + 500  # §3.2.1: from the broker's arrival
    assert registry.expired[address] == 2
    assert queue_of(shared, address).depth() == 0
    conn.close()


def test_without_a_dead_letter_address_expired_messages_are_dropped(
        dropping: RunningBroker) -> None:
    case = address = "lifetime.dropped"
    registry = dropping.broker.registry
    conn = connect(dropping.url)
    send(conn.create_sender(address), *the_mix(case, now_ms()))
    wait_for(lambda: registry.expired.get(address) == 2, "the two expired messages stayed")

    receiver = conn.create_receiver(address, credit=10)
    assert [m.body for m in take(receiver, 3)] == ["plain", "ttl-60s", "expiry-ahead"]
    assert nothing_more(conn, receiver)
    assert registry.lookup(DEAD_LETTERS) is None, "no dead-letter queue was made"
    assert nothing_more(conn, conn.create_receiver(DEAD_LETTERS, credit=10))
    assert registry.expired[address] == 2
    conn.close()


def test_expiry_gives_back_memory_without_any_consumer(dropping: RunningBroker) -> None:
    """Depth, bytes and the broker-wide memory budget (``--max-memory``) fall at expiry."""
    case = address = "lifetime.memory"
    budget = dropping.broker.budget
    registry = dropping.broker.registry
    conn = connect(dropping.url)
    before = budget.accounted
    lasting = [timed(case, f"keep-{k:02}") for k in range(5)]
    fleeting = [timed(case, f"gone-{k:02}" + "x" * 1000, ttl=400) for k in range(20)]
    send(conn.create_sender(address), *fleeting[:10], *lasting, *fleeting[10:])
    queue = queue_of(dropping, address)
    wait_for(lambda: queue.depth() == 5, "the expired messages are still held")
    sizes = [len(m.encode()) for m in lasting]
    assert queue.bytes == sum(sizes)
    assert budget.accounted - before == sum(PER_ENTRY + bytes_cost(size) for size in sizes)
    assert registry.expired[address] == 20
    receiver = conn.create_receiver(address, credit=10)
    assert [m.body for m in take(receiver, 5)] == [m.body for m in lasting]
    assert nothing_more(conn, receiver)
    assert budget.accounted == before
    conn.close()


def test_a_topic_subscriber_without_credit_never_gets_an_expired_message(
        shared: RunningBroker) -> None:
    """One message (ttl 500 ms) published to three subscribers: the one with credit takes it;
    in each of the two without, it expires and is dead-lettered, once per subscription. The
    dead letter's x-opt-dead-letter-node is the topic, which ``registry.expired`` counts too."""
    case = address = "lifetime.ticks"
    registry = shared.broker.registry
    conn = connect(shared.url)
    fast = conn.create_receiver(address, options=TopicOption(), credit=5, name="fast")
    slow = [raw_receiver(conn, address, options=TopicOption(), credit=0, name=f"slow-{k}")
            for k in (1, 2)]
    send(conn.create_sender(address, options=TopicOption()),
         timed(case, "tick", ttl=500), timed(case, "lasting"))
    assert [m.body for m in take(fast, 2)] == ["tick", "lasting"]
    wait_for(lambda: registry.expired.get(address) == 2, "the slow subscriptions kept it")

    for receiver, handler in slow:
        receiver.link.flow(10)
        wait_received(conn, handler, 1)
        drained(conn, receiver)
        assert decoded_bodies(handler.received) == ["lasting"]
    topic = registry.lookup(address)
    assert isinstance(topic, Topic)
    slow_queues = {s.queue.name for s in topic.subscriptions if s.queue.expired == 1}
    assert len(slow_queues) == 2, slow_queues
    assert sum(s.queue.expired for s in topic.subscriptions) == 2  # none in the fast one

    dead = dead_letters(conn, case, 2)
    assert [m.body for m in dead] == ["tick", "tick"]
    assert [annotations_of(m)[NODE] for m in dead] == [address, address]
    assert all(annotations_of(m)[REASON] == "expired" for m in dead)
    assert registry.expired[address] == 2  # counted as the topic's
    conn.close()


def test_a_message_that_expires_while_delivered_is_dead_lettered_when_it_comes_back(
        shared: RunningBroker) -> None:
    """Held unsettled past its ttl, then released (§3.4.4), or its link closed: it is not
    delivered again, though a consumer with credit waits; it is dead-lettered."""
    case = "lifetime.held"
    released, closed = "lifetime.held.released", "lifetime.held.closed"
    registry = shared.broker.registry
    conn = connect(shared.url)
    send(conn.create_sender(released), timed(case, "released", ttl=500))
    send(conn.create_sender(closed), timed(case, "closed", ttl=500))
    arrived_by = time.monotonic()
    first, first_handler = raw_receiver(conn, released, credit=1, settle=False)
    holder, holder_handler = raw_receiver(conn, closed, credit=1, settle=False)
    ((_, delivery),) = wait_received(conn, first_handler, 1)
    wait_received(conn, holder_handler, 1)
    waiting, waiting_handler = raw_receiver(conn, closed, credit=10, name="waiting")
    first.link.flow(10)  # so a redelivery would come here at once
    time.sleep(max(0.0, arrived_by + 0.7 - time.monotonic()))  # past the ttl

    delivery.update(Delivery.RELEASED)
    delivery.settle()
    detach(conn, holder)  # the unsettled delivery goes back to the queue
    wait_for(lambda: registry.expired.get(released) == 1 and registry.expired.get(closed) == 1,
             "the returned messages did not expire")
    for receiver, handler, count in ((first, first_handler, 1), (waiting, waiting_handler, 0)):
        drained(conn, receiver)
        assert len(handler.received) == count, "an expired message was delivered again"

    dead = sorted(dead_letters(conn, case, 2), key=lambda m: str(m.body))
    assert [m.body for m in dead] == ["closed", "released"]
    assert [annotations_of(m)[NODE] for m in dead] == [closed, released]
    assert all(annotations_of(m)[REASON] == "expired" for m in dead)
    # A link closed with the delivery unsettled counts as a failed delivery; a release not.
    assert [m.delivery_count for m in dead] == [1, 0]
    assert queue_of(shared, released).depth() == queue_of(shared, closed).depth() == 0
    conn.close()


def ttl_of(data: bytes) -> object:
    return (RawMessageView(data).section(Section.HEADER) or {}).get("ttl")


def test_a_message_goes_out_with_the_ttl_it_has_left(shared: RunningBroker) -> None:
    """§3.2.1: an intermediary forwards "the reduced ttl". Sent with a ttl of 60 s and taken
    300 ms later, a message carries what is left; released and taken again, less again. One
    that expires by its absolute-expiry-time alone goes out as it came."""
    case = address = "lifetime.ttl-left"
    conn = connect(shared.url)
    sent_at = now_ms()
    expiry = sent_at + 60_000
    send(conn.create_sender(address), timed(case, "ttl", ttl=60_000),
         timed(case, "absolute", expiry=expiry))
    time.sleep(0.3)
    receiver, handler = raw_receiver(conn, address, credit=2, settle=False)
    (first, delivery), (second, _) = wait_received(conn, handler, 2)
    taken_at = now_ms()
    left = ttl_of(first)
    assert isinstance(left, int)
    assert 60_000 - (taken_at - sent_at) <= left <= 60_000 - 300
    assert ttl_of(second) is None
    kept = (RawMessageView(second).section(Section.PROPERTIES) or {})["absolute-expiry-time"]
    assert abs(kept - expiry) <= 1  # as sent (proton's Message holds it in seconds)

    time.sleep(0.05)
    delivery.update(Delivery.RELEASED)
    delivery.settle()
    receiver.link.flow(1)
    again, _ = wait_received(conn, handler, 3)[2]
    later = ttl_of(again)
    assert isinstance(later, int) and later <= left - 50
    header = RawMessageView(again).section(Section.HEADER) or {}
    assert header.get("delivery-count") in (None, 0)  # a release is no failed attempt
    conn.close()
