"""At-least-once under faults, every message counted.

A consumer link detached mid-stream, a consumer process killed (SIGKILL), a
broker process killed mid-stream and restarted on its data directory. After
each fault a fresh consumer drains the node and the test accounts for every
message: nothing accepted by the broker is lost, and a message seen twice
is a redelivery (``delivery-count`` incremented) or one AMQP's at-least-once
allows (settled by the consumer, or unsettled, when the broker died).

Clients that are killed run as processes: this file is also their script
(``python test_faults.py produce URL ADDRESS COUNT`` / ``consume URL ADDRESS
ACCEPT HOLD``), each printing what happened to every message, one line each.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from broker_clients import (
    TIMEOUT,
    RunningBroker,
    TopicOption,
    bodies,
    connect,
    message,
    nothing_more,
    raw_receiver,
    send,
    sql,
    wait_received,
)
from proton import Delivery, Message
from proton.handlers import MessagingHandler
from proton.reactor import Container, DurableSubscription

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve()


# -- the client processes -------------------------------------------------------------------


class _Producer(MessagingHandler):
    """Sends ``count`` messages as fast as credit allows; prints ``A n`` for each accepted."""

    def __init__(self, url: str, address: str, count: int) -> None:
        super().__init__()
        self.url = url
        self.address = address
        self.count = count
        self.sent = 0
        self.settled = 0
        self.numbers: dict[Any, int] = {}

    def on_start(self, event: Any) -> None:
        connection = event.container.connect(self.url, reconnect=False)
        event.container.create_sender(connection, self.address)

    def on_sendable(self, event: Any) -> None:
        sender = event.sender
        while sender.credit and self.sent < self.count:
            delivery = sender.send(Message(body=self.sent, properties={"n": self.sent}))
            self.numbers[delivery] = self.sent
            self.sent += 1

    def on_accepted(self, event: Any) -> None:
        print("A", self.numbers.pop(event.delivery), flush=True)
        self._done(event)

    def on_rejected(self, event: Any) -> None:
        print("R", self.numbers.pop(event.delivery), flush=True)
        self._done(event)

    def on_released(self, event: Any) -> None:
        print("L", self.numbers.pop(event.delivery), flush=True)
        self._done(event)

    def _done(self, event: Any) -> None:
        self.settled += 1
        if self.settled == self.count:
            event.connection.close()


def _consume_and_hang(url: str, address: str, accept: int, hold: int) -> None:
    """Take ``accept + hold`` messages, accept the first ``accept``, then wait to be killed."""
    conn = connect(url)
    receiver, handler = raw_receiver(conn, address, settle=False)
    received = wait_received(conn, handler, accept + hold, flow=accept + hold, link=receiver.link)
    for data, delivery in received:
        m = Message()
        m.decode(data)
        if accept > 0:
            delivery.update(Delivery.ACCEPTED)
            delivery.settle()
            accept -= 1
            print("A", number(m), flush=True)
        else:
            print("H", number(m), flush=True)
    # The broker answers an attach after the dispositions sent before it: they are in.
    conn.create_receiver(None, dynamic=True)
    print("READY", flush=True)
    while True:
        conn.wait(lambda: False, timeout=3600)


def number(m: Message) -> int:
    """The message's sequence number (application property ``n``)."""
    assert m.properties is not None
    return int(m.properties["n"])


