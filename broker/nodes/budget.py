"""The broker-wide memory budget (``--max-memory``): what every node's messages cost, together.

Each node is bounded on its own (:class:`filtex_broker.nodes.node.NodeLimits`), but nodes are made
on first use and nothing else bounds their sum. The budget does: a queue charges it for each entry
it stores and credits it when the entry leaves, and while the total is at or above the limit no
producer link, on any node, gets more credit (:class:`~filtex_broker.nodes.node.RoomToWait`,
as for a full node). Consumers, settlement and management go on; when the total falls to the
low mark (:data:`LOW_MARK` of the limit) every stalled producer is topped up again. Nothing is
refused or dropped: the limit throttles. Blocking and unblocking are logged once each and counted.

A message costs more than its bytes: :func:`entry_cost` is what an entry really costs
(docs/BROKER.md, "byte accounting"; tests/broker/nodes/test_memory.py measures it with
tracemalloc and fails if the model falls behind): :data:`PER_ENTRY` for the entry and its
slot, the ``bytes`` object (:func:`bytes_cost`) divided among the entries that share it (a
topic's subscriptions), and :data:`PER_JOURNALED` more in a durable node (``--data-dir``).
The durable store's write buffers are charged while they wait for the disk
(``filtex_broker.store.log.Store``). What producers hold in flight (their credit: at most one window
each) arrives after the block, so the total may pass the limit by that.
"""

from __future__ import annotations

import logging
from typing import Final

from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.lifetime import COMMON
from filtex_broker.nodes.node import RoomToWait

__all__ = ["LOW_MARK", "PER_ENTRY", "PER_JOURNALED", "PER_MOMENT", "MemoryBudget", "bytes_cost",
           "entry_cost"]

log = logging.getLogger("filtex.broker")

PER_ENTRY: Final = 176
"""Bytes one queued entry costs besides its message's bytes (CPython 3.11, 64-bit): the
:class:`~filtex_broker.nodes.entry.Entry` (10 slots: 112, as allocated), its position in the
queue (an int: 32), the queue's slot (8, and the list's spare room); 141 by tracemalloc, 176 in
resident size with the allocator's rounding and arenas (``bench/bench_memory.py``). The node
matcher's answer an entry keeps (its arrival) is shared by the entries with the same candidates:
nothing per entry."""
PER_JOURNALED: Final = 128
"""Bytes more in a durable node: the journal's store id (an int: 32) and its entry in the
journal's index (a dict entry and its share of the table); 124 to 146 in resident size."""
PER_MOMENT: Final = 180
"""Bytes more for each moment of a message that expires or waits for a scheduled time (divided
among the entries sharing it, as its bytes are): its item in the deadline heap (a 4-tuple and
two ints: about 110) and its share of its lifetime (a 3-slot object and its ints: about 70);
tracemalloc: 186 for a ttl, 368 for a ttl and a schedule. A message with only a priority shares
one lifetime per priority: nothing more."""
LOW_MARK: Final = 0.9
"""Producers get credit again when the accounted total falls to this share of the limit."""


def bytes_cost(size: int) -> int:
    """What a ``bytes`` object of ``size`` bytes costs: 33 bytes of header and terminator, the
    allocator's 16-byte rounding (pymalloc up to 512 bytes; glibc malloc's 8-byte chunk header
    above)."""
    request = size + 33
    return (request + 15) & ~15 if request <= 512 else (request + 23) & ~15


def entry_cost(entry: Entry, journaled: bool) -> int:
    """What holding ``entry`` costs the broker, in bytes (see the module docstring)."""
    cost = (PER_ENTRY + (PER_JOURNALED if journaled else 0)
            + bytes_cost(len(entry.data)) // entry.shares)
    lifetime = entry.lifetime
    if lifetime is not COMMON:
        moments = (lifetime.expires_ms is not None) + (lifetime.visible_ms is not None)
        cost += PER_MOMENT * moments // entry.shares
    return cost


class MemoryBudget(RoomToWait):
    """The bytes every node's messages cost, the limit, and the producers waiting for room."""

    def __init__(self, limit: int | None = None) -> None:
        super().__init__()
        self.limit = limit
        """None: unlimited (accounted, never blocks)."""
        self.low = 0 if limit is None else int(limit * LOW_MARK)
        self.accounted = 0
        self.blocked = False
        self.blockings = 0
        """Times producers were blocked (``--metrics``)."""

    def has_room(self) -> bool:
        return not self.blocked

    def charge(self, cost: int) -> None:
        """A message is stored (the hot path: an add and a compare)."""
        self.accounted += cost
        if not self.blocked and self.limit is not None and self.accounted >= self.limit:
            self.blocked = True
            self.blockings += 1
            log.warning("event=memory-blocked accounted=%d limit=%d: no producer gets credit "
                        "until memory falls to %d bytes", self.accounted, self.limit, self.low)

    def credit(self, cost: int) -> None:
        """A message is gone (settled, dropped with its node)."""
        self.accounted -= cost
        if self.blocked and self.accounted <= self.low:
            self.blocked = False
            log.warning("event=memory-unblocked accounted=%d limit=%d: %d producer link(s) "
                        "get credit again", self.accounted, self.limit, len(self.stalled))
            self.room_available()
