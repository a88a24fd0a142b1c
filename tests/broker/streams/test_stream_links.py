"""Streams over real sockets: consumers attach from an offset spec, read without removing,
each delivery carries its ``x-stream-offset``; outcomes only settle."""

from __future__ import annotations

import time

from proton import Delivery, Described, Link, Message, symbol, timestamp, ulong
from proton.reactor import AtMostOnce

from filtex_proton.amqp.message import RawMessageView
from filtex_proton.amqp.view import Section

from ..broker_clients import (
    BrokerFactory,
    TopicOption,
    connect,
    filters,
    is_null_source,
    refusal_of,
    send_raw,
    wait_for,
)
from .stream_clients import (
    consumer,
    decoded,
    drained,
    offset_spec,
    publish,
    read_all,
    received,
    stream_broker,
    stream_of,
)
from .stream_helpers import Clock, message

N = 10


def test_offset_specs_choose_where_a_consumer_starts(broker_factory: BrokerFactory) -> None:
    running = stream_broker(broker_factory)
    with_all = [(n, n) for n in range(N)]
    connection = connect(running.url)
    try:
        publish(connection, "events.orders", range(N))
    finally:
        connection.close()
    url = running.url
    assert read_all(url, "events.orders", o=offset_spec("first")) == with_all
    assert read_all(url, "events.orders", o=offset_spec(symbol("first"))) == with_all
    assert read_all(url, "events.orders", o=offset_spec("last")) == with_all[-1:]
    assert read_all(url, "events.orders", o=offset_spec("next")) == []
    assert read_all(url, "events.orders") == [], "next is the default"
    assert read_all(url, "events.orders", o=offset_spec(ulong(7))) == with_all[7:]
    assert read_all(url, "events.orders", o=offset_spec(4)) == with_all[4:], "a long too"
    assert read_all(url, "events.orders", o=offset_spec(ulong(99))) == [], "clamped to the end"
    assert read_all(url, "events.orders", o=offset_spec("1h")) == with_all


