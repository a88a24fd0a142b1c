"""Session fixtures shared by test folders: real upstream brokers from Maven Central.

One JVM per broker per test session, started on first use on free loopback ports
and stopped at the end (``upstreams/``); without Java and Maven the tests that use
one skip with that reason.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from upstreams.activemq import ActiveMQ, start_activemq
from upstreams.artemis import Artemis, start_artemis
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
def activemq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ActiveMQ]:
    """ActiveMQ Classic 5.18 with its default configuration, AMQP only."""
    _require_java("ActiveMQ Classic")
    base = tmp_path_factory.mktemp("activemq")
    node = start_activemq(base)
    yield node
    node.stop()
    shutil.rmtree(base, ignore_errors=True)
