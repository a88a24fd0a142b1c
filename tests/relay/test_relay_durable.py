"""A durable topic subscription through the relay stays durable upstream (our own broker as
the upstream): it collects while no relay runs, is resumed through a new relay by the same
container-id and link name, and is ended upstream when the client closes its link."""

from __future__ import annotations

import time

from proton import Described, Message, symbol
from proton.reactor import DurableSubscription, Filter
from proton.utils import BlockingConnection, BlockingReceiver

from filtex_broker.config import BrokerConfig
from filtex_broker.server import Broker

from .relay_rabbit import free_port
from .relay_support import RelayFactory, RelayProcess, TopicSource, accepted_ids

RED = Filter({symbol("red"): Described(symbol("amqp:sql-filter"), "colour = 'red'")})


def _subscribe(relay: RelayProcess) -> tuple[BlockingConnection, BlockingReceiver]:
    conn = BlockingConnection(relay.address, timeout=20, container_id="durable-client")
    return conn, conn.create_receiver("news", name="reds", credit=10,
                                      options=[DurableSubscription(), TopicSource(), RED])


def _publish(url: str, *bodies: str) -> None:
    conn = BlockingConnection(url, timeout=20)
    sender = conn.create_sender("news")
    for body in bodies:
        sender.send(Message(id=body, body=body, properties={"colour": body[:-1]}))
    conn.close()


def _wait_for(predicate: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)  # polling the upstream's state


def test_a_durable_subscription_survives_the_relay(relay_factory: RelayFactory) -> None:
    port = free_port()
    upstream = Broker(BrokerConfig(listen=(("127.0.0.1", port),), container_id="upstream"))
    thread = upstream.start_in_thread()
    url = f"amqp://127.0.0.1:{port}"
    try:
        first = relay_factory(url)
        conn, sub = _subscribe(first)
        durable = upstream.registry.durable
        _wait_for(lambda: len(durable) == 1)
        # named by the relay's container-id and a link name made of the client's two
        assert list(durable) == [("filtex-broker-relay", "durable-client:reds@relay")]
        _publish(url, "red1", "blue1")
        assert accepted_ids(sub) == ["red1"]
        first.stop()  # the client's connection goes with it; the subscription stays
        conn.close()
        _publish(url, "red2", "blue2")
        second = relay_factory(url)
        conn, sub = _subscribe(second)
        assert accepted_ids(sub) == ["red2"]  # published while no relay ran
        sub.close()  # type: ignore[no-untyped-call]  # detach closed: unsubscribe
        conn.close()
        _wait_for(lambda: not durable)
    finally:
        upstream.stop()
        thread.join(30)
