"""The stream node: publishing appends to its log; each reader reads from its own position.

Reading removes nothing. A reader (a consumer link) has a position, the next offset it reads,
chosen at attach from its offset spec; with credit it walks forward, skipping (not removing) the
messages its filter set does not match, and is sent a copy of each match with
``x-stream-offset`` in its message annotations. A reader at the end waits; a publish wakes it.
A block of a segment whose summary rules out the reader's filter (what it requires of a
message, as the node matcher indexes it: :func:`~filtex_proton.matcher.decompose`) is passed
over unread, and a message that lacks the texts the filter requires is not decoded.
Outcomes change nothing in the log and nothing is redelivered (as RabbitMQ's streams: a consumer
that wants a message again attaches again from its offset). A reader whose position was dropped
by retention goes on from the oldest offset still held.

A stream keeps no lifetime (ttl and priority change nothing, as on RabbitMQ's streams), but it
does not take a message scheduled for later (``x-opt-delivery-time`` or ``-delay``): it would
deliver it at once, and the producer, told the broker offers ``DELAYED_DELIVERY``, would never
know. It is rejected with ``amqp:not-implemented``, saying why.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import ClassVar, Final, NamedTuple, Protocol

from filtex_broker.nodes.budget import MemoryBudget
from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.lifetime import now_ms, scheduled_ms
from filtex_broker.nodes.node import Durability, MessageRefusedError, Node, NodeLimits
from filtex_broker.store.log import Store
from filtex_broker.streams.annotate import with_offset
from filtex_broker.streams.durable import DurableStreamLog
from filtex_broker.streams.log import Segment, StreamLog
from filtex_broker.streams.summaries import BLOCK
from filtex_proton.matcher import (
    ALWAYS,
    Arrival,
    Condition,
    NodeMatcher,
    Verdict,
    decompose,
    text_prefilter,
    tracked_fields,
)
from filtex_proton.plugin import FilterMessage, LinkFilter, OffsetSpec

__all__ = ["MAX_TRACKED", "ReadPlan", "Reader", "Stream", "StreamFigures", "StreamSettings"]

NOT_IMPLEMENTED: Final = "amqp:not-implemented"
"""The error condition of a scheduled message a stream refuses."""
MAX_TRACKED: Final = 32
"""Fields a stream's segments summarise at most (each costs a read per message appended);
a reader's fields beyond are not summarised, and its filter then skips fewer segments."""


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

    def make(self, address: str, limits: NodeLimits, budget: MemoryBudget,
             store: Durability | None = None) -> Stream:
        """The stream at ``address``: on disk with the durable store (``--data-dir``), its
        segments read back if it has some there."""
        log = None
        if isinstance(store, Store):
            log = DurableStreamLog(address, store, self.max_bytes, self.max_age_s, budget)
        return Stream(address, limits, budget, max_bytes=self.max_bytes,
                      max_age_s=self.max_age_s, log=log)


class Reader(Hashable, Protocol):
    """A consumer of a stream, as the node sees it (hashed by identity: the stream keys what it
    knows of each reader by the reader)."""

    position: int
    credit: int
    filter: LinkFilter | None

    def deliver(self, data: bytes) -> None:
        """Send one message (the node has checked credit and the filter); uses one credit."""
        ...


@dataclass(frozen=True, slots=True)
class StreamFigures:
    """What a stream holds, as the console and the metrics show it (one reading, so that
    its numbers agree with each other)."""

    messages: int
    bytes: int
    first_offset: int
    """The oldest offset held (``next_offset`` when empty)."""
    next_offset: int
    """The offset the next message gets."""
    segments: int
    dropped_segments: int
    """Segments retention has dropped since the stream was created."""
    skipped: int
    """Messages readers passed over in blocks their summaries ruled out."""

    @property
    def last_offset(self) -> int | None:
        """The newest offset held; None when the stream holds nothing."""
        return self.next_offset - 1 if self.messages else None

    def reader_at(self, position: int) -> tuple[int, int]:
        """A reader's next offset and its lag (the offsets from there to the end) given its
        ``position``: one retention dropped goes on from the oldest offset held."""
        at = max(position, self.first_offset)
        return at, self.next_offset - at


