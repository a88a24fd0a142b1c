"""The stream node: publishing appends to its log; each reader reads from its own position.

Reading removes nothing. A reader (a consumer link) has a position, the next offset it reads,
chosen at attach from its offset spec; with credit it walks forward, skipping (not removing) the
messages its filter set does not match, and is sent a copy of each match with
``x-stream-offset`` in its message annotations. A reader at the end waits; a publish wakes it.
Outcomes change nothing in the log and nothing is redelivered (as RabbitMQ's streams: a consumer
that wants a message again attaches again from its offset). A reader whose position was dropped
by retention goes on from the oldest offset still held.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import ClassVar, Protocol

from filtex_broker.nodes.budget import MemoryBudget
from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.node import Node, NodeLimits
from filtex_broker.streams.annotate import with_offset
from filtex_broker.streams.log import StreamLog
from filtex_proton.plugin import FilterMessage, LinkFilter, OffsetSpec

__all__ = ["Reader", "Stream", "StreamSettings"]


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """Which addresses are streams (``--stream``) and how much each keeps; the registry asks it
    of every address it creates a node for."""

    patterns: tuple[str, ...]
    """Globs (``fnmatch``, case-sensitive, as ``--archive-node``)."""
    max_bytes: int
    max_age_s: float | None = None

    def wants(self, address: str) -> bool:
        return any(fnmatch.fnmatchcase(address, pattern) for pattern in self.patterns)

    def make(self, address: str, limits: NodeLimits, budget: MemoryBudget) -> Stream:
        return Stream(address, limits, budget, max_bytes=self.max_bytes,
                      max_age_s=self.max_age_s)


class Reader(Protocol):
    """A consumer of a stream, as the node sees it."""

    position: int
    credit: int
    filter: LinkFilter | None

    def deliver(self, data: bytes) -> None:
        """Send one message (the node has checked credit and the filter); uses one credit."""
        ...


class Stream(Node):
    """An append-only log read by any number of readers, each at its own offset."""

    kind: ClassVar[str] = "stream"

    def __init__(self, name: str, limits: NodeLimits, budget: MemoryBudget | None = None, *,
                 max_bytes: int, max_age_s: float | None = None) -> None:
        super().__init__(name, limits)
        self.log = StreamLog(max_bytes, max_age_s, budget)
        self.readers: list[Reader] = []
        self.delivered = 0

    def has_room(self) -> bool:
        return True  # retention makes room: a stream never stalls its producers

    def publish(self, message: FilterMessage) -> None:
        self.log.append(message.data, message.origin)
        for reader in self.readers:
            if reader.credit > 0:
                self.dispatch_to(reader)

    def put_back(self, entry: Entry) -> None:
        self.log.append(entry.data, entry.origin)

    def depth(self) -> int:
        return len(self.log)

    def destroy(self) -> None:
        self.readers.clear()
        self.log.clear()

    # -- readers -------------------------------------------------------------------------

    def start(self, spec: OffsetSpec | None, now_ms: int | None = None) -> int:
        """The first offset a reader attaching now with ``spec`` reads (``next`` if None)."""
        log = self.log
        if spec is None or spec.kind == "next":
            return log.next_offset
        if spec.kind == "first":
            return log.first_offset
        if spec.kind == "last":
            return max(log.first_offset, log.next_offset - 1)
        assert spec.value is not None
        if spec.kind == "offset":
            return min(max(spec.value, log.first_offset), log.next_offset)
        if spec.kind == "timestamp":
            return log.offset_at(spec.value)
        now = log.clock() if now_ms is None else now_ms  # an interval: back from now
        return log.offset_at(now - spec.value * 1000)

    def add_reader(self, reader: Reader) -> None:
        self.readers.append(reader)

    def remove_reader(self, reader: Reader) -> None:
        if reader in self.readers:
            self.readers.remove(reader)

    def dispatch_to(self, reader: Reader) -> int:
        """Send the reader what it matches from its position while it has credit; returns how
        many were sent. At the end it waits for the next publish."""
        log = self.log
        sent = 0
        position = max(reader.position, log.first_offset)
        link_filter = reader.filter
        while reader.credit > 0 and position < log.next_offset:
            found = log.read(position)
            assert found is not None
            data, origin = found
            if link_filter is None or link_filter.matches(FilterMessage(data, origin)):
                reader.deliver(with_offset(data, position))
                sent += 1
            position += 1
        reader.position = position
        self.delivered += sent
        return sent
