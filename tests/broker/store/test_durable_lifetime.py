"""Message lifetime in the durable store (``--data-dir``) across a SIGKILL and a restart:
AMQP 1.0 part 3 §3.2.1 (header ttl, counted from the broker's first arrival, not again from a
restart), §3.2.4 (properties absolute-expiry-time) and the x-opt-delivery-delay and
x-opt-delivery-time message annotations (§3.2.3) of scheduled delivery.

A timed message is logged as a ``timed`` record holding its absolute expiry and visibility
(broker/store/records.py), so after a crash what expired meanwhile is dead-lettered at once,
what has not expires at its original time, and a scheduled message appears at its original
time. Clean restarts (in this process) check the recorded times exactly, compaction included.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import Delivery, Message, Timeout
from proton.reactor import DurableSubscription
from proton.utils import LinkDetached, SendException

from filtex_broker.nodes.lifetime import Lifetime
from filtex_broker.nodes.queue import Queue
from filtex_broker.store import log as store_module
from filtex_broker.store.log import Journal
from filtex_broker.store.records import ENQUEUE, META, TIMED, TIMES, parse

from ..broker_clients import (
    TIMEOUT,
    BrokerFactory,
    RawReceiver,
    RunningBroker,
    TopicOption,
    connect,
    message,
    nothing_more,
    send,
    sql,
)
from ..fault_clients import BrokerProcess
from ..lifetime.lifetime_clients import (
    NODE,
    REASON,
    annotations_of,
    expired_at,
    now_ms,
    of_case,
    take,
    timed,
)

SLACK = 0.002
"""Seconds: the broker keeps times in whole ms, truncated."""
KILL_AT = 1.0
"""Seconds after the send: the broker is killed then (the ttls and delays below are 3 s)."""


class Clocked(RawReceiver):
    """Keeps each delivery's body and the wall-clock time it arrived (accepting it)."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[tuple[Message, float]] = []

    def on_delivery(self, event: Any) -> None:
        before = len(self.received)
        super().on_delivery(event)
        for data, _ in self.received[before:]:
            m = Message()
            m.decode(data)
            self.got.append((m, time.time()))


def bodies_at(handler: Clocked, t0: float) -> list[tuple[str, float]]:
    """What arrived, and when (s after t0)."""
    return [(str(m.body), round(when - t0, 3)) for m, when in handler.got]


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path, "--data-dir", str(tmp_path / "data"))
    yield process
    process.kill()


def test_a_killed_broker_keeps_expiry_and_schedule_times(broker_process: BrokerProcess) -> None:
    """Sent at t0, the broker killed at t0 + 1 s and restarted: the ttl 300 ms message
    (expired before the kill) and the ttl 1500 ms one (expired while down, or soon after)
    are dead-lettered; the two ttl 3 s ones and a durable subscription's expire at t0 + 3 s,
    before a ttl counted from the restart could end; the scheduled ones appear at t0 + 1.5,
    3 and 3.5 s, not before; the plain ones stay."""
    case, expiring, scheduled, topic = "kept", "kept.ttl", "kept.scheduled", "kept.topic"
    url = broker_process.start()
    durable = [TopicOption(), DurableSubscription(), of_case(case)]
    subscriber = connect(url, container_id="lifetime-1")
    subscriber.create_receiver(topic, name="sub", options=durable)
    subscriber.close()  # detached: the subscription collects on its own
    conn = connect(url)
    t0 = time.time()
    start = now_ms()
    send(conn.create_sender(expiring), timed(case, "ttl-300", ttl=300),
         timed(case, "ttl-1500", ttl=1500), timed(case, "ttl-3000", ttl=3000),
         timed(case, "ttl-3000", ttl=3000), timed(case, "plain"))
    send(conn.create_sender(scheduled), timed(case, "plain"),
         timed(case, "delay-3000", delay=3000), timed(case, "at-3500", at=start + 3500),
         timed(case, "delay-1500", delay=1500))
    send(conn.create_sender(topic, options=TopicOption()),
         timed(case, "topic-ttl-3000", ttl=3000), timed(case, "topic-plain"))
    sent_by = now_ms()
    conn.close()
    time.sleep(max(0.0, t0 + KILL_AT - time.time()))
    broker_process.kill()

    restarted = time.time()  # recovery comes after: a ttl counted from it ends later than +3
    url = broker_process.start()
    conn = connect(url)
    dead, due = Clocked(), Clocked()
    # Kept referenced: a handler receiver that is garbage-collected hears nothing more.
    receivers = [conn.create_receiver("DLQ", credit=20, handler=dead, options=of_case(case)),
                 conn.create_receiver(scheduled, credit=20, handler=due)]
    try:
        conn.wait(lambda: len(dead.got) >= 5 and len(due.got) >= 4, timeout=TIMEOUT)
    except Timeout:
        pytest.fail(f"dead letters {bodies_at(dead, t0)}, scheduled {bodies_at(due, t0)}")

    assert sorted(str(m.body) for m, _ in dead.got) == [
        "topic-ttl-3000", "ttl-1500", "ttl-300", "ttl-3000", "ttl-3000"]
    assert all(annotations_of(m)[REASON] == "expired" for m, _ in dead.got)
    assert {str(annotations_of(m)[NODE]) for m, _ in dead.got} == {expiring, topic}
    last = {m.body: (m, when) for m, when in dead.got}
    for body in ("ttl-3000", "topic-ttl-3000"):
        m, when = last[body]
        expired = expired_at(m)
        assert start + 3000 <= expired <= sent_by + 3000, (body, expired - start)
        assert t0 + 3.0 - SLACK <= when < restarted + 3.0, (body, when - t0)

    assert [m.body for m, _ in due.got] == ["plain", "delay-1500", "delay-3000", "at-3500"]
    times = {m.body: when for m, when in due.got}
    assert times["delay-1500"] >= t0 + 1.5 - SLACK
    assert t0 + 3.0 - SLACK <= times["delay-3000"] < restarted + 3.0, times["delay-3000"] - t0
    assert times["at-3500"] >= start / 1000 + 3.5 - SLACK

    assert all(r.link.credit > 0 for r in receivers)
    receiver = conn.create_receiver(expiring, credit=10)
    assert [m.body for m in take(receiver, 1)] == ["plain"]
    assert nothing_more(conn, receiver)
    conn.close()
    back = connect(url, container_id="lifetime-1")
    found = back.create_receiver(None, name="sub", credit=10)  # resumed, as Qpid JMS does
    assert [m.body for m in take(found, 1)] == ["topic-plain"]
    assert nothing_more(back, found)
    back.close()
    assert broker_process.stop() == 0


