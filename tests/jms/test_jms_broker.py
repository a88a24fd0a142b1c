"""Qpid JMS 2.10 (the JMS client over AMQP 1.0) against filtex-broker.

One broker process and one JVM for the module: the JVM runs every scenario of
``java/JmsScenarios.java`` and prints what each consumer received; the tests
assert exactly which messages arrived (docs/BROKER.md, "Qpid JMS").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..broker.fault_clients import BrokerProcess
from .jms_support import (
    SELECTORS,
    Results,
    check_browser,
    check_durable,
    check_invalid_selector,
    check_no_local,
    check_receive_no_wait,
    check_temporary_queue,
    run_scenarios,
)


@pytest.fixture(scope="module")
def results(jms_classpath: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Results]:
    broker = BrokerProcess(Path(tmp_path_factory.mktemp("jms-broker")))
    url = broker.start()
    try:
        yield run_scenarios(jms_classpath, url)
    finally:
        assert broker.stop() == 0, broker.log()


@pytest.mark.parametrize(("label", "selector", "expected"), SELECTORS,
                         ids=[label for label, _, _ in SELECTORS])
@pytest.mark.parametrize("scenario", ["queue-selectors", "topic-selectors"])
def test_a_selector_gets_exactly_its_matches(results: Results, scenario: str, label: str,
                                             selector: str, expected: str) -> None:
    assert results(scenario, label) == expected, selector


def test_an_invalid_selector_is_refused_with_the_brokers_reason(results: Results) -> None:
    """Qpid JMS parses selectors itself (InvalidSelectorException); with that switched off
    (``jms.validateSelector=false``) the broker's refusal reaches the application."""
    check_invalid_selector(results)


def test_a_no_local_subscriber_gets_only_other_connections_messages(results: Results) -> None:
    check_no_local(results)


@pytest.mark.parametrize("scenario", ["durable-subscriber", "durable-consumer"])
def test_a_durable_subscription_keeps_what_was_published_while_away(
        results: Results, scenario: str) -> None:
    check_durable(results, scenario)


def test_a_shared_durable_subscription_shares_and_keeps_what_was_published(
        results: Results) -> None:
    """Two connections without client-id on one subscription: each match once; a joiner with
    another selector is refused while consumers are attached (JMS 2.0 §8.3.4)."""
    assert results("shared-durable", "online") == "online-m0,online-m3"
    other = results("shared-durable", "other-selector")
    assert other.startswith("!JMSException: shared subscription ('', "), other
    assert other.endswith("has consumers with another selector or filter set "
                          "[condition = amqp:resource-locked]"), other
    assert results("shared-durable", "resumed") == "away-m0,away-m3"
    assert results("shared-durable", "unsubscribe") == "ok"
    assert results("shared-durable", "after-unsubscribe") == "-"


def test_a_shared_non_durable_subscription_shares(results: Results) -> None:
    assert results("shared-durable", "non-durable") == "volatile-m0,volatile-m3"


def test_a_browser_with_a_selector_takes_nothing(results: Results) -> None:
    check_browser(results)


def test_receive_no_wait_drains_what_is_there(results: Results) -> None:
    """Qpid JMS's receiveNoWait drains the link: it must get what the queue holds."""
    check_receive_no_wait(results)


def test_request_reply_through_a_temporary_queue(results: Results) -> None:
    check_temporary_queue(results)
