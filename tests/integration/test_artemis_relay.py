"""The relay in front of a real ActiveMQ Artemis 2.40 (Maven Central, its default configuration).

Artemis runs as a child process for the whole test session (``tests/conftest.py``,
``upstreams/artemis.py``); each test starts the relays it needs (``python -m filtex_broker
--upstream ...``, with the console on, whose per-link ``received`` counts what the relay's
upstream link took from Artemis) and uses python-qpid-proton clients. What Artemis does by
default and the relay relies on (docs/BROKER.md, "ActiveMQ Artemis"): an address a client
names without a ``queue``/``topic`` capability is created multicast; ``modified`` with
undeliverable-here gives a message back to the queue's other consumers; a topic attach on an
anycast address is refused with ``amqp:illegal-state``; its selector parser refuses Java's
``2.0d`` (the relay then evaluates that link's filters alone); durable subscriptions are named by
container id and link name.

Every queue is read back directly on Artemis afterwards (nothing lost), and Artemis's ``DLQ``
is browsed (nothing dead-lettered).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Condition, Described, Event, Message, Terminus
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import BlockingConnection, BlockingReceiver, LinkDetached

from upstreams.artemis import Artemis

from .integration_support import (
    JMS_NO_LOCAL,
    PROPERTIES,
    QUEUE,
    SELECTOR,
    SQL,
    TOPIC,
    Durable,
    Relays,
    abandon,
    browse,
    close,
    connect,
    connect_as,
    detached,
    drain,
    eventually,
    nothing_more,
    numbered,
    receiver,
    send,
    take,
    upstream_links,
)

RED = {"f": Described(SQL, "colour = 'red'")}
FILTERS = {  # each matches the red messages with n > 2 among numbered(8): 3, 5, 7
    "sql": {"f": Described(SQL, "colour = 'red' AND n > 2")},
    "jms": {"f": Described(SELECTOR, "colour = 'red' AND n > 2")},
    "properties": {"colour": Described(PROPERTIES, {"colour": "red"}),
                   "big": Described(SQL, "n > 2")},
}


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def relays(artemis: Artemis, tmp_path: Path) -> Iterator[Relays]:
    started = Relays(tmp_path, artemis.url)
    yield started
    started.stop_all()


@pytest.fixture
def direct(artemis: Artemis) -> Iterator[BlockingConnection]:
    """A client of Artemis itself, to put messages in and read back what is left."""
    conn = connect(artemis.url)
    yield conn
    conn.close()


def _nothing_dead_lettered(direct: BlockingConnection) -> None:
    assert browse(direct, "DLQ") == [], "Artemis dead-lettered messages"


# -- queues ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(FILTERS))
def test_a_filtered_consumer_gets_exactly_its_matches_and_the_rest_stays_on_artemis(
        relays: Relays, direct: BlockingConnection, kind: str) -> None:
    relay = relays.start()
    queue = fresh(kind)
    send(direct, queue, numbered(8), [QUEUE])
    downstream = connect(relay.address)
    filtered = receiver(downstream, queue, FILTERS[kind], name="filtered", credit=20,
                        options=[QUEUE])
    assert drain(filtered) == [3, 5, 7]
    # pushed down: Artemis handed the relay's link only what the selector lets through
    assert relays.received(relay, "filtered") == 3
    close(filtered)
    if kind == "sql":  # browsing through the relay shows the rest and takes nothing
        assert browse(downstream, queue) == [0, 1, 2, 4, 6]
    downstream.close()
    assert drain(receiver(direct, queue, credit=20, options=[QUEUE])) == [0, 1, 2, 4, 6]
    _nothing_dead_lettered(direct)


def test_clients_that_name_their_links_alike_are_each_served(
        relays: Relays, direct: BlockingConnection) -> None:
    """Instances of one application give their links the same names; upstream each link of
    the relay gets a name of its own (``#2``...): Artemis took a second link of one name on a
    connection for the first, and never answered it."""
    relay = relays.start()
    queue = fresh("alike")
    instances = [connect(relay.address) for _ in range(3)]
    senders = [conn.create_sender(queue, name="orders-out", options=[QUEUE])
               for conn in instances]
    for k, sender in enumerate(senders):
        sender.send(Message(id=k, body=k, properties={"colour": "red", "n": k}))
    readers = [receiver(conn, queue, RED, name="orders-in", credit=10, options=[QUEUE])
               for conn in instances]
    upstream_links(relay, 6)
    got = sorted(body for rcv in readers for body in drain(rcv))
    assert got == [0, 1, 2], "each sender's message kept, and read through the relay"
    log = relay.log()
    for name in ("orders-out@relay", "orders-in@relay"):
        assert all(f"upstream link '{name}{suffix}' attached" in log
                   for suffix in ("", "#2", "#3")), name
    for conn in instances:
        conn.close()
    assert drain(receiver(direct, queue, credit=20, options=[QUEUE])) == []
    _nothing_dead_lettered(direct)


def test_pushdown_keeps_what_the_selector_excludes_away_from_the_relay(
        relays: Relays, direct: BlockingConnection) -> None:
    pushed, local = relays.start(), relays.start("--upstream-selector", "never")
    for relay in (pushed, local):
        queue = fresh("pushdown")
        send(direct, queue, numbered(8), [QUEUE])
        downstream = connect(relay.address)
        filtered = receiver(downstream, queue, FILTERS["jms"], name="filtered", credit=20,
                            options=[QUEUE])
        assert drain(filtered) == [3, 5, 7]
        link = relays.links(relay)["filtered"]
        if relay is pushed:
            assert link["pushed_down"] == "colour = 'red' AND n > 2"
            assert link["received"] == 3  # the five others never left Artemis
        else:
            assert link["pushed_down"] is None
            assert link["received"] == 8  # every message crossed, and went back as modified
        downstream.close()
        assert drain(receiver(direct, queue, credit=20, options=[QUEUE])) == [0, 1, 2, 4, 6]
    _nothing_dead_lettered(direct)


def test_without_pushdown_artemis_gives_non_matches_to_others_at_once(
        relays: Relays, direct: BlockingConnection) -> None:
    relay = relays.start("--upstream-selector", "never")
    queue = fresh("non-match")
    downstream = connect(relay.address)
    reds = receiver(downstream, queue, RED, name="reds", credit=20, options=[QUEUE])
    upstream_links(relay, 1)
    assert "queue non-matches without pushdown are modified" in relay.log()
    send(direct, queue, numbered(6), [QUEUE])
    assert drain(reds) == [1, 3, 5]
    eventually(lambda: relays.received(relay, "reds"), lambda n: n == 6,
               "every message offered to the relay's link")
    # The relay's filtered link is still attached, and Artemis hands its non-matches to a
    # plain consumer (held instead, they would stay invisible until the link goes) ...
    plain = receiver(direct, queue, credit=20, options=[QUEUE])
    blues = [plain.receive(timeout=10) for _ in range(3)]
    for _ in blues:
        plain.accept()  # the oldest unsettled delivery first
    assert [m.body for m in blues] == [0, 2, 4]
    assert [m.delivery_count for m in blues] == [0, 0, 0]  # modified, not delivery-failed
    # ... and never offers them to the relay's link again.
    assert nothing_more(reds)
    assert relays.received(relay, "reds") == 6
    assert nothing_more(plain)
    downstream.close()
    _nothing_dead_lettered(direct)


def test_a_relay_killed_mid_stream_loses_nothing(
        relays: Relays, direct: BlockingConnection) -> None:
    queue = fresh("killed")
    send(direct, queue, numbered(30), [QUEUE])
    reds = list(range(1, 30, 2))
    first = relays.start()
    downstream = connect(first.address)
    filtered = receiver(downstream, queue, RED, credit=10, options=[QUEUE])
    accepted = []
    for index in range(10):
        message = filtered.receive(timeout=30)
        if index < 4:
            accepted.append(message.body)
            filtered.accept()
    # four accepted, six delivered and unsettled, five more on their way or on Artemis
    first.kill()
    abandon(downstream)
    second = relays.start()
    downstream = connect(second.address)
    again = drain(receiver(downstream, queue, RED, credit=10, options=[QUEUE]))
    downstream.close()
    assert sorted(set(accepted) | set(again)) == reds  # each red one accepted at least once
    assert len(again) == len(set(again))
    assert set(again) >= set(reds) - set(accepted)
    assert drain(receiver(direct, queue, credit=50, options=[QUEUE])) == list(range(0, 30, 2))
    _nothing_dead_lettered(direct)


def test_an_attach_artemis_refuses_is_refused_downstream_with_its_reason(
        relays: Relays) -> None:
    relay = relays.start()
    downstream = connect(relay.address)
    try:  # a topic subscription on the anycast queue 'orders' (declared by the fixture)
        refused = receiver(downstream, "orders", RED, options=[TOPIC])
    except LinkDetached as exc:
        condition: Condition | None = exc.link.remote_condition
    else:
        # The relay answers the attach before Artemis does (downstream links outlive the
        # upstream's absence); Artemis's refusal follows as the detach.
        assert refused.link.remote_source.address == "orders"
        condition = detached(refused)
    assert condition is not None, "the refused link was not detached"
    assert condition.name == "amqp:illegal-state"
    assert condition.description == "Address orders is not configured for topic support"
    # the client's connection and the relay go on
    queue = fresh("after-refusal")
    send(downstream, queue, numbered(2), [QUEUE])
    assert drain(receiver(downstream, queue, credit=5, options=[QUEUE])) == [0, 1]
    downstream.close()


def test_a_selector_artemis_cannot_parse_is_evaluated_by_the_relay_alone(
        relays: Relays, direct: BlockingConnection) -> None:
    relay = relays.start()
    queue = fresh("java-literal")
    send(direct, queue, numbered(8), [QUEUE])
    downstream = connect(relay.address)
    # 2.0d is a Java double literal (JMS allows it); Artemis's selector parser refuses it
    selector = {"jms": Described(SELECTOR, "colour = 'red' AND n > 2.0d")}
    filtered = receiver(downstream, queue, selector, name="filtered", credit=20, options=[QUEUE])
    assert take(filtered, 3) == [3, 5, 7]
    assert nothing_more(filtered)
    assert ("upstream refused link 'filtered@relay' with the selector pushed down "
            "(amqp:invalid-field: Invalid filter)") in relay.log()
    link = relays.links(relay)["filtered"]
    assert (link["pushed_down"], link["received"]) == (None, 8)
    downstream.close()
    assert drain(receiver(direct, queue, credit=20, options=[QUEUE])) == [0, 1, 2, 4, 6]
    _nothing_dead_lettered(direct)


# -- topics ----------------------------------------------------------------------------------


def test_a_durable_subscription_through_the_relay_outlives_the_client_and_the_relay(
        relays: Relays, direct: BlockingConnection) -> None:
    topic = fresh("news")
    reader = fresh("reader")  # the client's container id: Artemis names the subscription by it

    def subscribe(relay_address: str) -> tuple[BlockingConnection, BlockingReceiver]:
        conn = connect_as(relay_address, reader)
        return conn, receiver(conn, topic, RED, name="reds", credit=20, options=[TOPIC, Durable()])

    relay = relays.start()
    conn, reds = subscribe(relay.address)
    upstream_links(relay, 1)  # Artemis drops what a topic gets before its subscriptions
    send(direct, topic, numbered(4), [TOPIC])
    assert drain(reds) == [1, 3]

    conn.close()  # the client goes without closing its link: the subscription stays
    send(direct, topic, numbered(4, start=4), [TOPIC])
    conn, reds = subscribe(relay.address)
    assert drain(reds) == [5, 7]

    relay.kill()  # and the relay goes: Artemis keeps the subscription and collects
    abandon(conn)
    send(direct, topic, numbered(4, start=8), [TOPIC])
    relay = relays.start()
    conn, reds = subscribe(relay.address)
    assert drain(reds) == [9, 11]

    close(reds)  # closing the link ends the subscription upstream
    conn.close()
    send(direct, topic, numbered(2, start=12), [TOPIC])
    conn, reds = subscribe(relay.address)
    assert nothing_more(reds)  # a new subscription: 13 went to none
    close(reds)
    conn.close()
    _nothing_dead_lettered(direct)


class Reattach(MessagingHandler):
    """Attaches a durable subscription, detaches it once attached and attaches it again as
    soon as the detach is answered (in a new session), ``times`` times, as a client that
    comes back at once does; records any refusal. (Detaching and attaching in one write is
    no test: Proton writes a new link's attach before an old one's detach.)"""

    def __init__(self, url: str, container_id: str, topic: str, times: int) -> None:
        super().__init__(prefetch=0, auto_accept=False)
        self.url = url
        self.container_id = container_id
        self.topic = topic
        self.left = times
        self.refusals: list[str] = []
        self.attached = 0

    def on_start(self, event: Event) -> None:
        event.container.container_id = self.container_id
        self.connection = event.container.connect(self.url)
        self.timer = event.container.schedule(60.0, self)
        self._attach()

    def on_timer_task(self, event: Event) -> None:
        self.refusals.append(f"no answer after 60 s, {self.left} attaches left")
        self.connection.close()

    def _finish(self) -> None:
        self.timer.cancel()
        self.connection.close()

    def _attach(self) -> None:
        session = self.connection.session()
        session.open()
        link = session.receiver("reds")
        link.source.address = self.topic
        TOPIC.apply(link)
        Durable().apply(link)
        link.open()

    def on_link_opened(self, event: Event) -> None:
        link = event.link
        if link.remote_source.type == Terminus.UNSPECIFIED:
            return  # refused: the detach with the reason follows
        self.attached += 1
        self.left -= 1
        link.detach()

    def on_link_remote_detach(self, event: Event) -> None:
        if self.left > 0:
            self._attach()
        else:
            self._finish()

    def on_link_error(self, event: Event) -> None:
        condition = event.link.remote_condition
        self.refusals.append(f"{condition.name}: {condition.description}" if condition
                             else "closed")
        self._finish()


def test_a_durable_subscription_detached_and_attached_again_at_once_is_never_refused(
        relays: Relays, direct: BlockingConnection) -> None:
    """Artemis removes a detached link's consumer only after answering the detach: the relay
    attaches the subscription again once Artemis has ended the old link's session, where the
    attach used to meet the old consumer now and then ("Maximum Consumer Limit Reached")."""
    relay = relays.start()
    topic = fresh("again")
    reader = fresh("reader")
    client = Reattach(relay.address, reader, topic, times=30)
    Container(client).run()
    assert client.refusals == [] and client.attached == 30
    conn = connect_as(relay.address, reader)  # the subscription is there, collecting
    reds = receiver(conn, topic, RED, name="reds", credit=20, options=[TOPIC, Durable()])
    send(direct, topic, numbered(4), [TOPIC])
    assert drain(reds) == [1, 3]
    close(reds)
    conn.close()


def test_no_local_across_the_relay_on_a_topic(relays: Relays) -> None:
    relay = relays.start()
    topic = fresh("chat")
    alice, bob = connect(relay.address), connect(relay.address)
    mine_not = receiver(alice, topic, {"nl": Described(JMS_NO_LOCAL, [])}, credit=20,
                        options=[TOPIC])
    everything = receiver(bob, topic, credit=20, options=[TOPIC])
    upstream_links(relay, 2)
    for conn, who in ((alice, "a"), (bob, "b")):
        send(conn, topic, [Message(body=f"{who}{i}") for i in range(3)], [TOPIC])
    assert drain(mine_not) == ["b0", "b1", "b2"]
    assert sorted(drain(everything)) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    alice.close()
    bob.close()


# -- Artemis restarted -----------------------------------------------------------------------


def test_an_artemis_restart_loses_nothing_and_keeps_the_clients_links(
        artemis: Artemis, relays: Relays) -> None:
    relay = relays.start()
    queue = fresh("restart")
    downstream = BlockingConnection(relay.address, timeout=120)  # outlives the restart
    try:
        reds = receiver(downstream, queue, RED, credit=10, options=[QUEUE])
        producer = downstream.create_sender(queue, options=[QUEUE])
        for message in numbered(10, durable=True):  # durable: Artemis keeps them on disk
            producer.send(message)
        got = take(reds, 3)
        artemis.process.restart()
        for message in numbered(10, start=10, durable=True):
            producer.send(message)  # waits for the relay to reconnect and Artemis to accept
        got += drain(reds, quiet=3.0)
        close(producer)
        assert sorted(set(got)) == list(range(1, 20, 2))
        assert "upstream link" in relay.log().rsplit("lost; reconnecting", 1)[-1]
    finally:
        if not artemis.process.running():
            artemis.process.start()  # the session's other tests need it
        abandon(downstream)
    direct = connect(artemis.url)
    try:
        assert drain(receiver(direct, queue, credit=50, options=[QUEUE])) == list(range(0, 20, 2))
        _nothing_dead_lettered(direct)
    finally:
        direct.close()
