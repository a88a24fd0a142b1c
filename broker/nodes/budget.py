"""The broker-wide memory budget (``--max-memory``): what every node's messages cost, together.

Each node is bounded on its own (:class:`broker.nodes.node.NodeLimits`), but nodes are made on
first use and nothing else bounds their sum. The budget does: a queue charges it for each entry
it stores and credits it when the entry leaves, and while the total is at or above the limit no
producer link, on any node, gets more credit (:class:`~broker.nodes.node.RoomToWait`, as for a
full node). Consumers, settlement and management go on; when the total falls to the low mark
(:data:`LOW_MARK` of the limit) every stalled producer is topped up again. Nothing is refused or
dropped: the limit throttles. Blocking and unblocking are logged once each and counted.

A message costs more than its bytes: the entry, the plugin's message and view, and the sections
the door check decoded (header, properties, application properties: the body is never decoded).
:func:`message_cost` is that, measured with tracemalloc (tests/broker/test_memory.py measures it
again and fails if the model falls behind): :data:`PER_MESSAGE` plus the bytes, plus
:data:`PER_DECODED_BYTE` for every byte outside the body. What producers hold in flight (their
credit: at most one window each) arrives after the block, so the total may pass the limit by that.
"""

from __future__ import annotations

import logging
from typing import Final

from broker.nodes.node import RoomToWait
from filtex_proton.plugin import FilterMessage

__all__ = ["LOW_MARK", "PER_DECODED_BYTE", "PER_MESSAGE", "MemoryBudget", "message_cost"]

log = logging.getLogger("filtex.broker")

PER_MESSAGE: Final = 1400
"""Bytes one stored message costs besides its own bytes (CPython 3.11, 64-bit: the ``bytes``
object's header, the Entry, the FilterMessage and its view with the decoded-section cache, the
queue slot), measured with tracemalloc on a message with a null body and no properties."""
PER_DECODED_BYTE: Final = 11
"""Bytes per encoded byte outside the body: what the door check's decoded header, properties and
application properties (Python dicts, strings, ints) cost, measured the same way."""
LOW_MARK: Final = 0.9
"""Producers get credit again when the accounted total falls to this share of the limit."""


def message_cost(message: FilterMessage) -> int:
    """What holding ``message`` once costs the broker, in bytes (see the module docstring)."""
    data = message.data
    view = message.view  # already made by the door check; a cheap scan otherwise
    return PER_MESSAGE + len(data) + PER_DECODED_BYTE * (
        len(data) - (view.body_end - view.body_offset))


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
