"""What the relay may trust an upstream broker to do, by the product it names in its open frame.

Chiefly the ``--upstream-selector auto`` decision (whether it evaluates JMS selectors)
and the ``--upstream-non-match auto`` one (whether ``modified`` with
``undeliverable-here`` gives a message back for *other* consumers, or ends the
session, loops or dead-letters it), and also whether it really browses
(distribution-mode ``copy``) and creates dynamic nodes: RabbitMQ 3.10 echoes
``copy`` in its attach reply and consumes anyway, and never answers a dynamic attach.

A broker that offers ``APACHE.ORG:SELECTOR`` says so; several that evaluate
``apache.org:selector-filter:string`` do not offer it (Artemis, ActiveMQ 5,
qpidd, Qpid Broker-J), and RabbitMQ echoes any filter in its attach reply
while ignoring it. So ``auto`` trusts the capability first, then the
``product`` the upstream names in its open frame's connection properties,
looked up in :data:`KNOWN_BROKERS`; anything else gets no pushdown (pushing
nothing is always correct: the relay evaluates the whole filter set itself).
An unknown product's non-matches are held, not ``modified``: a broker that
does not honour undeliverable-here may end the session (RabbitMQ 3.10),
dead-letter or drop the message (later RabbitMQ; ActiveMQ 5 does both, by the
message's persistence), which loses it for the other consumers; holding only delays it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "KNOWN_BROKERS", "KnownBroker", "NonMatchDecision", "PushdownDecision", "decide_non_match",
    "decide_pushdown", "identify", "topic_address",
]

SELECTOR_CAPABILITY: Final = "APACHE.ORG:SELECTOR"


@dataclass(frozen=True, slots=True)
class KnownBroker:
    """One broker product as it names itself in the open frame's ``product`` property."""

    label: str
    products: frozenset[str]
    """``product`` values (compared case-insensitively) this broker sends."""
    evaluates_selectors: bool
    note: str
    browses: bool = True
    """Honours distribution-mode ``copy`` (a browser consumes nothing)."""
    dynamic_nodes: bool = True
    """Answers an attach with a dynamic source or target with a fresh node."""
    undeliverable_here: bool = False
    """Honours ``modified`` with ``undeliverable-here``: the message goes back to the queue
    for other consumers and is never offered to that link again."""
    undeliverable_note: str = ""
    """Why (for the log): what the broker's source does with that outcome."""
    topic_selectors: bool = True
    """Evaluates a selector on a topic subscription as on a queue. Without it a topic
    consumer's selector is not pushed down (its non-matches are skipped here instead)."""
    ended_channels_safe: bool = True
    """A session begun on the channel number of one just ended gets its own frames. Without
    it (and for an unknown product) a new consumer session waits until the upstream has
    answered every session end (``filtex_broker.relay.session_ends``)."""


KNOWN_BROKERS: Final[tuple[KnownBroker, ...]] = (
    KnownBroker("ActiveMQ Artemis", frozenset({"apache-activemq-artemis", "activemq artemis"}),
                True, "evaluates apache.org:selector-filter:string, offers no capability",
                undeliverable_here=True,
                undeliverable_note="ProtonServerSenderContext rejects the message for that "
                "consumer only (rejectConsumer) and cancels it back to the queue (observed "
                "with 2.40: at once for the other consumers, delivery-count unchanged)",
                # 2.40, observed with Qpid JMS directly: a multicast subscription's selector on
                # JMSPriority, JMSMessageID or JMSTimestamp matches no AMQP message at all
                topic_selectors=False),
    KnownBroker("ActiveMQ 5 (Classic)", frozenset({"activemq", "activemq classic"}),
                True, "evaluates apache.org:selector-filter:string on AMQP links (other "
                "filters it ignores, unechoed)",
                undeliverable_note="AmqpSender acks undeliverable-here as a poison message: "
                "a persistent one goes to ActiveMQ.DLQ, a non-persistent one is dropped "
                "(observed, 5.18.3)"),
    KnownBroker("Qpid C++ broker (qpidd)", frozenset({"qpid-cpp"}),
                True, "evaluates apache.org:selector-filter:string on AMQP 1.0 links",
                undeliverable_here=True,
                undeliverable_note="tracks undeliverable messages per outgoing link (since "
                "2016, svn r1750369; older releases reject the message)"),
    KnownBroker("Qpid Broker-J", frozenset({"apache qpid broker-j core", "qpid-java-broker",
                                            "qpid broker-j"}),
                True, "evaluates apache.org:selector-filter:string (JMS selectors)",
                undeliverable_here=True,
                undeliverable_note="ConsumerTarget_1_0 rejects the entry for that consumer and "
                "releases it to the others"),
    KnownBroker("RabbitMQ", frozenset({"rabbitmq"}),
                False, "ignores source filters but echoes them in the attach reply",
                browses=False, dynamic_nodes=False, ended_channels_safe=False,
                undeliverable_note="3.10.8 ends the session on modified (observed); later "
                "releases dead-letter or drop an undeliverable-here message"),
    KnownBroker("filtex-broker", frozenset({"filtex-broker"}),
                True, "offers APACHE.ORG:SELECTOR",
                undeliverable_here=True,
                undeliverable_note="broker/nodes/consumer.py never offers the message to that link "
                "again"),
)


