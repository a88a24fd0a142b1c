"""Qpid JMS 2.10's message lifetime against filtex-broker: setTimeToLive (AMQP 1.0 part 3
§3.2.1 header ttl, with §3.2.4 absolute-expiry-time, both of which Qpid JMS sets),
setDeliveryDelay (the x-opt-delivery-time message annotation, §3.2.3, sent only to a peer
whose open offers DELAYED_DELIVERY, part 2 §2.7.1) and setPriority (§3.2.1 header priority).

One broker process (its addresses ``*.stream`` are streams) and one JVM for the module, running
the scenarios ``ttl``, ``dead-letter-read``, ``delivery-delay``, ``stream-delay`` and
``priority`` of ``java/JmsScenarios.java``; skipped without a JDK and Maven.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..broker.fault_clients import BrokerProcess
from .jms_support import Results, run_scenarios

LIFETIME = ("ttl", "dead-letter-read", "delivery-delay", "stream-delay", "priority")


@pytest.fixture(scope="module")
def results(jms_classpath: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Results]:
    broker = BrokerProcess(Path(tmp_path_factory.mktemp("jms-lifetime-broker")),
                           "--stream", "*.stream")
    url = broker.start()
    try:
        yield run_scenarios(jms_classpath, url, LIFETIME)
    finally:
        assert broker.stop() == 0, broker.log()


def test_a_message_past_its_time_to_live_is_not_received_and_is_dead_lettered(
        results: Results) -> None:
    """setTimeToLive(500), the consumer created 1 s later (Qpid JMS's local expiry check off:
    the broker's is tested)."""
    assert results("ttl", "received") == "kept"
    assert results("ttl", "dead-lettered") == "expiring"


def test_a_dead_letter_of_an_expired_message_reaches_a_client_checking_expiry(
        results: Results) -> None:
    """Qpid JMS's own expiry check on (its default): the dead letter of a message whose
    setTimeToLive(300) passed arrives, and never expires (JMSExpiration 0): a dead letter
    carries no ttl or absolute-expiry-time."""
    assert results("dead-letter-read", "received") == "expired"
    assert results("dead-letter-read", "expiration") == "0"


def test_a_delivery_delay_holds_the_message_until_due(results: Results) -> None:
    """setDeliveryDelay(1500): nothing within 1 s of the send, then the message; one sent
    after it without a delay comes first."""
    assert results("delivery-delay", "first") == "at-once"
    assert results("delivery-delay", "early") == "-", "delivered before its delay"
    assert results("delivery-delay", "later") == "delayed"
    assert int(results("delivery-delay", "after-ms")) >= 1500 - 2  # the broker's ms, truncated


def test_a_delivery_delay_on_a_stream_fails_the_send_with_the_reason(results: Results) -> None:
    """A stream does not schedule: Qpid JMS's send throws the broker's rejection (it offered
    DELAYED_DELIVERY, so the client sent the delay); nothing of that message is read."""
    failure = results("stream-delay", "delayed")
    assert failure.startswith("!JMSException: stream '") and "does not schedule" in failure, \
        failure
    assert failure.endswith("send it without one, or to a queue [condition = "
                            "amqp:not-implemented]"), failure
    assert results("stream-delay", "received") == "at-once"
    assert results("stream-delay", "more") == "-"


def test_a_consumer_takes_the_highest_priority_first(results: Results) -> None:
    """setPriority 1, 1, 9, 4, 9 queued before the consumer: 9, 9, 4, 1, 1 (arrival order
    within a priority)."""
    assert results("priority", "order") == "p9-a,p9-b,p4,p1-a,p1-b"
