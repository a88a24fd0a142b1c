"""Filters on stream consumers over real sockets: evaluated as the consumer reads, skipping (not
removing) what does not match; RabbitMQ's stream filter with and without match-unfiltered."""

from __future__ import annotations

from proton import Described, symbol

from ..broker_clients import BrokerFactory, connect
from .stream_clients import (
    match_unfiltered,
    offset_spec,
    publish,
    read_all,
    stream_broker,
    stream_of,
)

FIRST = offset_spec("first")


def _published(broker_factory: BrokerFactory) -> str:
    """A broker whose stream ``events.f`` holds 0-5 (odd EU, even US), 6-7 with the stream
    filter value ``eu``, 8 with ``us``, 9 with a null one; its url."""
    running = stream_broker(broker_factory)
    connection = connect(running.url)
    try:
        publish(connection, "events.f", range(6))
        publish(connection, "events.f", [6, 7], x_stream_filter_value="eu")
        publish(connection, "events.f", [8], x_stream_filter_value="us")
        publish(connection, "events.f", [9], x_stream_filter_value=None)
    finally:
        connection.close()
    assert stream_of(running, "events.f").depth() == 10
    return running.url


def _numbers(got: list[tuple[int, int]]) -> list[int]:
    assert all(n == offset for n, offset in got), got  # each carries its own offset
    return [n for n, _ in got]


def test_a_sql_filter_on_a_stream_consumer(broker_factory: BrokerFactory) -> None:
    url = _published(broker_factory)
    sql = Described(symbol("amqp:sql-filter"), "region = 'EU' AND n > 2")
    assert _numbers(read_all(url, "events.f", o=FIRST, f=sql)) == [3, 5, 7, 9]
    assert _numbers(read_all(url, "events.f", o=offset_spec(6), f=sql)) == [7, 9]
    assert _numbers(read_all(url, "events.f", o=FIRST)) == list(range(10)), "nothing removed"


def test_a_property_filter_on_a_stream_consumer(broker_factory: BrokerFactory) -> None:
    url = _published(broker_factory)
    prop = Described(symbol("amqp:application-properties-filter"), {"region": "US"})
    assert _numbers(read_all(url, "events.f", o=FIRST, f=prop)) == [0, 2, 4, 6, 8]


def test_the_stream_filter_takes_the_values_it_names(broker_factory: BrokerFactory) -> None:
    url = _published(broker_factory)
    eu = Described(symbol("rabbitmq:stream-filter"), "eu")
    both = Described(symbol("rabbitmq:stream-filter"), ["eu", "us"])
    assert _numbers(read_all(url, "events.f", o=FIRST, f=eu)) == [6, 7]
    assert _numbers(read_all(url, "events.f", o=FIRST, f=both)) == [6, 7, 8]


def test_match_unfiltered_adds_the_messages_without_a_value(
        broker_factory: BrokerFactory) -> None:
    url = _published(broker_factory)
    eu = Described(symbol("rabbitmq:stream-filter"), "eu")
    unfiltered = [0, 1, 2, 3, 4, 5, 6, 7, 9]  # absent or null: unfiltered; 8 is "us"
    assert _numbers(read_all(url, "events.f", o=FIRST, f=eu, u=match_unfiltered(True))) == (
        unfiltered)
    assert _numbers(read_all(url, "events.f", o=FIRST, f=eu, u=match_unfiltered(False))) == [
        6, 7]


def test_a_stream_filter_and_a_sql_filter_together(broker_factory: BrokerFactory) -> None:
    """RabbitMQ's clients send both: the stream filter narrows, SQL decides (all must match)."""
    url = _published(broker_factory)
    entries = {"f": Described(symbol("rabbitmq:stream-filter"), "eu"),
               "u": match_unfiltered(True),
               "s": Described(symbol("amqp:sql-filter"), "region = 'EU'")}
    assert _numbers(read_all(url, "events.f", o=FIRST, **entries)) == [1, 3, 5, 7, 9]
