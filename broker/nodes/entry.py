"""One message held by one node: the bytes that arrived, and where it stands.

The bytes are forwarded untouched; the plugin's message (``message``) decodes
sections lazily and is shared by every link that evaluates it, so a topic gives
each subscription its own :class:`Entry` around the same message.
"""

from __future__ import annotations

from typing import Final

from filtex_proton.plugin import FilterMessage

__all__ = ["RETRIES", "Entry"]

RETRIES: Final = 3
"""Times one consumer re-evaluates an entry after its filter ran out of evaluation budget."""


class Entry:
    """A message in a node: queued (``owner is None``) or delivered and unsettled.

    ``pos`` is the entry's slot in its queue (the queue keeps delivered entries
    in their slot, so a message that comes back is back in order); ``refused``
    holds consumers that answered ``modified(undeliverable-here)``.
    """

    __slots__ = ("browse_candidates", "candidates", "cost", "data", "epoch", "message", "owner",
                 "pos", "refused", "retries", "size")

    def __init__(self, message: FilterMessage) -> None:
        self.message = message
        self.data: bytes = message.data
        self.size = len(self.data)
        self.cost = 0
        """What its queue charged the memory budget for it (``broker.nodes.budget``)."""
        self.pos = -1
        self.owner: object | None = None
        """The consumer it is delivered to and not settled by (an entry needs only its
        identity)."""
        self.refused: set[object] | None = None
        self.retries: dict[object, int] | None = None
        self.candidates: tuple[object, ...] | None = None
        """The queue's consumers that could match it when it arrived (its node matcher's
        answer, in attach order); None if it arrived when there were none."""
        self.browse_candidates: tuple[object, ...] | None = None
        """The same, among the queue's browsers (when they are indexed)."""
        self.epoch = 0
        """How many consumers the queue had seen attach when ``candidates`` was taken: one
        attached later (a higher ``order``) is not among them and must evaluate."""

    def retry(self, consumer: object) -> bool:
        """Whether a consumer whose filter ran out of time on this entry should try again."""
        if self.retries is None:
            self.retries = {}
        count = self.retries.get(consumer, 0)
        self.retries[consumer] = count + 1
        return count < RETRIES

    @property
    def origin(self) -> object:
        """The identity of the connection the message arrived on (for no-local)."""
        return self.message.origin

    def __repr__(self) -> str:
        state = "queued" if self.owner is None else "delivered"
        return f"<Entry {self.size} bytes at {self.pos} {state}>"
