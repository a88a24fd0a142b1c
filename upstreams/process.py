"""A broker as a child process: free loopback ports, start, wait for AMQP, stop, leave nothing.

Each broker runs in a process group of its own and, where util-linux's ``setpriv``
is present (Debian's essential set), with a parent-death signal, so that it dies
with the process that started it even when that one is SIGKILLed (a test session or
the README's command interrupted hard leaves no JVM behind).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["BrokerProcess", "RunningBroker", "Upstream", "amqp_answers", "dying_with_parent",
           "free_port"]

_SETPRIV = shutil.which("setpriv")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def amqp_answers(port: int, host: str = "127.0.0.1") -> bool:
    """The listener answers an AMQP protocol header with one of its own (AMQP or SASL)."""
    try:
        with socket.create_connection((host, port), timeout=1) as sock:
            sock.sendall(b"AMQP\x00\x01\x00\x00")
            return sock.recv(8).startswith(b"AMQP")
    except OSError:
        return False


def dying_with_parent(command: Sequence[str]) -> list[str]:
    """The command, run with SIGKILL as its parent-death signal where setpriv can set it
    (kept across the broker scripts' ``exec java``)."""
    if _SETPRIV is None:
        return list(command)
    return [_SETPRIV, "--pdeathsig", "KILL", "--", *command]


class Upstream(Protocol):
    """What every broker started here offers: where it listens, who may log in (None:
    anonymous), its end."""

    @property
    def url(self) -> str: ...

    @property
    def user(self) -> str | None: ...

    @property
    def password(self) -> str | None: ...

    def running(self) -> bool: ...

    def stop(self) -> None: ...


class BrokerProcess:
    """One broker's process: its command, environment and log file; restartable."""

    def __init__(self, label: str, command: Sequence[str], *, cwd: Path, log: Path,
                 port: int, env: Mapping[str, str] | None = None,
                 ready_marker: str | None = None) -> None:
        self.label = label
        self.command = list(command)
        self.cwd = cwd
        self.log_path = log
        self.port = port
        self.env = {**os.environ, **(env or {})}
        self.ready_marker = ready_marker
        """A log line the broker writes once it serves clients, for brokers whose AMQP port
        answers before their virtual hosts are up (Broker-J): waited for after the port."""
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> None:
        """Start the broker and wait until its AMQP listener answers (and its log says
        ``ready_marker``)."""
        logged = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as out:
            self.process = subprocess.Popen(
                dying_with_parent(self.command), cwd=self.cwd, env=self.env, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not (amqp_answers(self.port) and self._marker_logged(logged)):
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.process.returncode} during "
                                   f"start-up: {self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.label} did not answer AMQP on port {self.port} in "
                                   f"{timeout:.0f} s: {self.log_tail()}")
            time.sleep(0.25)  # polling the JVM's start-up

    def _marker_logged(self, since: int) -> bool:
        if self.ready_marker is None:
            return True
        with self.log_path.open("rb") as log:
            log.seek(since)
            return self.ready_marker.encode() in log.read()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (each broker shuts down cleanly, durable state kept), SIGKILL if it hangs."""
        self._signal(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed beyond what the broker had already synced."""
        self._signal(signal.SIGKILL, 30.0)

    def restart(self, timeout: float = 120.0) -> None:
        self.stop()
        self.start(timeout)

    def _signal(self, signum: int, timeout: float) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signum)
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
        except ProcessLookupError:
            process.wait(30)

    def log_tail(self, size: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-size:]
        except OSError:
            return "(no log)"


@dataclass
class RunningBroker:
    """What each broker module's instance shares: its process, where it listens, its end."""

    process: BrokerProcess

    @property
    def port(self) -> int:
        return self.process.port

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    def running(self) -> bool:
        return self.process.running()

    def stop(self) -> None:
        self.process.stop()
