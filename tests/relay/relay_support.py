"""What the relay tests import: a relay as a subprocess, and a receive-everything helper.

Kept out of ``conftest.py`` so that test modules never import a conftest by
name (two test folders' conftests would clash in one pytest run).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from proton import Link, Timeout, symbol
from proton.reactor import ReceiverOption
from proton.utils import BlockingReceiver

__all__ = ["RelayFactory", "RelayProcess", "TopicSource", "accepted_ids"]

ROOT = Path(__file__).resolve().parents[2]


def accepted_ids(receiver: BlockingReceiver, timeout: float = 2.0) -> list[str]:
    """Receive and accept until ``timeout`` passes quietly; the message-ids, as strings."""
    got = []
    while True:
        try:
            message = receiver.receive(timeout=timeout)
        except Timeout:
            return got
        got.append(str(message.id))
        receiver.accept()


class TopicSource(ReceiverOption):
    """The ``topic`` source capability (what Qpid JMS sends for a topic)."""

    def apply(self, link: Link) -> None:
        link.source.capabilities.put_object(symbol("topic"))


class RelayProcess:
    """``python -m filtex_broker --upstream URL`` on a free port, with its log in a file."""

    def __init__(self, upstream: str, workdir: Path, *extra: str) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        ready = workdir / "ready"
        ready.unlink(missing_ok=True)
        self.log_path = workdir / "relay.log"
        self._log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "filtex_broker", "--listen", "127.0.0.1:0", "--ready-file",
             str(ready), "--upstream", upstream, *extra],
            cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 30
        while not ready.exists():  # written atomically once bound
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the relay did not start: {self.log()}")
            time.sleep(0.05)
        self.address = ready.read_text().split()[0]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no goodbye to anyone (the upstream sees the socket drop)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)
        self._log.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()


RelayFactory = Callable[..., RelayProcess]
