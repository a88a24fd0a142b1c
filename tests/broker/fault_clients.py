"""Client processes that tests kill, and a broker process they can kill and restart.

Clients that are killed run as processes: this module is their script
(``python -m tests.broker.fault_clients produce URL ADDRESS COUNT`` / ``consume URL ADDRESS
ACCEPT HOLD``, from the repository root), each printing what happened to every message, one
line each. Used by test_faults.py and test_soak.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from proton import Delivery, Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

from .broker_clients import TIMEOUT, connect, raw_receiver, wait_received

REPO = Path(__file__).resolve().parents[2]

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
    """A client process running this module (``quiet``: its lines are not wanted)."""
    out = subprocess.DEVNULL if quiet else subprocess.PIPE
    return subprocess.Popen([sys.executable, "-m", __name__, *args], cwd=REPO, text=True,
                            stdout=out)


def lines_until(proc: subprocess.Popen[str], stop: str) -> list[str]:
    """The client's lines up to (not including) ``stop``; fails if it exits first."""
    assert proc.stdout is not None
    out: list[str] = []
    for line in proc.stdout:
        if line.strip() == stop:
            return out
        out.append(line.strip())
    raise AssertionError(f"the client exited (status {proc.wait()}) before {stop!r}")


def first_lines(proc: subprocess.Popen[str], count: int) -> list[str]:
    """The client's first ``count`` lines (it runs on: the rest is its to say); fails if it
    exits first."""
    assert proc.stdout is not None
    out: list[str] = []
    while len(out) < count:
        line = proc.stdout.readline()
        assert line, "the client ended early"
        out.append(line.strip())
    return out


def numbers(lines: list[str], kind: str) -> list[int]:
    return [int(line.split()[1]) for line in lines if line.startswith(kind + " ")]


# -- a broker process --------------------------------------------------------------------------


class BrokerProcess:
    """``python -m filtex_broker`` on an ephemeral port (restartable on the same data directory)."""

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
            [sys.executable, "-m", "filtex_broker", "--listen", "127.0.0.1:0", "--ready-file",
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
