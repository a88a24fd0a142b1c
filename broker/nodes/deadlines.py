"""When timed messages expire or become visible: one heap for the whole broker.

A message with a lifetime (``filtex_broker.nodes.lifetime``: a ttl, an absolute-expiry-time, a
scheduled delivery) puts its moments here when a queue takes it in; a timer wakes the broker at
the earliest one, and each due moment asks the entry's queue to look at it
(:meth:`Timed.at_deadline`: expire it, or make it visible). So an expired message is found
without scanning any queue, and its memory and disk are given back at its expiry, whether or
not anyone consumes. A message without a lifetime costs nothing here.

A message settled before its moment leaves its heap item behind (a queue has no cheap way to
pull an item out of the middle of a heap); such items pop harmlessly, and whenever the heap has
doubled since it was last cleaned, it is rebuilt without them. The heap is so at most about
twice the size of the timed messages held, for an O(1) amortised cost per message.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

from filtex_broker.nodes.lifetime import now_ms

if TYPE_CHECKING:
    from filtex_broker.nodes.entry import Entry

__all__ = ["GONE", "Deadlines", "Timed"]

GONE: Final = -1
"""An entry's ``pos`` once it has left its queue."""
_CLEAN_FROM: Final = 1024
"""Heap items below which the heap is never rebuilt."""


class Timed(Protocol):
    """A queue as the deadlines see it (``filtex_broker.nodes.queue.Queue``)."""

    def at_deadline(self, entry: Entry, now: int) -> None:
        """One of the entry's moments has come: expire it or make it visible, as due."""
        ...


Arm = Callable[[float], object]
"""Wake the broker in this many seconds (the server's timer; None in unit tests, which call
:meth:`Deadlines.run` themselves)."""


class Deadlines:
    """Every timed entry's pending moments, earliest first."""

    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self.clock = clock
        """Ms since the epoch: the clock of absolute-expiry-time and x-opt-delivery-time."""
        self.arm: Arm | None = None
        self._heap: list[tuple[int, int, Timed, Entry]] = []
        self._order = itertools.count()
        """Ties broken by insertion: entries due together are looked at in arrival order."""
        self._armed_for: int | None = None
        """When the earliest timer set will fire (ms), if one is set."""
        self._cleaned = 0
        """The heap's size after its last rebuild."""

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, when: int, queue: Timed, entry: Entry) -> None:
        """Look at ``entry`` in ``queue`` at ``when`` (ms since the epoch)."""
        heap = self._heap
        heapq.heappush(heap, (when, next(self._order), queue, entry))
        if len(heap) > 2 * self._cleaned + _CLEAN_FROM:
            self._clean()
        armed = self._armed_for
        if armed is None or when < armed:
            self._wake_at(when)

    def run(self, now: int | None = None) -> None:
        """Look at every entry whose moment has come; set the timer for the next."""
        if now is None:
            now = self.clock()
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, queue, entry = heapq.heappop(heap)
            if entry.pos != GONE:
                queue.at_deadline(entry, now)
        self._armed_for = None
        if heap:
            self._wake_at(heap[0][0])

    def _wake_at(self, when: int) -> None:
        """Set the broker's timer for ``when`` (ms since the epoch), if it has one."""
        if self.arm is not None:
            self._armed_for = when
            self.arm(max(0.001, (when - self.clock()) / 1000))

    def _clean(self) -> None:
        """Drop the items of entries that have left their queue."""
        self._heap = [item for item in self._heap if item[3].pos != GONE]
        heapq.heapify(self._heap)
        self._cleaned = len(self._heap)
