"""Session fixtures shared by test folders: real upstream brokers from Maven Central.

One JVM per broker per test session, started on first use on free loopback ports
and stopped at the end (``upstreams/``); without Java and Maven the tests that use
one skip with that reason.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from upstreams.artemis import Artemis, start_artemis
from upstreams.brokerj import BrokerJ, start_broker_j
from upstreams.maven import java_missing


def _require_java(broker: str) -> None:
    reason = java_missing()
    if reason is not None:
        pytest.skip(f"{broker} needs Java and Maven: {reason}")


@pytest.fixture(scope="session")
def artemis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Artemis]:
    """ActiveMQ Artemis 2.40 with its default configuration and a queue ``orders``."""
    _require_java("ActiveMQ Artemis")
    base = tmp_path_factory.mktemp("artemis")
    node = start_artemis(base, queues=["orders"])
    yield node
    node.stop()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def broker_j(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerJ]:
    """Qpid Broker-J 9.2 (BDB store, user ``guest``) with a queue ``orders``; queues named
    ``filtex-...`` are created on first use (a node auto-creation policy), others are not."""
    _require_java("Qpid Broker-J")
    base = tmp_path_factory.mktemp("broker-j")
    node = start_broker_j(base, queues=["orders"], auto_create="filtex-.*")
    yield node
    node.stop()
    shutil.rmtree(base, ignore_errors=True)
