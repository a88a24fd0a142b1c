"""Relay mode: our consumers of one upstream queue share what one of them does not match.

A message taken from an upstream queue by one of our links, and not matched by its filter,
is not given back at once (RabbitMQ would redeliver it to the same link in a loop): it is
handed to another of our links on that queue that matches it, found through a node matcher
over their filters (only the candidates it names are evaluated); else the link holds it.
A consumer that attaches later takes what the others hold and it matches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from filtex_broker.relay.consumers import RelayConsumer
from filtex_proton.matcher import NodeMatcher
from filtex_proton.plugin import FilterMessage

__all__ = ["QueueSharing"]


class QueueSharing:
    """Our consumers of each upstream queue, indexed by their filters."""

    def __init__(self, message: Callable[[bytes], FilterMessage]) -> None:
        self.message = message
        """Bytes taken from the upstream as a message the filters read."""
        self.matchers: dict[str, NodeMatcher[RelayConsumer]] = {}
        self.indexed: dict[RelayConsumer, str] = {}
        """The address each consumer is indexed under (a dynamic or looked-up source learns
        its address from the upstream's answer)."""

    def index(self, consumer: RelayConsumer) -> None:
        matcher = self.matchers.setdefault(consumer.address, NodeMatcher())
        matcher.register(consumer, consumer.filter)
        self.indexed[consumer] = consumer.address

    def unindex(self, consumer: RelayConsumer) -> None:
        address = self.indexed.pop(consumer, None)
        if address is None:
            return
        matcher = self.matchers[address]
        matcher.unregister(consumer)
        if not len(matcher):
            del self.matchers[address]

    def readdressed(self, consumer: RelayConsumer) -> None:
        """The upstream answered the consumer's attach with another address: index it there."""
        if consumer in self.indexed and self.indexed[consumer] != consumer.address:
            self.unindex(consumer)
            self.index(consumer)

    def candidates(self, consumer: RelayConsumer,
                   message: FilterMessage) -> tuple[RelayConsumer, ...] | None:
        """The consumers of ``consumer``'s queue that may match ``message`` (the queue's
        matcher, evaluating nothing); None if ``consumer`` is not indexed there."""
        matcher = self.matchers.get(consumer.address)
        if matcher is None or consumer not in matcher:
            return None
        return matcher.candidates(message)

    def hand_off(self, owner: RelayConsumer, delivery: Any, data: bytes,
                 message: FilterMessage,
                 candidates: tuple[RelayConsumer, ...] | None = None) -> bool:
        """Give a message one link does not match to another of our links on the queue (only
        the candidates the queue's matcher names are asked; ``candidates``: already named)."""
        if candidates is None:
            matcher = self.matchers.get(owner.address)
            if matcher is None:
                return False
            candidates = matcher.candidates(message)
        for other in candidates:
            if other is not owner and other.wants(message):
                other.borrow(owner, delivery, data)
                return True
        return False

    def offer_held(self, newcomer: RelayConsumer, links: Iterable[object]) -> None:
        """A new consumer on a queue: take what our other ``links`` hold and it matches."""
        if newcomer.copies:
            return
        for other in list(links):
            if (not isinstance(other, RelayConsumer) or other is newcomer
                    or other.address != newcomer.address or not other.held):
                continue
            for delivery, data in list(other.held.items()):
                if newcomer.wants(self.message(data)):
                    del other.held[delivery]
                    newcomer.borrow(other, delivery, data)
            other.top_up()
