"""The Qpid JMS scenarios through the relay, in front of ActiveMQ Artemis 2.40.

The relay forwards the client's node capabilities (``queue``, ``topic``,
``temporary-queue``) so that Artemis picks anycast or multicast as for Qpid JMS itself,
answers a topic consumer's attach once the upstream subscription exists, forwards drains,
relays durable subscriptions under a name that says whose they are, and filters locally
what it does not push down; shared subscriptions are refused (docs/BROKER.md, "Qpid JMS").
One relay process and one JVM. The relay in front of filtex-broker is tested by
``tests/relay`` and ``tests/broker/test_link_memory.py``; Qpid JMS against filtex-broker itself by
``test_jms_broker``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from upstreams.artemis import Artemis

from ..integration.integration_support import relay
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
def results(artemis: Artemis, jms_classpath: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Results]:
    workdir = tmp_path_factory.mktemp("jms-relay-artemis")
    with relay(workdir, artemis.url, "--upstream-user", artemis.user,
               "--upstream-password", artemis.password) as url:
        yield run_scenarios(jms_classpath, url)


@pytest.mark.parametrize(("label", "selector", "expected"), SELECTORS,
                         ids=[label for label, _, _ in SELECTORS])
@pytest.mark.parametrize("scenario", ["queue-selectors", "topic-selectors"])
def test_a_selector_gets_exactly_its_matches(results: Results, scenario: str, label: str,
                                             selector: str, expected: str) -> None:
    """On Artemis's topics too, where Artemis alone matches nothing for JMSPriority,
    JMSMessageID or JMSTimestamp selectors: the relay does not push selectors down there."""
    assert results(scenario, label) == expected, selector


def test_an_invalid_selector_is_refused_by_the_relay(results: Results) -> None:
    check_invalid_selector(results)


def test_no_local_across_the_upstream(results: Results) -> None:
    check_no_local(results)


@pytest.mark.parametrize("scenario", ["durable-subscriber", "durable-consumer"])
def test_a_durable_subscription_through_the_relay(results: Results, scenario: str) -> None:
    """Upstream, under the client's container-id and link name; detached (not closed) when
    the client's connection goes, so that it keeps collecting; unsubscribe reaches it."""
    check_durable(results, scenario)


def test_shared_subscriptions_are_refused(results: Results) -> None:
    """The relay offers no SHARED-SUBS; Qpid JMS attaches anyway and reports the relay's
    refusal, or its own verdict if it closes the link before the refusal arrives."""
    failure = results.failure("shared-durable")
    assert failure in (
        "!JMSException: Remote peer does not support shared subscriptions",
        "!JMSException: relay mode: shared subscriptions are not relayed (use one on the "
        "upstream broker directly) [condition = amqp:not-implemented]"), failure


def test_a_browser_with_a_selector_takes_nothing(results: Results) -> None:
    """The browser's enumeration ends at the first empty drain: the relay forwards drains."""
    check_browser(results)


def test_receive_no_wait_drains_what_is_there(results: Results) -> None:
    check_receive_no_wait(results)


def test_request_reply_through_a_temporary_queue(results: Results) -> None:
    check_temporary_queue(results)
