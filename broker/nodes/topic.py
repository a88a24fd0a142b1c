"""The topic node: every subscription gets its own copy of each message it matches.

A subscription is a private queue (so settlement, redelivery and credit work
exactly as for queues) fed by the topic. Its filters are evaluated when a
message is published, through the topic's node matcher (docs/PLUGIN.md): only
the subscriptions whose indexed conditions the message meets are evaluated, so
thousands of filtered subscriptions cost little more than a few. A
subscription only ever holds what it wants, and a
durable subscription (Qpid JMS: terminus durability + expiry-policy never,
named by container-id and link name) keeps collecting while its consumer is
detached. A shared subscription (JMS 2.0, Qpid JMS capability ``shared``) is
one such queue with competing consumers. A topic is full when any of its
subscriptions is: a stalled subscriber slows the publishers, it is never
silently skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from filtex_broker.nodes.budget import MemoryBudget
from filtex_broker.nodes.deadlines import Deadlines
from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.lifetime import lifetime_of
from filtex_broker.nodes.node import Node, NodeLimits, SubscriptionJournals
from filtex_broker.nodes.queue import MATCHER_FROM, Expired, Queue
from filtex_proton.matcher import NodeMatcher
from filtex_proton.plugin import FilterMessage, LinkFilter

__all__ = ["Subscription", "Topic"]


class Subscription:
    """One subscriber's private queue, its filters, and whether it outlives its link."""

    __slots__ = ("_filter", "consumers", "durable", "filter_code", "key", "queue", "shared",
                 "topic")

    def __init__(
        self, topic: Topic, key: tuple[str, str] | None, link_filter: LinkFilter | None,
        *, durable: bool | None = None,
    ) -> None:
        self.topic = topic
        self.key = key
        """(container-id, name) for durable and shared subscriptions, else None."""
        self.consumers: list[object] = []
        """The attached consumers (more than one only if shared); none while detached."""
        self.durable = key is not None if durable is None else durable
        self.shared = False
        """Its consumers attached saying ``shared``: more may attach (with the same filters)."""
        self.filter_code = b""
        """The source filter map it was attached with, as encoded (shared: must be the same)."""
        self._filter = link_filter
        name = f"{topic.name}::{key[1]}" if key is not None else f"{topic.name}::{id(self):x}"
        self.queue = Queue(name, topic.limits, owner=topic, budget=topic.budget,
                           deadlines=topic.deadlines)
        self.queue.on_expired = topic.on_expired

    @property
    def filter(self) -> LinkFilter | None:
        return self._filter

    @filter.setter
    def filter(self, link_filter: LinkFilter | None) -> None:
        """A durable subscription re-attached with other filters: the topic re-indexes it."""
        self._filter = link_filter
        if self in self.topic.subscriptions:
            self.topic.matcher.register(self, link_filter)

    def __repr__(self) -> str:
        return f"<Subscription {self.queue.name!r} durable={self.durable}>"


class Topic(Node):
    """Publish/subscribe: a message goes to every subscription whose filters match it."""

    kind: ClassVar[str] = "topic"

    def __init__(self, name: str, limits: NodeLimits, budget: MemoryBudget | None = None,
                 deadlines: Deadlines | None = None) -> None:
        super().__init__(name, limits)
        self.deadlines = deadlines if deadlines is not None else Deadlines()
        """The broker's timed moments: its subscriptions' queues put theirs there."""
        self.on_expired: Expired | None = None
        """Where a message that expires in a subscription goes (None: dropped)."""
        self.budget = budget
        """The broker-wide memory budget its subscriptions charge (``--max-memory``)."""
        self.subscriptions: list[Subscription] = []
        self.matcher: NodeMatcher[Subscription] = NodeMatcher()
        """Every subscription's filter set, indexed (a subscription without filters too)."""
        self.journals: SubscriptionJournals | None = None
        """Where its durable subscriptions log (``--data-dir``), if anywhere."""

    def publish(self, message: FilterMessage) -> None:
        """Each matching subscription gets an entry of its own around the same bytes, and is
        charged its share of them (``shares``): the bytes are held once, however many hold
        them (docs/BROKER.md, "byte accounting")."""
        subscriptions = self.subscriptions
        matched: Sequence[Subscription]
        if len(subscriptions) < MATCHER_FROM:  # a few: evaluating each is cheaper than indexing
            matched = [s for s in subscriptions if s.filter is None or s.filter.matches(message)]
        else:
            matched = self.matcher.match(message).matched
        shares = len(matched)
        if not shares:
            return
        lifetime = lifetime_of(message)  # once: every subscription's entry shares it
        for subscription in matched:
            subscription.queue.put(Entry.of(message, shares=shares, lifetime=lifetime))

    def put_back(self, entry: Entry) -> None:
        self.publish(entry.message)

    def has_room(self) -> bool:
        return all(s.queue.has_room() for s in self.subscriptions)

    def depth(self) -> int:
        return sum(s.queue.count for s in self.subscriptions)

    def held_back(self) -> int:
        return sum(s.queue.held_back() for s in self.subscriptions)

    def subscribe(
        self, key: tuple[str, str] | None, link_filter: LinkFilter | None,
        *, durable: bool | None = None,
    ) -> Subscription:
        """A new subscription; it sees messages published from now on."""
        subscription = Subscription(self, key, link_filter, durable=durable)
        if key is not None and subscription.durable and self.journals is not None:
            subscription.queue.journal = self.journals(self.name, key[0], key[1])
        self.subscriptions.append(subscription)
        self.matcher.register(subscription, link_filter)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """The subscription ends; what it held goes with it (that is what ending means)."""
        if subscription in self.subscriptions:
            self.subscriptions.remove(subscription)
            self.matcher.unregister(subscription)
            subscription.queue.destroy()
        self.room_available()

    def destroy(self) -> None:
        for subscription in self.subscriptions:
            subscription.queue.destroy()
            self.matcher.unregister(subscription)
        self.subscriptions = []
