"""Queue non-matches without pushdown, over our own broker as the upstream (which honours
``modified`` with undeliverable-here): the relay gives them back at once, the upstream offers
them to its other consumers and never again to the relay's link; a downstream ``modified``
goes up as ``modified``. With ``--upstream-non-match hold`` the relay holds them instead."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from proton import Data, Delivery, Described, Message, Timeout, symbol
from proton.reactor import Filter, LinkOption
from proton.utils import BlockingConnection, BlockingReceiver

from filtex_broker.config import BrokerConfig
from filtex_broker.nodes.consumer import Consumer
from filtex_broker.nodes.queue import Queue
from filtex_broker.server import Broker
from filtex_proton import __version__

from .relay_rabbit import Rabbit, free_port
from .relay_support import RelayFactory, RelayProcess, accepted_ids

EVEN = Filter({symbol("f"): Described(symbol("amqp:sql-filter"), "even = TRUE")})
NO_PUSHDOWN = ("--upstream-selector", "never")
"""Our broker evaluates selectors: without this, non-matches would never leave it."""


class TopicSource(LinkOption):  # type: ignore[misc]
    """The source capability ``topic``: the link reads a subscription copy of its own."""

    def apply(self, link: Any) -> None:
        link.source.capabilities.put_array(False, Data.SYMBOL)
        link.source.capabilities.enter()
        link.source.capabilities.put_symbol("topic")
        link.source.capabilities.exit()


class Upstream:
    """Our own broker, in this process, as the relay's upstream."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"amqp://127.0.0.1:{self.port}"
        self.broker = Broker(BrokerConfig(listen=(("127.0.0.1", self.port),),
                                          container_id="upstream"))
        self.thread: threading.Thread = self.broker.start_in_thread()

    def publish(self, count: int, address: str = "orders") -> None:
        conn = BlockingConnection(self.url, timeout=20)
        sender = conn.create_sender(address)
        for i in range(count):
            sender.send(Message(id=i, body=i, properties={"even": i % 2 == 0}))
        conn.close()

    def queue(self, address: str = "orders") -> Queue:
        node = self.broker.registry.nodes[address]
        assert isinstance(node, Queue)
        return node

    def relay_link(self, address: str = "orders") -> Consumer:
        """The upstream end of the relay's link (named ``<downstream name>@relay``)."""
        return next(c for c in self.queue(address).consumers if c.name.endswith("@relay"))

    def stop(self) -> None:
        self.broker.stop()
        self.thread.join(30)
        assert not self.thread.is_alive()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    node = Upstream()
    yield node
    node.stop()


def _wait_for(predicate: Callable[[], bool], what: str, relay: RelayProcess) -> None:
    deadline = time.monotonic() + 20
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {relay.log()}"
        time.sleep(0.05)  # polling state another thread changes


def _settle_modified(receiver: BlockingReceiver, *, failed: bool, undeliverable: bool) -> None:
    """Settle the last received message as modified with these fields."""
    delivery = receiver.fetcher.unsettled[0]
    delivery.local.failed = failed
    delivery.local.undeliverable = undeliverable
    receiver.settle(Delivery.MODIFIED)


def test_our_broker_names_itself_in_its_open_frame(upstream: Upstream) -> None:
    conn = BlockingConnection(upstream.url, timeout=20)
    properties = {str(k): v for k, v in conn.conn.remote_properties.items()}
    conn.close()
    assert properties["product"] == "filtex-broker"
    assert properties["version"] == __version__


