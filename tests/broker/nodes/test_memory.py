"""The broker-wide memory limit (``--max-memory``).

Units: sizes with units, the cgroup's limit read from fake files, the budget's marks, what a
queue charges it, and the cost model against tracemalloc. Then the real thing: a broker process
with a small limit flooded through many queues on loopback keeps its peak resident size near
the limit, producers wait (no credit, nothing dropped), and once a consumer drains, producers,
old and new, are served again. Bounded in time and in messages.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from proton import Delivery, Described, Message, Timeout, symbol
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender

from filtex_broker.config import load_config
from filtex_broker.memory import (
    DEFAULT_SHARE,
    cgroup_memory_limit,
    default_max_memory,
    physical_memory,
)
from filtex_broker.nodes.budget import LOW_MARK, PER_ENTRY, MemoryBudget, bytes_cost, entry_cost
from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.node import NodeLimits
from filtex_broker.nodes.queue import Queue
from filtex_broker.nodes.registry import Registry
from filtex_broker.settings import ConfigError, parse_size
from filtex_broker.store.log import Store
from filtex_proton.plugin import FilterMessage, FiltexPlugin, LinkFilter

from ..broker_clients import TIMEOUT, BrokerFactory, RawReceiver, connect, raw_receiver
from ..fault_clients import BrokerProcess
from ..traced import traced_per_message

MiB = 1 << 20

# -- sizes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("536870912", 536870912), (1024, 1024), ("512MiB", 512 * MiB), ("512M", 512 * MiB),
    ("512mib", 512 * MiB), ("2GiB", 2 << 30), ("2 GiB", 2 << 30), ("0.5GiB", 512 * MiB),
    ("500MB", 500_000_000), ("100kB", 100_000), ("64KiB", 65536), ("1TiB", 1 << 40),
    ("10B", 10), ("0", 0),
])
def test_sizes_with_and_without_units(text: object, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "lots", "12XB", "-1", "-5MiB", "nanMiB", "infGiB", "1.2.3M",
                                  True])
def test_bad_sizes_are_refused_by_name(text: object) -> None:
    with pytest.raises(ConfigError, match=r"size|unit"):
        parse_size(text)


def test_max_memory_from_flag_environment_and_toml(tmp_path: Path) -> None:
    assert load_config([], env={}).max_memory == 0  # the default share, resolved at start
    assert load_config(["--max-memory", "512MiB"], env={}).max_memory == 512 * MiB
    assert load_config([], env={"FILTEX_MAX_MEMORY": "1GiB"}).max_memory == 1 << 30
    toml = tmp_path / "broker.toml"
    toml.write_text('[broker]\nmax_memory = "256MiB"\n')
    assert load_config(["--config", str(toml)], env={}).max_memory == 256 * MiB
    toml.write_text("[broker]\nmax_memory = 1048576\n")
    assert load_config(["--config", str(toml)], env={}).max_memory == MiB
    # flags > environment > TOML
    assert load_config(["--config", str(toml), "--max-memory", "3MiB"],
                       env={"FILTEX_MAX_MEMORY": "2MiB"}).max_memory == 3 * MiB
    assert load_config(["--config", str(toml)],
                       env={"FILTEX_MAX_MEMORY": "2MiB"}).max_memory == 2 * MiB
    with pytest.raises(ConfigError, match=r"--max-memory.*unknown unit"):
        load_config(["--max-memory", "12parsecs"], env={})
    with pytest.raises(ConfigError, match="FILTEX_MAX_MEMORY"):
        load_config([], env={"FILTEX_MAX_MEMORY": "much"})


# -- the cgroup's limit -------------------------------------------------------------------------


def _cgroup(tmp_path: Path, self_cgroup: str, files: dict[str, str]) -> int | None:
    root = tmp_path / "cgroup"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text(self_cgroup)
    return cgroup_memory_limit(root, proc)


def test_cgroup_v2_limit_is_the_tightest_along_the_path(tmp_path: Path) -> None:
    assert _cgroup(tmp_path, "0::/system.slice/broker.service\n", {
        "memory.max": "max\n",
        "system.slice/memory.max": "8589934592\n",
        "system.slice/broker.service/memory.max": "max\n",
    }) == 8 << 30


def test_cgroup_v2_without_a_limit(tmp_path: Path) -> None:
    assert _cgroup(tmp_path, "0::/user.slice\n", {"user.slice/memory.max": "max\n"}) is None


def test_cgroup_v2_in_a_container_reads_the_mounted_root(tmp_path: Path) -> None:
    # The container sees its own cgroup as the root, while /proc/self/cgroup names the host path.
    assert _cgroup(tmp_path, "0::/docker/abc123\n", {"memory.max": "536870912\n"}) == 512 * MiB


def test_cgroup_v1_limit_and_its_unlimited_value(tmp_path: Path) -> None:
    lines = "4:memory:/process_api/x\n3:cpu,cpuacct:/\n0::/\n"
    assert _cgroup(tmp_path, lines, {
        "memory/process_api/x/memory.limit_in_bytes": "1073741824\n",
        "memory/memory.limit_in_bytes": "9223372036854771712\n",
    }) == 1 << 30
    assert _cgroup(tmp_path / "2", lines, {
        "memory/process_api/x/memory.limit_in_bytes": "9223372036854771712\n",
    }) is None


def test_no_cgroup_files_no_limit(tmp_path: Path) -> None:
    assert cgroup_memory_limit(tmp_path / "none", tmp_path / "absent") is None


def test_default_is_a_share_of_what_the_process_may_use() -> None:
    limit = cgroup_memory_limit()
    available = physical_memory() if limit is None else min(limit, physical_memory())
    assert default_max_memory() == int(available * DEFAULT_SHARE)
    assert 0 < default_max_memory() < physical_memory()


# -- the budget ------------------------------------------------------------------------------


class _Producer:
    def __init__(self) -> None:
        self.resumed = 0

    def resume(self) -> None:
        self.resumed += 1


def test_budget_blocks_at_the_limit_and_unblocks_at_the_low_mark(
        caplog: pytest.LogCaptureFixture) -> None:
    budget = MemoryBudget(1000)
    assert budget.low == int(1000 * LOW_MARK) == 900
    producers = [_Producer(), _Producer()]
    budget.charge(999)
    assert budget.has_room()
    budget.charge(1)
    assert not budget.has_room() and budget.blocked and budget.blockings == 1
    for producer in producers:
        budget.stall(producer)
    budget.charge(500)  # in-flight credit still lands: accounted, no second block
    assert budget.blockings == 1
    budget.credit(500)
    budget.credit(99)  # 901: below the limit, above the low mark: still blocked
    assert budget.blocked and [p.resumed for p in producers] == [0, 0]
    budget.credit(1)  # 900: the low mark
    assert not budget.blocked and [p.resumed for p in producers] == [1, 1]
    assert budget.stalled == []
    budget.charge(100)
    assert budget.blocked and budget.blockings == 2
    events = re.findall(r"event=memory-(\w+)", caplog.text)
    assert events == ["blocked", "unblocked", "blocked"]  # once each time, not per message


def test_unlimited_budget_accounts_and_never_blocks() -> None:
    budget = MemoryBudget()
    budget.charge(1 << 50)
    assert budget.has_room() and budget.accounted == 1 << 50


def _message(body: Any = "x" * 60, **properties: Any) -> FilterMessage:
    data = Message(body=body, properties=properties or None, durable=True, address="q").encode()
    message = FiltexPlugin.message(bytes(data), origin=1)
    message.validate()
    return message


def test_queues_charge_what_they_hold_and_credit_it_back() -> None:
    budget = MemoryBudget(10 * MiB)
    registry = Registry(NodeLimits(1000, 1 << 30), "DLQ", budget)
    queue = registry.node("a")
    topic = registry.node("t", topic=True)
    assert isinstance(queue, Queue)
    sub = topic.subscribe(None, None)  # type: ignore[attr-defined]
    for n in range(10):
        queue.publish(_message(n=n))
        topic.publish(_message(n=n))
    cost = entry_cost(Entry(_message(n=1).data), journaled=False)
    assert budget.accounted == pytest.approx(20 * cost, rel=0.01)
    for entry in queue.entries()[:4]:
        queue.remove(entry)
    assert budget.accounted == pytest.approx(16 * cost, rel=0.01)
    entry = queue.entries()[0]
    bigger = _message(body="y" * 1000, n=99)
    before, old_size = budget.accounted, len(entry.data)
    queue.resize(entry, bigger.data, bigger)
    assert budget.accounted - before == bytes_cost(len(bigger.data)) - bytes_cost(old_size)
    registry.delete(queue)
    topic.unsubscribe(sub)  # type: ignore[attr-defined]
    assert budget.accounted == 0


def test_a_message_fanned_out_to_subscriptions_is_charged_its_bytes_once() -> None:
    """Every subscription holds its own entry around the same bytes: each is charged the entry
    and its share of the bytes, so together they are charged the bytes once."""
    budget = MemoryBudget(10 * MiB)
    registry = Registry(NodeLimits(1000, 1 << 30), "DLQ", budget)
    topic = registry.node("t", topic=True)
    subs = [topic.subscribe(None, None) for _ in range(3)]  # type: ignore[attr-defined]
    message = _message(body=b"b" * 3000, n=1)
    topic.publish(message)
    entries = [sub.queue.entries()[0] for sub in subs]
    assert all(e.data is message.data and e.shares == 3 for e in entries)  # shared, not copied
    size = bytes_cost(len(message.data))
    assert size - 3 < budget.accounted - 3 * PER_ENTRY <= size
    bumped = _message(body=b"b" * 3000, n=2)  # a redelivery rewrites one subscription's copy
    subs[0].queue.resize(entries[0], bumped.data, bumped)
    assert entries[0].shares == 1
    for sub, entry in zip(subs, entries, strict=True):
        sub.queue.remove(entry)
    assert budget.accounted == 0


def test_the_store_charges_its_write_buffers_until_they_are_written(tmp_path: Path) -> None:
    """With --data-dir every record waits in a buffer until the writer thread has fsync'ed it:
    charged to the budget meanwhile, credited back once written."""
    budget = MemoryBudget()
    store = Store(tmp_path / "data", lambda: None, account=budget)
    try:
        journal = store.for_queue("q")
        waiting = budget.accounted
        assert waiting > 0  # the log's meta record
        journal.enqueue(Entry(b"m" * 1000))
        assert budget.accounted >= waiting + 1000
        written: list[bool] = []
        store.after_commit(written.append)
        deadline = time.monotonic() + TIMEOUT
        while not written:
            assert time.monotonic() < deadline, "the store never wrote"
            time.sleep(0.01)
            store.complete()  # the reactor's part: credits what the writer has written
        assert written == [True] and budget.accounted == 0
    finally:
        store.close()


@pytest.mark.parametrize(("body", "properties"), [
    (None, {}), ("x" * 60, {"n": 1, "color": "red"}), (b"y" * 1000, {"n": 1}),
    ("x" * 60, {f"k{i}": i for i in range(20)}), (b"z" * 10_000, {"region": "eu", "n": 1}),
], ids=["bare", "150B", "1KiB", "20-properties", "10KiB"])
def test_cost_model_against_tracemalloc(body: Any, properties: dict[str, Any]) -> None:
    """What a queued message really costs (tracemalloc: every Python allocation, the received
    bytes included) is what the budget charges, within a margin."""
    encoded = Message(body=body, properties=properties or None, durable=True,
                      address="q", id=7).encode()
    count = 5000
    queue = Queue("q", NodeLimits(1 << 30, 1 << 40), budget=MemoryBudget())
    measured = traced_per_message(queue.publish, [encoded], count)
    accounted = queue.budget.accounted / count  # type: ignore[union-attr]
    print(f"{len(encoded)} bytes: measured {measured:.0f}, accounted {accounted:.0f}")
    assert 0.85 * measured <= accounted <= 1.3 * measured


@pytest.mark.parametrize("timed", ["ttl", "scheduled", "ttl and scheduled"])
def test_cost_model_of_timed_messages_against_tracemalloc(timed: str) -> None:
    """A message that expires or waits costs its lifetime and its items in the deadline heap
    too (``PER_TIMED``): still within the margin."""
    message = Message(body="x" * 60, properties={"n": 1}, durable=True, address="q", id=7)
    if "ttl" in timed:
        message.ttl = 3600.0
    if "scheduled" in timed:
        message.annotations = {symbol("x-opt-delivery-delay"): 3_600_000}
    encoded = message.encode()
    count = 5000
    queue = Queue("q", NodeLimits(1 << 30, 1 << 40), budget=MemoryBudget())
    measured = traced_per_message(queue.publish, [encoded], count)
    accounted = queue.budget.accounted / count  # type: ignore[union-attr]
    print(f"{timed}: measured {measured:.0f}, accounted {accounted:.0f}")
    assert queue.held_back() == (count if "scheduled" in timed else 0)
    assert 0.85 * measured <= accounted <= 1.3 * measured


class _Idle:
    """A filtered consumer without credit, as a queue sees it."""

    def __init__(self, text: str) -> None:
        filter_set = FiltexPlugin().compile({symbol("f"): Described(symbol("amqp:sql-filter"),
                                                                     text)})
        self.filter = LinkFilter(filter_set, None)
        self.filter_stats = filter_set.stats
        self.credit = self.cursor = self.ruled_out = 0
        self.closed = self.browse = False

    def send(self, entry: Entry) -> None:
        raise AssertionError("no credit")


def test_entries_kept_for_filtered_consumers_cost_what_others_do() -> None:
    """With filtered consumers a queue keeps each message's arrival (the consumers that may match
    it); messages with the same candidates share one, so such an entry costs what the model
    charges for any other (measured: the same bytes, where a candidates tuple of its own cost
    48 to 64 more)."""
    encoded = [Message(body="x" * 60, properties={"n": n}, durable=True, address="q").encode()
               for n in range(10)]
    count = 4000
    alone = Queue("q", NodeLimits(1 << 30, 1 << 40), budget=MemoryBudget())
    watched = Queue("q", NodeLimits(1 << 30, 1 << 40), budget=MemoryBudget())
    for text in [f"n = {n}" for n in range(10)] + ["n >= 5", "n < 3 OR n = 7"]:
        watched.add_consumer(_Idle(text))  # type: ignore[arg-type]
    plain = traced_per_message(alone.publish, encoded, count)
    kept = traced_per_message(watched.publish, encoded, count)
    assert all(e.arrival is not None for e in watched.entries())
    print(f"per entry: {plain:.0f} bytes alone, {kept:.0f} with 12 filtered consumers")
    assert kept <= plain + 8
    assert watched.budget.accounted == alone.budget.accounted  # type: ignore[union-attr]


def test_cost_model_of_a_fan_out_against_tracemalloc() -> None:
    """A message held by three topic subscriptions costs its bytes once and three entries:
    what the budget charges for it, within the same margin."""
    encoded = Message(body=b"f" * 1000, properties={"n": 1}, address="t").encode()
    count = 2000
    budget = MemoryBudget()
    topic = Registry(NodeLimits(1 << 30, 1 << 40), "DLQ", budget).node("t", topic=True)
    for _ in range(3):
        topic.subscribe(None, None)  # type: ignore[attr-defined]
    measured = traced_per_message(topic.publish, [encoded], count)
    accounted = budget.accounted / count
    print(f"fan-out of {len(encoded)} bytes to 3: measured {measured:.0f}, "
          f"accounted {accounted:.0f}")
    assert 0.85 * measured <= accounted <= 1.3 * measured
    assert accounted < 2 * bytes_cost(len(encoded))  # the bytes once, not three times


def _until(conn: Any, predicate: Any, msg: str) -> None:
    """Wait for a predicate on the broker's state: ``conn.wait`` checks only after events of
    its own connection, and the broker's state may change without one."""
    deadline = time.monotonic() + TIMEOUT
    while not predicate():
        assert time.monotonic() < deadline, f"timed out: {msg}"
        with contextlib.suppress(Timeout):
            conn.wait(predicate, timeout=0.05)