def client(*args: str, quiet: bool = False) -> subprocess.Popen[str]:
    """A client process running this file (``quiet``: its lines are not wanted)."""
    path = os.pathsep.join([str(SCRIPT.parent), str(REPO), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    out = subprocess.DEVNULL if quiet else subprocess.PIPE
    return subprocess.Popen([sys.executable, str(SCRIPT), *args], cwd=REPO, text=True,
                            stdout=out, env=env)


def lines_until(proc: subprocess.Popen[str], stop: str) -> list[str]:
    """The client's lines up to (not including) ``stop``; fails if it exits first."""
    assert proc.stdout is not None
    out: list[str] = []
    for line in proc.stdout:
        if line.strip() == stop:
            return out
        out.append(line.strip())
    raise AssertionError(f"the client exited (status {proc.wait()}) before {stop!r}")


def numbers(lines: list[str], kind: str) -> list[int]:
    return [int(line.split()[1]) for line in lines if line.startswith(kind + " ")]


# -- a broker process --------------------------------------------------------------------------


class BrokerProcess:
    """``python -m broker`` on an ephemeral port (restartable on the same data directory)."""

    def __init__(self, tmp_path: Path, *extra: str) -> None:
        self.tmp_path = tmp_path
        self.extra = extra
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> str:
        ready = self.tmp_path / "ready"
        ready.unlink(missing_ok=True)
        log = (self.tmp_path / "broker.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "broker", "--listen", "127.0.0.1:0", "--ready-file",
             str(ready), *self.extra], cwd=REPO, stderr=log)
        log.close()
        deadline = time.monotonic() + TIMEOUT
        while not ready.exists():  # a file the broker writes atomically once bound
            assert self.proc.poll() is None, self.log()
            assert time.monotonic() < deadline, "the broker did not start"
            time.sleep(0.02)
        self.url = ready.read_text().split()[0]
        return self.url

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(TIMEOUT)

    def log(self) -> str:
        return (self.tmp_path / "broker.log").read_text(errors="replace")


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path, "--data-dir", str(tmp_path / "data"))
    yield process
    process.kill()


def drain(url: str, address: str) -> list[tuple[int, int]]:
    """Everything the node holds, accepted: (n, delivery-count) in arrival order.

    Each round drains (credit with the drain flag): the broker sends what it has
    before its flow answer, so a round that brings nothing means the node is empty.
    """
    conn = connect(url)
    receiver, handler = raw_receiver(conn, address)  # accepts every delivery as it arrives
    link = receiver.link
    while True:
        before = len(handler.received)
        link.drain(500)
        conn.wait(lambda: not link.draining(), timeout=TIMEOUT, msg="waiting for drain")
        if len(handler.received) == before:
            break
    conn.close()
    out: list[tuple[int, int]] = []
    for data, _ in handler.received:
        m = Message()
        m.decode(data)
        out.append((number(m), m.delivery_count))
    return out


# -- the faults ----------------------------------------------------------------------------------


