"""What the relay may trust an upstream broker to do, by the product it names in its open frame.

Chiefly the ``--upstream-selector auto`` decision (whether it evaluates JMS selectors),
and also whether it really browses (distribution-mode ``copy``) and creates
dynamic nodes: RabbitMQ 3.10 echoes ``copy`` in its attach reply and consumes
anyway, and never answers a dynamic attach.

A broker that offers ``APACHE.ORG:SELECTOR`` says so; several that evaluate
``apache.org:selector-filter:string`` do not offer it (Artemis, ActiveMQ 5,
qpidd, Qpid Broker-J), and RabbitMQ echoes any filter in its attach reply
while ignoring it. So ``auto`` trusts the capability first, then the
``product`` the upstream names in its open frame's connection properties,
looked up in :data:`KNOWN_BROKERS`; anything else gets no pushdown (pushing
nothing is always correct: the relay evaluates the whole filter set itself).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["KNOWN_BROKERS", "KnownBroker", "PushdownDecision", "decide_pushdown", "identify"]

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


KNOWN_BROKERS: Final[tuple[KnownBroker, ...]] = (
    KnownBroker("ActiveMQ Artemis", frozenset({"apache-activemq-artemis", "activemq artemis"}),
                True, "evaluates apache.org:selector-filter:string, offers no capability"),
    KnownBroker("ActiveMQ 5 (Classic)", frozenset({"activemq", "activemq classic"}),
                True, "evaluates apache.org:selector-filter:string on AMQP links"),
    KnownBroker("Qpid C++ broker (qpidd)", frozenset({"qpid-cpp"}),
                True, "evaluates apache.org:selector-filter:string on AMQP 1.0 links"),
    KnownBroker("Qpid Broker-J", frozenset({"qpid-java-broker", "qpid broker-j"}),
                True, "evaluates apache.org:selector-filter:string (JMS selectors)"),
    KnownBroker("RabbitMQ", frozenset({"rabbitmq"}),
                False, "ignores source filters but echoes them in the attach reply",
                browses=False, dynamic_nodes=False),
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
    props = {_text(k): v for k, v in (properties or {}).items()}
    product = props.get("product")
    if product is None:
        return PushdownDecision(False, "the upstream names no product and does not offer "
                                f"{SELECTOR_CAPABILITY}")
    version = _text(props.get("version", "?"))
    broker = identify(properties)
    if broker is not None:
        return PushdownDecision(broker.evaluates_selectors,
                                f"{broker.label} {version}: {broker.note}")
    return PushdownDecision(False, f"unknown product {_text(product).strip()!r} {version} that "
                            f"does not offer {SELECTOR_CAPABILITY}")


def identify(properties: Mapping[Any, Any] | None) -> KnownBroker | None:
    """The known broker whose ``product`` the open frame's connection properties name."""
    for key, value in (properties or {}).items():
        if _text(key) == "product":
            name = _text(value).strip().lower()
            return next((b for b in KNOWN_BROKERS if name in b.products), None)
    return None