def test_non_matches_go_back_to_the_upstreams_other_consumers(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    upstream.publish(10)
    relay = relay_factory(upstream.url, *NO_PUSHDOWN)
    decision = f"non-matches without pushdown are modified (undeliverable-here): filtex-broker " \
        f"{__version__}"
    _wait_for(lambda: decision in relay.log(), "the decision in the log", relay)
    downstream = BlockingConnection(relay.address, timeout=20)
    filtered = downstream.create_receiver("orders", name="filtered", options=EVEN, credit=20)
    assert accepted_ids(filtered, 1.5) == ["0", "2", "4", "6", "8"]
    # Nothing held: the five odd ones are back in the upstream queue, free for anyone but
    # the relay's link, which has credit left and was offered each message exactly once.
    queue, link = upstream.queue(), upstream.relay_link()
    _wait_for(lambda: queue.ready == 5, "the odd messages back upstream", relay)
    assert not link.unacked  # the relay holds nothing
    assert link.sent == 10
    direct = BlockingConnection(upstream.url, timeout=20)
    plain = direct.create_receiver("orders", name="plain", credit=20)
    odd = []
    for _ in range(5):
        message = plain.receive(timeout=10)
        assert message.delivery_count == 0  # undeliverable-here, not delivery-failed
        odd.append(str(message.id))
        plain.accept()
    assert sorted(odd) == ["1", "3", "5", "7", "9"]  # none lost, none duplicated
    assert link.sent == 10
    with pytest.raises(Timeout):
        filtered.receive(timeout=0.5)
    downstream.close()
    direct.close()
    assert queue.depth() == 0


def test_a_downstream_modified_goes_upstream_as_modified(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    upstream.publish(1)
    relay = relay_factory(upstream.url, *NO_PUSHDOWN)
    downstream = BlockingConnection(relay.address, timeout=20)
    receiver = downstream.create_receiver("orders", name="picky", credit=10)
    first = receiver.receive(timeout=10)
    assert first.delivery_count == 0
    _settle_modified(receiver, failed=True, undeliverable=True)
    # Released instead, the upstream would offer it straight back to the relay's link.
    with pytest.raises(Timeout):
        receiver.receive(timeout=1)
    direct = BlockingConnection(upstream.url, timeout=20)
    plain = direct.create_receiver("orders", name="plain", credit=10)
    again = plain.receive(timeout=10)
    assert (again.id, again.delivery_count) == (first.id, 1)  # delivery-failed reached it too
    plain.accept()
    direct.close()
    downstream.close()


def test_a_downstream_modified_without_undeliverable_here_comes_back(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    upstream.publish(1)
    relay = relay_factory(upstream.url, *NO_PUSHDOWN)
    downstream = BlockingConnection(relay.address, timeout=20)
    receiver = downstream.create_receiver("orders", name="retry", credit=10)
    assert receiver.receive(timeout=10).delivery_count == 0
    _settle_modified(receiver, failed=True, undeliverable=False)
    assert receiver.receive(timeout=10).delivery_count == 1  # the same link may have it again
    receiver.accept()
    downstream.close()
    _wait_for(lambda: upstream.queue().depth() == 0, "the accept upstream", relay)


def test_hold_keeps_non_matches_until_the_link_goes(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    upstream.publish(4)
    relay = relay_factory(upstream.url, *NO_PUSHDOWN, "--upstream-non-match", "hold")
    decision = "non-matches without pushdown are held while the link lives: " \
        "--upstream-non-match hold"
    _wait_for(lambda: decision in relay.log(), "the decision in the log", relay)
    downstream = BlockingConnection(relay.address, timeout=20)
    filtered = downstream.create_receiver("orders", name="filtered", options=EVEN, credit=10)
    assert accepted_ids(filtered, 1.5) == ["0", "2"]
    direct = BlockingConnection(upstream.url, timeout=20)
    plain = direct.create_receiver("orders", name="plain", credit=10)
    with pytest.raises(Timeout):  # 1 and 3 are held (taken, unsettled) by the relay's link
        plain.receive(timeout=1)
    filtered.close()
    assert sorted(accepted_ids(plain)) == ["1", "3"]
    downstream.close()
    direct.close()


def test_topic_subscribers_skip_non_matches(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    relay = relay_factory(upstream.url, *NO_PUSHDOWN)
    downstream = BlockingConnection(relay.address, timeout=20)
    subscriber = downstream.create_receiver("news", name="sub", options=[EVEN, TopicSource()],
                                            credit=10)
    nodes = upstream.broker.registry.nodes
    _wait_for(lambda: "news" in nodes and nodes["news"].kind == "topic", "the topic", relay)
    upstream.publish(4, "news")
    assert accepted_ids(subscriber, 1.5) == ["0", "2"]
    # 1 and 3 were accepted upstream (skipped), not given back: the copy was the link's own
    _wait_for(lambda: nodes["news"].depth() == 0, "an empty subscription", relay)
    downstream.close()


def test_hold_honours_a_downstream_undeliverable_here_by_holding(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    upstream.publish(2)
    relay = relay_factory(upstream.url, *NO_PUSHDOWN, "--upstream-non-match", "hold")
    downstream = BlockingConnection(relay.address, timeout=20)
    receiver = downstream.create_receiver("orders", name="picky", credit=1)
    assert receiver.receive(timeout=10).id == 0
    _settle_modified(receiver, failed=False, undeliverable=True)
    # Released upstream instead, 0 would come straight back on this link, before 1.
    assert receiver.receive(timeout=10).id == 1
    receiver.accept()
    direct = BlockingConnection(upstream.url, timeout=20)
    plain = direct.create_receiver("orders", name="plain", credit=10)
    with pytest.raises(Timeout):  # held by the relay's link while it lives
        plain.receive(timeout=1)
    receiver.close()
    assert accepted_ids(plain) == ["0"]
    downstream.close()
    direct.close()


def test_rabbitmq_gets_hold_and_a_downstream_undeliverable_here_is_held(
    rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    queue = f"/queue/nonmatch-{uuid.uuid4().hex[:8]}"
    direct = BlockingConnection(rabbit.url, allowed_mechs="ANONYMOUS PLAIN", timeout=20)
    sender = direct.create_sender(queue)
    for i in range(2):
        sender.send(Message(id=i, body=i))
    relay = relay_factory(rabbit.url)
    downstream = BlockingConnection(relay.address, timeout=20)
    receiver = downstream.create_receiver(queue, name="picky", credit=1)
    decision = "non-matches without pushdown are held while the link lives: RabbitMQ"
    _wait_for(lambda: decision in relay.log(), "the decision in the log", relay)
    assert receiver.receive(timeout=10).id == 0
    _settle_modified(receiver, failed=False, undeliverable=True)
    assert receiver.receive(timeout=10).id == 1  # not 0 again, and the session lives on
    receiver.accept()
    receiver.close()
    other = direct.create_receiver(queue, name="other", credit=10)
    assert accepted_ids(other) == ["0"]
    downstream.close()
    direct.close()
