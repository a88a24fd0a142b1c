"""Browse, dynamic, anonymous-relay and pre-settled links through the relay: over our own broker
as the upstream (which does all of them), and refused with a clear condition over RabbitMQ 3.10
(which echoes distribution-mode copy yet consumes, never answers a dynamic attach, and
offers no ANONYMOUS-RELAY)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from proton import Described, Endpoint, Event, Handler, Link, Message, symbol
from proton.reactor import AtMostOnce, Container, Copy, Filter, LinkOption
from proton.utils import BlockingConnection, LinkDetached

from filtex_broker.config import BrokerConfig
from filtex_broker.server import Broker

from .relay_rabbit import Rabbit, free_port
from .relay_support import RelayFactory, RelayProcess, accepted_ids

EVEN = Filter({symbol("f"): Described(symbol("amqp:sql-filter"), "even = TRUE")})


class DynamicTarget(LinkOption):
    """A sender asking the broker for a node of its own (a dynamic target)."""

    def apply(self, link: Link) -> None:
        link.target.dynamic = True


class Upstream:
    """Our own broker, in this process, as the relay's upstream."""

    def __init__(self) -> None:
        self.port = free_port()
        self.broker = Broker(BrokerConfig(listen=(("127.0.0.1", self.port),),
                                          container_id="upstream"))
        self.thread = self.broker.start_in_thread()
        self.url = f"amqp://127.0.0.1:{self.port}"
        self.stopped = False

    def publish(self, address: str, count: int) -> None:
        conn = BlockingConnection(self.url, timeout=20)
        sender = conn.create_sender(address)
        for i in range(count):
            sender.send(Message(id=i, body=i, properties={"even": i % 2 == 0}))
        conn.close()

    def depth(self, address: str) -> int:
        return self.broker.registry.nodes[address].depth()

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.broker.stop()
        self.thread.join(30)
        assert not self.thread.is_alive()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    node = Upstream()
    yield node
    node.stop()




def _refusal(relay: RelayProcess, attach: str) -> str:
    """Attach through the relay a link it must refuse; the error the client sees."""
    conn = BlockingConnection(relay.address, timeout=20)
    try:
        if attach == "browse":
            conn.create_receiver("/queue/kinds", options=Copy())
        elif attach == "dynamic":
            conn.create_receiver(None, dynamic=True)
        elif attach == "dynamic target":
            conn.create_sender(None, options=DynamicTarget())
        else:
            conn.create_sender(None)
    except LinkDetached as exc:
        return str(exc)
    finally:
        conn.close()
    raise AssertionError(f"the relay accepted a {attach} link")


