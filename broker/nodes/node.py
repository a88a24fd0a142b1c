"""What every node (queue, topic) shares: a name, a memory limit, stalled producers.

Bounded memory is flow control, not refusal: a producer keeps the credit it
was given, but gets no more while its node is full; when the node has room
again every stalled producer is topped up (:meth:`Node.room_available`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from filtex_proton.plugin import FilterMessage

if TYPE_CHECKING:
    from filtex_broker.nodes.entry import Entry

__all__ = [
    "ArchiveSink", "Durability", "Journal", "MessageRefusedError", "Node", "NodeLimits",
    "RoomToWait", "Stalled", "SubscriptionJournals",
]


@dataclass(frozen=True, slots=True)
class NodeLimits:
    """Per-node bounds on what is held (queued or delivered-unsettled)."""

    max_messages: int
    max_bytes: int


class Journal(Protocol):
    """A node's durable log, as the node sees it (``--data-dir``; ``filtex_broker.store.log`` has
    the one implementation). Nodes call it on the reactor thread; it never calls back."""

    def enqueue(self, entry: Entry) -> None: ...

    def ack(self, entry: Entry) -> None: ...

    def replace(self, entry: Entry, data: bytes) -> None: ...

    def remember_filter(self, encoded: bytes) -> None:
        """A durable subscription's consumer attached with this (encoded) filter set."""
        ...

    def drop(self) -> None: ...


SubscriptionJournals = Callable[[str, str, str], Journal]
"""(topic, container-id, link name) -> the log of a durable subscription."""


class Durability(Protocol):
    """The durable store as the address space and producers see it (``--data-dir``;
    ``filtex_broker.store.log.Store`` implements it): logs for new nodes, and the group commit a
    producer's ``accepted`` waits for."""

    def for_queue(self, address: str) -> Journal: ...

    def for_subscription(self, topic: str, container_id: str, link_name: str) -> Journal: ...

    def pending(self) -> bool:
        """Whether records are waiting to be written (an accept must wait for them)."""
        ...

    def after_commit(self, callback: Callable[[bool], None]) -> None:
        """Call back (on the reactor thread) once what is pending is on disk, or failed."""
        ...


class ArchiveSink(Protocol):
    """The archive as producers see it (``--archive``; ``filtex_broker.archive.archiver.Archiver``):
    accepted messages offered to it; producers wait while it is behind."""

    def wants(self, address: str) -> bool: ...

    def has_room(self) -> bool: ...

    def offer(self, address: str, data: bytes) -> None: ...

    def stall(self, producer: Stalled) -> None: ...

    def unstall(self, producer: Stalled) -> None: ...


class Stalled(Protocol):
    """A producer waiting for room (see :class:`filtex_broker.nodes.producer.Producer`)."""

    def resume(self) -> None:
        """The node has room again: grant credit."""
        ...


class RoomToWait:
    """Where producers wait for room (a full node, an archive behind): no credit until
    :meth:`has_room`, then all are woken in the order they stalled."""

    def __init__(self) -> None:
        self.stalled: list[Stalled] = []

    def has_room(self) -> bool:
        raise NotImplementedError

    def stall(self, producer: Stalled) -> None:
        if producer not in self.stalled:
            self.stalled.append(producer)

    def unstall(self, producer: Stalled) -> None:
        if producer in self.stalled:
            self.stalled.remove(producer)

    def room_available(self) -> None:
        """Wake stalled producers if there is room (cheap when none is stalled)."""
        if self.stalled and self.has_room():
            waiting, self.stalled = self.stalled, []
            for producer in waiting:
                producer.resume()


class MessageRefusedError(Exception):
    """What :meth:`Node.publish` raises for a message the node will not take, before storing
    anything: the producer's delivery is rejected with this error condition."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition = condition
        self.description = description


class Node(RoomToWait):
    """A named place messages are sent to; subclasses decide who gets them."""

    kind: ClassVar[str] = "node"

    def __init__(self, name: str, limits: NodeLimits) -> None:
        super().__init__()
        self.name = name
        self.limits = limits
        self.dynamic_owner: object | None = None
        """The link that created this node dynamically; the node goes when it detaches."""

    def publish(self, message: FilterMessage) -> None:
        """Take in one message (the producer's delivery is accepted after this returns), or
        raise :class:`MessageRefusedError`."""
        raise NotImplementedError

    def put_back(self, entry: Entry) -> None:
        """Store an entry regardless of limits (dead letters must never vanish)."""
        raise NotImplementedError

    def held_back(self) -> int:
        """Messages held until their scheduled delivery time (counted in :meth:`depth`)."""
        return 0

    def depth(self) -> int:
        """Messages held, for logs."""
        raise NotImplementedError

    def destroy(self) -> None:
        """The node is deleted (dynamic nodes): drop consumers' references."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} depth={self.depth()}>"