class ReadPlan(NamedTuple):
    """How a reader's messages are chosen, worked out once when it attaches."""

    condition: Condition
    """What its filter requires of a message (:func:`decompose`): the blocks' test."""
    may_skip: bool
    """Whether a block's summary can rule its filter out (it has one)."""
    admits: Callable[[bytes, Hashable], bool]
    """Whether it takes a message (bytes, origin): a byte search for the texts its filter
    requires (:func:`text_prefilter`), then its filter."""

    @classmethod
    def of(cls, link_filter: LinkFilter | None) -> ReadPlan:
        if link_filter is None:
            return cls(ALWAYS, False, _everything)
        condition = decompose(link_filter.filter_set)
        matches = link_filter.matches
        prefilter = text_prefilter(condition)
        if prefilter is None:
            return cls(condition, True,
                       lambda data, origin: matches(FilterMessage(data, origin)))
        return cls(condition, True, lambda data, origin: prefilter(data) and matches(
            FilterMessage(data, origin)))


def _everything(data: bytes, origin: Hashable) -> bool:
    return True


class Stream(Node):
    """An append-only log read by any number of readers, each at its own offset."""

    kind: ClassVar[str] = "stream"

    def __init__(self, name: str, limits: NodeLimits, budget: MemoryBudget | None = None, *,
                 max_bytes: int, max_age_s: float | None = None,
                 log: StreamLog | None = None) -> None:
        super().__init__(name, limits)
        self.log = StreamLog(max_bytes, max_age_s, budget) if log is None else log
        """In memory, or on disk (``log``: ``filtex_broker.streams.durable``)."""
        self.log.on_commit = self.wake
        self.readers: dict[Reader, ReadPlan] = {}
        """Each reader and how its messages are chosen."""
        self.matcher: NodeMatcher[Reader] = NodeMatcher()
        """The readers' filters, indexed: who may take a message as it is published."""
        self.delivered = 0
        self.skipped = 0
        """Messages readers passed over unread, in blocks their summaries ruled out."""

    def has_room(self) -> bool:
        return True  # retention makes room: a stream never stalls its producers

    def publish(self, message: FilterMessage) -> None:
        due = scheduled_ms(message)
        if due is not None:
            raise MessageRefusedError(
                NOT_IMPLEMENTED, f"stream {self.name!r} does not schedule: the message asks to "
                f"be delivered {max(due - now_ms(), 1)} ms from now (x-opt-delivery-time or "
                "x-opt-delivery-delay); send it without one, or to a queue")
        offset = self.log.append(message.data, message.origin, message)
        if self.log.readable > offset:  # in memory: readable at once
            self._tail(message, offset)
        # (a durable log wakes the readers once the message is on disk: on_commit)

    def _tail(self, message: FilterMessage, offset: int) -> None:
        """The message just appended, to the readers with credit: those waiting at the end
        share one node-matcher pass, one decoded view and one annotated copy; the others
        catch up from their positions."""
        arrival: Arrival[Reader] | None = None
        copy: bytes | None = None
        matcher = self.matcher
        for reader in self.readers:
            if reader.credit <= 0:
                continue
            if reader.position != offset:
                self.dispatch_to(reader)
                continue
            reader.position = offset + 1
            if reader.filter is not None:
                if arrival is None:
                    arrival = matcher.arrival(message)
                if not arrival.may_match(reader) or (
                        matcher.verdict(reader, message) is not Verdict.MATCHED):
                    continue
            if copy is None:
                copy = with_offset(message.data, offset)
            reader.deliver(copy)
            self.delivered += 1

    def wake(self) -> None:
        """New messages are readable: readers with credit read them."""
        for reader in self.readers:
            if reader.credit > 0:
                self.dispatch_to(reader)

    def put_back(self, entry: Entry) -> None:
        self.log.append(entry.data, entry.origin)

    def depth(self) -> int:
        return len(self.log)

    def destroy(self) -> None:
        for reader in list(self.readers):
            self.remove_reader(reader)
        self.log.clear()

    def figures(self) -> StreamFigures:
        """The log's numbers; safe from another thread (the metrics' scrape): the segment
        list is copied once, so a segment retention drops meanwhile cannot break the read."""
        log = self.log
        next_offset = log.next_offset
        segments = list(log.segments)
        first = segments[0].first if segments else next_offset
        return StreamFigures(next_offset - first, log.size, first, next_offset, len(segments),
                             log.dropped_segments, self.skipped)

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
        """Read for ``reader`` from now on; the fields its filter pins are summarised in the
        segments started from now on (up to :data:`MAX_TRACKED` fields per stream)."""
        plan = self.readers[reader] = ReadPlan.of(reader.filter)
        self.matcher.register(reader, reader.filter)
        log = self.log
        room = MAX_TRACKED - len(log.tracked)
        new = sorted(tracked_fields(plan.condition) - log.tracked, key=repr)[:max(room, 0)]
        if new:
            log.track(new)

    def remove_reader(self, reader: Reader) -> None:
        self.readers.pop(reader, None)
        self.matcher.unregister(reader)

    def _read_segment(self, segment: Segment, position: int, stop: int, reader: Reader,
                      plan: ReadPlan) -> tuple[int, int]:
        """Read ``segment`` from offset ``position`` up to ``stop`` for the reader while it
        has credit, block by block: where it stopped and how many it sent. The messages are
        loaded (a durable log may read them from disk) only for a block the summary admits."""
        sent = 0
        loaded: Segment | None = None
        first = segment.first
        while position < stop and reader.credit > 0:
            block_end = min(stop, first + ((position - first) // BLOCK + 1) * BLOCK)
            if plan.may_skip and not segment.summary.may_match(position - first,
                                                               plan.condition):
                self.skipped += block_end - position
                position = block_end
                continue
            if loaded is None:
                loaded = self.log.loaded(segment)
            held = first + len(loaded.datas)
            if held <= position:  # unreadable on disk: passed over
                return stop, sent
            position, taken = _read_block(loaded, position, min(block_end, held), reader,
                                          plan.admits)
            sent += taken
        return position, sent

    def dispatch_to(self, reader: Reader) -> int:
        """Send the reader what it matches from its position while it has credit; returns how
        many were sent. At the end it waits for the next publish."""
        log = self.log
        segments = log.segments
        position = max(reader.position, log.first_offset)
        index = log.segment_index(position)
        plan = self.readers.get(reader) or ReadPlan.of(reader.filter)
        end = log.readable  # (a durable log: what is on disk)
        sent = 0
        while reader.credit > 0 and index < len(segments) and position < end:
            segment = segments[index]
            index += 1
            position = max(position, segment.first)  # (offsets lost with an unreadable file)
            position, taken = self._read_segment(segment, position, min(segment.next, end),
                                                 reader, plan)
            sent += taken
        reader.position = position
        self.delivered += sent
        return sent


def _read_block(segment: Segment, position: int, end: int, reader: Reader,
                admits: Callable[[bytes, Hashable], bool]) -> tuple[int, int]:
    """Deliver what ``admits`` from offset ``position`` up to ``end`` while the reader has
    credit: where it stopped and how many it sent."""
    first, datas, origins = segment.first, segment.datas, segment.origins
    at, stop = position - first, end - first
    sent = 0
    while at < stop:
        data = datas[at]
        at += 1
        if admits(data, origins[at - 1]):
            reader.deliver(with_offset(data, first + at - 1))
            sent += 1
            if reader.credit <= 0:
                break
    return first + at, sent