def test_blocking_is_exported_and_every_node_waits(broker_factory: BrokerFactory) -> None:
    pytest.importorskip("prometheus_client")
    from ..metrics_clients import scrape, value

    running = broker_factory(metrics="127.0.0.1:0", max_memory=200_000, credit_window=10)
    budget = running.broker.budget
    samples = scrape(running)
    assert value(samples, "filtex_memory_limit_bytes") == 200_000
    assert value(samples, "filtex_producers_blocked") == 0
    conn = connect(running.url)
    senders = [conn.create_sender(f"m/{n}").link for n in range(4)]
    data = Message(body=b"m" * 2000).encode()
    sent = 0

    def send_what_credit_allows() -> bool:
        nonlocal sent
        for sender in senders:
            while sender.credit > 0:
                sender.delivery(b"%d" % sent)
                sender.send(data)
                sender.advance()
                sent += 1
        return budget.blocked and len(budget.stalled) == len(senders)

    # Every producer link waits, whichever its node (a flow granted just before the block may
    # still be on its way: what it grants is sent too).
    _until(conn, send_what_credit_allows, "every producer waits")
    _until(conn, lambda: sum(n.depth() for n in running.broker.registry.nodes.values()) == sent,
           "every message stored")
    samples = scrape(running)
    assert value(samples, "filtex_producers_blocked") == 1
    assert value(samples, "filtex_memory_blockings_total") == 1
    assert value(samples, "filtex_memory_accounted_bytes") >= 200_000
    receivers = [raw_receiver(conn, f"m/{n}") for n in range(4)]
    for receiver, _ in receivers:
        receiver.link.flow(sent)
    conn.wait(lambda: sum(len(h.received) for _, h in receivers) == sent, timeout=TIMEOUT,
              msg="draining")
    _until(conn, lambda: all(s.credit > 0 for s in senders) and budget.accounted == 0,
           "credit again, and every settlement in")
    samples = scrape(running)
    assert value(samples, "filtex_producers_blocked") == 0
    assert value(samples, "filtex_memory_blockings_total") == 1
    assert value(samples, "filtex_memory_accounted_bytes") == budget.accounted == 0
    conn.close()


