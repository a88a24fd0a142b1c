"""Relay mode in front of a real third-party broker: RabbitMQ 3.10, which filters nothing."""

from __future__ import annotations

import contextlib
import time
import uuid

import pytest
from proton import Described, Message, Timeout, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection, LinkDetached

from .relay_rabbit import Rabbit
from .relay_support import RelayFactory


def _id(message: Message) -> int:
    assert isinstance(message.id, int)
    return int(message.id)


def _queue() -> str:
    return f"/queue/relay-{uuid.uuid4().hex[:8]}"


def _sql(text: str) -> Filter:
    return Filter({symbol("f"): Described(symbol("amqp:sql-filter"), text)})


def _direct(rabbit: Rabbit) -> BlockingConnection:
    return BlockingConnection(rabbit.url, allowed_mechs="ANONYMOUS PLAIN", timeout=20)


def _publish_direct(rabbit: Rabbit, address: str, count: int) -> None:
    conn = _direct(rabbit)
    sender = conn.create_sender(address)
    for i in range(count):
        sender.send(Message(id=i, body=f"m{i}", properties={"i": i, "even": i % 2 == 0}))
    conn.close()


def _drain(conn: BlockingConnection, address: str, options: Filter | None = None,
           *, timeout: float = 2.0, credit: int = 50, close: bool = True) -> list[int]:
    """Receive and accept until nothing comes for ``timeout`` seconds; the message ids."""
    receiver = conn.create_receiver(address, options=options, credit=credit)
    ids: list[int] = []
    while True:
        try:
            message = receiver.receive(timeout=timeout)
        except Timeout:
            break
        ids.append(_id(message))
        receiver.accept()
    if close:  # not on RabbitMQ directly: its detach reply lacks closed=true
        receiver.close()
    return ids


def _drain_direct(rabbit: Rabbit, address: str) -> list[int]:
    conn = _direct(rabbit)
    ids = _drain(conn, address, timeout=1, close=False)
    conn.close()
    return ids


