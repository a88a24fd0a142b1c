"""The address space: nodes by address, created on first use; durable subscriptions; dead letters.

An address names a queue unless the first link to use it says ``topic`` (the
Qpid JMS node capability), or it matches a ``--stream`` pattern: then it is a
stream, whatever the link asks (a ``topic`` capability included: the operator
declared it, as RabbitMQ's streams are declared). The kind is fixed at
creation. Dynamic nodes are never streams. Dynamic nodes get a
fresh address and are deleted with the link that asked for them. Rejected
messages go to the dead-letter queue, ignoring its limits: a rejected message
must never vanish silently. So do expired ones (``filtex_broker.nodes.lifetime``), counted per
node; with dead-lettering off, expired messages are dropped (counted all the same). A dead
letter carries why in its message annotations (:func:`dead_letter_annotations`).
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

from proton import symbol

from filtex_broker.nodes.budget import MemoryBudget
from filtex_broker.nodes.deadlines import Deadlines
from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.holding import LifetimeKeeping
from filtex_broker.nodes.lifetime import DEAD_LETTER_REASON, dead_letter_lifetime
from filtex_broker.nodes.node import Durability, Journal, Node, NodeLimits
from filtex_broker.nodes.queue import Queue
from filtex_broker.nodes.rewrites import with_annotations, without_expiry
from filtex_broker.nodes.topic import Topic

if TYPE_CHECKING:
    from filtex_broker.nodes.topic import Subscription

__all__ = ["DELETED_NODES", "EXPIRED", "REJECTED", "Registry", "Streams", "dead_letter_annotations",
           "fold_deleted"]

log = logging.getLogger("filtex.broker")

DELETED_NODES: Final = "dynamic/*"
"""The one name the counters of every deleted (dynamic) node are folded into: per-node counts
stay bounded however many temporary queues come and go, and their sums stay monotonic."""


EXPIRED: Final = "expired"
REJECTED: Final = "rejected"
_DESCRIPTION: Final = symbol("x-opt-dead-letter-description")
_FROM: Final = symbol("x-opt-dead-letter-node")


def dead_letter_annotations(reason: str, description: str, node: str) -> dict[symbol, str]:
    """What a dead letter carries in its message annotations: why (``x-opt-dead-letter-reason``:
    ``expired`` or ``rejected``), in words (``x-opt-dead-letter-description``: the consumer's
    error condition, or the lifetime that passed) and the node it left
    (``x-opt-dead-letter-node``: the queue, or a subscription's topic). A message so marked
    never expires again (``filtex_broker.nodes.lifetime``)."""
    return {symbol(DEAD_LETTER_REASON): reason, _DESCRIPTION: description, _FROM: node}


def fold_deleted(counts: dict[str, int], name: str) -> None:
    """Move a deleted node's count to :data:`DELETED_NODES`."""
    count = counts.pop(name, 0)
    if count:
        counts[DELETED_NODES] = counts.get(DELETED_NODES, 0) + count


class Streams(Protocol):
    """Which addresses are streams and how to make one (``--stream``; implemented by
    ``filtex_broker.streams.node.StreamSettings``, which this package may not import)."""

    def wants(self, address: str) -> bool: ...

    def make(self, address: str, limits: NodeLimits, budget: MemoryBudget,
             store: Durability | None = None) -> Node:
        """A new stream; on disk if ``store`` is given."""
        ...


def _utc(ms: int) -> str:
    """A time in ms since the epoch as ISO 8601 UTC (ms too, for a year past 9999)."""
    try:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms since the epoch"


class Registry:
    """Every node the broker holds, by address."""

    def __init__(self, limits: NodeLimits, dead_letter_address: str,
                 budget: MemoryBudget | None = None, *, streams: Streams | None = None) -> None:
        self.limits = limits
        self.budget = budget if budget is not None else MemoryBudget()
        """The broker-wide memory budget every node charges (``--max-memory``; unlimited if
        none is given)."""
        self.dead_letter_address = dead_letter_address
        self.nodes: dict[str, Node] = {}
        self.durable: dict[tuple[str, str], Subscription] = {}
        """Durable topic subscriptions by (container-id, link name)."""
        self.store: Durability | None = None
        """The durable store (``--data-dir``): new non-dynamic nodes log to it."""
        self.streams = streams
        """``--stream``: the addresses created as streams (None: no stream)."""
        self.deadlines = Deadlines()
        """Every timed message's expiry and scheduled delivery (the server sets its timer)."""
        self.expired: dict[str, int] = {}
        """Messages expired, by node (a topic's subscriptions count as the topic)."""
        self._dynamic = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:8]
        self.on_delete: list[Callable[[str], None]] = []
        """Told the name of each node deleted (counters keyed by node fold it away)."""

    def lookup(self, address: str) -> Node | None:
        return self.nodes.get(address)

    def is_stream(self, address: str) -> bool:
        """Whether ``address`` is (or would be created as) a stream."""
        streams = self.streams
        return streams is not None and streams.wants(address)

    def node(self, address: str, *, topic: bool = False, durable: bool = True) -> Node:
        """The node at ``address``, created on first use: a stream if the address matches a
        ``--stream`` pattern (not for a dynamic node), else a topic if asked, else a queue."""
        node = self.nodes.get(address)
        if node is None:
            node = self._create(address, topic=topic, durable=durable)
            self.nodes[address] = node
            log.info("created %s %r", node.kind, address)
        return node

    def _create(self, address: str, *, topic: bool, durable: bool) -> Node:
        if durable and self.streams is not None and self.streams.wants(address):
            return self.streams.make(address, self.limits, self.budget, self.store)
        store = self.store if durable else None  # a queue logs; a topic, its durable subs
        if topic:
            node = Topic(address, self.limits, self.budget, self.deadlines)
            node.on_expired = self._expired
            if store is not None:
                node.journals = self._subscription_journal
            return node
        queue = Queue(address, self.limits, budget=self.budget, deadlines=self.deadlines)
        queue.on_expired = self._expired
        if store is not None:
            queue.journal = store.for_queue(address)
        return queue

    def _subscription_journal(self, topic: str, container_id: str, link_name: str) -> Journal:
        assert self.store is not None
        return self.store.for_subscription(topic, container_id, link_name)

    def dynamic_node(self, *, topic: bool = False) -> Node:
        """A node with a fresh address; the caller makes its link the ``dynamic_owner``."""
        return self.node(f"dynamic/{self._prefix}/{next(self._dynamic)}", topic=topic,
                         durable=False)

    def delete(self, node: Node) -> None:
        if self.nodes.get(node.name) is node:
            del self.nodes[node.name]
            depth = node.depth()
            node.destroy()
            node.dynamic_owner = None  # the owner refers to the node: no cycle left behind
            fold_deleted(self.expired, node.name)
            for forget in self.on_delete:
                forget(node.name)
            log.info("deleted %s %r (%d messages held)", node.kind, node.name, depth)

    def dead_letter(self, entry: Entry, reason: str, node_name: str = "") -> None:
        """A rejected message goes to the dead-letter queue (or, if disabled, to the log)."""
        if not self.dead_letter_address:
            log.warning("rejected message (%d bytes) dropped, no dead-letter address: %s",
                        entry.size, reason)
            return
        self._to_dead_letters(entry, dead_letter_annotations(REJECTED, reason, node_name))
        log.info("rejected message (%d bytes) moved to %r: %s",
                 entry.size, self.dead_letter_address, reason)

    def _expired(self, entry: Entry, queue: LifetimeKeeping) -> None:
        """A message expired in ``queue``: counted, then dead-lettered (or dropped if
        dead-lettering is off). Not logged one by one: a flood of expiries is a counter."""
        name = queue.node_name
        self.expired[name] = self.expired.get(name, 0) + 1
        if self.dead_letter_address and queue.name != self.dead_letter_address:
            self._to_dead_letters(entry, dead_letter_annotations(
                EXPIRED, f"its ttl or absolute-expiry-time passed at "
                f"{_utc(entry.lifetime.expires_ms or 0)}", name))

    def _to_dead_letters(self, entry: Entry, annotations: dict[symbol, str]) -> None:
        """A dead letter: why, in its annotations, and no expiry (it never expires again)."""
        data = without_expiry(with_annotations(entry.data, annotations))
        dead = Entry(data, entry.origin, lifetime=dead_letter_lifetime(entry.lifetime))
        self.node(self.dead_letter_address).put_back(dead)
