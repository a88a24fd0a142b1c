"""Fixtures for relay mode: RabbitMQ 3.10 (Debian's package) upstream, relays as subprocesses."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from filtex_broker.config import BrokerConfig
from filtex_broker.server import Broker

from .relay_rabbit import Rabbit, free_port, rabbit_available, start_rabbit
from .relay_support import RelayFactory, RelayProcess
from .tls_certs import make_certs, openssl_missing


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


@pytest.fixture
def upstream() -> Iterator[Broker]:
    """Our own broker as the upstream, in this process (unsecured, on a free port)."""
    broker = Broker(BrokerConfig(listen=(("127.0.0.1", free_port()),), container_id="upstream"))
    thread = broker.start_in_thread()
    yield broker
    broker.stop()
    thread.join(30)
    assert not thread.is_alive()
