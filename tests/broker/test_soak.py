"""Slow and stuck consumers: memory stays bounded, producers are throttled by credit.

The soak test runs the broker as a process and samples its resident memory
(``VmRSS`` in ``/proc/PID/status``) while a producer process floods a queue
that a slow consumer drains, in memory and with ``--data-dir`` (where the log
must stay bounded too, by compaction). It is bounded in time and in messages,
loopback only, and asserts memory and disk, never speed.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from proton import Delivery

from filtex_broker.nodes.queue import Queue
from filtex_broker.store.log import COMPACT_MIN_BYTES
from filtex_proton.amqp.message import encode_message

from .broker_clients import TIMEOUT, BrokerFactory, connect, raw_receiver, wait_received
from .fault_clients import BrokerProcess, client

SOAK_SECONDS = 8.0
SOAK_MESSAGES = 400_000
MiB = 1024 * 1024


def rss(pid: int) -> int:
    """Resident memory of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_stuck_consumer_throttles_the_producer_by_credit(broker_factory: BrokerFactory) -> None:
    running = broker_factory(max_queue_messages=200, credit_window=50)
    conn = connect(running.url)
    stuck, handler = raw_receiver(conn, "q", settle=False)
    stuck.link.flow(10)  # takes ten, never settles them, asks for nothing more
    sender = conn.create_sender("q").link
    data = encode_message(body=b"x" * 100)
    sent = 0

    def send_what_credit_allows() -> bool:
        nonlocal sent
        while sender.credit > 0:
            sender.delivery(b"%d" % sent)
            sender.send(data)
            sender.advance()
            sent += 1
        return False

    node = running.broker.registry.lookup("q")
    assert isinstance(node, Queue)
    # Send whenever there is credit until the broker stops granting it: the node is full.
    conn.wait(lambda: send_what_credit_allows() or (node.stalled != [] and sender.credit == 0),
              timeout=TIMEOUT, msg="waiting for the producer to be stalled")
    assert len(handler.received) <= 10
    assert node.count >= node.limits.max_messages
    assert sent <= node.limits.max_messages + 50  # what it exceeds by: one credit window at most

    for _, delivery in wait_received(conn, handler, 10):  # the consumer wakes up
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
    stuck.link.flow(200)
    conn.wait(lambda: sender.credit > 0, timeout=TIMEOUT, msg="waiting for credit again")
    conn.close()


@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "data-dir"])
def test_memory_stays_flat_with_a_slow_consumer(tmp_path: Path, durable: bool) -> None:
    data_dir = tmp_path / "data"
    store = ("--data-dir", str(data_dir)) if durable else ()
    process = BrokerProcess(tmp_path, "--max-queue-messages", "2000", "--credit-window", "200",
                            "--log-level", "WARNING", *store)
    url = process.start()
    assert process.proc is not None
    pid = process.proc.pid
    producer = client("produce", url, "soak", str(SOAK_MESSAGES), quiet=True)
    try:
        conn = connect(url)
        receiver, handler = raw_receiver(conn, "soak")  # accepts as they arrive
        link = receiver.link
        samples: list[int] = []
        deadline = time.monotonic() + SOAK_SECONDS
        consumed = 0
        while time.monotonic() < deadline and consumed < SOAK_MESSAGES:
            link.flow(20)  # slow: twenty at a time, one round trip each
            wait_received(conn, handler, 20)
            handler.received.clear()
            consumed += 20
            if consumed % 1000 == 0:
                samples.append(rss(pid))
                if durable:  # compaction keeps the log near its threshold
                    logged = sum(f.stat().st_size for f in data_dir.glob("*.log"))
                    assert logged < 2 * COMPACT_MIN_BYTES + 2000 * 200
        conn.close()
        # Enough traffic to matter: the queue's whole capacity went through several times.
        assert consumed >= 5 * 2000, f"only {consumed} messages went through"
        warm = max(samples[len(samples) // 5 : len(samples) // 4])  # after warm-up
        late = max(samples[len(samples) // 4 :])
        print(f"soak: {consumed} messages, broker RSS {samples[0] / MiB:.1f} -> "
              f"{warm / MiB:.1f} (warm) -> {late / MiB:.1f} MiB (max after)")
        assert late <= warm * 1.5 + 32 * MiB, (
            f"broker RSS grew from {warm / MiB:.1f} MiB to {late / MiB:.1f} MiB")
    finally:
        producer.kill()
        producer.wait()
        process.kill()