# -- clean restarts: the recorded times, exactly ----------------------------------------------


def queue_of(running: RunningBroker, address: str) -> Queue:
    node = running.broker.registry.lookup(address)
    assert isinstance(node, Queue)
    return node


def restart(factory: BrokerFactory, running: RunningBroker, data_dir: Path) -> RunningBroker:
    running.broker.stop()
    running.thread.join(TIMEOUT)
    assert not running.thread.is_alive()
    return factory(data_dir=data_dir)


def held_times(running: RunningBroker, address: str) -> dict[str, Lifetime]:
    """Each held message's lifetime, by body, as the broker has it."""
    journal = queue_of(running, address).journal
    assert isinstance(journal, Journal)
    out = {}
    for entry in journal.ids:
        m = Message()
        m.decode(entry.data)
        out[str(m.body)] = entry.lifetime
    return out


def logged_times(data_dir: Path) -> list[tuple[int, tuple[int, int] | None]]:
    """Each message record of the one log: its kind, and the times of a timed record."""
    (path,) = data_dir.glob("*.log")
    records, _ = parse(path.read_bytes())
    out: list[tuple[int, tuple[int, int] | None]] = []
    for kind, _, payload in records:
        if kind == TIMED:
            out.append((kind, TIMES.unpack_from(payload)))
        elif kind != META:
            out.append((kind, None))
    return out


def timed_records(logged: list[tuple[int, tuple[int, int] | None]]) -> list[tuple[int, int]]:
    """The times of the timed records, sorted."""
    return sorted(times for _, times in logged if times is not None)


