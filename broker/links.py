"""Answering attaches and detaches: which node a link goes to, and what the reply says.

For a link the broker sends on, the plugin sees the attach first
(:meth:`FiltexPlugin.attach_sender`): it validates and compiles the filter set,
and either writes the filter echo and capabilities into our source or refuses
the link on the wire (null source, detach with ``amqp:invalid-field``). Only
then does the broker pick or create the node and fill in the rest of the
source. Refusals for the broker's own reasons (no such durable subscription,
transactions) use the same wire pattern with their own condition.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from proton import Link, Receiver, Sender, Terminus

from filtex_broker.archive.archiver import Archiver
from filtex_broker.client import Attached, ClientConnection
from filtex_broker.nodes.consumer import Consumer
from filtex_broker.nodes.node import Node
from filtex_broker.nodes.producer import Producer
from filtex_broker.nodes.queue import Queue
from filtex_broker.nodes.registry import Registry
from filtex_broker.nodes.topic import Subscription, Topic
from filtex_broker.relay.consumers import RelayConsumer
from filtex_broker.relay.producers import RelayProducer
from filtex_broker.relay.upstream import Upstream
from filtex_broker.security.access import (
    UNAUTHORIZED,
    guard_relay,
    principal_of,
    refusal,
)
from filtex_broker.security.permissions import Principal
from filtex_broker.settings import BrokerConfig
from filtex_broker.streams.consumer import StreamConsumer
from filtex_broker.streams.node import Stream
from filtex_broker.terminus import (
    TerminusRequest,
    lookup_key,
    read_terminus,
    refuse,
    subscription_key,
)
from filtex_proton.plugin import (
    RECENT_REFUSALS,
    FilterMessage,
    FiltexPlugin,
    LinkFilter,
    Refusal,
)

if TYPE_CHECKING:
    from filtex_broker.metrics import BrokerMetrics

__all__ = ["LinkManager"]

log = logging.getLogger("filtex.broker")

NOT_FOUND: Final = "amqp:not-found"
NOT_IMPLEMENTED: Final = "amqp:not-implemented"
RESOURCE_LOCKED: Final = "amqp:resource-locked"

LinkState = Consumer | StreamConsumer | Producer | RelayConsumer


class LinkManager:
    """Attaches links to nodes and detaches them, keeping the registry consistent."""

    def __init__(self, config: BrokerConfig, registry: Registry, plugin: FiltexPlugin) -> None:
        self.config = config
        self.registry = registry
        self.plugin = plugin
        self.upstream: Upstream | None = Upstream(config, plugin) if config.upstream else None
        """Relay mode: nodes live on this upstream broker."""
        self.archive: Archiver | None = None
        """``--archive``: set by the broker once the archive is open."""
        self.metrics: BrokerMetrics | None = None
        """``--metrics``: set by the broker; told of consumers and stored messages."""
        self.count_in: Callable[[Node], None] | None = None
        """``--metrics`` or ``--console``: told of every message a producer stores."""
        self.refusals: dict[str, int] = {}
        """The broker's own refusals (not the plugin's filter refusals), by condition."""
        self.recent_refusals: deque[Refusal] = deque(maxlen=RECENT_REFUSALS)
        """The last of them, newest last (the console shows them with the plugin's)."""

    def _refuse(self, link: Link, condition: str, description: str) -> None:
        self.refusals[condition] = self.refusals.get(condition, 0) + 1
        source = link.remote_source if isinstance(link, Sender) else link.remote_target
        self.recent_refusals.append(
            Refusal(time.time(), link.name, source.address, condition, description))
        refuse(link, condition, description)

    def _make_message(self, data: bytes, origin: object) -> FilterMessage:
        return self.plugin.message(data, origin=origin)

    # -- attach ---------------------------------------------------------------------

    def attach(self, link: Link, client: ClientConnection) -> LinkState | None:
        """Answer the peer's attach; returns the link's state, or None if refused."""
        upstream = self.upstream
        principal = principal_of(link)
        # The peer's terminus, read once and passed to every step of the attach.
        request = read_terminus(link.remote_source if isinstance(link, Sender)
                                else link.remote_target)
        if principal is not None:
            why = refusal(link, request, principal, self.registry, client.container)
            if why is not None:
                self._refuse(link, UNAUTHORIZED, why)
                return None
        if isinstance(link, Sender):
            if upstream is not None:
                return upstream.attach_consumer(link, client, request)
            return self._attach_consumer(link, client, request)
        assert isinstance(link, Receiver)
        if upstream is not None:
            relayed = upstream.attach_producer(link, client, self.registry, request)
            if relayed is not None:
                guard_relay(relayed, request, principal)  # per-message ``to`` (anonymous relay)
            return relayed
        return self._attach_producer(link, client, principal, request)

    def _attach_consumer(self, link: Sender, client: ClientConnection,
                         request: TerminusRequest) -> Consumer | StreamConsumer | None:
        """A consumer on a queue, on a topic (a subscription of its own, or a durable or shared
        one it joins), on a durable subscription named by the link alone, or on a stream."""
        durable_key = self._durable_key(link, client, request)
        subscription = self._named_subscription(link, client, request, durable_key)
        if subscription is None and request.address is None and not request.dynamic:
            self._refuse(link, NOT_FOUND, f"no source address, and no durable subscription "
                         f"named {link.name!r} for container {client.container!r}")
            return None
        if subscription is not None:
            why = self._taken(link, request, subscription)
            if why is not None:
                self._refuse(link, RESOURCE_LOCKED, why)
                return None
            subscription = self._join(subscription, request)

        link_filter = self.plugin.attach_sender(link)
        if link_filter is None:
            return None  # refused on the wire by the plugin, which logged why
        active_filter = None if link_filter.is_trivial else link_filter

        node = self._consumer_node(request, subscription, active_filter)
        if isinstance(node, Stream):
            return self._attach_stream_consumer(link, client, request, node, link_filter)
        if isinstance(node, Topic):
            subscription = self._subscribe(node, link, request, subscription, durable_key,
                                           active_filter)
            # a subscription is filtered when messages are published, not by its consumer
            queue, browse, consumer_filter = subscription.queue, False, None
        else:
            assert isinstance(node, Queue)
            queue, browse, consumer_filter = node, request.copy, active_filter

        self._reply_source(link, request, node, browse=browse, subscription=subscription)
        presettled = _open_sender(link)
        consumer = Consumer(
            link, node, queue, consumer_filter,
            browse=browse, presettled=presettled,
            make_message=self._make_message, dead_letter=self.registry.dead_letter,
            subscription=subscription,
        )
        self._start_consumer(consumer, client, link, request, active_filter)
        log.info(
            "connection %d: %s %r attached to %s %r%s%s%s",
            client.origin, "browser" if browse else "consumer", link.name, node.kind,
            node.name, " (filtered)" if active_filter is not None else "",
            " (durable subscription)" if subscription is not None and subscription.durable
            else "", " (pre-settled)" if presettled else "",
        )
        return consumer

    def _attach_stream_consumer(self, link: Sender, client: ClientConnection,
                                request: TerminusRequest, stream: Stream,
                                link_filter: LinkFilter) -> StreamConsumer:
        """A consumer reading ``stream`` from where the set's offset spec says (``next`` when it
        names none); the filters are evaluated by the stream as it reads."""
        self._reply_source(link, request, stream, browse=request.copy, subscription=None)
        presettled = _open_sender(link)
        offset = link_filter.filter_set.options.offset
        consumer = StreamConsumer(link, stream, link_filter, position=stream.start(offset),
                                  presettled=presettled)
        stream.add_reader(consumer)
        client.consumers.append(consumer)
        if self.metrics is not None:
            self.metrics.consumer_attached(consumer, consumer.filter)
        log.info("connection %d: consumer %r attached to stream %r at offset %d%s%s",
                 client.origin, link.name, stream.name, consumer.position,
                 " (filtered)" if consumer.filter is not None else "",
                 " (pre-settled)" if presettled else "")
        return consumer

    def _durable_key(self, link: Sender, client: ClientConnection,
                     request: TerminusRequest) -> tuple[str, str] | None:
        """The key of the durable or shared topic subscription the attach asks for (None: it
        asks for none)."""
        if request.address is None or request.dynamic:
            return None
        existing = self.registry.lookup(request.address)
        is_topic = (isinstance(existing, Topic) if existing is not None
                    else request.topic and not self.registry.is_stream(request.address))
        if is_topic and (request.durable or request.shared):
            return subscription_key(client.container, link.name, request)
        return None

    def _named_subscription(self, link: Sender, client: ClientConnection,
                            request: TerminusRequest, durable_key: tuple[str, str] | None,
                            ) -> Subscription | None:
        """The existing subscription the attach names, if there is one."""
        if request.dynamic:
            return None
        if request.address is None:
            # Qpid JMS looks up (and unsubscribes) a durable subscription by link name alone.
            return self.registry.durable.get(lookup_key(client.container, link.name))
        return self.registry.durable.get(durable_key) if durable_key is not None else None

    def _join(self, subscription: Subscription, request: TerminusRequest) -> Subscription | None:
        """An existing subscription a consumer may join: without consumers, it is shared as
        this attach says; ended (None) if the attach names another topic."""
        if not subscription.consumers:
            subscription.shared = request.shared
        if request.address not in (None, subscription.topic.name):
            self._end_subscription(subscription)  # the JMS way to move a subscription
            return None
        return subscription

    def _consumer_node(self, request: TerminusRequest, subscription: Subscription | None,
                       active_filter: LinkFilter | None) -> Node:
        """The node the consumer reads: its subscription's topic (whose filter set the attach
        replaces, if it brings one), a new dynamic node, or the addressed node."""
        if subscription is not None:
            if active_filter is not None:
                subscription.filter = active_filter
            return subscription.topic
        if request.dynamic:
            return self.registry.dynamic_node(topic=request.topic)
        assert request.address is not None
        return self.registry.node(request.address, topic=request.topic)

    def _subscribe(self, topic: Topic, link: Sender, request: TerminusRequest,
                   subscription: Subscription | None, durable_key: tuple[str, str] | None,
                   active_filter: LinkFilter | None) -> Subscription:
        """The consumer's subscription to ``topic``: the one it joins, or a new one (kept by
        the registry if durable or shared); it remembers the attach's filter map, which a
        consumer that joins later must repeat."""
        if subscription is None:
            subscription = topic.subscribe(durable_key, active_filter, durable=request.durable)
            subscription.shared = request.shared
            if durable_key is not None:
                self.registry.durable[durable_key] = subscription
        if request.address is not None:
            subscription.filter_code = _filter_code(link)
        return subscription

    def _start_consumer(self, consumer: Consumer, client: ClientConnection, link: Sender,
                        request: TerminusRequest, active_filter: LinkFilter | None) -> None:
        """Hand the new consumer to its subscription, node, queue and connection, and to the
        metrics."""
        subscription = consumer.subscription
        if subscription is not None:
            subscription.consumers.append(consumer)
        if request.dynamic:
            consumer.node.dynamic_owner = consumer
        queue = consumer.queue
        queue.add_consumer(consumer)
        if queue.journal is not None:  # a durable subscription remembers its filter set
            queue.journal.remember_filter(_filter_code(link))
        client.consumers.append(consumer)
        if self.metrics is not None:
            self.metrics.consumer_attached(consumer, active_filter)

    @staticmethod
    def _taken(link: Sender, request: TerminusRequest, subscription: Subscription) -> str | None:
        """Why a consumer may not join ``subscription`` now (None: it may)."""
        if not subscription.consumers:
            return None
        if not (request.shared and subscription.shared):
            return f"subscription {link.name!r} already has a consumer"
        if request.address not in (None, subscription.topic.name):
            return (f"shared subscription {subscription.key!r} has consumers on topic "
                    f"{subscription.topic.name!r}")
        if request.address is not None and _filter_code(link) != subscription.filter_code:
            return (f"shared subscription {subscription.key!r} has consumers with another "
                    "selector or filter set")
        return None

    @staticmethod
    def _reply_source(
        link: Sender, request: TerminusRequest, node: Node, *, browse: bool,
        subscription: Subscription | None,
    ) -> None:
        """Our source: the address (fresh if dynamic) and the peer's durability, as granted."""
        remote = link.remote_source
        source = link.source
        source.address = node.name
        if request.dynamic:
            source.dynamic = True
        source.durability = remote.durability
        source.expiry_policy = remote.expiry_policy
        source.timeout = remote.timeout
        if subscription is not None and subscription.durable and request.address is None:
            source.durability = Terminus.DELIVERIES
            source.expiry_policy = Terminus.EXPIRE_NEVER
        if browse:
            source.distribution_mode = Terminus.DIST_MODE_COPY
        link.target.copy(link.remote_target)

    def _attach_producer(self, link: Receiver, client: ClientConnection,
                         principal: Principal | None, request: TerminusRequest
                         ) -> Producer | None:
        if request.coordinator:
            self._refuse(link, NOT_IMPLEMENTED, "transactions are not supported by this broker")
            return None
        node: Node | None
        if request.dynamic:
            node = self.registry.dynamic_node(topic=request.topic)
        elif request.address is None:
            node = None  # anonymous relay: routed per message by properties.to
        else:
            node = self.registry.node(request.address, topic=request.topic)
        target = link.target
        target.copy(link.remote_target)
        if node is not None:
            target.address = node.name
            target.dynamic = request.dynamic
        link.source.copy(link.remote_source)
        link.rcv_settle_mode = Link.RCV_FIRST
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.max_message_size = self.config.max_message_size
        link.open()
        producer = Producer(
            link, node, origin=client.origin, registry=self.registry,
            make_message=self._make_message, window=self.config.credit_window,
            max_size=self.config.max_message_size, archive=self.archive,
        )
        guard_relay(producer, request, principal)  # per-message ``to`` check (anonymous relay)
        if node is not None and request.dynamic:
            node.dynamic_owner = producer
        producer.counted = self.count_in
        producer.top_up()
        client.producers.append(producer)
        log.info("connection %d: producer %r attached to %s", client.origin, link.name,
                 f"{node.kind} {node.name!r}" if node is not None else "anonymous relay")
        return producer

    # -- detach --------------------------------------------------------------------------

    def detach(self, state: Attached, client: ClientConnection | None, *, closed: bool) -> None:
        """The link is detached (``closed``: for good) or its connection is gone."""
        if isinstance(state, RelayConsumer | RelayProducer):
            self._detach_relay(state, client, closed=closed)
            return
        if isinstance(state, StreamConsumer):
            self._detach_stream(state, client)
            return
        if isinstance(state, Consumer):
            if state.closed:
                return
            self._detach_consumer(state, client, closed=closed)
        else:
            assert isinstance(state, Producer), state
            if state.closed:
                return
            state.detach()
            if client is not None and state in client.producers:
                client.producers.remove(state)
            log.info("producer %r detached", state.name)
        node = state.node
        if node is not None and node.dynamic_owner is state:
            self.registry.delete(node)

    def _detach_consumer(self, state: Consumer, client: ClientConnection | None, *,
                         closed: bool) -> None:
        """A queue's or a subscription's consumer: what it held goes back; a subscription it
        leaves without consumers ends unless durable (and only detached)."""
        returned = state.detach()
        subscription = state.subscription
        if self.metrics is not None:
            self.metrics.consumer_detached(state, filter_kept=subscription is not None
                                           and subscription.durable and not closed)
        if subscription is not None:
            if state in subscription.consumers:
                subscription.consumers.remove(state)
            if not subscription.consumers and (not subscription.durable or closed):
                self._end_subscription(subscription)
        if client is not None and state in client.consumers:
            client.consumers.remove(state)
        stats = state.filter_stats
        log.info("consumer %r detached from %r%s%s%s", state.name, state.node.name,
                 f", {returned} unsettled message(s) returned" if returned else "",
                 " (durable subscription kept)" if subscription is not None
                 and subscription.durable and not closed else "",
                 f"; filter: {stats.evaluations} evaluated, {stats.matches} matched, "
                 f"{stats.nulls} unknown ({stats.errors} errors, {stats.budget_exceeded} "
                 "over budget)" if stats is not None else "")

    def _detach_stream(self, state: StreamConsumer, client: ClientConnection | None) -> None:
        """A stream consumer stops reading; nothing goes back (it took nothing)."""
        if state.closed:
            return
        state.detach()
        if self.metrics is not None:
            self.metrics.consumer_detached(state, filter_kept=False)
        if client is not None and state in client.consumers:
            client.consumers.remove(state)
        stats = state.filter_stats
        log.info("consumer %r detached from stream %r at offset %d, %d sent%s", state.name,
                 state.node.name, state.position, state.sent,
                 f"; filter: {stats.evaluations} evaluated, {stats.matches} matched"
                 if stats is not None else "")

    @staticmethod
    def _detach_relay(
        state: RelayConsumer | RelayProducer, client: ClientConnection | None, *, closed: bool
    ) -> None:
        if state.closed:
            return
        if isinstance(state, RelayConsumer):
            returned = state.detach(closed=closed)
            if client is not None and state in client.consumers:
                client.consumers.remove(state)
            stats = state.filter.filter_set.stats if state.filter is not None else None
            log.info("relay consumer %r detached from %r: %d received, %d sent, %d skipped%s%s%s",
                     state.name, state.address, state.received, state.sent, state.skipped,
                     " (durable subscription kept upstream)" if state.durable_as is not None
                     and not closed else "",
                     f", {returned} unsettled message(s) released upstream" if returned else "",
                     f"; filter: {stats.evaluations} evaluated, {stats.matches} matched"
                     if stats is not None else "")
        else:
            state.detach()
            if client is not None and state in client.producers:
                client.producers.remove(state)
            log.info("relay producer %r detached", state.name)

    def _end_subscription(self, subscription: Subscription) -> None:
        registry = self.registry
        if subscription.key is not None and registry.durable.get(subscription.key) is subscription:
            del registry.durable[subscription.key]
        subscription.topic.unsubscribe(subscription)

    def connection_gone(self, client: ClientConnection) -> None:
        """Every link of the connection is gone (closed or dropped): give everything back."""
        if client.closed:
            return
        client.closed = True
        for consumer in list(client.consumers):
            self.detach(consumer, client, closed=False)
        for producer in list(client.producers):
            self.detach(producer, client, closed=False)


def _open_sender(link: Sender) -> bool:
    """Open the link with the settle modes the peer asked for; whether it sends pre-settled."""
    presettled: bool = link.remote_snd_settle_mode == Link.SND_SETTLED
    link.snd_settle_mode = Link.SND_SETTLED if presettled else Link.SND_UNSETTLED
    link.rcv_settle_mode = link.remote_rcv_settle_mode
    link.open()
    return presettled


def _filter_code(link: Sender) -> bytes:
    """The link's source filter map as encoded (empty: none), to compare two attaches'."""
    source_filter = link.remote_source.filter
    return bytes(source_filter.encode()) if source_filter is not None else b""
