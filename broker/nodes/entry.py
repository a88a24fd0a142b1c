"""One message held by one node: the bytes that arrived, and where it stands.

An entry is kept small, because a broker holds millions of them (docs/BROKER.md, "byte
accounting"): the bytes as they arrived (forwarded untouched, and shared by every topic
subscription that holds the message) and a few fixed fields, nothing per message beyond what
delivery needs. The plugin's message (``message``: the view the filters read, with the sections
the door check decoded) is kept only while the message is being offered on arrival; a queued
entry drops it, and a later evaluation (a consumer scanning a backlog, a message coming back)
makes a fresh one from the bytes, whose sections are decoded again on first use.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Final

from filtex_broker.nodes.lifetime import COMMON, Lifetime
from filtex_proton.matcher import Arrival
from filtex_proton.plugin import FilterMessage

__all__ = ["REFUSED", "RETRIES", "Entry"]

RETRIES: Final = 3
"""Times one consumer re-evaluates an entry after its filter ran out of evaluation budget."""
REFUSED: Final = -1
"""In an entry's ``notes``: the consumer answered ``modified(undeliverable-here)``."""


class Entry:
    """A message in a node: queued (``owner is None``) or delivered and unsettled.

    ``pos`` is the entry's slot in its queue (the queue keeps delivered entries
    in their slot, so a message that comes back is back in order); ``notes``
    holds, per consumer, what is rare: a refusal, retries after a filter ran out of time.
    """

    __slots__ = ("arrival", "browse_arrival", "data", "fresh", "lifetime", "notes", "origin",
                 "owner", "pos", "shares")

    def __init__(self, data: bytes, origin: Hashable | None = None,
                 message: FilterMessage | None = None, *, shares: int = 1,
                 lifetime: Lifetime = COMMON) -> None:
        self.data = data
        self.lifetime = lifetime
        """When it expires, when it becomes visible, its priority (:data:`COMMON`, shared, for
        a message that sets none of them)."""
        self.origin = origin
        """The identity of the connection the message arrived on (for no-local)."""
        self.fresh = message
        """The plugin's message it arrived as, while it is offered on arrival (the sections
        the door check decoded are in it); None once queued (the queue drops it)."""
        self.shares = shares
        """How many entries (topic subscriptions) share ``data``: each is charged its share."""
        self.pos = -1
        self.owner: object | None = None
        """The consumer it is delivered to and not settled by (an entry needs only its
        identity)."""
        self.notes: dict[object, int] | None = None
        """Per consumer: :data:`REFUSED`, or how many times it retried (see :meth:`retry`)."""
        self.arrival: Arrival[Any] | None = None
        """The queue's consumers that may match it (its node matcher's answer, kept right as
        consumers come and say no; shared with other entries); None if it arrived when the
        queue did not index its consumers: every one may."""
        self.browse_arrival: Arrival[Any] | None = None
        """The same, among the queue's browsers (when they are indexed)."""

    @classmethod
    def of(cls, message: FilterMessage, *, shares: int = 1,
           lifetime: Lifetime = COMMON) -> Entry:
        """The entry of a message that just arrived (its decoded sections kept for the offer)."""
        return cls(message.data, message.origin, message, shares=shares, lifetime=lifetime)

    @property
    def message(self) -> FilterMessage:
        """The plugin's message: the one it arrived as while it is offered, else made afresh
        (a view over the bytes; each filter's first read decodes what it reads)."""
        message = self.fresh
        if message is None:
            return FilterMessage(self.data, self.origin)
        return message

    @property
    def size(self) -> int:
        return len(self.data)

    def refuse(self, consumer: object) -> None:
        """The consumer answered ``modified(undeliverable-here)``: never offer it this again."""
        if self.notes is None:
            self.notes = {}
        self.notes[consumer] = REFUSED

    def refuses(self, consumer: object) -> bool:
        notes = self.notes
        return notes is not None and notes.get(consumer) == REFUSED

    def retry(self, consumer: object) -> bool:
        """Whether a consumer whose filter ran out of time on this entry should try again."""
        if self.notes is None:
            self.notes = {}
        count = self.notes.get(consumer, 0)
        self.notes[consumer] = count + 1
        return count < RETRIES

    def __repr__(self) -> str:
        state = "queued" if self.owner is None else "delivered"
        return f"<Entry {len(self.data)} bytes at {self.pos} {state}>"
