"""The relay in front of Qpid Broker-J 9.2 (from Maven Central, one JVM per test session).

Broker-J evaluates ``apache.org:selector-filter:string`` (and no-local) on AMQP 1.0
links and refuses every other filter type with ``amqp:not-implemented``; the relay
recognises it by the ``product`` of its open frame (``Apache Qpid Broker-J Core``),
pushes only a JMS selector and gives a queue's non-matches back as ``modified``
(undeliverable-here) when nothing is pushed. Queues ``filtex-...`` are created on
first use (the fixture's node auto-creation policy); other unknown addresses are
refused with ``amqp:not-found``. Topics are exchanges: ``amq.topic/KEY`` subscribes
with binding key ``KEY``. Clients are python-qpid-proton over real sockets.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Described, Message, Terminus, symbol
from proton.reactor import DurableSubscription, Filter
from proton.utils import BlockingConnection, BlockingReceiver

from tests.relay.relay_support import RelayProcess, TopicSource
from upstreams.brokerj import BrokerJ

from .integration_support import (
    SELECTOR,
    SQL,
    close,
    connect,
    drain,
    eventually,
    nothing_more,
    receiver,
    refusal,
    send,
    shapes,
    take,
    take_until,
)

PROPERTIES = symbol("amqp:application-properties-filter")
NO_LOCAL = Described(symbol("apache.org:no-local-filter:list"), [])


def _relay(broker_j: BrokerJ, workdir: Path, *extra: str) -> RelayProcess:
    return RelayProcess(broker_j.url, workdir, "--upstream-user", broker_j.user,
                        "--upstream-password", broker_j.password, *extra)


@pytest.fixture(scope="module")
def relay(broker_j: BrokerJ, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[RelayProcess]:
    """The relay with its defaults (``--upstream-selector auto``, ``--upstream-non-match
    auto``)."""
    process = _relay(broker_j, tmp_path_factory.mktemp("brokerj-relay"))
    yield process
    process.stop()


def _direct(broker_j: BrokerJ, container_id: str | None = None) -> BlockingConnection:
    if container_id is None:
        return connect(broker_j.url, broker_j.user, broker_j.password)
    return BlockingConnection(broker_j.url, timeout=30, user=broker_j.user,
                              password=broker_j.password, allowed_mechs="PLAIN",
                              allow_insecure_mechs=True, container_id=container_id)


def _queue() -> str:
    return f"filtex-{uuid.uuid4().hex[:8]}"


def _left_on(broker_j: BrokerJ, queue: str) -> list[object]:
    """Everything still on a Broker-J queue, read there directly (and consumed)."""
    direct = _direct(broker_j)
    try:
        return sorted(drain(receiver(direct, queue)))
    finally:
        direct.close()


def _detach_line(relay: RelayProcess, rcv: BlockingReceiver) -> re.Match[str]:
    """The relay's log line for a consumer link that detached: received from the upstream,
    sent downstream, skipped (non-matches the upstream gave it)."""
    pattern = re.compile(rf"relay consumer '{re.escape(rcv.link.name)}' detached from .*?: "
                         r"(\d+) received, (\d+) sent, (\d+) skipped")
    found = eventually(lambda: pattern.search(relay.log()), lambda m: m is not None,
                       f"the relay logs the detach of {rcv.link.name}")
    assert found is not None
    return found


def test_the_relay_knows_broker_j(relay: RelayProcess) -> None:
    eventually(relay.log, lambda log: "queue non-matches" in log, "the upstream opened")
    log = relay.log()
    assert "selector pushdown on: Qpid Broker-J 9.2.1" in log
    assert "are modified (undeliverable-here): Qpid Broker-J 9.2.1" in log


def test_sql_jms_and_property_filters_take_exactly_their_matches(
        broker_j: BrokerJ, relay: RelayProcess) -> None:
    queue = _queue()
    direct = _direct(broker_j)
    send(direct, queue, shapes())  # n = 0..5, odd red, even blue
    direct.close()
    downstream = connect(relay.address)
    try:
        for filters, wanted in (
                ({"sql": Described(SQL, "n > 3")}, [4, 5]),
                ({"jms": Described(SELECTOR, "colour = 'red' AND n < 2")}, [1]),
                ({"props": Described(PROPERTIES, {"colour": "blue"})}, [0, 2])):
            filtered = receiver(downstream, queue, filters)
            assert take(filtered, len(wanted)) == wanted
            assert nothing_more(filtered)
            close(filtered)
    finally:
        downstream.close()
    # nothing lost: the message no filter took is still on the Broker-J queue (its default
    # queues have no alternate binding, i.e. no dead-letter queue: nothing could go there)
    assert _left_on(broker_j, queue) == [3]


def test_a_rejected_message_comes_back(broker_j: BrokerJ, relay: RelayProcess) -> None:
    """Broker-J has no dead-letter queue by default and counts ``rejected`` as a failed
    delivery: the message is back on the queue, for the same consumer too."""
    queue = _queue()
    direct = _direct(broker_j)
    send(direct, queue, shapes())
    direct.close()
    downstream = connect(relay.address)
    try:
        red = receiver(downstream, queue, {"red": Described(SQL, "colour = 'red'")})
        first = red.receive(timeout=30)
        red.reject()
        assert (first.body, first.delivery_count) == (1, 0)
        seen = set()
        for _ in range(3):
            message = red.receive(timeout=30)
            seen.add((message.body, message.delivery_count))
            red.accept()
        assert seen == {(1, 1), (3, 0), (5, 0)}  # 1 again, its delivery count raised
        assert nothing_more(red)
        close(red)
    finally:
        downstream.close()
    assert _left_on(broker_j, queue) == [0, 2, 4]


def test_pushdown_keeps_non_matches_away_from_the_relay(
        broker_j: BrokerJ, relay: RelayProcess, tmp_path: Path) -> None:
    """Each relay's link logs what the upstream gave it: sent downstream plus skipped."""
    without = _relay(broker_j, tmp_path / "never", "--upstream-selector", "never")
    try:
        received = {}
        for label, through in (("auto", relay), ("never", without)):
            queue = _queue()
            direct = _direct(broker_j)
            send(direct, queue, shapes())
            downstream = connect(through.address)
            red = receiver(downstream, queue, {"red": Described(SQL, "colour = 'red'")})
            assert take(red, 3) == [1, 3, 5]
            # the rest is at once available to a plain Broker-J consumer while the filtered
            # link is attached: with pushdown never taken, without it given back as modified
            # (undeliverable-here), which Broker-J honours: not offered to the relay again
            assert sorted(take(receiver(direct, queue), 3)) == [0, 2, 4]
            assert nothing_more(red)
            close(red)
            downstream.close()
            direct.close()
            line = _detach_line(through, red)
            assert line.group(2) == "3", line.group(0)  # sent downstream
            # what the upstream gave the link: sent downstream, or skipped here
            assert int(line.group(1)) == int(line.group(2)) + int(line.group(3)), line.group(0)
            received[label] = int(line.group(1))
        # pushed down, Broker-J's selector kept the blue ones on its queue; not pushed, the
        # relay was given each of the six exactly once
        assert received == {"auto": 3, "never": 6}
        assert "selector pushed upstream: \"colour = 'red'\"" in relay.log()
        assert "nothing pushed upstream (selector pushdown is off for this upstream)" in \
            without.log()
        assert "selector pushdown off: --upstream-selector never" in without.log()
    finally:
        without.stop()