@dataclass(frozen=True, slots=True)
class PushdownDecision:
    """Whether to push JMS selectors to this upstream, and why (for the log)."""

    pushdown: bool
    reason: str


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def decide_pushdown(mode: str, offered: Iterable[Any],
                    properties: Mapping[Any, Any] | None) -> PushdownDecision:
    """The pushdown decision for ``mode`` (auto, always, never) from the upstream's open frame:
    its offered capabilities and its connection properties (``product``, ``version``)."""
    if mode == "always":
        return PushdownDecision(True, "--upstream-selector always")
    if mode == "never":
        return PushdownDecision(False, "--upstream-selector never")
    if SELECTOR_CAPABILITY in {_text(c) for c in offered}:
        return PushdownDecision(True, f"the upstream offers {SELECTOR_CAPABILITY}")
    product = _property(properties, "product")
    if product is None:
        return PushdownDecision(False, "the upstream names no product and does not offer "
                                f"{SELECTOR_CAPABILITY}")
    version = _text(_property(properties, "version") or "?")
    broker = identify(properties)
    if broker is not None:
        return PushdownDecision(broker.evaluates_selectors,
                                f"{broker.label} {version}: {broker.note}")
    return PushdownDecision(False, f"unknown product {_text(product).strip()!r} {version} that "
                            f"does not offer {SELECTOR_CAPABILITY}")


@dataclass(frozen=True, slots=True)
class NonMatchDecision:
    """Whether a queue consumer's non-matches go back upstream as ``modified``
    (undeliverable-here) at once, or are held while its link lives; and why."""

    modified: bool
    reason: str


def decide_non_match(mode: str, properties: Mapping[Any, Any] | None) -> NonMatchDecision:
    """The ``--upstream-non-match`` decision for ``mode`` (auto, modified, hold) from the
    upstream's open frame connection properties (``product``, ``version``)."""
    if mode in ("modified", "hold"):
        return NonMatchDecision(mode == "modified", f"--upstream-non-match {mode}")
    product = _property(properties, "product")
    version = _text(_property(properties, "version") or "?")
    broker = identify(properties)
    if broker is not None:
        return NonMatchDecision(broker.undeliverable_here,
                                f"{broker.label} {version}: {broker.undeliverable_note}")
    who = ("the upstream names no product" if product is None
           else f"unknown product {_text(product).strip()!r} {version}")
    return NonMatchDecision(False, f"{who}: a broker not known to honour undeliverable-here "
                            "may end the session or dead-letter the message")


def _property(properties: Mapping[Any, Any] | None, name: str) -> Any:
    """One connection property by name (keys are symbols, or strings from some peers)."""
    return next((v for k, v in (properties or {}).items() if _text(k) == name), None)


def topic_address(address: str, properties: Mapping[Any, Any] | None) -> str:
    """The upstream address of the topic a client names ``address`` with the ``topic``
    capability: prefixed with the ``topic-prefix`` the open frame announces, where it does
    (ActiveMQ Classic ignores the capability and reads ``topic://NAME`` as the topic, ``NAME``
    as a queue; Qpid JMS prefixes the same way)."""
    prefix = _property(properties, "topic-prefix")
    if not prefix or address.startswith(_text(prefix)):
        return address
    return _text(prefix) + address


def identify(properties: Mapping[Any, Any] | None) -> KnownBroker | None:
    """The known broker whose ``product`` the open frame's connection properties name."""
    product = _property(properties, "product")
    if product is None:
        return None
    name = _text(product).strip().lower()
    return next((b for b in KNOWN_BROKERS if name in b.products), None)
