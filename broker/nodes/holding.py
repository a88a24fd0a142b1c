"""What a queue does with a message's lifetime: hold it until its scheduled time, expire it.

A part of :class:`filtex_broker.nodes.queue.Queue` kept apart, because it is a job of its own:
the queue's dispatch never sees a held entry, and sees an expired one only to skip it. A timed
entry's moments go to the broker's :class:`~filtex_broker.nodes.deadlines.Deadlines`, which call
:meth:`LifetimeKeeping.at_deadline` when one comes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from filtex_broker.nodes.deadlines import GONE, Deadlines
from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.node import Node

__all__ = ["HELD", "Expired", "LifetimeKeeping", "lapsed"]

HELD: Final = -2
"""An entry's ``pos`` while it waits for its scheduled delivery time (in no slot yet)."""

Expired = Callable[[Entry, "LifetimeKeeping"], None]
"""Told of each message that expires in a queue, before it leaves: dead-letters it (or drops
it) and counts it (``Registry.expired``)."""


def lapsed(entry: Entry, now: int) -> bool:
    """Whether the entry's expiry has come (it is then never delivered)."""
    expires = entry.lifetime.expires_ms
    return expires is not None and expires <= now


class LifetimeKeeping:
    """The queue's held entries and its expiries (mixed into the queue, whose state it uses)."""

    name: str
    ready: int
    _elsewhere: int
    _owner: Node | None

    def _keep_lifetimes(self, deadlines: Deadlines) -> None:
        self.deadlines = deadlines
        """The broker's timed moments (expiry, scheduled delivery) of its entries."""
        self.on_expired: Expired | None = None
        """Where an expired message goes (None: dropped)."""
        self.expired = 0
        """Messages that expired here."""
        self._held: dict[Entry, None] = {}
        """Entries waiting for their scheduled delivery time (counted, charged and logged,
        offered to nobody), in arrival order."""

    @property
    def node_name(self) -> str:
        """The node it belongs to: its topic's name for a subscription, else its own."""
        return self._owner.name if self._owner is not None else self.name

    def _place(self, entry: Entry) -> None:
        raise NotImplementedError

    def remove(self, entry: Entry) -> None:
        raise NotImplementedError

    def _held_back(self, entry: Entry) -> bool:
        """A timed entry arrived: note its moments; hold it if it is not visible yet."""
        lifetime = entry.lifetime
        deadlines = self.deadlines
        if lifetime.expires_ms is not None:
            deadlines.add(lifetime.expires_ms, self, entry)
        visible = lifetime.visible_ms
        if visible is None or visible <= deadlines.clock():
            return False
        entry.pos = HELD
        entry.fresh = None  # held compact, as a queued entry is
        self._held[entry] = None
        self._elsewhere += 1
        deadlines.add(visible, self, entry)
        return True

    def at_deadline(self, entry: Entry, now: int) -> None:
        """One of the entry's moments has come (:class:`~filtex_broker.nodes.deadlines.Deadlines`):
        a queued or held entry past its expiry leaves; a held one now visible is offered. A
        delivered one is its consumer's: if it comes back, the queue's ``requeue`` looks again."""
        if entry.owner is not None:
            return
        if lapsed(entry, now):
            self._expire(entry)
        elif entry.pos == HELD and (entry.lifetime.visible_ms or 0) <= now:
            del self._held[entry]
            self._elsewhere -= 1
            entry.pos = GONE
            self._place(entry)

    def _expire(self, entry: Entry) -> None:
        if entry.pos >= 0:
            self.ready -= 1
        self.expired += 1
        if self.on_expired is not None:
            self.on_expired(entry, self)
        self.remove(entry)  # after the dead letter: with --data-dir, never only the removal
