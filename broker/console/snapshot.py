"""What the console reads of the broker, ON the reactor thread: plain copies, nothing changed.

:func:`overview` and :func:`peek` are handed to ``Broker.submit`` by the HTTP side; they walk
the registry, the connections and the links while nothing else can, copy numbers and
references to immutable things (compiled filter sets, message bytes), and return. Turning
those into JSON (normalising filters, decoding messages, evaluating a tested filter) happens
on the console's own thread, so the reactor spends as little time as possible here.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from filtex_broker.nodes.consumer import Consumer
from filtex_broker.nodes.queue import Queue
from filtex_broker.nodes.topic import Subscription, Topic
from filtex_broker.relay.consumers import RelayConsumer
from filtex_broker.streams.consumer import StreamConsumer
from filtex_broker.streams.node import Stream, StreamFigures
from filtex_proton import __version__
from filtex_proton.plugin import FilterSet, FilterStats, LinkFilter, Refusal

if TYPE_CHECKING:
    from filtex_broker.client import ClientConnection
    from filtex_broker.links import LinkManager
    from filtex_broker.nodes.budget import MemoryBudget
    from filtex_broker.nodes.registry import Registry
    from filtex_broker.settings import BrokerConfig
    from filtex_proton.plugin import FiltexPlugin

__all__ = ["Inspected", "LinkCopy", "NodeCopy", "Overview", "PeekedMessage", "overview", "peek"]


class Inspected(Protocol):
    """The broker as the console sees it (``filtex_broker.server.Broker``)."""

    config: BrokerConfig
    registry: Registry
    links: LinkManager
    plugin: FiltexPlugin
    clients: dict[int, ClientConnection]
    messages_in: dict[str, int]
    idle_closes: int
    budget: MemoryBudget


@dataclass(slots=True)
class LinkCopy:
    """One consumer link (or a detached durable subscription), copied."""

    id: str
    name: str
    node: str
    connection: int | None
    peer: str
    role: str
    """consumer, browser, subscription (a topic's), or relay."""
    durable: bool
    attached: bool
    presettled: bool
    credit: int
    sent: int
    unsettled: int
    filter_set: FilterSet | None
    counters: dict[str, int] | None
    pushed_down: str | None = None
    """Relay mode: the JMS selector put on the upstream source (None: nothing pushed)."""
    received: int | None = None
    """Relay mode: messages taken from the upstream on this link (None: not a relay link)."""
    position: int | None = None
    """A stream consumer: the next offset it reads (None: not a stream consumer)."""
    lag: int | None = None
    """A stream consumer: the offsets from its position to the stream's end."""

    @property
    def filtered_out(self) -> int:
        """Messages this link's filters made ineligible for it: evaluated but not TRUE, and
        ruled out by the node's matcher without an evaluation (0 for an unfiltered link).
        A node's count adds its links', so one message counts once per link it missed."""
        counters = self.counters
        if counters is None:
            return 0
        return counters["evaluated"] - counters["matched"] + counters["ruled_out"]


@dataclass(slots=True)
class NodeCopy:
    name: str
    kind: str
    depth: int
    bytes: int
    messages_in: int
    consumers: int
    producers: int
    links: list[LinkCopy] = field(default_factory=list)
    expired: int = 0
    """Messages that expired here (a topic: in its subscriptions)."""
    scheduled: int = 0
    """Messages held until their scheduled delivery time."""
    stream: StreamFigures | None = None
    """A stream's offsets and segments (None: not a stream)."""


@dataclass(slots=True)
class Overview:
    time: float
    container_id: str
    version: str
    connections: int
    connections_closed_idle: int
    memory_used: int
    """Bytes the broker's messages are charged (``MemoryBudget.accounted``)."""
    memory_limit: int | None
    """``--max-memory`` (or the default share of the machine's memory)."""
    nodes: list[NodeCopy]
    refusals: list[Refusal]
    refusal_counts: dict[str, int]
    upstream: dict[str, Any] | None


def _counters(stats: FilterStats | None, ruled_out: int) -> dict[str, int] | None:
    """A link's filter counters (``nulls`` counts errors and over-budget verdicts too)."""
    if stats is None:
        return None
    evaluated = stats.evaluations
    return {"evaluated": evaluated, "matched": stats.matches,
            "not_matched": evaluated - stats.matches - stats.nulls, "unknown": stats.nulls,
            "errors": stats.errors, "over_budget": stats.budget_exceeded,
            "ruled_out": ruled_out}


def _filter_set(link_filter: LinkFilter | None) -> FilterSet | None:
    return link_filter.filter_set if link_filter is not None else None


def _consumer_copy(consumer: Consumer | StreamConsumer, peer: dict[int, tuple[int, str]],
                   subscription: Subscription | None) -> LinkCopy:
    link_filter = subscription.filter if subscription is not None else consumer.filter
    filter_set = _filter_set(link_filter)
    origin, label = peer.get(id(consumer), (None, "?"))
    role = "browser" if consumer.browse else "subscription" if subscription else "consumer"
    return LinkCopy(
        id=f"{origin}/{consumer.name}", name=consumer.name, node=consumer.node.name,
        connection=origin, peer=label, role=role,
        durable=subscription is not None and subscription.durable, attached=not consumer.closed,
        presettled=consumer.presettled, credit=consumer.credit, sent=consumer.sent,
        unsettled=len(consumer.unacked), filter_set=filter_set,
        counters=_counters(filter_set.stats if filter_set is not None else None,
                           consumer.ruled_out_now() if filter_set is not None else 0))


def _detached_subscription(subscription: Subscription) -> LinkCopy:
    """A durable subscription without its consumer: it still collects (and filters)."""
    filter_set = _filter_set(subscription.filter)
    name = subscription.key[1] if subscription.key is not None else "?"
    try:
        ruled_out = subscription.topic.matcher.ruled_out(subscription)
    except KeyError:
        ruled_out = 0
    return LinkCopy(
        id=f"-/{subscription.queue.name}", name=name, node=subscription.topic.name,
        connection=None, peer=subscription.key[0] if subscription.key else "?",
        role="subscription", durable=True, attached=False, presettled=False, credit=0, sent=0,
        unsettled=0, filter_set=filter_set,
        counters=_counters(filter_set.stats if filter_set is not None else None, ruled_out))


def _consumers_of(node: Queue | Topic) -> Iterator[tuple[Consumer, Subscription | None]]:
    if isinstance(node, Topic):
        for subscription in node.subscriptions:
            for consumer in subscription.consumers:
                if isinstance(consumer, Consumer):
                    yield consumer, subscription
        return
    for outlet in (*node.consumers, *node.browsers):
        if isinstance(outlet, Consumer):
            yield outlet, None


def _copy_queue_or_topic(node: Queue | Topic, copy: NodeCopy,
                         peer: dict[int, tuple[int, str]]) -> None:
    copy.bytes = (node.bytes if isinstance(node, Queue)
                  else sum(s.queue.bytes for s in node.subscriptions))
    copy.scheduled = node.held_back()
    for consumer, subscription in _consumers_of(node):
        copy.links.append(_consumer_copy(consumer, peer, subscription))
    if isinstance(node, Topic):
        copy.links.extend(_detached_subscription(s) for s in node.subscriptions
                          if not s.consumers and s.durable)


def _copy_stream(stream: Stream, copy: NodeCopy, peer: dict[int, tuple[int, str]]) -> None:
    """A stream's figures, and each reader with its position and lag."""
    figures = copy.stream = stream.figures()
    copy.bytes = figures.bytes
    for reader in stream.readers:
        if isinstance(reader, StreamConsumer):
            link = _consumer_copy(reader, peer, None)
            link.position, link.lag = figures.reader_at(reader.position)
            copy.links.append(link)


def overview(broker: Inspected) -> Overview:
    """Every node and link with their counters (run it on the reactor thread)."""
    peer: dict[int, tuple[int, str]] = {}
    producers: dict[str, int] = {}
    relayed: list[RelayConsumer] = []
    for client in list(broker.clients.values()):
        for attached in client.consumers:
            peer[id(attached)] = (client.origin, client.label)
            if isinstance(attached, RelayConsumer):
                relayed.append(attached)
        for producer in client.producers:
            node = getattr(producer, "node", None)
            name = node.name if node is not None else getattr(producer, "address", None)
            if name is not None:
                producers[name] = producers.get(name, 0) + 1
    nodes: list[NodeCopy] = []
    messages_in = broker.messages_in
    for name, node in list(broker.registry.nodes.items()):
        if not isinstance(node, Queue | Topic | Stream):
            continue
        copy = NodeCopy(name, node.kind, node.depth(), 0, messages_in.get(name, 0), 0,
                        producers.get(name, 0), expired=broker.registry.expired.get(name, 0))
        if isinstance(node, Stream):
            _copy_stream(node, copy, peer)
        else:
            _copy_queue_or_topic(node, copy, peer)
        copy.consumers = sum(1 for link in copy.links if link.attached)
        nodes.append(copy)
    upstream = broker.links.upstream
    if upstream is not None:
        nodes.extend(_relay_nodes(relayed, peer, producers, upstream.pushdown))
    refusals = sorted((*broker.plugin.stats.recent, *broker.links.recent_refusals),
                      key=lambda refusal: refusal.at)
    counts = dict(broker.plugin.stats.refusals)
    for reason, count in broker.links.refusals.items():
        counts[reason] = counts.get(reason, 0) + count
    return Overview(
        time=time.time(), container_id=broker.config.container_id, version=__version__,
        connections=len(broker.clients), connections_closed_idle=broker.idle_closes,
        memory_used=broker.budget.accounted, memory_limit=broker.budget.limit, nodes=nodes,
        refusals=refusals,
        refusal_counts=counts,
        upstream=None if upstream is None else {
            "url": broker.config.upstream, "connected": bool(upstream.ready),
            "product": upstream.product.label if upstream.product is not None else None,
            "offers_selectors": "APACHE.ORG:SELECTOR" in upstream.offered,
            "pushdown": bool(upstream.pushdown), "mode": broker.config.upstream_selector,
            "idle_losses": upstream.idle_losses})


def _relay_nodes(relayed: list[RelayConsumer], peer: dict[int, tuple[int, str]],
                 producers: dict[str, int], pushdown: bool) -> list[NodeCopy]:
    """Relay mode: the upstream holds the nodes; the console shows each address relayed."""
    nodes: dict[str, NodeCopy] = {}
    for consumer in relayed:
        address = consumer.address or "(dynamic)"
        node = nodes.get(address)
        if node is None:
            node = nodes[address] = NodeCopy(address, "upstream " + ("topic" if consumer.topic
                                                                    else "queue"),
                                             0, 0, 0, 0, producers.get(address, 0))
        filter_set = _filter_set(consumer.filter)
        origin, label = peer.get(id(consumer), (None, "?"))
        node.links.append(LinkCopy(
            id=f"{origin}/{consumer.name}", name=consumer.name, node=address,
            connection=origin, peer=label, role="relay browser" if consumer.browse else "relay",
            durable=False, attached=not consumer.closed, presettled=consumer.presettled,
            credit=consumer.credit, sent=consumer.sent, unsettled=len(consumer.unacked),
            filter_set=filter_set,
            counters=_counters(filter_set.stats if filter_set is not None else None, 0),
            pushed_down=consumer.selector if pushdown else None, received=consumer.received))
        node.consumers += 1
    return list(nodes.values())


@dataclass(frozen=True, slots=True)
class PeekedMessage:
    """A copy of one held message: its bytes (immutable), where it is, who sent it."""

    position: int
    state: str
    data: bytes
    origin: object


def peek(broker: Inspected, name: str, limit: int) -> list[PeekedMessage] | None:
    """The last ``limit`` messages a node holds, oldest first; None if there is no such node.

    Nothing is consumed, settled or reordered: the entries are listed, not taken. A topic
    keeps nothing itself: its subscriptions' copies are listed, each message once. A
    stream's are listed by offset, as they arrived (without ``x-stream-offset``).
    """
    node = broker.registry.nodes.get(name)
    if isinstance(node, Stream):
        return _peek_stream(node, limit)
    if isinstance(node, Queue):
        entries = node.entries()[-limit:] if limit > 0 else []
    elif isinstance(node, Topic):
        seen: set[int] = set()
        entries = []
        for subscription in node.subscriptions:
            for entry in subscription.queue.entries():
                if id(entry.data) not in seen:  # the subscriptions' entries share the bytes
                    seen.add(id(entry.data))
                    entries.append(entry)
        entries = entries[-limit:] if limit > 0 else []
    else:
        return None
    return [PeekedMessage(entry.pos, "queued" if entry.owner is None else "delivered",
                          entry.data, entry.origin) for entry in entries]


def _peek_stream(stream: Stream, limit: int) -> list[PeekedMessage]:
    log = stream.log
    end = log.next_offset
    peeked = []
    for offset in range(max(log.first_offset, end - limit) if limit > 0 else end, end):
        found = log.read(offset)
        if found is not None:
            peeked.append(PeekedMessage(offset, "held", found[0], found[1]))
    return peeked
