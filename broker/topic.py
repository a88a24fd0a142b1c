"""The topic node: every subscription gets its own copy of each message it matches.

A subscription is a private queue (so settlement, redelivery and credit work
exactly as for queues) fed by the topic. Its filters are evaluated when a
message is published, so a subscription only ever holds what it wants, and a
durable subscription (Qpid JMS: terminus durability + expiry-policy never,
named by container-id and link name) keeps collecting while its consumer is
detached. A topic is full when any of its subscriptions is: a stalled
subscriber slows the publishers, it is never silently skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from broker.entry import Entry
from broker.node import Node, NodeLimits
from broker.queue import Queue
from broker.store import subscription_meta
from filtex_proton.plugin import FilterMessage, LinkFilter

if TYPE_CHECKING:
    from broker.consumer import Consumer
    from broker.store import Store

__all__ = ["Subscription", "Topic"]


class Subscription:
    """One subscriber's private queue, its filters, and whether it outlives its link."""

    __slots__ = ("consumer", "durable", "filter", "key", "queue", "topic")

    def __init__(
        self, topic: Topic, key: tuple[str, str] | None, link_filter: LinkFilter | None
    ) -> None:
        self.topic = topic
        self.key = key
        """(container-id, link name) for durable subscriptions, else None."""
        self.consumer: Consumer | None = None
        """The attached consumer; None while a durable subscription is detached."""
        self.durable = key is not None
        self.filter = link_filter
        name = f"{topic.name}::{key[1]}" if key is not None else f"{topic.name}::{id(self):x}"
        self.queue = Queue(name, topic.limits, owner=topic)

    def __repr__(self) -> str:
        return f"<Subscription {self.queue.name!r} durable={self.durable}>"


class Topic(Node):
    """Publish/subscribe: a message goes to every subscription whose filters match it."""

    kind: ClassVar[str] = "topic"

    def __init__(self, name: str, limits: NodeLimits) -> None:
        super().__init__(name, limits)
        self.subscriptions: list[Subscription] = []
        self.store: Store | None = None
        """The durable store its durable subscriptions log to (``--data-dir``), if any."""

    def publish(self, message: FilterMessage) -> None:
        for subscription in self.subscriptions:
            link_filter = subscription.filter
            if link_filter is None or link_filter.matches(message):
                subscription.queue.put(Entry(message))

    def put_back(self, entry: Entry) -> None:
        self.publish(entry.message)

    def has_room(self) -> bool:
        return all(s.queue.has_room() for s in self.subscriptions)

    def depth(self) -> int:
        return sum(s.queue.count for s in self.subscriptions)

    def subscribe(
        self, key: tuple[str, str] | None, link_filter: LinkFilter | None
    ) -> Subscription:
        """A new subscription; it sees messages published from now on."""
        subscription = Subscription(self, key, link_filter)
        if key is not None and self.store is not None:  # durable: its own log
            subscription.queue.journal = self.store.journal(
                subscription_meta(self.name, key[0], key[1]))
        self.subscriptions.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """The subscription ends; what it held goes with it (that is what ending means)."""
        if subscription in self.subscriptions:
            self.subscriptions.remove(subscription)
            subscription.queue.destroy()
        self.room_available()

    def destroy(self) -> None:
        for subscription in self.subscriptions:
            subscription.queue.destroy()
        self.subscriptions = []