def test_consumer_link_detached_mid_stream(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    send(conn.create_sender("q"), *(message(i, n=i) for i in range(100)))
    receiver, handler = raw_receiver(conn, "q", settle=False)
    received = wait_received(conn, handler, 20, flow=20, link=receiver.link)
    for _, delivery in received[:10]:
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
    receiver.link.detach()  # ten accepted, ten in flight: those ten come back
    conn.wait(lambda: "detach (not closed)" in handler.events, timeout=TIMEOUT)
    conn.close()

    drained = drain(broker.url, "q")
    assert sorted(n for n, _ in drained) == list(range(10, 100))  # each exactly once
    assert {n: c for n, c in drained if c} == dict.fromkeys(range(10, 20), 1)


def test_consumer_process_killed(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    send(conn.create_sender("q"), *(message(i, n=i) for i in range(50)))
    conn.close()
    consumer = client("consume", broker.url, "q", "15", "10")
    before = lines_until(consumer, "READY")
    consumer.send_signal(signal.SIGKILL)  # the connection drops without a close
    consumer.wait()

    accepted, held = numbers(before, "A"), numbers(before, "H")
    assert (accepted, held) == (list(range(15)), list(range(15, 25)))
    drained = drain(broker.url, "q")
    assert sorted(n for n, _ in drained) == list(range(15, 50))
    # What the dead consumer held unsettled is a redelivery; the rest was never sent.
    assert {n: c for n, c in drained if c} == dict.fromkeys(held, 1)


def test_broker_killed_mid_stream_loses_nothing_it_accepted(
    broker_process: BrokerProcess,
) -> None:
    url = broker_process.start()
    total = 20_000
    producer = client("produce", url, "orders", str(total))
    conn = connect(url)
    receiver = conn.create_receiver("orders", credit=50)
    consumed = []
    for _ in range(300):  # a consumer at work while the producer sends
        m = receiver.receive(timeout=TIMEOUT)
        receiver.accept()
        consumed.append(number(m))
    assert producer.stdout is not None
    early: list[str] = []
    while len(early) < 2000:  # mid-stream: the producer has more in flight
        line = producer.stdout.readline()
        assert line, "the producer ended early"
        early.append(line.strip())
    broker_process.kill()
    rest, _ = producer.communicate(timeout=TIMEOUT)
    accepted = set(numbers(early + rest.splitlines(), "A"))
    assert 2000 <= len(accepted) < total, "the broker was not killed mid-stream"

    url = broker_process.start()
    drained = drain(url, "orders")
    after = [n for n, _ in drained]
    assert len(after) == len(set(after)), "a message came twice from one broker run"
    assert set(after) <= set(range(total))
    assert "store: recovered queue 'orders'" in broker_process.log()
    lost = accepted - set(consumed) - set(after)
    assert not lost, (f"{len(lost)} accepted message(s) lost, e.g. {sorted(lost)[:5]}; "
                      f"max accepted {max(accepted)}, {len(after)} after, consumed up to "
                      f"{max(consumed)}, after from {min(after)} to {max(after)}"
                      f"{broker_process.log()[-3000:]}")
    # Seen twice: only what the consumer accepted just before the crash (its credit's worth).
    assert len(set(consumed) & set(after)) <= 50
    assert broker_process.stop() == 0


def test_durable_subscription_survives_a_broker_kill(broker_process: BrokerProcess) -> None:
    url = broker_process.start()
    durable = [TopicOption(), DurableSubscription(), sql("n % 2 = 0")]
    subscriber = connect(url, container_id="jms-7")
    subscriber.create_receiver("ticks", name="evens", options=durable)
    subscriber.close()  # detached: the subscription collects on its own
    publisher = connect(url)
    send(publisher.create_sender("ticks", options=TopicOption()),
         *(message(i, n=i) for i in range(20)))  # each one accepted: on disk
    broker_process.kill()

    url = broker_process.start()
    back = connect(url, container_id="jms-7")
    found = back.create_receiver(None, name="evens")  # resumed by name, as Qpid JMS does
    assert found.link.remote_source.address == "ticks"
    assert bodies(found, 10) == list(range(0, 20, 2))
    assert nothing_more(back, found)
    back.close()


def test_a_second_broker_on_the_same_data_dir_exits_1(
    broker_process: BrokerProcess, tmp_path: Path
) -> None:
    broker_process.start()
    result = subprocess.run(
        [sys.executable, "-m", "broker", "--listen", "127.0.0.1:0", "--data-dir",
         str(tmp_path / "data")], cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT,
        check=False)
    assert result.returncode == 1
    assert "in use by another broker" in result.stderr


def test_a_restart_without_data_dir_loses_what_was_held(tmp_path: Path) -> None:
    process = BrokerProcess(tmp_path)
    url = process.start()
    try:
        conn = connect(url)
        send(conn.create_sender("q"), *(message(i, n=i) for i in range(5)))
        conn.close()
        assert process.stop() == 0
        assert "they are discarded" in process.log()
        url = process.start()
        assert drain(url, "q") == []
    finally:
        process.kill()


def main(argv: list[str]) -> int:
    """The client processes (see the module docstring)."""
    command, url, address, *counts = argv
    if command == "produce":
        Container(_Producer(url, address, int(counts[0]))).run()
        return 0
    if command == "consume":
        _consume_and_hang(url, address, int(counts[0]), int(counts[1]))
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