# -- the real thing: a flood against a small limit --------------------------------------------

FLOOD_LIMIT = 48 * MiB
FLOOD_QUEUES = 48
FLOOD_WINDOW = 50
FLOOD_SECONDS = 25.0


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field}")


def _flood(conn: BlockingConnection, senders: list[Any], data: bytes) -> int:
    """Send whatever credit allows until none comes for a while; how many were sent (every one
    of them accepted: throttled, not lost)."""
    deliveries: list[Delivery] = []
    last_sent = time.monotonic()
    deadline = last_sent + FLOOD_SECONDS
    while True:
        for sender in senders:
            while sender.credit > 0:
                deliveries.append(sender.delivery(b"%d" % len(deliveries)))
                sender.send(data)
                sender.advance()
                last_sent = time.monotonic()
        with contextlib.suppress(Timeout):
            conn.wait(lambda: any(s.credit > 0 for s in senders), timeout=0.25)
        if time.monotonic() - last_sent > 1.5 and all(d.remote_state for d in deliveries):
            break  # blocked, and every message sent is answered
        assert time.monotonic() < deadline, f"not blocked after {len(deliveries)} messages"
    assert all(d.remote_state == Delivery.ACCEPTED for d in deliveries)
    return len(deliveries)


def _blocked_but_serving(
    url: str, conn: BlockingConnection,
) -> tuple[BlockingConnection, BlockingSender, tuple[BlockingReceiver, RawReceiver]]:
    """While the broker is over its limit, a new producer on a new node gets no credit, and a
    consumer is still served: the late producer's connection and sender, and the consumer."""
    other = connect(url)
    late_sender = other.create_sender("late")
    first, handler = raw_receiver(conn, "flood/0")
    first.link.flow(10)
    conn.wait(lambda: len(handler.received) >= 10, timeout=TIMEOUT, msg="a consumer served")
    with contextlib.suppress(Timeout):
        other.wait(lambda: late_sender.link.credit > 0, timeout=1.0)
    assert late_sender.link.credit == 0
    return other, late_sender, (first, handler)