def test_broker_j_refuses_what_the_relay_never_forwards(
        broker_j: BrokerJ, relay: RelayProcess) -> None:
    direct = _direct(broker_j)
    try:
        condition = refusal(direct, "orders", {"sql": Described(SQL, "n > 1")})
        assert condition.name == "amqp:not-implemented"
        assert "Unsupported filter type: amqp:sql-filter" in str(condition.description)
    finally:
        direct.close()
    # the same SQL filter through the relay: only a JMS selector goes up (else the relay
    # evaluates the filter alone), so Broker-J accepts the upstream link
    downstream = connect(relay.address)
    try:
        filtered = receiver(downstream, "orders", {"sql": Described(SQL, "n > 1"),
                                                    "nl": NO_LOCAL})
        assert nothing_more(filtered)  # still attached: Broker-J took the upstream link
        close(filtered)
    finally:
        downstream.close()
    log = relay.log()
    assert f"link '{filtered.link.name}': selector pushed upstream: 'n " in log  # went up
    assert f"upstream link '{filtered.link.name}@relay' attached to 'orders'" in log


def test_an_upstream_refusal_is_the_refusal_of_the_clients_attach(relay: RelayProcess) -> None:
    """Broker-J creates no queue outside its auto-creation pattern: it refuses the relay's
    upstream attach, and the relay, which answers the client only once Broker-J has answered,
    refuses the client's attach (null source) with Broker-J's error."""
    downstream = connect(relay.address)
    try:
        condition = refusal(downstream, f"unknown-{uuid.uuid4().hex[:8]}", {
            "jms": Described(SELECTOR, "colour = 'red'")})
        assert condition.name == "amqp:not-found"
        assert "Could not find destination" in str(condition.description)
        # the connection and its other links are unharmed
        assert nothing_more(receiver(downstream, "orders"))
    finally:
        downstream.close()