def test_a_timestamp_and_an_interval_start_at_arrival_times(
        broker_factory: BrokerFactory) -> None:
    running = stream_broker(broker_factory)
    connection = connect(running.url)
    try:
        publish(connection, "events.t", [0])  # creates the stream
        clock = Clock(time.time_ns() // 1_000_000 + 1)  # times never go back in a stream
        stream_of(running, "events.t").log.clock = clock
        publish(connection, "events.t", range(1, 4))
        clock.now += 2 * 3600 * 1000  # two hours later
        publish(connection, "events.t", range(4, 7))
    finally:
        connection.close()
    later = [(n, n) for n in range(4, 7)]
    assert read_all(running.url, "events.t", o=offset_spec("1h")) == later
    assert read_all(running.url, "events.t", o=offset_spec("3h"))[0] == (0, 0)
    at = timestamp(clock.now - 1000)
    assert read_all(running.url, "events.t", o=offset_spec(at)) == later
    assert read_all(running.url, "events.t", o=offset_spec(timestamp(clock.now + 1))) == []


def test_x_stream_offset_is_a_long_in_the_message_annotations(
        broker_factory: BrokerFactory) -> None:
    running = stream_broker(broker_factory)
    connection = connect(running.url)
    try:
        publish(connection, "audit", range(3), x_stream_filter_value="eu")
        _receiver, handler = consumer(connection, "audit", credit=3, o=offset_spec("first"))
        assert received(connection, handler, 3) == [(0, 0), (1, 1), (2, 2)]
        annotations = decoded(handler, 2).annotations
        assert annotations[symbol("x-stream-offset")] == 2
        assert type(annotations[symbol("x-stream-offset")]) is int  # a long, not a ulong
        assert annotations[symbol("x-stream-filter-value")] == "eu", "the others are kept"
        view = RawMessageView(handler.received[2][0])
        assert view.field(Section.APPLICATION_PROPERTIES, "n") == 2
        assert decoded(handler, 2).body == "m2", "the rest of the message as it was sent"
    finally:
        connection.close()


def test_two_consumers_read_the_same_messages_independently(
        broker_factory: BrokerFactory) -> None:
    running = stream_broker(broker_factory)
    connection = connect(running.url)
    try:
        publish(connection, "events.x", range(N))
        first, first_got = consumer(connection, "events.x", 3, "one", o=offset_spec("first"))
        _second, second_got = consumer(connection, "events.x", N, "two", o=offset_spec("first"))
        assert received(connection, second_got, N) == [(n, n) for n in range(N)]
        assert received(connection, first_got, 3) == [(0, 0), (1, 1), (2, 2)]
        assert drained(connection, first, first_got) == [(0, 0), (1, 1), (2, 2)]
        first.link.flow(N)
        assert received(connection, first_got, N)[3:] == [(n, n) for n in range(3, N)]
        assert stream_of(running, "events.x").depth() == N, "reading removes nothing"
    finally:
        connection.close()


def test_a_consumer_at_the_end_gets_new_messages_as_they_come(
        broker_factory: BrokerFactory) -> None:
    running = stream_broker(broker_factory)
    connection = connect(running.url)
    try:
        publish(connection, "events.live", range(3))
        _receiver, handler = consumer(connection, "events.live", credit=5)  # from next
        publish(connection, "events.live", [3])
        assert received(connection, handler, 1) == [(3, 3)]
        publish(connection, "events.live", [4, 5])
        assert received(connection, handler, 3) == [(3, 3), (4, 4), (5, 5)]
    finally:
        connection.close()


def test_outcomes_only_settle_and_nothing_is_redelivered(broker_factory: BrokerFactory) -> None:
    running = stream_broker(broker_factory)
    connection = connect(running.url)
    try:
        publish(connection, "events.o", range(4))
        receiver, handler = consumer(connection, "events.o", o=offset_spec("first"))
        handler.settle = False
        receiver.link.flow(4)
        received(connection, handler, 4)
        for (_, delivery), outcome in zip(handler.received, (
                Delivery.ACCEPTED, Delivery.RELEASED, Delivery.MODIFIED, Delivery.REJECTED),
                strict=True):
            delivery.update(outcome)
            delivery.settle()
        assert drained(connection, receiver, handler) == [(n, n) for n in range(4)]
        receiver.close()
        assert running.broker.registry.lookup("DLQ") is None, "a rejection is no dead letter"
        assert stream_of(running, "events.o").depth() == 4
        assert stream_of(running, "events.o").readers == {}, "its reader went with the link"
    finally:
        connection.close()


def test_a_bad_offset_spec_is_refused_with_invalid_field(broker_factory: BrokerFactory) -> None:
    running = stream_broker(broker_factory)
    connection = connect(running.url)
    try:
        for bad in (1.5, "yesterday", Described(symbol("x"), 1), -1):
            handler, link = refusal_of(connection, "events.bad",
                                       filters({"o": offset_spec(bad)}))
            assert is_null_source(handler), bad
            assert link.remote_condition.name == "amqp:invalid-field", bad
        publish(connection, "events.bad", [0])  # the connection carries on
    finally:
        connection.close()


def test_a_topic_capability_on_a_stream_address_gets_the_stream(
        broker_factory: BrokerFactory) -> None:
    running = stream_broker(broker_factory)
    connection = connect(running.url)
    try:
        publish(connection, "events.tc", range(2))
        receiver = connection.create_receiver(
            "events.tc", credit=0, options=[TopicOption(), filters({"o": offset_spec("first")})])
        receiver.link.flow(2)
        assert [receiver.receive().properties["n"] for _ in range(2)] == [0, 1]
        assert stream_of(running, "events.tc").kind == "stream"
    finally:
        connection.close()


def test_retention_by_bytes_drops_the_oldest(broker_factory: BrokerFactory) -> None:
    running = stream_broker(broker_factory, stream_max_bytes=128 * 1024)
    connection = connect(running.url)
    try:
        publish(connection, "events.r", range(80), padding=4096)
    finally:
        connection.close()
    got = read_all(running.url, "events.r", o=offset_spec("first"))
    oldest = got[0][1]
    assert oldest > 0, "the oldest segments are gone"
    assert got == [(n, n) for n in range(oldest, 80)]
    assert len(got) * 4096 <= 128 * 1024 + 64 * 1024  # the bound, and the segment being written
    wait_for(lambda: stream_of(running, "events.r").log.first_offset == oldest, "retained")


def test_a_presettled_consumer_and_an_anonymous_producer(broker_factory: BrokerFactory) -> None:
    """At-most-once reading, and a message routed by ``to`` through the anonymous relay (the
    normal producer path) creates and feeds the stream."""
    running = stream_broker(broker_factory)
    connection = connect(running.url)
    try:
        sender = connection.create_sender(None)
        sender.send(Message(address="events.anon", body="a", properties={"n": 0}))
        receiver = connection.create_receiver(
            "events.anon", options=[AtMostOnce(), filters({"o": offset_spec("first")})])
        got = receiver.receive()
        assert (got.body, got.annotations[symbol("x-stream-offset")]) == ("a", 0)
        assert receiver.link.remote_snd_settle_mode == Link.SND_SETTLED
    finally:
        connection.close()


def test_a_message_scheduled_for_later_is_rejected_not_delivered_early(
        broker_factory: BrokerFactory) -> None:
    """A stream does not schedule, and the broker offers DELAYED_DELIVERY: a message asking to
    be delivered later (x-opt-delivery-delay, or an x-opt-delivery-time ahead) is rejected with
    amqp:not-implemented saying why, not appended and read at once. A time already passed, or a
    delay of 0, asks for nothing; the link goes on."""
    running = stream_broker(broker_factory)
    connection = connect(running.url)
    try:
        sender = connection.create_sender("events.later")
        now = int(time.time() * 1000)
        outcomes = []
        for n, annotations in enumerate((
                {"x_opt_delivery_delay": 60_000},
                {"x_opt_delivery_time": timestamp(now + 60_000)},
                {"x_opt_delivery_time": timestamp(now - 60_000)},
                {"x_opt_delivery_delay": 0},
                {})):
            delivery = send_raw(connection, sender, message(n, **annotations))
            outcomes.append(delivery.remote_state)
            if delivery.remote_state == Delivery.REJECTED:
                condition = delivery.remote.condition
                assert condition.name == "amqp:not-implemented"
                assert condition.description.startswith(
                    "stream 'events.later' does not schedule: the message asks to be delivered ")
                assert condition.description.endswith(
                    " ms from now (x-opt-delivery-time or x-opt-delivery-delay); send it "
                    "without one, or to a queue")
        assert outcomes == [Delivery.REJECTED] * 2 + [Delivery.ACCEPTED] * 3
        assert read_all(running.url, "events.later", o=offset_spec("first")) == [
            (2, 0), (3, 1), (4, 2)]
    finally:
        connection.close()
