"""The event loop waits with poll(2): descriptors above 1023 (FD_SETSIZE) must work.

proton's own selector uses select(2), which raises ``filedescriptor out of
range`` for them, and the broker's event loop then ends: found when a test
flooding the broker with 500 connections ran late in the suite.
"""

from __future__ import annotations

import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import pytest

from filtex_broker.loop.poller import PollSelector

from ..broker_clients import HIGH_DESCRIPTORS, bodies, connect, message, send

HIGH: Final = HIGH_DESCRIPTORS
CROWDED_BROKER: Final = f"""
import os, resource, runpy, sys
_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, {HIGH} + 200), hard))
held = [os.open(os.devnull, os.O_RDONLY) for _ in range({HIGH})]
sys.argv[0] = "filtex-broker"
runpy.run_module("broker", run_name="__main__")
"""


class _Watched:
    """The part of a proton Selectable the selector reads."""

    def __init__(self, sock: socket.socket, *, reading: bool, writing: bool) -> None:
        self.sock = sock
        self.reading = reading
        self.writing = writing
        self.deadline: Any = None

    def fileno(self) -> int:
        return self.sock.fileno()


def test_poll_selector_reports_ready_sockets_above_descriptor_1023(
    high_descriptors: list[int],
) -> None:
    left, right = socket.socketpair()
    try:
        assert left.fileno() > 1023
        reader = _Watched(left, reading=True, writing=False)
        writer = _Watched(right, reading=False, writing=True)
        selector = PollSelector()
        selector.add(reader)
        selector.add(writer)
        readable, writable, expired = selector.select(0)
        assert (readable, writable, expired) == ([], [writer], [])
        right.send(b"x")
        readable, writable, _ = selector.select(1.0)
        assert readable == [reader] and writable == [writer]
    finally:
        left.close()
        right.close()


def test_poll_selector_reports_expired_deadlines() -> None:
    left, right = socket.socketpair()
    try:
        timer = _Watched(left, reading=False, writing=False)
        timer.deadline = 1.0  # long past (seconds since the epoch)
        selector = PollSelector()
        selector.add(timer)
        assert selector.select(5.0) == ([], [], [timer])  # no waiting: the deadline is due
    finally:
        left.close()
        right.close()


def test_the_broker_serves_connections_above_descriptor_1023(tmp_path: Path) -> None:
    """A broker process that opens 1100 files before it starts, so that its sockets get
    descriptors above 1023; the client, in this process, keeps low ones (proton's client
    selector has the select(2) limit too)."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < HIGH + 200:
        pytest.skip(f"the open-files limit ({hard}) is too low to reach descriptor {HIGH}")
    ready = tmp_path / "ready"
    broker = subprocess.Popen([sys.executable, "-c", CROWDED_BROKER, "--listen", "127.0.0.1:0",
                               "--ready-file", str(ready), "--log-level", "WARNING"],
                              stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert broker.poll() is None and time.monotonic() < deadline, "no broker"
            time.sleep(0.05)
        conn = connect(f"amqp://{ready.read_text().split()[0]}")
        send(conn.create_sender("q"), *(message(i) for i in range(20)))
        assert bodies(conn.create_receiver("q"), 20) == list(range(20))
        conn.close()
    finally:
        broker.send_signal(signal.SIGTERM)
        _, errors = broker.communicate(timeout=30)
    assert broker.returncode == 0, errors
    assert "out of range" not in errors