def _drain(conn: BlockingConnection, first: tuple[BlockingReceiver, RawReceiver],
           sent: int) -> None:
    """Every accepted message is there to be read."""
    receivers = [first]
    for n in range(1, FLOOD_QUEUES):
        receivers.append(raw_receiver(conn, f"flood/{n}"))
    for receiver, _ in receivers:
        receiver.link.flow(sent)
    conn.wait(lambda: sum(len(h.received) for _, h in receivers) >= sent, timeout=TIMEOUT,
              msg=f"draining {sent} messages")
    assert sum(len(h.received) for _, h in receivers) == sent


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "data-dir"])
def test_a_flood_over_many_queues_stays_near_the_limit(tmp_path: Path, durable: bool) -> None:
    store = ("--data-dir", str(tmp_path / "data")) if durable else ()
    process = BrokerProcess(tmp_path, "--max-memory", f"{FLOOD_LIMIT // MiB}MiB",
                            "--credit-window", str(FLOOD_WINDOW), *store)
    url = process.start()
    assert process.proc is not None
    pid = process.proc.pid
    try:
        conn = connect(url)
        baseline = _status(pid, "VmRSS")
        senders = [conn.create_sender(f"flood/{n}").link for n in range(FLOOD_QUEUES)]
        data = Message(body=b"p" * 1000, properties={"n": 1, "region": "eu"},
                       durable=durable).encode()
        sent = _flood(conn, senders, data)
        peak = _status(pid, "VmHWM")
        assert "event=memory-blocked" in process.log()
        cost = entry_cost(Entry(bytes(data)), journaled=durable)  # about 1.3 KB here
        # With --data-dir the store's write buffers are charged too, while they wait for the
        # disk: the block may come that much earlier.
        least = 0.75 * FLOOD_LIMIT if durable else FLOOD_LIMIT
        assert least <= sent * cost <= FLOOD_LIMIT + FLOOD_QUEUES * FLOOD_WINDOW * cost
        other, late_sender, first = _blocked_but_serving(url, conn)
        _drain(conn, first, sent)
        # Producers are served again, the late one and the flooders.
        other.wait(lambda: late_sender.link.credit > 0, timeout=TIMEOUT,
                   msg="credit for the late producer")
        conn.wait(lambda: all(s.credit > 0 for s in senders), timeout=TIMEOUT,
                  msg="credit again for the flooders")
        late_sender.send(Message(body="served"))  # waits for the broker's accepted
        other.close()
        conn.close()
        assert "event=memory-unblocked" in process.log()
        print(f"flood: {sent} messages into {FLOOD_QUEUES} queues, limit "
              f"{FLOOD_LIMIT / MiB:.0f} MiB, accounted {sent * cost / MiB:.1f} MiB, broker RSS "
              f"{baseline / MiB:.1f} MiB idle, peak "
              f"{peak / MiB:.1f} MiB ({(peak - baseline) / MiB:.1f} MiB above idle)")
        # In-flight credit lands after the block (one window per producer at most). With
        # --data-dir the store's write buffers and its writer thread's allocations come on top,
        # and are not accounted (docs/BROKER.md): measured 65 to 102 MiB above idle.
        in_flight = FLOOD_QUEUES * FLOOD_WINDOW * cost
        assert peak - baseline <= (3.0 if durable else 1.25) * FLOOD_LIMIT + in_flight, (
            f"peak RSS {peak / MiB:.1f} MiB, idle {baseline / MiB:.1f} MiB")
    finally:
        process.kill()
