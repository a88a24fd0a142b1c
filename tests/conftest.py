"""Session fixtures shared by test folders: real upstream brokers from Maven Central.

One JVM per broker per test session, started on first use on free loopback ports
and stopped at the end (``upstreams/``). Without Java and Maven, or when Maven
Central cannot be reached, the tests that use one skip with that reason, unless
``FILTEX_REQUIRE_BROKERS`` is set (CI sets it: there a broker that cannot run is a
failure, not a skip).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from upstreams.activemq import ActiveMQ, start_activemq
from upstreams.artemis import Artemis, start_artemis
from upstreams.brokerj import BrokerJ, start_broker_j
from upstreams.maven import java_missing

T = TypeVar("T")


def _cannot_run(broker: str, reason: str) -> None:
    if os.environ.get("FILTEX_REQUIRE_BROKERS"):
        pytest.fail(f"{broker} cannot run here and FILTEX_REQUIRE_BROKERS is set: {reason}")
    pytest.skip(f"{broker} cannot run here: {reason}")


def started(broker: str, start: Callable[[Path], T], base: Path) -> T:
    """``start(base)``, or a skip (a failure where brokers are required) saying why not."""
    reason = java_missing()
    if reason is not None:
        _cannot_run(broker, reason)
    try:
        return start(base)
    except (RuntimeError, OSError) as exc:
        _cannot_run(broker, str(exc))
        raise  # not reached: skip and fail raise


@pytest.fixture(scope="session")
def artemis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Artemis]:
    """ActiveMQ Artemis 2.40 with its default configuration and a queue ``orders``."""
    base = tmp_path_factory.mktemp("artemis")
    node = started("ActiveMQ Artemis", lambda b: start_artemis(b, queues=["orders"]), base)
    yield node
    node.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def activemq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ActiveMQ]:
    """ActiveMQ Classic 5.18 with its default configuration, AMQP only."""
    base = tmp_path_factory.mktemp("activemq")
    node = started("ActiveMQ Classic", start_activemq, base)
    yield node
    node.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def broker_j(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerJ]:
    """Qpid Broker-J 9.2 (BDB store, user ``guest``) with a queue ``orders``; queues named
    ``filtex-...`` are created on first use (a node auto-creation policy), others are not."""
    base = tmp_path_factory.mktemp("broker-j")
    node = started("Qpid Broker-J",
                   lambda b: start_broker_j(b, queues=["orders"], auto_create="filtex-.*"), base)
    yield node
    node.stop()
    shutil.rmtree(base, ignore_errors=True)
