"""A queue's other priorities: one lane of slots per priority besides the default one.

A queue delivers, among the messages a consumer's filters admit, the higher ``header.priority``
first (AMQP 1.0 part 3 §3.2.1: 0..9, 4 by default), first in first out within a priority, as
Artemis and ActiveMQ do. The queue's own slots hold the default priority, with each consumer's
cursor on the consumer itself, exactly as when priorities are not used; a message of another
priority goes to that priority's :class:`Lane`, made when the first such message arrives and
dropped when it is empty again, so the common case of one priority pays for none of this. A
lane keeps the same kind of slots (holes left by settled messages, compacted in bulk) and each
reader's cursor in a dict.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from filtex_broker.nodes.entry import Entry

__all__ = ["COMPACT_MIN", "Lane", "compact"]

COMPACT_MIN: Final = 1024
"""Holes tolerated before compaction (compaction also waits for holes > live entries)."""


def compact(slots: list[Entry | None]) -> tuple[list[Entry | None], list[int]]:
    """The slots without their holes, each entry's ``pos`` renumbered, and the old position of
    each slot kept (so that a cursor ``c`` becomes ``bisect_left(old, c)``)."""
    old_positions: list[int] = []
    kept: list[Entry | None] = []
    for index, entry in enumerate(slots):
        if entry is not None:
            entry.pos = len(kept)
            kept.append(entry)
            old_positions.append(index)
    return kept, old_positions


class Lane:
    """The slots of one priority other than the default, and each reader's cursor there."""

    __slots__ = ("browse_cursors", "cursors", "live", "priority", "slots")

    def __init__(self, priority: int) -> None:
        self.priority = priority
        self.slots: list[Entry | None] = []
        self.live = 0
        """Entries in the slots (queued or delivered)."""
        self.cursors: dict[Hashable, int] = {}
        """Per consumer: the first slot it has not looked at (absent: 0)."""
        self.browse_cursors: dict[Hashable, int] = {}
        """The same per browser (a browser is never rewound: it saw delivered entries too)."""

    def append(self, entry: Entry) -> None:
        entry.pos = len(self.slots)
        self.slots.append(entry)
        self.live += 1

    def vacate(self, pos: int) -> None:
        """The entry at ``pos`` left; compact when the holes are many."""
        self.slots[pos] = None
        self.live -= 1
        holes = len(self.slots) - self.live
        if holes > COMPACT_MIN and holes > self.live:
            self.slots, old_positions = compact(self.slots)
            self.cursors = {reader: bisect_left(old_positions, cursor)
                            for reader, cursor in self.cursors.items()}
            self.browse_cursors = {reader: bisect_left(old_positions, cursor)
                                   for reader, cursor in self.browse_cursors.items()}

    def rewind(self, pos: int) -> None:
        """An entry at ``pos`` came back: every consumer's cursor past it returns to it."""
        cursors = self.cursors
        for reader, cursor in cursors.items():
            if cursor > pos:
                cursors[reader] = pos

    def forget(self, reader: Hashable) -> None:
        self.cursors.pop(reader, None)
        self.browse_cursors.pop(reader, None)

    def __repr__(self) -> str:
        return f"<Lane priority {self.priority}: {self.live} entries>"
