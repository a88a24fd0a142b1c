"""The relay in front of the Qpid C++ broker (qpidd, ``scholzj/qpid-cpp``).

qpidd evaluates ``apache.org:selector-filter:string`` on AMQP 1.0 links; the
relay pushes the selector down (the default ``--upstream-selector auto``
recognises qpidd by the ``product`` of its open frame) and evaluates
the whole filter set itself as well. Queues are created on demand
(``--queue-patterns .*``); authentication is off (``--auth no``).

Needs a Docker engine; skipped without one. Image: ``FILTEX_QPIDD_IMAGE``
(default below).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from proton import Described

from .integration_support import (
    SQL,
    close,
    connect,
    nothing_more,
    receiver,
    refusal,
    relay,
    selector_and_sql,
    send,
    shapes,
    take,
)

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

IMAGE = os.environ.get("FILTEX_QPIDD_IMAGE", "scholzj/qpid-cpp:latest")


@dataclass(frozen=True)
class QpidRelay:
    qpidd_amqp: str
    relay: str


@pytest.fixture(scope="module")
def qpidd(docker_engine: None, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[QpidRelay]:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import PortWaitStrategy

    container = (DockerContainer(IMAGE)
                 .with_command(["--auth", "no", "--queue-patterns", ".*", "--log-enable", "info+"])
                 .with_exposed_ports(5672)
                 .waiting_for(PortWaitStrategy(5672).with_startup_timeout(120)))
    with container:
        amqp = f"{container.get_container_host_ip()}:{container.get_exposed_port(5672)}"
        with relay(tmp_path_factory.mktemp("qpid-relay"), f"amqp://{amqp}") as relay_url:
            yield QpidRelay(amqp, relay_url)


def test_filtered_consumer_through_the_relay(qpidd: QpidRelay) -> None:
    queue = f"filtex-{uuid.uuid4().hex[:8]}"
    direct = connect(qpidd.qpidd_amqp)
    send(direct, queue, shapes())
    direct.close()
    downstream = connect(qpidd.relay)
    try:
        filtered = receiver(downstream, queue, selector_and_sql())
        assert take(filtered, 2) == [3, 5]
        assert nothing_more(filtered)
        close(filtered)  # the relay releases what it held (n = 1) upstream
    finally:
        downstream.close()
    direct = connect(qpidd.qpidd_amqp)
    try:
        rest = receiver(direct, queue)
        assert sorted(take(rest, 4)) == [0, 1, 2, 4]
        assert nothing_more(rest)
    finally:
        direct.close()


def test_a_refused_filter_is_reported_by_the_relay(qpidd: QpidRelay) -> None:
    downstream = connect(qpidd.relay)
    try:
        condition = refusal(downstream, f"filtex-{uuid.uuid4().hex[:8]}",
                            {"bad": Described(SQL, "n > ")})
        assert condition.name == "amqp:invalid-field"
        assert "filter 'bad' (amqp:sql-filter)" in str(condition.description)
    finally:
        downstream.close()


def test_a_producer_through_the_relay_reaches_qpidd(qpidd: QpidRelay) -> None:
    queue = f"filtex-{uuid.uuid4().hex[:8]}"
    downstream = connect(qpidd.relay)
    try:
        send(downstream, queue, shapes())  # accepted downstream only once qpidd accepted it
    finally:
        downstream.close()
    direct = connect(qpidd.qpidd_amqp)
    try:
        rest = receiver(direct, queue)
        assert take(rest, 6) == [0, 1, 2, 3, 4, 5]
        assert nothing_more(rest)
    finally:
        direct.close()
