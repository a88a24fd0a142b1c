"""Outcomes and failures: what comes back, in which order, and what is never lost."""

from __future__ import annotations

import socket

from proton import Delivery
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection

from filtex_proton.amqp.message import RawMessageView
from filtex_proton.amqp.view import MISSING, Section

from ..broker_clients import (
    TIMEOUT,
    BrokerFactory,
    RunningBroker,
    bodies,
    connect,
    decoded_bodies,
    encoded,
    message,
    nothing_more,
    raw_receiver,
    send,
    send_raw,
    wait_received,
)


def _settle(conn: BlockingConnection, delivery: Delivery, state: int, **modified: bool) -> None:
    if modified:
        delivery.local.failed = modified.get("failed", False)
        delivery.local.undeliverable = modified.get("undeliverable", False)
    delivery.update(state)
    delivery.settle()


def _delivery_count(data: bytes) -> object:
    return RawMessageView(data).field(Section.HEADER, "delivery-count")


def test_released_message_comes_back_in_its_place(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    send(conn.create_sender("q"), *(message(f"m{i}") for i in range(5)))
    _first, handler = raw_receiver(conn, "q", name="first", credit=3, settle=False)
    got = wait_received(conn, handler, 3)
    assert decoded_bodies(got) == ["m0", "m1", "m2"]
    _settle(conn, got[0][1], Delivery.ACCEPTED)
    _settle(conn, got[1][1], Delivery.RELEASED)
    _settle(conn, got[2][1], Delivery.ACCEPTED)
    second = conn.create_receiver("q", name="second")
    assert bodies(second, 3) == ["m1", "m3", "m4"]
    assert nothing_more(conn, second)
    conn.close()


def test_modified_failed_increments_delivery_count(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    send(conn.create_sender("q"), message("once"))
    _first, handler = raw_receiver(conn, "q", name="first", credit=1, settle=False)
    (data, delivery), = wait_received(conn, handler, 1)
    assert _delivery_count(data) in (MISSING, 0)
    _settle(conn, delivery, Delivery.MODIFIED, failed=True)
    _second, again = raw_receiver(conn, "q", name="second", credit=1)
    (redelivered, _), = wait_received(conn, again, 1)
    assert _delivery_count(redelivered) == 1
    assert decoded_bodies([(redelivered, _)]) == ["once"]
    # Only the header changed: the bytes after it are the bytes that arrived.
    view_before, view_after = RawMessageView(data), RawMessageView(redelivered)
    assert data[view_before.spans[1].start:] == redelivered[view_after.spans[1].start:]
    conn.close()


def test_modified_undeliverable_here_goes_to_another_consumer(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    send(conn.create_sender("q"), message("picky"), message("next"))
    first, handler = raw_receiver(conn, "q", name="first", credit=1, settle=False)
    (_, delivery), = wait_received(conn, handler, 1)
    _settle(conn, delivery, Delivery.MODIFIED, undeliverable=True)
    first.link.flow(1)
    (_, nxt), = wait_received(conn, handler, 2)[1:]
    assert decoded_bodies(handler.received[1:]) == ["next"]
    nxt.update(Delivery.ACCEPTED)
    nxt.settle()
    second = conn.create_receiver("q", name="second")
    assert bodies(second, 1) == ["picky"]
    conn.close()


def test_rejected_message_goes_to_the_dead_letter_queue(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(dead_letter_address="dead")
    conn = connect(broker.url)
    send(conn.create_sender("q"), message("bad"), message("good"))
    _receiver, handler = raw_receiver(conn, "q", credit=2, settle=False)
    (_, bad), (_, good) = wait_received(conn, handler, 2)
    _settle(conn, bad, Delivery.REJECTED)
    _settle(conn, good, Delivery.ACCEPTED)
    dead = conn.create_receiver("dead")
    assert bodies(dead, 1) == ["bad"]
    assert nothing_more(conn, conn.create_receiver("q", name="again"))
    conn.close()


def test_unsettled_messages_return_in_order_when_the_link_closes(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    send(conn.create_sender("q"), *(message(i) for i in range(6)))
    first, handler = raw_receiver(conn, "q", name="first", credit=4, settle=False)
    got = wait_received(conn, handler, 4)
    _settle(conn, got[1][1], Delivery.ACCEPTED)
    first.close()
    _second, again = raw_receiver(conn, "q", name="second", credit=10)
    redelivered = wait_received(conn, again, 5)
    assert decoded_bodies(redelivered) == [0, 2, 3, 4, 5]
    assert [_delivery_count(d) for d, _ in redelivered[:3]] == [1, 1, 1]
    conn.close()


def test_client_dropping_its_connection_mid_stream_loses_nothing(broker: RunningBroker) -> None:
    producer = connect(broker.url)
    sender = producer.create_sender("q")
    send(sender, *(message(i) for i in range(10)))
    victim = connect(broker.url)
    _receiver, handler = raw_receiver(victim, "q", credit=5, settle=False)
    got = wait_received(victim, handler, 5)
    _settle(victim, got[0][1], Delivery.ACCEPTED)
    _settle(victim, got[1][1], Delivery.ACCEPTED)
    victim.wait(lambda: victim.conn.transport.pending() == 0, timeout=TIMEOUT)
    # Pull the plug: no detach, no close, just the TCP connection gone.
    victim.conn.transport._selectable._delegate.shutdown(socket.SHUT_RDWR)
    send(sender, message(10))
    survivor = connect(broker.url)
    assert bodies(survivor.create_receiver("q"), 9) == list(range(2, 11))
    survivor.close()
    producer.close()


def test_at_most_once_receivers_get_pre_settled_deliveries(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    send(conn.create_sender("q"), message("a"), message("b"))
    receiver, handler = raw_receiver(conn, "q", credit=2, settle=False, options=AtMostOnce())
    got = wait_received(conn, handler, 2)
    assert all(delivery.settled for _, delivery in got)
    receiver.close()  # nothing was unsettled, so nothing comes back
    assert nothing_more(conn, conn.create_receiver("q", name="after"))
    conn.close()


def test_drain_gives_what_is_there_then_clears_the_credit(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    send(conn.create_sender("q"), message(1), message(2), message(3))
    receiver, handler = raw_receiver(conn, "q", credit=0)
    link = receiver.link
    link.drain(10)
    conn.wait(lambda: not link.draining(), timeout=TIMEOUT, msg="waiting for drain")
    assert decoded_bodies(handler.received) == [1, 2, 3]
    assert link.credit == 0
    conn.close()


def test_full_node_gives_producers_no_more_credit(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(max_queue_messages=5, credit_window=2)
    conn = connect(broker.url)
    sender = conn.create_sender("q")
    link = sender.link
    sent = 0
    probes = 0
    while True:
        while sent < 5 or link.credit > 0:
            conn.wait(lambda: link.credit > 0, timeout=TIMEOUT, msg="credit while there is room")
            outcome = send_raw(conn, sender, message(sent).encode())
            assert outcome.remote_state == Delivery.ACCEPTED
            sent += 1
            assert sent < 20, "the broker kept granting credit to a full node"
        # A round trip through the broker: any flow it sent before has arrived by now.
        probes += 1
        assert nothing_more(conn, conn.create_receiver("other", name=f"probe-{probes}"))
        if link.credit == 0:
            break
    receiver = conn.create_receiver("q", name="consumer")
    assert bodies(receiver, 3) == [0, 1, 2]
    conn.wait(lambda: link.credit > 0, timeout=TIMEOUT, msg="credit after the queue drained")
    conn.close()


def test_large_messages_arrive_whole(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    big = encoded(application_properties={"n": 1}, body=bytes(range(256)) * 8192,
                  body_kind="data")  # 2 MiB: many transfer frames
    assert send_raw(conn, conn.create_sender("q"), big).remote_state == Delivery.ACCEPTED
    _, handler = raw_receiver(conn, "q", credit=1)
    (data, _), = wait_received(conn, handler, 1)
    assert data == big
    conn.close()


def test_too_large_message_is_rejected(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(max_message_size=10_000)
    conn = connect(broker.url)
    sender = conn.create_sender("q")
    outcome = send_raw(conn, sender, encoded(body=b"x" * 50_000, body_kind="data"))
    assert outcome.remote_state == Delivery.REJECTED
    assert outcome.remote.condition.name == "amqp:link:message-size-exceeded"
    assert send_raw(conn, sender, encoded(body="small")).remote_state == Delivery.ACCEPTED
    assert bodies(conn.create_receiver("q"), 1) == ["small"]
    conn.close()


def test_aborted_delivery_is_dropped(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    sender = conn.create_sender("q")
    link = sender.link
    conn.wait(lambda: link.credit > 0, timeout=TIMEOUT)
    half = link.delivery("aborted")
    link.stream(encoded(body=b"y" * 100_000, body_kind="data")[:60_000])
    conn.wait(lambda: conn.conn.transport.pending() == 0, timeout=TIMEOUT)
    half.abort()
    assert send_raw(conn, sender, encoded(body="after")).remote_state == Delivery.ACCEPTED
    receiver = conn.create_receiver("q")
    assert bodies(receiver, 1) == ["after"]
    assert nothing_more(conn, receiver)
    conn.close()
