"""The Qpid JMS scenarios through the relay in front of ActiveMQ Artemis 2.40.

The relay forwards the client's node capabilities (``queue``, ``topic``,
``temporary-queue``) so that Artemis picks anycast or multicast as for Qpid JMS itself,
answers a topic consumer's attach once the upstream subscription exists, and filters
locally what it does not push down; durable subscriptions are refused
(docs/BROKER.md, "Qpid JMS"). One relay process and one JVM for the module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from upstreams.artemis import Artemis

from ..integration.integration_support import relay
from .jms_support import SELECTORS, Results, run_scenarios

SCENARIOS = ("queue-selectors", "topic-selectors", "invalid-selector", "no-local",
             "durable-subscriber", "durable-consumer", "shared-durable", "browser",
             "receive-no-wait", "temporary-queue")


@pytest.fixture(scope="module")
def results(jms_classpath: str, artemis: Artemis, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Results]:
    with relay(tmp_path_factory.mktemp("jms-relay"), artemis.url, "--upstream-user",
               artemis.user, "--upstream-password", artemis.password) as url:
        yield run_scenarios(jms_classpath, url, SCENARIOS)


@pytest.mark.parametrize(("label", "selector", "expected"), SELECTORS,
                         ids=[label for label, _, _ in SELECTORS])
@pytest.mark.parametrize("scenario", ["queue-selectors", "topic-selectors"])
def test_a_selector_gets_exactly_its_matches(results: Results, scenario: str, label: str,
                                             selector: str, expected: str) -> None:
    """On topics too, where Artemis alone matches nothing for JMSPriority, JMSMessageID or
    JMSTimestamp selectors: the relay does not push selectors down there."""
    assert results(scenario, label) == expected, selector


def test_an_invalid_selector_is_refused_by_the_relay(results: Results) -> None:
    for kind in ("queue", "topic"):
        error = results("invalid-selector", kind)
        assert error.startswith("!JMSException: filter 'jms-selector'"), error
        assert error.endswith("[condition = amqp:invalid-field]"), error
    assert results("invalid-selector", "after") == "m0,m3", "the session goes on"


def test_no_local_across_the_upstream(results: Results) -> None:
    others = ",".join(f"other-m{k}" for k in range(6))
    assert results("no-local", "no-local") == others
    assert results("no-local", "no-local-red") == "other-m0,other-m3"
    assert results("no-local", "all").count(",") == 11


@pytest.mark.parametrize("scenario", ["durable-subscriber", "durable-consumer"])
def test_a_durable_subscription_is_refused_with_the_reason(results: Results,
                                                           scenario: str) -> None:
    """Upstream it would be named by the relay's container-id and end with its link."""
    failure = results.failure(scenario)
    assert failure == ("!JMSException: relay mode: durable and shared subscriptions are not "
                       "relayed (use one on the upstream broker directly) "
                       "[condition = amqp:not-implemented]")


def test_shared_subscriptions_are_refused(results: Results) -> None:
    """The relay offers no SHARED-SUBS; Qpid JMS attaches anyway and reports the relay's
    refusal, or its own verdict if it closes the link before the refusal arrives."""
    failure = results.failure("shared-durable")
    assert failure in (
        "!JMSException: Remote peer does not support shared subscriptions",
        "!JMSException: relay mode: durable and shared subscriptions are not relayed (use one "
        "on the upstream broker directly) [condition = amqp:not-implemented]"), failure