def test_browsing_through_the_relay_consumes_nothing(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    upstream.publish("orders", 6)
    relay = relay_factory(upstream.url)
    conn = BlockingConnection(relay.address, timeout=20)
    for _ in range(2):  # twice: the first browse took nothing away
        browser = conn.create_receiver("orders", options=[Copy(), EVEN], credit=10)
        assert accepted_ids(browser, 1.5) == ["0", "2", "4"]
        browser.close()
    conn.close()
    assert upstream.depth("orders") == 6


def test_a_presettled_consumer_takes_its_messages_off_the_upstream(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    """At most once: each message comes settled, and the relay accepts it upstream as it sends
    it (the consumer settles nothing), so the upstream queue empties."""
    upstream.publish("orders", 3)
    relay = relay_factory(upstream.url)
    conn = BlockingConnection(relay.address, timeout=20)
    receiver = conn.create_receiver("orders", options=AtMostOnce(), credit=10)
    assert receiver.link.remote_snd_settle_mode == Link.SND_SETTLED
    assert [receiver.receive(timeout=20).id for _ in range(3)] == [0, 1, 2]
    assert not receiver.fetcher.unsettled, "each came settled: nothing for the consumer to settle"
    deadline = time.monotonic() + 10
    while upstream.depth("orders"):
        assert time.monotonic() < deadline, "the upstream still holds the messages sent"
        time.sleep(0.05)  # polling the upstream's queue
    conn.close()


def test_a_dynamic_source_is_the_upstreams_dynamic_node(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    relay = relay_factory(upstream.url)
    conn = BlockingConnection(relay.address, timeout=20)
    replies = conn.create_receiver(None, dynamic=True, options=EVEN, credit=10)
    address = replies.link.remote_source.address
    assert address and address in upstream.broker.registry.nodes  # the node lives upstream
    sender = conn.create_sender(address)
    for i in range(4):
        sender.send(Message(id=i, body=i, properties={"even": i % 2 == 0}))
    assert accepted_ids(replies, 1.5) == ["0", "2"]
    conn.close()


def test_a_dynamic_target_is_the_upstreams_dynamic_node(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    relay = relay_factory(upstream.url)
    conn = BlockingConnection(relay.address, timeout=20)
    sender = conn.create_sender(None, options=DynamicTarget())
    address = sender.link.remote_target.address
    assert address and address in upstream.broker.registry.nodes
    for i in range(3):
        sender.send(Message(id=i, body=i))  # settled: the upstream accepted each one
    assert upstream.depth(address) == 3
    conn.close()


def test_an_anonymous_producer_is_relayed_by_each_messages_to(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    relay = relay_factory(upstream.url)
    conn = BlockingConnection(relay.address, timeout=20)
    sender = conn.create_sender(None)
    for i in range(3):
        sender.send(Message(id=i, body=i, address="left" if i % 2 else "right"))
    conn.close()
    deadline = time.monotonic() + 10
    while "left" not in upstream.broker.registry.nodes:
        assert time.monotonic() < deadline
        time.sleep(0.05)  # polling the upstream's registry
    assert (upstream.depth("left"), upstream.depth("right")) == (1, 2)


def test_a_dynamic_consumer_is_closed_when_the_upstream_connection_goes(
    upstream: Upstream, relay_factory: RelayFactory,
) -> None:
    relay = relay_factory(upstream.url)
    conn = BlockingConnection(relay.address, timeout=20)
    replies = conn.create_receiver(None, dynamic=True, credit=10)
    stopper = threading.Thread(target=upstream.stop)
    stopper.start()
    with pytest.raises(LinkDetached, match="amqp:resource-deleted"):
        replies.receive(timeout=20)
    stopper.join(30)
    conn.close()


@pytest.mark.parametrize(("attach", "text"), [
    ("browse", "(RabbitMQ) does not browse"),
    ("dynamic", "(RabbitMQ) creates no dynamic nodes"),
    ("dynamic target", "(RabbitMQ) creates no dynamic nodes"),
    ("anonymous", "does not offer ANONYMOUS-RELAY"),
])
def test_what_rabbitmq_cannot_do_is_refused_clearly(
    rabbit: Rabbit, relay_factory: RelayFactory, attach: str, text: str,
) -> None:
    relay = relay_factory(rabbit.url)
    deadline = time.monotonic() + 20
    while "open (offers" not in relay.log():  # the relay knows its upstream
        assert time.monotonic() < deadline
        time.sleep(0.05)  # polling the relay's log file
    error = _refusal(relay, attach)
    assert "amqp:not-implemented" in error and text in error


class _Silent(Handler):
    """An upstream that opens connections and sessions but never answers an attach."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.port = port

    def on_reactor_init(self, event: Event) -> None:
        event.container.listen(f"127.0.0.1:{self.port}")

    def on_connection_remote_open(self, event: Event) -> None:
        if event.connection.state & Endpoint.LOCAL_UNINIT:
            event.connection.open()

    def on_session_remote_open(self, event: Event) -> None:
        if event.session.state & Endpoint.LOCAL_UNINIT:
            event.session.open()


def test_a_dynamic_attach_the_upstream_never_answers_is_refused_in_time(
    relay_factory: RelayFactory,
) -> None:
    port = free_port()
    container = Container(_Silent(port))
    thread = threading.Thread(target=container.run, daemon=True)
    thread.start()
    try:
        relay = relay_factory(f"amqp://127.0.0.1:{port}", "--upstream-attach-timeout", "1.5")
        conn = BlockingConnection(relay.address, timeout=30)
        asked = time.monotonic()
        with pytest.raises(LinkDetached) as info:
            conn.create_receiver(None, dynamic=True)
        assert time.monotonic() - asked >= 1.5
        assert "did not answer a dynamic attach within 1.5 s" in str(info.value)
        conn.close()
    finally:
        container.stop()
        thread.join(10)