def test_relay_killed_mid_stream_loses_nothing(broker_j: BrokerJ, tmp_path: Path) -> None:
    queue = _queue()
    direct = _direct(broker_j)
    send(direct, queue, [Message(body=n, durable=True, properties={"even": n % 2 == 0})
                         for n in range(20)])
    direct.close()
    first = _relay(broker_j, tmp_path / "first")
    accepted: list[object] = []
    downstream = connect(first.address)
    evens = receiver(downstream, queue, {"even": Described(SQL, "even = TRUE")})
    accepted += take(evens, 3)
    unacked = [evens.receive(timeout=30).body for _ in range(2)]  # in flight, never settled
    first.kill()  # its client connection is dead with it (closing it would wait for nothing)
    second = _relay(broker_j, tmp_path / "second")
    try:
        downstream = connect(second.address)
        evens = receiver(downstream, queue, {"even": Described(SQL, "even = TRUE")})
        rest = take_until(evens, set(range(0, 20, 2)) - set(accepted))
        assert nothing_more(evens)
        downstream.close()
    finally:
        second.stop()
    accepted += rest
    # at least once: every even message accepted, the unsettled ones redelivered
    assert sorted(set(accepted)) == list(range(0, 20, 2))
    assert set(unacked) <= set(rest)
    assert _left_on(broker_j, queue) == list(range(1, 20, 2))


def _subscribe(relay: RelayProcess, client: str, name: str) -> tuple[BlockingConnection,
                                                                      BlockingReceiver]:
    conn = BlockingConnection(relay.address, timeout=30, container_id=client)
    sub = conn.create_receiver("amq.topic/orders.*", name=name, options=[
        DurableSubscription(), TopicSource(),
        Filter({symbol("red"): Described(SQL, "colour = 'red'")})])
    return conn, sub


def test_durable_subscription_through_the_relay_survives_its_restart(
        broker_j: BrokerJ, tmp_path: Path) -> None:
    client, name = f"client-{uuid.uuid4().hex[:6]}", "reds"
    first = _relay(broker_j, tmp_path / "first")
    conn, sub = _subscribe(first, client, name)
    source = sub.link.remote_source
    assert (source.durability, source.expiry_policy) != (Terminus.NONDURABLE, None)
    eventually(first.log, lambda log: "upstream link" in log, "the upstream subscription")
    direct = _direct(broker_j)
    colours = ["red", "blue", "red", "blue"]
    send(direct, "amq.topic/orders.eu", [
        Message(body=f"a{i}", durable=True, properties={"colour": c})
        for i, c in enumerate(colours)])
    send(direct, "amq.topic/stock.eu", [Message(body="other", properties={"colour": "red"})])
    assert take(sub, 2) == ["a0", "a2"]
    assert nothing_more(sub)
    first.stop()  # the client's connection goes; the subscription stays on Broker-J
    conn.close()
    send(direct, "amq.topic/orders.us", [
        Message(body=f"b{i}", durable=True, properties={"colour": c})
        for i, c in enumerate(colours)])
    second = _relay(broker_j, tmp_path / "second")
    try:
        conn, sub = _subscribe(second, client, name)
        assert take(sub, 2) == ["b0", "b2"]  # published while no relay ran
        assert nothing_more(sub)
        close(sub)  # detach closed: unsubscribe, upstream too
        conn.close()
        # the subscription is gone: what is published now is kept for nobody
        send(direct, "amq.topic/orders.eu", [Message(body="c0", properties={"colour": "red"})])
        conn, sub = _subscribe(second, client, name)
        assert nothing_more(sub)
        close(sub)
        conn.close()
    finally:
        second.stop()
        direct.close()


def test_no_local_across_the_relay_on_a_topic(relay: RelayProcess) -> None:
    address = f"amq.topic/nl-{uuid.uuid4().hex[:6]}"
    alice = connect(relay.address)
    bob = connect(relay.address)
    try:
        alice_sub = alice.create_receiver(address, name=f"alice-{uuid.uuid4().hex[:6]}",
                                          options=[TopicSource(), Filter({"nl": NO_LOCAL})])
        eventually(relay.log, lambda log: f"upstream link '{alice_sub.link.name}@relay'" in log,
                   "alice's upstream subscription")
        for conn, who in ((alice, "a"), (bob, "b")):
            send(conn, address, [Message(body=f"{who}{i}") for i in range(3)])
        assert drain(alice_sub) == ["b0", "b1", "b2"]
    finally:
        alice.close()
        bob.close()


def test_broker_j_restart_keeps_the_client_attached(broker_j: BrokerJ,
                                                    relay: RelayProcess) -> None:
    """Last in the module: it restarts the session's Broker-J (BDB store: durable queues and
    durable messages survive)."""
    queue = _queue()
    direct = _direct(broker_j)
    send(direct, queue, [Message(body=n, durable=True, properties={"n": n}) for n in range(10)])
    direct.close()
    downstream = connect(relay.address)
    try:
        big = receiver(downstream, queue, {"big": Described(SQL, "n >= 4")})
        got = take(big, 2)
        broker_j.process.restart()
        direct = _direct(broker_j)
        send(direct, queue, [Message(body=n, durable=True, properties={"n": n})
                             for n in range(10, 14)])
        direct.close()
        # the same link: the relay reconnected under it
        got += take_until(big, set(range(4, 14)) - set(got))
        assert nothing_more(big)
        close(big)
    finally:
        downstream.close()
    assert sorted(set(got)) == list(range(4, 14))
    assert "reconnecting" in relay.log()
    assert _left_on(broker_j, queue) == [0, 1, 2, 3]
