"""The durable store (``--data-dir``): records, recovery, torn tails, compaction, restarts.

Restarts here are clean (the broker is stopped and a new one opened on the same
directory, in this process); crashes (SIGKILL of a broker process) are in
``test_faults.py``.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest
from proton import Delivery, Message
from proton.reactor import DurableSubscription
from proton.utils import SendException

from filtex_broker.config import load_config
from filtex_broker.nodes.queue import Queue
from filtex_broker.store import log as store_module
from filtex_broker.store.log import Store, StoreLockedError
from filtex_broker.store.records import ACK, ENQUEUE, META, parse, record

from ..broker_clients import (
    TIMEOUT,
    BrokerFactory,
    DiskFull,
    RunningBroker,
    TopicOption,
    bodies,
    connect,
    message,
    nothing_more,
    raw_receiver,
    send,
    sql,
    wait_for,
    wait_received,
)


def restart(factory: BrokerFactory, running: RunningBroker, data_dir: Path) -> RunningBroker:
    """Stop a broker cleanly and open a new one on the same data directory."""
    running.broker.stop()
    running.thread.join(TIMEOUT)
    assert not running.thread.is_alive()
    return factory(data_dir=data_dir)


def logs(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("*.log"))


def queue_of(running: RunningBroker, address: str) -> Queue:
    node = running.broker.registry.lookup(address)
    assert isinstance(node, Queue)
    return node


# -- the log format ------------------------------------------------------------------------


def test_records_round_trip_and_a_torn_tail_is_where_parsing_stops() -> None:
    data = record(META, 0, b'{"kind": "queue"}') + record(ENQUEUE, 1, b"abc") + record(ACK, 1)
    records, intact = parse(data)
    assert records == [(META, 0, b'{"kind": "queue"}'), (ENQUEUE, 1, b"abc"), (ACK, 1, b"")]
    assert intact == len(data)
    torn = data + record(ENQUEUE, 2, b"x" * 100)[:-7]
    assert parse(torn) == (records, len(data))
    flipped = bytearray(data)
    flipped[-1] ^= 0xFF  # the last record's id: its CRC no longer matches
    assert parse(bytes(flipped))[0] == records[:2]


def test_data_dir_is_a_setting() -> None:
    assert load_config(["--data-dir", "/var/lib/filtex"], env={}).data_dir == Path(
        "/var/lib/filtex")
    assert load_config([], env={"FILTEX_DATA_DIR": "/d"}).data_dir == Path("/d")
    assert load_config([], env={}).data_dir is None


def test_a_data_dir_serves_one_broker_at_a_time(tmp_path: Path) -> None:
    first = Store(tmp_path, lambda: None)
    with pytest.raises(StoreLockedError, match="in use by another broker"):
        Store(tmp_path, lambda: None)
    first.close()
    Store(tmp_path, lambda: None).close()


def test_a_commit_callback_runs_only_after_the_write(tmp_path: Path) -> None:
    woken = threading.Event()
    store = Store(tmp_path, woken.set)
    journal = store.journal({"kind": "queue", "name": "q"})
    store.append(journal, record(ENQUEUE, 1, b"m"))
    results: list[bool] = []
    store.after_commit(results.append)
    assert woken.wait(TIMEOUT)
    assert results == []  # callbacks run on the reactor thread, in complete()
    store.complete()
    assert results == [True]
    assert parse(journal.path.read_bytes())[0][-1] == (ENQUEUE, 1, b"m")
    store.close()



def test_a_change_in_a_failed_batch_is_never_reported_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race found in review: a callback registered while its change's batch is being
    written, that batch fails, and the next batch writes nothing: the callback must hear
    "not written", not "written" from that empty batch."""
    store = Store(tmp_path, lambda: None)
    journal = store.journal({"kind": "queue", "name": "q"})
    in_fsync, release = threading.Event(), threading.Event()

    def failing_fsync(fd: int) -> None:
        in_fsync.set()
        assert release.wait(TIMEOUT)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_module.os, "fsync", failing_fsync)
    store.append(journal, record(ENQUEUE, 1, b"m"))
    assert in_fsync.wait(TIMEOUT)  # the writer holds the batch with the change
    results: list[bool] = []
    store.after_commit(results.append)  # registered while that batch is in flight
    monkeypatch.undo()
    release.set()
    deadline = time.monotonic() + TIMEOUT
    while not results and time.monotonic() < deadline:
        store.complete()  # the reactor's part: runs callbacks, rewrites the broken log
        time.sleep(0.01)
    assert results == [False]
    # Once the log is rewritten, changes are reported written again (the first one after a
    # failure may still be refused: conservative, never wrong).
    later: list[bool] = []
    ident = 2
    while True not in later and time.monotonic() < deadline:
        if len(later) == ident - 2:
            store.append(journal, record(ENQUEUE, ident, b"n"))
            store.after_commit(later.append)
            ident += 1
        store.complete()
        time.sleep(0.01)
    assert later[-1] is True and later.count(True) == 1
    assert (ENQUEUE, ident - 1, b"n") in parse(journal.path.read_bytes())[0]
    store.close()


