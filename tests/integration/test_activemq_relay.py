"""The relay in front of ActiveMQ Classic 5.18 (Maven Central, ``upstreams/activemq.py``).

ActiveMQ evaluates ``apache.org:selector-filter:string`` and names itself
``product: ActiveMQ`` in its open frame, so ``--upstream-selector auto`` pushes
selectors down; it does not honour ``modified`` with undeliverable-here (it
acks the message as a poison: a persistent one goes to ``ActiveMQ.DLQ``, a
non-persistent one is dropped), so ``--upstream-non-match auto`` holds queue
non-matches. Every test reads ActiveMQ directly afterwards: what the relay's
consumers did not match is still on the queue, and nothing is dead-lettered.
One ActiveMQ per test session (the ``activemq`` fixture); the restart test runs last.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import ConnectionException, Described, Message, Timeout, symbol
from proton.reactor import Copy, DurableSubscription
from proton.utils import BlockingConnection, BlockingReceiver

from filtex_broker.relay.brokers import decide_non_match, decide_pushdown, identify
from upstreams.activemq import DLQ, ActiveMQ

from ..relay.relay_support import RelayProcess
from .integration_support import (
    SELECTOR,
    SQL,
    Capability,
    close,
    connect,
    drain,
    drain_messages,
    eventually,
    nothing_more,
    receiver,
    refusal,
    send,
    settle_modified,
    shapes,
    take,
)

PROPERTY = symbol("amqp:application-properties-filter")
NO_LOCAL = symbol("apache.org:no-local-filter:list")
NEVER = ("--upstream-selector", "never")
RED = {"sql": Described(SQL, "colour = 'red'")}


@pytest.fixture
def queue() -> str:
    """A fresh queue name: ActiveMQ creates the queue on first use."""
    return f"filtex-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def relays() -> Iterator[list[RelayProcess]]:
    """Relays started by the test (``start(*flags)``), stopped at its end."""
    started: list[RelayProcess] = []
    yield started
    for relay in started:
        relay.stop()


def start(relays: list[RelayProcess], activemq: ActiveMQ, workdir: Path,
          *flags: str) -> RelayProcess:
    relay = RelayProcess(activemq.url, workdir / f"relay-{len(relays)}", *flags)
    relays.append(relay)
    return relay


def client(relay: RelayProcess, container: str | None = None) -> BlockingConnection:
    """A client of the relay that does not reconnect (a killed relay's port is gone)."""
    options = {} if container is None else {"container_id": container}
    return BlockingConnection(f"amqp://{relay.address}", timeout=30, reconnect=False,
                              **options)


def gone(conn: BlockingConnection) -> None:
    """Drop a client connection whose relay was killed (no close frame will come back)."""
    conn.timeout = 1
    with contextlib.suppress(ConnectionException, Timeout):
        conn.close()


def synced(conn: BlockingConnection, address: str) -> None:
    """One round trip to the relay: the outcomes settled before it have reached the relay,
    which settles them upstream at once (a blocking client sends frames only while it waits)."""
    close(conn.create_sender(address, name=f"sync-{uuid.uuid4().hex[:8]}"))


def upstream_attached(relay: RelayProcess, link: str, times: int = 1) -> None:
    """Wait until the relay's upstream link for ``link`` is attached (``times`` over)."""
    pattern = re.compile(rf"upstream link '[^']*{re.escape(link)}@relay' attached")
    eventually(lambda: len(pattern.findall(relay.log())), lambda n: n >= times,
               f"upstream attach of {link!r}")


def dead_letters(activemq: ActiveMQ) -> list[Message]:
    """Everything in ActiveMQ.DLQ, read (and consumed) directly."""
    return left_on(activemq, DLQ)


def left_on(activemq: ActiveMQ, address: str) -> list[Message]:
    """What is still on an ActiveMQ queue, read (and consumed) directly."""
    direct = connect(activemq.url)
    try:
        return drain_messages(receiver(direct, address, credit=50))
    finally:
        direct.close()


def browse(activemq: ActiveMQ, address: str) -> list[object]:
    """The bodies on an ActiveMQ queue, browsed directly (distribution-mode copy)."""
    direct = connect(activemq.url)
    try:
        return drain(receiver(direct, address, credit=50, options=[Copy()]), 0.5)
    finally:
        direct.close()


def fill(activemq: ActiveMQ, address: str, messages: list[Message]) -> None:
    direct = connect(activemq.url)
    try:
        send(direct, address, messages)
    finally:
        direct.close()


def test_what_activemq_announces_and_answers(activemq: ActiveMQ, queue: str) -> None:
    """Its open frame names the product brokers.py looks for; an unknown filter is ignored
    (attached, not echoed, not applied); a bad selector is refused with invalid-field."""
    direct = connect(activemq.url)
    try:
        properties = direct.conn.remote_properties
        assert {str(k): v for k, v in properties.items()}["product"] == "ActiveMQ"
        assert {str(k): v for k, v in properties.items()}["topic-prefix"] == "topic://"
        broker = identify(properties)
        assert broker is not None and "activemq" in broker.products
        assert decide_pushdown("auto", direct.conn.remote_offered_capabilities or [],
                               properties).pushdown
        assert not decide_non_match("auto", properties).modified

        sql = receiver(direct, queue, {"big": Described(SQL, "n > 3")}, credit=10)
        echoed = sql.link.remote_source.filter
        echoed.rewind()
        assert not echoed.next(), "ActiveMQ echoes no filter it does not apply"
        send(direct, queue, shapes())
        assert drain(sql) == [0, 1, 2, 3, 4, 5]  # the SQL filter ignored
        close(sql)

        condition = refusal(direct, queue, {"jms": Described(SELECTOR, "n >")})
        assert condition.name == "amqp:invalid-field"
    finally:
        direct.close()


def test_activemq_dead_letters_undeliverable_here_and_loops_released(
        activemq: ActiveMQ, queue: str) -> None:
    """Why the relay holds non-matches on ActiveMQ: ``modified`` undeliverable-here sends a
    persistent message to ActiveMQ.DLQ and drops a non-persistent one; ``released`` comes
    straight back to the same link, never to the other consumer waiting."""
    fill(activemq, queue, [Message(body="persistent", durable=True),
                           Message(body="non-persistent", durable=False)])
    direct = connect(activemq.url)
    try:
        first = receiver(direct, queue, credit=2)
        for _ in range(2):
            first.receive(timeout=30)
            settle_modified(first, failed=False, undeliverable=True)
        close(first)
        assert nothing_more(receiver(direct, queue), 2.0), "both left the queue"
    finally:
        direct.close()
    assert [m.body for m in dead_letters(activemq)] == ["persistent"]  # the other: gone

    fill(activemq, queue, [Message(body="again", durable=True)])
    direct = connect(activemq.url)
    try:
        mine = receiver(direct, queue, credit=1)
        other = receiver(direct, queue, credit=1)
        for _ in range(3):
            assert mine.receive(timeout=30).delivery_count == 0
            mine.release(delivered=False)
        assert nothing_more(other, 1.0), "a released message goes back to the same link"
        mine.receive(timeout=30)
        mine.accept()
    finally:
        direct.close()


@pytest.mark.parametrize("flags", [(), NEVER], ids=["pushdown", "no-pushdown"])
def test_filtered_consumers_take_exactly_their_matches_and_lose_nothing(
        activemq: ActiveMQ, relays: list[RelayProcess], tmp_path: Path, queue: str,
        flags: tuple[str, ...]) -> None:
    """SQL, JMS selector and property filters through the relay, one queue each: exactly the
    matches; the non-matches stay on the queue, none dead-lettered, their delivery-count 0;
    without pushdown they were held (never ``modified``) and released when the link went."""
    relay = start(relays, activemq, tmp_path, *flags)
    cases = {
        f"{queue}-sql": ({"sql": Described(SQL, "colour = 'red' AND n > 1")}, [3, 5]),
        f"{queue}-jms": ({"jms": Described(SELECTOR, "colour = 'blue'")}, [0, 2, 4]),
        f"{queue}-prop": ({"prop": Described(PROPERTY, {"colour": "red"})}, [1, 3, 5]),
    }
    for address in cases:
        fill(activemq, address, shapes(durable=True))
    downstream = client(relay)
    try:
        for address, (filters, wanted) in cases.items():
            filtered = receiver(downstream, address, filters, credit=10)
            assert sorted(take(filtered, len(wanted))) == wanted
            assert nothing_more(filtered)
            close(filtered)
    finally:
        downstream.close()
    for address, (_, wanted) in cases.items():
        rest = left_on(activemq, address)
        assert sorted(m.body for m in rest) == sorted(set(range(6)) - set(wanted)), address
        assert [m.delivery_count for m in rest] == [0] * len(rest), address
    assert dead_letters(activemq) == []
    decision = re.search(r"queue non-matches without pushdown are (.*?): ActiveMQ", relay.log())
    assert decision is not None and decision.group(1) == "held while the link lives"


@pytest.mark.parametrize("flags", [(), NEVER], ids=["pushdown", "no-pushdown"])
def test_pushed_selector_keeps_non_matches_away_from_the_relay(
        activemq: ActiveMQ, relays: list[RelayProcess], tmp_path: Path, queue: str,
        flags: tuple[str, ...]) -> None:
    """With pushdown ActiveMQ evaluates the selector: the relay's upstream link receives the
    matches only (3, none skipped); without, it receives all six and skips the three blue
    ones."""
    relay = start(relays, activemq, tmp_path, *flags)
    fill(activemq, queue, shapes(durable=True))
    downstream = client(relay)
    try:
        red = receiver(downstream, queue, RED, credit=10, name="counted")
        assert take(red, 3) == [1, 3, 5]
        assert nothing_more(red)
        close(red)
    finally:
        downstream.close()
    counts = eventually(
        lambda: re.search(r"relay consumer 'counted' detached from .*?: (\d+) received, "
                          r"(\d+) sent, (\d+) skipped", relay.log()),
        bool, "the relay consumer's detach line")
    assert counts is not None
    received, sent, skipped = (int(n) for n in counts.groups())
    assert (received, sent, skipped) == ((3, 3, 0) if not flags else (6, 3, 3))
    assert sorted(m.body for m in left_on(activemq, queue)) == [0, 2, 4]


@pytest.mark.parametrize("flags", [(), NEVER], ids=["pushdown", "no-pushdown"])
def test_relay_killed_mid_stream_loses_nothing(
        activemq: ActiveMQ, relays: list[RelayProcess], tmp_path: Path, queue: str,
        flags: tuple[str, ...]) -> None:
    """SIGKILL with matches unsettled (and, without pushdown, non-matches held): after a new
    relay every match is accepted at least once, the non-matches are all still queued, nothing
    is dead-lettered; what ActiveMQ had dispatched to the killed relay comes back with
    delivery-count 1 (a dropped connection counts as a delivery attempt; ActiveMQ never
    dead-letters an AMQP redelivery for its count), what the relay never took with 0."""
    fill(activemq, queue, shapes(30, durable=True))
    red = set(range(1, 30, 2))
    relay = start(relays, activemq, tmp_path, *flags)
    downstream = client(relay)
    filtered = receiver(downstream, queue, RED, credit=5)
    accepted = take(filtered, 5)
    synced(downstream, queue)
    in_flight = {filtered.receive(timeout=30).body for _ in range(3)}  # left unsettled
    relay.kill()
    gone(downstream)

    relay = start(relays, activemq, tmp_path, *flags)
    downstream = client(relay)
    try:
        again = drain_messages(receiver(downstream, queue, RED, credit=10), 2.0)
    finally:
        downstream.close()
    assert set(accepted) | {m.body for m in again} == red
    # an accept the killed relay had sent but ActiveMQ had not read (the reset connection
    # drops it) makes a redelivery: at-least-once, and flagged as one
    assert all(m.delivery_count >= 1 for m in again if m.body in accepted)
    # ActiveMQ counts a delivery attempt for all it had dispatched to the relay's link: the
    # three in flight downstream and what the relay had taken upstream for its window
    assert {m.body for m in again if m.delivery_count} >= in_flight
    assert max(m.delivery_count for m in again) == 1
    rest = left_on(activemq, queue)
    assert sorted(m.body for m in rest) == sorted(set(range(30)) - red)
    assert max(m.delivery_count for m in rest) <= (1 if flags else 0)  # held at the kill: 1
    assert dead_letters(activemq) == []


def test_durable_filtered_subscription_survives_the_client_and_the_relay_going(
        activemq: ActiveMQ, relays: list[RelayProcess], tmp_path: Path, queue: str) -> None:
    """A durable subscription through the relay is durable on ActiveMQ: what the topic gets
    while the client is away (its connection closed, the link only detached) or while the relay
    is down (SIGKILLed) waits there, and the client gets only its matches."""
    topic = f"topic://{queue}"
    batches = shapes(18, durable=True)
    relay = start(relays, activemq, tmp_path)

    def subscribe() -> tuple[BlockingConnection, BlockingReceiver]:
        downstream = client(relay, "subscriber")
        return downstream, receiver(downstream, topic, RED, credit=10, name="reds",
                                    options=[DurableSubscription()])

    downstream, sub = subscribe()
    upstream_attached(relay, "reds")
    fill(activemq, topic, batches[:6])
    assert take(sub, 3) == [1, 3, 5]
    synced(downstream, topic)
    downstream.close()  # the link is not closed: the subscription stays
    fill(activemq, topic, batches[6:12])  # the client is away

    downstream, sub = subscribe()
    assert drain(sub, 2.0) == [7, 9, 11]
    synced(downstream, topic)
    relay.kill()
    gone(downstream)
    fill(activemq, topic, batches[12:])  # the relay is down

    relay = start(relays, activemq, tmp_path)
    downstream, sub = subscribe()
    try:
        got = drain_messages(sub, 2.0)
        assert [m.body for m in got if m.body not in (7, 9, 11)] == [13, 15, 17]
        # at-least-once: an accept the killed relay had sent but ActiveMQ had not read yet
        # (the reset connection drops it) makes a redelivery, flagged as one
        assert all(m.delivery_count >= 1 for m in got if m.body in (7, 9, 11))
        close(sub)  # closed, not detached: the subscription ends upstream too
    finally:
        downstream.close()
    assert dead_letters(activemq) == []


def test_topic_capability_becomes_activemqs_topic_prefix(
        activemq: ActiveMQ, relays: list[RelayProcess], tmp_path: Path, queue: str) -> None:
    """ActiveMQ ignores the ``topic`` capability (``NAME`` with it is the queue ``NAME``); for a
    client that says ``topic`` the relay addresses ``topic://NAME``, the ``topic-prefix`` of
    ActiveMQ's open frame, on its consumers' and producers' upstream links."""
    direct = connect(activemq.url)
    try:
        capped = receiver(direct, queue, credit=10, options=[Capability("topic")])
        send(direct, f"topic://{queue}", [Message(body="to the topic")])
        send(direct, queue, [Message(body="to the queue")])
        assert drain(capped) == ["to the queue"]
    finally:
        direct.close()

    topic = f"{queue}-topic"
    relay = start(relays, activemq, tmp_path)
    downstream, direct = client(relay), connect(activemq.url)
    try:
        watcher = receiver(direct, f"topic://{topic}", credit=10)
        sub = receiver(downstream, topic, RED, credit=10, name="capped",
                       options=[Capability("topic")])
        upstream_attached(relay, "capped")
        producer = downstream.create_sender(topic, options=[Capability("topic")])
        for message in shapes():
            producer.send(message)
        assert take(sub, 3) == [1, 3, 5]
        assert nothing_more(sub)
        assert drain(watcher) == [0, 1, 2, 3, 4, 5]  # published on the topic
    finally:
        downstream.close()
        direct.close()
    assert f"attached to 'topic://{topic}'" in relay.log()
    assert left_on(activemq, topic) == []  # nothing reached the queue of that name


def test_no_local_across_the_relay(activemq: ActiveMQ, relays: list[RelayProcess],
                                   tmp_path: Path, queue: str) -> None:
    """A no-local subscriber is not sent what its own connection published through the relay;
    another connection's subscriber is."""
    topic = f"topic://{queue}"
    relay = start(relays, activemq, tmp_path)
    alice, bob = client(relay), client(relay)
    try:
        mine = receiver(alice, topic, {"nl": Described(NO_LOCAL, [])}, credit=10, name="alice")
        theirs = receiver(bob, topic, credit=10, name="bob")
        upstream_attached(relay, "alice")
        upstream_attached(relay, "bob")
        send(alice, topic, shapes(3))
        send(bob, topic, [Message(body="from bob")])
        assert drain(theirs) == [0, 1, 2, "from bob"]
        assert drain(mine) == ["from bob"]
    finally:
        alice.close()
        bob.close()


def test_activemq_restart_keeps_links_and_durable_messages(
        activemq: ActiveMQ, relays: list[RelayProcess], tmp_path: Path, queue: str) -> None:
    """ActiveMQ stopped and started again: the relay reconnects, the client's consumer and
    producer links stay attached and go on, and the persistent messages are all there."""
    relay = start(relays, activemq, tmp_path)
    fill(activemq, f"{queue}-kept", shapes(durable=True))
    batches = shapes(12, durable=True)
    downstream = client(relay)
    try:
        red = receiver(downstream, queue, RED, credit=10)
        producer = downstream.create_sender(queue)
        for message in batches[:6]:
            producer.send(message)
        assert take(red, 3) == [1, 3, 5]
        synced(downstream, queue)
        # ActiveMQ acks asynchronously: an ack still on its way at the SIGTERM is lost, and the
        # message redelivered (at-least-once); wait until the three are gone
        eventually(lambda: browse(activemq, queue), lambda rest: rest == [0, 2, 4],
                   "ActiveMQ acked the accepted messages")

        activemq.process.restart()
        eventually(lambda: relay.log().count("open (offers"), lambda n: n >= 2,
                   "the relay reconnected to ActiveMQ", timeout=60)
        upstream_attached(relay, red.link.name, times=2)
        for message in batches[6:]:
            producer.send(message)  # the same downstream link as before the restart
        assert take(red, 3) == [7, 9, 11]
        kept = receiver(downstream, f"{queue}-kept", RED, credit=10)
        assert take(kept, 3) == [1, 3, 5]
        close(kept)
    finally:
        downstream.close()
    assert sorted(m.body for m in left_on(activemq, f"{queue}-kept")) == [0, 2, 4]
    assert sorted(m.body for m in left_on(activemq, queue)) == [0, 2, 4, 6, 8, 10]
    assert dead_letters(activemq) == []
