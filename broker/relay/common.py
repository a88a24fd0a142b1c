"""What the relay's consumers, producers and upstream connection share: constants, the small
handler an upstream link gets, and the protocols each side sees the other through (so
that ``consumers`` and ``producers`` need not import ``upstream``, which creates them)."""

from __future__ import annotations

from typing import Any, Final, Protocol

from proton import (
    Condition,
    Data,
    Endpoint,
    Link,
    Session,
    symbol,
)

from filtex_broker.relay.origin import OriginStamp
from filtex_broker.terminus import refuse
from filtex_proton.plugin import (
    FilterMessage,
    FiltexPlugin,
)

__all__ = [
    "ANONYMOUS_RELAY", "BACKOFF_MAX", "BACKOFF_MIN", "INVALID_FIELD", "NODE_CAPABILITIES",
    "NOT_IMPLEMENTED", "PER_LINK_PREFIXES", "SELECTOR_SYMBOL", "RelayEnd", "UpstreamPort",
    "UpstreamSide", "close_downstream", "put_capabilities",
]

SELECTOR_SYMBOL: Final = symbol("apache.org:selector-filter:string")
NOT_IMPLEMENTED: Final = "amqp:not-implemented"
INVALID_FIELD: Final = "amqp:invalid-field"
"""How brokers refuse a filter they cannot parse (Artemis, ActiveMQ, Qpid Broker-J)."""
ANONYMOUS_RELAY: Final = "ANONYMOUS-RELAY"
PER_LINK_PREFIXES: Final = ("/topic/", "/exchange/", "topic://")
"""Addresses where every link reads a copy of its own (a topic, whatever the caps): RabbitMQ's
``/topic/`` and ``/exchange/``, ActiveMQ Classic's ``topic://`` (its ``topic-prefix``)."""
NODE_CAPABILITIES: Final = frozenset({"queue", "topic", "temporary-queue", "temporary-topic"})
"""Terminus capabilities the relay passes upstream as the client sent them: what kind of node
the address names (Qpid JMS sends them; ActiveMQ Artemis creates an address with none as a
multicast one, where a consumer reads a subscription of its own)."""
BACKOFF_MIN: Final = 0.2
BACKOFF_MAX: Final = 5.0


class RelayEnd(Protocol):
    """A relay link (consumer or producer) as its upstream side and the upstream see it."""

    link: Any
    closed: bool

    def upstream_closed(self, condition: Condition | None) -> None: ...

    def upstream_attached(self, up: Link) -> None: ...

    def upstream_lost(self) -> None: ...

    def on_upstream_delivery(self, delivery: Any) -> None: ...

    def on_upstream_flow(self) -> None: ...


class SharingPort(Protocol):
    """What our consumers of one upstream queue share (``filtex_broker.relay.sharing``), as a
    consumer sees it."""

    # Consumers are ``Any`` here: filtex_broker.relay.consumers imports this module.
    def candidates(self, consumer: Any, message: FilterMessage) -> tuple[Any, ...] | None:
        """The consumers of ``consumer``'s queue that may match (None: not indexed there)."""
        ...

    def hand_off(self, owner: Any, delivery: Any, data: bytes, message: FilterMessage,
                 candidates: tuple[Any, ...] | None = None) -> bool:
        """Give a message ``owner`` does not match to another of our links that matches."""
        ...


class UpstreamPort(Protocol):
    """The upstream connection (``filtex_broker.relay.upstream.Upstream``) as relay links see it."""

    plugin: FiltexPlugin
    origins: OriginStamp
    non_match_modified: bool

    @property
    def sharing(self) -> SharingPort:
        """Our consumers of each upstream queue (a non-match goes to one that matches)."""
        ...

    def topic_address(self, address: str) -> str:
        """The upstream's address for a topic named with the ``topic`` capability."""
        ...

    def register(self, link: Link, side: UpstreamSide) -> None: ...

    def unregister(self, link: Link) -> None: ...

    # A relay link is a RelayConsumer or a RelayProducer; the port takes ``Any`` there because
    # those classes import this module (the upstream's methods are typed with them).
    def answer_by(self, relay_link: Any) -> None: ...

    def end_session(self, session: Session) -> None: ...

    def forget(self, relay_link: Any) -> None: ...

    def message(self, data: bytes) -> FilterMessage: ...


class UpstreamSide:
    """The fast-path state of an upstream link: hands its events to the relay link."""

    __slots__ = ("owner",)

    def __init__(self, owner: RelayEnd) -> None:
        self.owner = owner

    def on_raw_delivery(self, delivery: Any) -> None:
        self.owner.on_upstream_delivery(delivery)

    def on_flow(self) -> None:
        self.owner.on_upstream_flow()


def close_downstream(link: Link, condition: Condition | None) -> None:
    """Close a relayed link because of its upstream side (refuse it if not answered yet)."""
    condition = condition or Condition("amqp:internal-error", "the upstream closed the link")
    if link.state & Endpoint.LOCAL_UNINIT:  # a dynamic attach not answered yet
        refuse(link, condition.name, condition.description or "")
    elif link.state & Endpoint.LOCAL_ACTIVE:
        link.condition = condition
        link.close()


def put_capabilities(data: Any, capabilities: tuple[str, ...]) -> None:
    """Set a terminus's capabilities (``terminus.capabilities``) to these symbols."""
    if not capabilities:
        return
    data.put_array(False, Data.SYMBOL)
    data.enter()
    for capability in capabilities:
        data.put_symbol(symbol(capability))
    data.exit()
