"""Fixtures for relay mode: RabbitMQ 3.10 (Debian's package) upstream, relays as subprocesses."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from proton import Timeout
from proton.utils import BlockingReceiver
from relay_rabbit import Rabbit, rabbit_available, start_rabbit
from tls_certs import make_certs, openssl_missing

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


class RelayProcess:
    """``python -m broker --upstream URL`` on a free port, with its log in a file."""

    def __init__(self, upstream: str, workdir: Path, *extra: str) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        ready = workdir / "ready"
        ready.unlink(missing_ok=True)
        self.log_path = workdir / "relay.log"
        self._log = self.log_path.open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "broker", "--listen", "127.0.0.1:0", "--ready-file",
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


@pytest.fixture(scope="session")
def rabbit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rabbit]:
    """A private RabbitMQ node with the AMQP 1.0 plugin, for the whole session."""
    reason = rabbit_available()
    if reason is not None:
        pytest.skip(f"relay tests against RabbitMQ need it: {reason}")
    base = tmp_path_factory.mktemp("rabbit")
    try:
        certs = make_certs(base / "tls") if openssl_missing() is None else None
        node = start_rabbit(base, certs=certs)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"RabbitMQ could not be started here: {exc}")
    yield node
    node.stop()
    if os.environ.get("FILTEX_KEEP_RABBIT") is None:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def relay_factory(tmp_path: Path) -> Iterator[RelayFactory]:
    started: list[RelayProcess] = []
    count = 0

    def make(upstream: str, *extra: str) -> RelayProcess:
        nonlocal count
        count += 1
        relay = RelayProcess(upstream, tmp_path / f"relay{count}", *extra)
        started.append(relay)
        return relay

    yield make
    for relay in started:
        relay.stop()