# -- restarts -------------------------------------------------------------------------------


def test_queued_messages_survive_a_restart_in_order(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    running = broker_factory(data_dir=tmp_path)
    conn = connect(running.url)
    send(conn.create_sender("orders"), *(message(i, n=i) for i in range(100)))
    receiver = conn.create_receiver("orders")
    assert bodies(receiver, 30) == list(range(30))
    conn.close()

    running = restart(broker_factory, running, tmp_path)
    conn = connect(running.url)
    receiver = conn.create_receiver("orders")
    assert bodies(receiver, 70) == list(range(30, 100))
    assert nothing_more(conn, receiver)
    conn.close()


def test_without_a_data_dir_a_restart_loses_the_messages(broker_factory: BrokerFactory) -> None:
    running = broker_factory()
    conn = connect(running.url)
    send(conn.create_sender("orders"), *(message(i) for i in range(5)))
    conn.close()
    running.broker.stop()
    running.thread.join(TIMEOUT)

    running = broker_factory()
    conn = connect(running.url)
    assert nothing_more(conn, conn.create_receiver("orders"))  # as documented
    conn.close()


def test_a_failed_delivery_attempt_is_remembered_across_a_restart(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    running = broker_factory(data_dir=tmp_path)
    conn = connect(running.url)
    send(conn.create_sender("q"), message("a"), message("b"))
    _, handler = raw_receiver(conn, "q", credit=2, settle=False)
    (_, first), (_, second) = wait_received(conn, handler, 2)
    first.update(Delivery.ACCEPTED)
    first.settle()
    second.update(Delivery.MODIFIED)  # delivery-failed: the delivery-count goes up
    second.local.failed = True
    second.settle()
    conn.create_receiver(None, dynamic=True)  # a round trip: the outcomes are processed
    assert queue_of(running, "q").ready == 1
    conn.close()

    running = restart(broker_factory, running, tmp_path)
    conn = connect(running.url)
    _, handler = raw_receiver(conn, "q", credit=5)
    ((data, _),) = wait_received(conn, handler, 1)
    back = Message()
    back.decode(data)
    assert (back.body, back.delivery_count) == ("b", 1)
    conn.close()


def test_durable_subscription_and_its_filter_survive_a_restart(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    durable = [TopicOption(), DurableSubscription(), sql("colour = 'red'")]
    running = broker_factory(data_dir=tmp_path)
    sub_conn = connect(running.url, container_id="jms-1")
    sub_conn.create_receiver("prices", name="reds", options=durable)
    sub_conn.close()  # detached, still subscribed
    publisher = connect(running.url)
    sender = publisher.create_sender("prices", options=TopicOption())
    send(sender, message(1, colour="red"), message(2, colour="blue"), message(3, colour="red"))
    publisher.close()

    running = restart(broker_factory, running, tmp_path)
    publisher = connect(running.url)
    sender = publisher.create_sender("prices", options=TopicOption())
    send(sender, message(4, colour="blue"), message(5, colour="red"))  # the filter is back
    # Qpid JMS resumes a durable subscription by container-id and link name (null source).
    back = connect(running.url, container_id="jms-1")
    found = back.create_receiver(None, name="reds")
    assert found.link.remote_source.address == "prices"
    assert bodies(found, 3) == [1, 3, 5]
    assert nothing_more(back, found)
    found.close()  # unsubscribe: its log is deleted
    back.close()
    publisher.close()
    running = restart(broker_factory, running, tmp_path)
    assert running.broker.registry.durable == {}


def test_a_torn_tail_record_is_survived(
    broker_factory: BrokerFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    running = broker_factory(data_dir=tmp_path)
    conn = connect(running.url)
    send(conn.create_sender("q"), *(message(i) for i in range(10)))
    conn.close()
    running.broker.stop()
    running.thread.join(TIMEOUT)
    (log_file,) = logs(tmp_path)
    with log_file.open("ab") as handle:  # a crash in the middle of writing a record
        handle.write(record(ENQUEUE, 99, b"half a message" * 10)[:40])

    with caplog.at_level(logging.WARNING, logger="filtex.broker"):
        running = broker_factory(data_dir=tmp_path)
    assert "torn or corrupt record" in caplog.text
    assert log_file.with_suffix(".torn").stat().st_size == 40
    conn = connect(running.url)
    send(conn.create_sender("q"), message(10))  # appended after the cut, readable later
    conn.close()
    running = restart(broker_factory, running, tmp_path)
    conn = connect(running.url)
    receiver = conn.create_receiver("q")
    assert bodies(receiver, 11) == list(range(11))
    assert nothing_more(conn, receiver)
    conn.close()


def test_a_mostly_acknowledged_log_is_compacted(
    broker_factory: BrokerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "COMPACT_MIN_BYTES", 64 * 1024)
    running = broker_factory(data_dir=tmp_path)
    conn = connect(running.url)
    sender = conn.create_sender("q")
    send(sender, *(message("x" * 1000, n=i) for i in range(300)))
    receiver = conn.create_receiver("q")
    for _ in range(290):
        receiver.receive(timeout=TIMEOUT)
        receiver.accept()
    assert nothing_more(conn, conn.create_receiver("elsewhere"))  # a round trip: acks are in
    conn.close()
    running = restart(broker_factory, running, tmp_path)
    journal = queue_of(running, "q").journal
    assert journal is not None
    assert journal.path.stat().st_size < 300 * 1000 / 2  # far less than everything ever sent
    conn = connect(running.url)
    receiver = conn.create_receiver("q")
    assert [m.properties["n"] for m in (receiver.receive(timeout=TIMEOUT) for _ in range(10))] \
        == list(range(290, 300))
    conn.close()


def test_dynamic_nodes_are_not_stored(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    running = broker_factory(data_dir=tmp_path)
    conn = connect(running.url)
    receiver = conn.create_receiver(None, dynamic=True)
    address = receiver.link.remote_source.address
    send(conn.create_sender(address), message("temp"))
    assert bodies(receiver, 1) == ["temp"]
    conn.close()
    assert logs(tmp_path) == []


def test_a_rejected_message_is_dead_lettered_durably(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    running = broker_factory(data_dir=tmp_path)
    conn = connect(running.url)
    send(conn.create_sender("q"), message("poison"), message("fine"))
    receiver = conn.create_receiver("q")
    receiver.receive(timeout=TIMEOUT)
    receiver.reject()
    conn.close()

    running = restart(broker_factory, running, tmp_path)
    conn = connect(running.url)
    assert bodies(conn.create_receiver("DLQ"), 1) == ["poison"]
    assert bodies(conn.create_receiver("q"), 1) == ["fine"]
    conn.close()


def test_a_failed_write_is_reported_to_the_producer_and_repaired(
    broker_factory: BrokerFactory, tmp_path: Path, disk_full: DiskFull
) -> None:
    running = broker_factory(data_dir=tmp_path)
    conn = connect(running.url)
    sender = conn.create_sender("q")
    send(sender, message(0))
    disk_full.full = True
    with pytest.raises(SendException) as refused:
        sender.send(message(1), timeout=TIMEOUT)
    assert refused.value.state == Delivery.REJECTED
    disk_full.full = False
    journal = queue_of(running, "q").journal
    assert journal is not None
    # the store retries the rewrite by itself
    wait_for(lambda: not journal.broken, "the log was not repaired")
    send(sender, message(2))  # accepted again, after the log it goes into
    conn.close()

    running = restart(broker_factory, running, tmp_path)
    conn = connect(running.url)
    receiver = conn.create_receiver("q")
    # The refused message stayed in the node (at-least-once: it may still be delivered).
    assert bodies(receiver, 3) == [0, 1, 2]
    assert nothing_more(conn, receiver)
    conn.close()


def test_a_durable_subscription_resumed_with_a_new_filter_keeps_the_new_one(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    running = broker_factory(data_dir=tmp_path)
    sub_conn = connect(running.url, container_id="jms-2")
    sub_conn.create_receiver("prices", name="s", options=[
        TopicOption(), DurableSubscription(), sql("colour = 'red'")])
    sub_conn.close()
    sub_conn = connect(running.url, container_id="jms-2")
    sub_conn.create_receiver("prices", name="s", options=[
        TopicOption(), DurableSubscription(), sql("colour = 'blue'")])
    sub_conn.close()
    plain = connect(running.url)  # a non-durable subscriber: nothing of it is written
    plain.create_receiver("prices", name="passing", options=TopicOption())
    plain.close()

    running = restart(broker_factory, running, tmp_path)
    assert list(running.broker.registry.durable) == [("jms-2", "s")]
    publisher = connect(running.url)
    send(publisher.create_sender("prices", options=TopicOption()),
         message(1, colour="red"), message(2, colour="blue"))
    back = connect(running.url, container_id="jms-2")
    found = back.create_receiver(None, name="s")
    assert bodies(found, 1) == [2]
    assert nothing_more(back, found)
    back.close()
    publisher.close()
