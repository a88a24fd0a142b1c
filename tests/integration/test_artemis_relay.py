"""The relay in front of ActiveMQ Artemis (``apache/activemq-artemis``), with selector pushdown.

Artemis evaluates ``apache.org:selector-filter:string`` but offers no
``APACHE.ORG:SELECTOR`` capability; the relay runs with the default
``--upstream-selector auto``, which recognises Artemis by the ``product`` of its
open frame (broker/relay/brokers.py). Checked through Artemis's own management
(Jolokia): the upstream consumer carries the selector, and Artemis never hands
the relay the messages the selector excludes.

Needs a Docker engine; skipped without one. Image: ``FILTEX_ARTEMIS_IMAGE``
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
    SELECTOR,
    SQL,
    Jolokia,
    close,
    connect,
    eventually,
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

IMAGE = os.environ.get("FILTEX_ARTEMIS_IMAGE", "apache/activemq-artemis:2.44.0")
USER = PASSWORD = "artemis"


@dataclass(frozen=True)
class ArtemisRelay:
    artemis_amqp: str
    relay: str
    jolokia: Jolokia


@pytest.fixture(scope="module")
def artemis(docker_engine: None, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[ArtemisRelay]:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy

    container = (DockerContainer(IMAGE)
                 .with_env("ARTEMIS_USER", USER)
                 .with_env("ARTEMIS_PASSWORD", PASSWORD)
                 .with_env("ANONYMOUS_LOGIN", "false")
                 .with_exposed_ports(5672, 8161)
                 .waiting_for(LogMessageWaitStrategy(r"AMQ221007").with_startup_timeout(180)))
    with container:
        host = container.get_container_host_ip()
        amqp = f"{host}:{container.get_exposed_port(5672)}"
        jolokia = Jolokia(f"http://{host}:{container.get_exposed_port(8161)}", USER, PASSWORD)
        eventually(jolokia.ping, bool, "Artemis's Jolokia endpoint", timeout=120)
        with relay(tmp_path_factory.mktemp("artemis-relay"), f"amqp://{amqp}",
                   "--upstream-user", USER, "--upstream-password", PASSWORD) as relay_url:
            yield ArtemisRelay(amqp, relay_url, jolokia)


@pytest.fixture
def queue(artemis: ArtemisRelay) -> str:
    name = f"filtex-{uuid.uuid4().hex[:8]}"
    artemis.jolokia.create_anycast_queue(name)
    return name


def test_filtered_consumer_through_the_relay_with_pushdown(artemis: ArtemisRelay,
                                                           queue: str) -> None:
    jolokia = artemis.jolokia
    direct = connect(artemis.artemis_amqp, USER, PASSWORD)
    send(direct, queue, shapes())
    direct.close()
    eventually(lambda: jolokia.queue(queue).get("messageCount"), lambda v: str(v) == "6",
               "Artemis holds the six messages")
    downstream = connect(artemis.relay)
    try:
        filtered = receiver(downstream, queue, selector_and_sql())
        # colour = 'red' (pushed down) AND n > 1 (evaluated by the relay)
        assert take(filtered, 2) == [3, 5]
        assert nothing_more(filtered)

        # Artemis received the selector on the relay's upstream consumer ...
        filters = eventually(lambda: jolokia.consumer_filters(queue), bool,
                             "a consumer on the queue in Artemis")
        assert any("colour" in f and "red" in f for f in filters), filters
        # ... so it handed the relay only red messages: 3 and 5 accepted, 1 held (n = 1);
        # the blue ones were never delivered (without pushdown 4 would be in delivery).
        state = eventually(lambda: jolokia.queue(queue),
                           lambda q: str(q.get("messagesAcked")) == "2"
                           and str(q.get("deliveringCount")) == "1",
                           "Artemis queue state after the filtered consumer")
        assert str(state["messageCount"]) == "4"
        close(filtered)
    finally:
        downstream.close()

    # nothing was lost or consumed behind the consumer's back: Artemis still has the rest
    direct = connect(artemis.artemis_amqp, USER, PASSWORD)
    try:
        assert sorted(take(receiver(direct, queue), 4)) == [0, 1, 2, 4]
    finally:
        direct.close()


def test_a_refused_filter_never_reaches_artemis(artemis: ArtemisRelay, queue: str) -> None:
    downstream = connect(artemis.relay)
    try:
        condition = refusal(downstream, queue, {"bad": Described(SQL, "n > ")})
        assert condition.name == "amqp:invalid-field"
        assert "filter 'bad' (amqp:sql-filter)" in str(condition.description)
    finally:
        downstream.close()
    assert artemis.jolokia.consumer_filters(queue) == []


def test_a_producer_through_the_relay_reaches_artemis(artemis: ArtemisRelay, queue: str) -> None:
    downstream = connect(artemis.relay)
    try:
        send(downstream, queue, shapes())  # accepted downstream only once Artemis accepted it
    finally:
        downstream.close()
    direct = connect(artemis.artemis_amqp, USER, PASSWORD)
    try:
        red = receiver(direct, queue, {"jms-selector": Described(SELECTOR, "colour = 'red'")})
        assert take(red, 3) == [1, 3, 5]  # Artemis's own selector over the forwarded messages
        close(red)
        assert take(receiver(direct, queue), 3) == [0, 2, 4]
    finally:
        direct.close()