def test_a_restart_and_a_compaction_keep_the_absolute_times(
        broker_factory: BrokerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Times far ahead, so nothing is due during the test: what the broker holds after a restart
    and after a compaction of the log is what it held at arrival, to the ms."""
    monkeypatch.setattr(store_module, "COMPACT_MIN_BYTES", 32 * 1024)
    case = address = "lifetime.restarted"
    running = broker_factory(data_dir=tmp_path)
    conn = connect(running.url)
    start = now_ms()
    send(conn.create_sender(address), timed(case, "ttl", ttl=600_000),
         timed(case, "expiry", expiry=start + 700_000), timed(case, "delay", delay=800_000),
         timed(case, "at", at=start + 900_000, ttl=950_000), timed(case, "plain"))
    sent_by = now_ms()
    before = held_times(running, address)
    assert start + 600_000 <= (before["ttl"].expires_ms or 0) <= sent_by + 600_000
    assert before["expiry"].expires_ms == start + 700_000
    assert start + 800_000 <= (before["delay"].visible_ms or 0) <= sent_by + 800_000
    assert before["at"].visible_ms == start + 900_000
    assert before["plain"].expires_ms is None and before["plain"].visible_ms is None
    expected = sorted((b.expires_ms or 0, b.visible_ms or 0)
                      for body, b in before.items() if body != "plain")
    assert timed_records(logged_times(tmp_path)) == expected
    assert [kind for kind, _ in logged_times(tmp_path)] == [TIMED] * 4 + [ENQUEUE]
    conn.close()

    running = restart(broker_factory, running, tmp_path)
    assert held_times(running, address) == before
    queue = queue_of(running, address)
    assert (queue.depth(), queue.held_back()) == (5, 2)
    # Enough acknowledged filler that the log is compacted: rewritten from what is held.
    conn = connect(running.url)
    send(conn.create_sender(address), *(message("x" * 1000, n=k) for k in range(60)))
    filler = conn.create_receiver(address, credit=60, options=sql("n IS NOT NULL"))
    take(filler, 60)
    conn.create_receiver(None, dynamic=True)  # a round trip: the acks are in
    conn.close()
    running = restart(broker_factory, running, tmp_path)
    logged = logged_times(tmp_path)
    assert sum(kind == ENQUEUE for kind, _ in logged) < 1 + 60, "the log was not compacted"
    assert [kind for kind, _ in logged[:5]] == [TIMED] * 4 + [ENQUEUE]  # rewritten first
    assert timed_records(logged) == expected
    assert held_times(running, address) == before
    conn = connect(running.url)
    receiver = conn.create_receiver(address, credit=10)
    assert [m.body for m in take(receiver, 3)] == ["ttl", "expiry", "plain"]  # two are held
    assert nothing_more(conn, receiver)
    conn.close()


# -- a time beyond what a timed record holds ---------------------------------------------------

FAR = 2**63 - 1
"""x-opt-delivery-delay is a long: this one, added to the arrival, is past the signed 64 bits
of a timed record's visibility."""


def test_a_delivery_delay_too_far_to_log_leaves_the_producer_and_the_queue_working(
        broker_factory: BrokerFactory, tmp_path: Path) -> None:
    """Held (in effect for ever), delivered at once (the delay ignored as unreadable) or
    refused, but not an internal error that detaches the producer: the next message goes
    through."""
    case = address = "lifetime.far"
    running = broker_factory(data_dir=tmp_path)
    conn = connect(running.url)
    sender = conn.create_sender(address)
    try:
        sender.send(timed(case, "far", delay=FAR), timeout=TIMEOUT)
    except SendException as refused:
        assert refused.state == Delivery.REJECTED
    send(sender, timed(case, "after"))
    queue = queue_of(running, address)
    receiver = conn.create_receiver(address, credit=10)
    got = [m.body for m in take(receiver, queue.depth() - queue.held_back())]
    assert got in (["after"], ["far", "after"])
    assert nothing_more(conn, receiver)
    conn.close()


def test_a_delivery_delay_too_far_to_log_does_not_break_compaction(
        broker_factory: BrokerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever became of the far message, the log goes on: acknowledged filler is compacted
    away, consumers' acknowledgements are taken, and a restart holds what it held before."""
    monkeypatch.setattr(store_module, "COMPACT_MIN_BYTES", 32 * 1024)
    case = address = "lifetime.far.compacted"
    running = broker_factory(data_dir=tmp_path)
    conn = connect(running.url)
    # refused, or the first failure (the test above): not this test's point
    with contextlib.suppress(SendException, LinkDetached):
        send(conn.create_sender(address), timed(case, "far", delay=FAR))
    held = queue_of(running, address).depth()
    send(conn.create_sender(address, name="filler"),
         *(message("x" * 1000, n=k) for k in range(60)))
    filler = conn.create_receiver(address, credit=60, options=sql("n IS NOT NULL"))
    take(filler, 60)
    conn.create_receiver(None, dynamic=True)  # a round trip: the acks are in
    assert queue_of(running, address).depth() == held
    conn.close()
    running = restart(broker_factory, running, tmp_path)
    queue = queue_of(running, address)
    assert queue.depth() == held
    conn = connect(running.url)
    receiver = conn.create_receiver(address, credit=10)
    assert [m.body for m in take(receiver, held - queue.held_back())] == \
        ["far"] * (held - queue.held_back())
    assert nothing_more(conn, receiver)
    conn.close()
