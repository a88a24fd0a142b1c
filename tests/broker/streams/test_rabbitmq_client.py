"""RabbitMQ's own AMQP 1.0 client (rabbitmq-amqp-python-client) on a filtex-broker stream.

Its publisher sends events with ``x-stream-filter-value`` to ``/queues/<name>`` (a ``--stream``
address here); its stream consumer attaches with the filter set it builds from
``StreamConsumerOptions``: the offset spec as RabbitMQ writes it (``first``, an integer, a
datetime), filter values, match-unfiltered, application-properties and SQL filters. Its handler
reads ``x-stream-offset`` to resume from, as it does against RabbitMQ.

Its ``Connection.dial`` refuses a server whose open does not say product ``RabbitMQ`` (and gates
each filter option on RabbitMQ's version), and filtex-broker says who it is; so the publisher and
the consumer are the client's own ``Publisher`` and ``Consumer`` on the connection class it
bundles (its copy of Proton's ``BlockingConnection``), which send the same attaches and
messages ``Connection.publisher`` and ``Connection.consumer`` would.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from ..broker_clients import BrokerFactory
from .stream_clients import stream_broker, stream_of

rabbit = pytest.importorskip("rabbitmq_amqp_python_client", reason=(
    "RabbitMQ's AMQP client is a test dependency: pip install -e '.[test]'"))
from rabbitmq_amqp_python_client.consumer import Consumer  # noqa: E402
from rabbitmq_amqp_python_client.publisher import Publisher  # noqa: E402
from rabbitmq_amqp_python_client.qpid.proton import Message, symbol  # noqa: E402
from rabbitmq_amqp_python_client.qpid.proton.utils import BlockingConnection  # noqa: E402

ADDRESS = "/queues/events.rabbit"
REGIONS = ("eu", "us", "uk")


class _Collect(rabbit.AMQPMessagingHandler):  # type: ignore[misc]
    """Accepts and records (offset, n) until it has ``want`` or ``seconds`` pass."""

    def __init__(self, want: int, seconds: float = 10.0) -> None:
        super().__init__()
        self.want, self.seconds = want, seconds
        self.got: list[tuple[int, int]] = []
        self.consumer: Any = None

    def on_link_opened(self, event: Any) -> None:
        event.container.schedule(self.seconds, self)
        if self.want == 0:
            event.container.schedule(1.0, self)  # nothing is due: stop after a second

    def on_timer_task(self, event: Any) -> None:
        self.consumer.stop()

    def on_amqp_message(self, event: Any) -> None:
        message = event.message
        self.got.append((int(message.annotations["x-stream-offset"]),
                         int(message.application_properties["n"])))
        self.delivery_context.accept(event)
        if len(self.got) >= self.want:
            self.consumer.stop()


def _publish(url: str, count: int) -> None:
    connection = BlockingConnection(url)
    try:
        publisher = Publisher(connection, ADDRESS)
        for n in range(count):
            region = REGIONS[n % 3]
            status = publisher.publish(Message(
                body=f"event {n}".encode(), annotations={symbol("x-stream-filter-value"): region},
                application_properties={"n": n, "region": region.upper()}))
            assert status.remote_state == status.ACCEPTED, n
        publisher.close()
    finally:
        connection.close()


def _consume(url: str, options: Any, want: int) -> list[tuple[int, int]]:
    """What a consumer with ``options`` receives; ``consumer.stop()`` (the handler's, as in
    RabbitMQ's examples) stops the container, which closes the link and the connection."""
    connection = BlockingConnection(url)
    handler = _Collect(want)
    handler.consumer = consumer = Consumer(connection, ADDRESS, handler, options)
    consumer.run()
    return handler.got


@pytest.fixture
def url(broker_factory: BrokerFactory) -> str:
    running = stream_broker(broker_factory, streams=("/queues/events.*",))
    _publish(running.url, 30)
    assert stream_of(running, ADDRESS).depth() == 30
    return running.url


def test_first_and_an_offset_as_rabbitmq_writes_them(url: str) -> None:
    first = _consume(url, rabbit.StreamConsumerOptions(rabbit.OffsetSpecification.first), 30)
    assert first == [(n, n) for n in range(30)]
    from_25 = _consume(url, rabbit.StreamConsumerOptions(25), 5)
    assert from_25 == [(n, n) for n in range(25, 30)]


def test_a_datetime_offset(url: str) -> None:
    past = datetime.datetime.now() - datetime.timedelta(hours=1)
    assert len(_consume(url, rabbit.StreamConsumerOptions(past), 30)) == 30
    future = datetime.datetime.now() + datetime.timedelta(hours=1)
    assert _consume(url, rabbit.StreamConsumerOptions(future), 0) == []


def test_filter_values_and_sql(url: str) -> None:
    values = rabbit.StreamFilterOptions(values=["eu"])
    eu = _consume(url, rabbit.StreamConsumerOptions(rabbit.OffsetSpecification.first, values), 10)
    assert [n for _, n in eu] == list(range(0, 30, 3))
    both = rabbit.StreamFilterOptions(values=["eu", "uk"], sql="n > 20")
    got = _consume(url, rabbit.StreamConsumerOptions(rabbit.OffsetSpecification.first, both), 6)
    assert [n for _, n in got] == [21, 23, 24, 26, 27, 29]


def test_application_properties_filter(url: str) -> None:
    options = rabbit.StreamFilterOptions(application_properties={"region": "US"})
    got = _consume(url, rabbit.StreamConsumerOptions(rabbit.OffsetSpecification.first,
                                                     options), 10)
    assert [n for _, n in got] == list(range(1, 30, 3))
