"""Dead peers: ``--idle-timeout`` closes a connection that sends nothing, and what it held is
handed on; a peer that only heartbeats stays. Real processes and sockets: the frozen consumer is
a client process stopped with SIGSTOP (its TCP connection stays up, as with a hung process or a
host behind a partition).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from proton import Message
from proton.utils import BlockingConnection

from .broker_clients import TIMEOUT, connect
from .fault_clients import BrokerProcess, client

TIMEOUT_SECONDS = 2.0


def _received_numbers(connection: BlockingConnection, count: int, deadline: float) -> list[int]:
    receiver = connection.create_receiver("q", credit=count)
    numbers = []
    while len(numbers) < count:
        message = receiver.receive(timeout=max(0.1, deadline - time.monotonic()))
        assert message.properties is not None
        numbers.append(int(message.properties["n"]))
        receiver.accept()
    return numbers


def test_a_frozen_consumers_messages_go_to_another_consumer(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, "--idle-timeout", str(TIMEOUT_SECONDS))
    url = broker.start()
    producer = connect(url)
    sender = producer.create_sender("q")
    for n in range(20):
        sender.send(Message(body=n, properties={"n": n}))
    producer.close()  # not pumped while the test waits: it would be idle too
    frozen = client("consume", url, "q", "0", "10")  # takes ten, settles none, keeps pumping
    assert frozen.stdout is not None
    held = []
    for line in frozen.stdout:
        if line.startswith("H "):
            held.append(int(line.split()[1]))
        if line.startswith("READY"):
            break
    assert len(held) == 10
    try:
        frozen.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        other = connect(url)
        got = _received_numbers(other, 20, stopped + 2 * TIMEOUT_SECONDS + TIMEOUT)
        handed_on = time.monotonic() - stopped
        assert sorted(got) == list(range(20)), got
        assert set(got[10:]) == set(held)  # the held ones came last, after the idle close
        assert handed_on < 2 * TIMEOUT_SECONDS, f"the held messages came after {handed_on:.1f} s"
        other.close()
    finally:
        frozen.send_signal(signal.SIGCONT)
        frozen.kill()
        frozen.wait()
    log = broker.log()
    assert broker.stop() == 0
    assert "(idle-timeout)" in log and "nothing received from" in log, log


def test_a_client_that_only_heartbeats_stays_connected(tmp_path: Path) -> None:
    """Ten times the broker's idle-timeout with nothing but empty frames either way: both
    ends heartbeat within half of what the other declared, and nobody is closed."""
    timeout = 0.5
    broker = BrokerProcess(tmp_path, "--idle-timeout", str(timeout))
    url = broker.start()
    quiet = BlockingConnection(url, timeout=TIMEOUT, heartbeat=timeout)
    transport = quiet.conn.transport
    assert transport is not None
    assert transport.remote_idle_timeout == timeout / 2  # declared as half, as Proton does
    until = time.monotonic() + 10 * timeout
    quiet.wait(lambda: time.monotonic() > until, timeout=TIMEOUT)  # pumps: only heartbeats
    sender = quiet.create_sender("still-here")
    sender.send(Message(body="alive"))
    receiver = quiet.create_receiver("still-here", credit=1)
    assert receiver.receive(timeout=TIMEOUT).body == "alive"
    receiver.accept()
    quiet.close()
    log = broker.log()
    assert broker.stop() == 0
    assert "idle-timeout" not in log, log


@pytest.mark.parametrize(("flags", "declared"), [
    ((), 30.0),  # the default 60 s: a client is told to send something every 30 s
    (("--idle-timeout", "0"), 0.0),  # off: nothing declared
], ids=["default", "off"])
def test_the_open_frame_declares_half_the_idle_timeout(
        tmp_path: Path, flags: tuple[str, ...], declared: float) -> None:
    broker = BrokerProcess(tmp_path, *flags)
    connection = BlockingConnection(broker.start(), timeout=TIMEOUT)
    assert connection.conn.transport is not None
    assert connection.conn.transport.remote_idle_timeout == declared
    connection.close()
    assert broker.stop() == 0
