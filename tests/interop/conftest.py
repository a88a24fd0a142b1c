"""Interop fixtures: one filtex-broker process on an ephemeral port for the whole directory.

The clients under test are programs we did not write (rhea on Node, Qpid
Proton C and C++, cli-proton-python, go-amqp, fe2o3-amqp); they run as
subprocesses against a broker that runs the way an operator runs it
(``python -m filtex_broker``), over real sockets.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .interop_support import BrokerAddress

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0


@pytest.fixture(scope="session")
def interop_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerAddress]:
    ready = tmp_path_factory.mktemp("interop-broker") / "ready"
    process = subprocess.Popen(
        [sys.executable, "-m", "filtex_broker", "--listen", "127.0.0.1:0", "--ready-file",
         str(ready)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not ready.exists():
            assert process.poll() is None, "filtex-broker exited during start-up"
            assert time.monotonic() < deadline, "filtex-broker did not become ready"
            time.sleep(0.05)  # polling for the ready file, not synchronising on time
        host, port = ready.read_text().split()[0].rsplit(":", 1)
        yield BrokerAddress(host, int(port))
    finally:
        process.terminate()
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
    assert code == 0, "the broker did not exit cleanly on SIGTERM"


@pytest.fixture
def address() -> str:
    """A fresh queue name per test."""
    return f"interop-{uuid.uuid4().hex[:10]}"