def test_filtered_consumer_gets_only_matches_and_the_rest_stays_upstream(
    rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    address = _queue()
    relay = relay_factory(rabbit.url)
    conn = BlockingConnection(relay.address, timeout=20)
    sender = conn.create_sender(address)  # producers go through the relay too
    for i in range(20):
        sender.send(Message(id=i, body=f"m{i}", properties={"i": i, "even": i % 2 == 0}))
    got = _drain(conn, address, _sql("even = TRUE"))
    conn.close()
    assert sorted(got) == list(range(0, 20, 2))
    # The non-matching ones were held, never consumed, and released when the link went.
    rest = _drain_direct(rabbit, address)
    assert sorted(rest) == list(range(1, 20, 2))
    assert "selector pushdown off" in relay.log()  # RabbitMQ offers no capability


def test_competing_filtered_consumers_split_the_queue(
    rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    address = _queue()
    _publish_direct(rabbit, address, 30)
    relay = relay_factory(rabbit.url)
    conn = BlockingConnection(relay.address, timeout=20)
    evens = conn.create_receiver(address, name="evens", options=_sql("even = TRUE"), credit=50)
    odds = conn.create_receiver(address, name="odds", options=_sql("even = FALSE"), credit=50)
    seen: dict[str, list[int]] = {"even": [], "odd": []}
    for name, receiver in (("even", evens), ("odd", odds)):
        while True:
            try:
                message = receiver.receive(timeout=2)
            except Timeout:
                break
            seen[name].append(_id(message))
            receiver.accept()
    conn.close()
    assert sorted(seen["even"]) == list(range(0, 30, 2))
    assert sorted(seen["odd"]) == list(range(1, 30, 2))


def test_refusal_stays_local(rabbit: Rabbit, relay_factory: RelayFactory) -> None:
    relay = relay_factory(rabbit.url)
    conn = BlockingConnection(relay.address, timeout=20)
    with pytest.raises(LinkDetached) as info:
        conn.create_receiver(_queue(), options=_sql("even = = TRUE"))
    assert "amqp:invalid-field" in str(info.value)
    conn.close()
    assert "relay consumer" not in relay.log()


def test_reject_and_release_are_passed_upstream(
    rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    address = _queue()
    _publish_direct(rabbit, address, 2)
    relay = relay_factory(rabbit.url)
    conn = BlockingConnection(relay.address, timeout=20)
    receiver = conn.create_receiver(address, credit=1)
    first = receiver.receive(timeout=10)
    receiver.release()  # back upstream, and delivered again
    for _ in range(2):
        message = receiver.receive(timeout=10)
        if message.id == first.id:
            receiver.reject()  # RabbitMQ drops it (no dead-letter exchange configured)
            break
        receiver.accept()
    else:
        pytest.fail("the released message did not come back")
    receiver.close()
    conn.close()
    assert _drain_direct(rabbit, address) == []


def test_nothing_is_lost_when_the_relay_is_killed_mid_stream(
    rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    address = _queue()
    total = 200
    _publish_direct(rabbit, address, total)
    wanted = set(range(0, total, 2))
    relay = relay_factory(rabbit.url)
    conn = BlockingConnection(relay.address, timeout=20)
    receiver = conn.create_receiver(address, options=_sql("even = TRUE"), credit=20)
    first_run: list[int] = []
    for _ in range(40):
        message = receiver.receive(timeout=10)
        first_run.append(_id(message))
        receiver.accept()
    unacked = receiver.receive(timeout=10)  # taken, never settled: must come back
    with contextlib.suppress(Timeout):  # let the client's accepts go out
        conn.wait(lambda: False, timeout=0.5)
    relay.kill()  # the old client connection is simply abandoned

    relay = relay_factory(rabbit.url)
    conn = BlockingConnection(relay.address, timeout=20)
    second_run = _drain(conn, address, _sql("even = TRUE"), timeout=3)
    conn.close()

    seen = first_run + second_run
    assert set(seen) == wanted, f"lost: {sorted(wanted - set(seen))}"
    assert _id(unacked) in second_run
    # Duplicates only as redeliveries of what was in flight when the relay died: at most the
    # consumer's credit (20) of unsettled messages, plus accepts still on their way (20 more).
    duplicates = [i for i in set(seen) if seen.count(i) > 1]
    assert len(duplicates) <= 2 * 20 + 1
    assert sorted(_drain_direct(rabbit, address)) == list(range(1, total, 2))


def test_topic_subscriber_skips_non_matches(rabbit: Rabbit, relay_factory: RelayFactory) -> None:
    topic = f"/topic/relay-{uuid.uuid4().hex[:8]}"
    relay = relay_factory(rabbit.url)
    conn = BlockingConnection(relay.address, timeout=20)
    subscriber = conn.create_receiver(topic, name="sub", options=_sql("even = TRUE"), credit=50)
    plain = conn.create_receiver(topic, name="plain", credit=50)
    # RabbitMQ drops what is published before a subscription's queue is bound.
    deadline = time.monotonic() + 10
    while relay.log().count("upstream link") < 2:
        assert time.monotonic() < deadline, "the relay did not attach upstream"
        time.sleep(0.05)
    sender = conn.create_sender(topic)
    for i in range(10):
        sender.send(Message(id=i, body=f"m{i}", properties={"i": i, "even": i % 2 == 0}))
    got: dict[str, list[int]] = {"sub": [], "plain": []}
    for name, receiver in (("sub", subscriber), ("plain", plain)):
        while True:
            try:
                message = receiver.receive(timeout=2)
            except Timeout:
                break
            got[name].append(_id(message))
            receiver.accept()
    conn.close()
    assert got["sub"] == [0, 2, 4, 6, 8]
    assert got["plain"] == list(range(10))  # every subscriber has its own copy
