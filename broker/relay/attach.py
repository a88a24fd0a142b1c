"""Relay mode: what a client's attach becomes (a relay consumer or producer), or its refusal.

A downstream receiver is first accepted or refused by the plugin (refusals stay local: the
upstream never hears of them). Its answer then waits for the upstream's attach, so that the
upstream's refusal (an unknown node, a filter it rejects) is the refusal of the client's
attach and a topic's subscription exists upstream before the client publishes; only while the
upstream is away is the client's attach answered at once (its upstream side opens once the
upstream is back). What the upstream cannot serve, as far as its open frame tells, is refused
here with ``amqp:not-implemented``: shared subscriptions, transactions, and browse, dynamic or
anonymous links to an upstream known not to do them.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from proton import Link, Receiver, Sender, Terminus

from filtex_broker.client import ClientConnection
from filtex_broker.nodes.registry import Registry
from filtex_broker.relay.common import (
    NODE_CAPABILITIES,
    NOT_IMPLEMENTED,
    PER_LINK_PREFIXES,
    UpstreamPort,
)
from filtex_broker.relay.consumers import RelayConsumer
from filtex_broker.relay.producers import RelayProducer
from filtex_broker.settings import BrokerConfig
from filtex_broker.terminus import TerminusRequest, refuse
from filtex_proton.pushdown import client_selector, pushdown

__all__ = ["Attaching", "relay_consumer", "relay_producer"]

log = logging.getLogger("filtex.broker.relay")


class Attaching(UpstreamPort, Protocol):
    """The upstream connection (``filtex_broker.relay.upstream.Upstream``) as a client's
    attach sees it (a protocol: ``upstream`` imports this module)."""

    config: BrokerConfig
    ready: bool
    """Whether the upstream is open (else a link's upstream side opens once it is)."""

    def unsupported(self, *, browse: bool = False, dynamic: bool = False,
                    anonymous: bool = False) -> str | None:
        """Why the upstream cannot serve a link, as far as its open frame tells (None: try)."""
        ...

    def track(self, relay_link: Any) -> None:
        """Keep a new relay link, and open its upstream side when the upstream can."""
        ...


def relay_consumer(upstream: Attaching, link: Sender, client: ClientConnection,
                   request: TerminusRequest) -> RelayConsumer | None:
    """A downstream receiver (``request``: its source, as the peer sent it); None: refused."""
    lookup = request.address is None and not request.dynamic
    address = request.address or ""
    topic = request.topic or address.startswith(PER_LINK_PREFIXES) or lookup
    # A topic subscription reads a copy anyway: Qpid JMS says copy for a durable one, and
    # that is no browse (a browser settles upstream without an outcome: nothing is taken).
    browse = request.copy and not topic
    reason = upstream.unsupported(browse=browse, dynamic=request.dynamic)
    if request.shared:
        reason = ("relay mode: shared subscriptions are not relayed (use one on the "
                  "upstream broker directly)")
    if reason is not None:
        refuse(link, NOT_IMPLEMENTED, reason)
        return None
    link_filter = upstream.plugin.attach_sender(link)
    if link_filter is None:
        return None  # refused on the wire by the plugin, which logged why
    plan = pushdown(link_filter.filter_set)
    selector = plan.selector or client_selector(link_filter.filter_set)
    if plan.reasons:
        log.info("link %r: its filters that no JMS selector expresses are evaluated here "
                 "only: %s", link.name, "; ".join(plan.reasons))
    presettled = _mirror_source(link, request)
    if not (request.dynamic or lookup) and not upstream.ready:
        # The upstream is away: attached now, its side opens once it is back. Otherwise the
        # answer waits for the upstream's (a dynamic one is answered with the upstream's
        # node, a look-up with the subscription it found).
        link.open()
    # Upstream a durable subscription is named by the relay's container-id and this link
    # name, which carries the client's container-id, so two clients' subscriptions of the
    # same name stay apart and a restarted relay finds them (a look-up names the one it
    # looks up). Not "|": Artemis's look-up cuts a link name there (Qpid JMS's
    # shared-consumer count).
    durable_as = (f"{client.container}:{link.name}@relay"
                  if lookup or (request.durable and topic and not request.dynamic) else None)
    consumer = RelayConsumer(
        link, upstream, address, None if link_filter.is_trivial else link_filter,
        topic=topic, presettled=presettled, selector=selector,
        held_limit=upstream.config.upstream_held, browse=browse, dynamic=request.dynamic,
        capabilities=tuple(sorted(request.capabilities & NODE_CAPABILITIES)),
        durable_as=durable_as, lookup=lookup,
    )
    client.consumers.append(consumer)
    upstream.track(consumer)
    log.info("connection %d: relay consumer %r on upstream %r%s", client.origin, link.name,
             request.address, " (filtered)" if consumer.filter is not None else "")
    return consumer


def _mirror_source(link: Sender, request: TerminusRequest) -> bool:
    """Answer with the client's own source, target and settle modes; whether the client's
    deliveries are presettled."""
    source = link.source
    if request.address is not None:
        source.address = request.address
    remote = link.remote_source
    source.durability = remote.durability
    source.expiry_policy = remote.expiry_policy
    link.target.copy(link.remote_target)
    presettled: bool = link.remote_snd_settle_mode == Link.SND_SETTLED
    link.snd_settle_mode = Link.SND_SETTLED if presettled else Link.SND_UNSETTLED
    link.rcv_settle_mode = link.remote_rcv_settle_mode
    if request.copy:
        source.distribution_mode = Terminus.DIST_MODE_COPY
    return presettled


def relay_producer(upstream: Attaching, link: Receiver, client: ClientConnection,
                   registry: Registry, request: TerminusRequest) -> RelayProducer | None:
    """A downstream sender (``request``: its target, as the peer sent it); None: refused."""
    if request.coordinator:
        refuse(link, NOT_IMPLEMENTED, "relay mode: transactions are not relayed")
        return None
    reason = upstream.unsupported(dynamic=request.dynamic,
                                  anonymous=request.address is None and not request.dynamic)
    if reason is not None:
        refuse(link, NOT_IMPLEMENTED, reason)
        return None
    config = upstream.config
    link.target.copy(link.remote_target)
    link.source.copy(link.remote_source)
    link.rcv_settle_mode = Link.RCV_FIRST
    link.snd_settle_mode = link.remote_snd_settle_mode
    link.max_message_size = config.max_message_size
    if not request.dynamic:  # a dynamic one is answered with the upstream's node
        link.open()
    producer = RelayProducer(link, upstream, None if request.dynamic else request.address,
                             origin=client.origin, registry=registry,
                             window=config.credit_window, max_size=config.max_message_size,
                             dynamic=request.dynamic,
                             capabilities=tuple(sorted(request.capabilities
                                                       & NODE_CAPABILITIES)))
    client.producers.append(producer)
    upstream.track(producer)
    log.info("connection %d: relay producer %r to upstream %r", client.origin, link.name,
             "(dynamic)" if request.dynamic else request.address or "(anonymous relay)")
    return producer
