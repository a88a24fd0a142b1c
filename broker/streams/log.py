"""A stream's log in memory: segments of messages by offset, retention by bytes and by age.

Each segment holds consecutive offsets (its first offset, the arrival time in milliseconds and
the bytes of each message, and where it came from for no-local), its byte count, its first and
last arrival time and a summary of the fields its stream tracks (a
:class:`~filtex_proton.matcher.BatchSummary`: the values readers' filters pin, and
``x-stream-filter-value``), which lets a reader skip a segment its filter cannot match.

Retention drops whole segments, oldest first: by bytes (``max_bytes``), by age
(``max_age_s``) and, since a producer must never be stalled by a stream's size, whenever the
broker's memory budget is blocked (the stream gives back its oldest segments until the budget
has room or only the segment being written is left). Every message is charged to the budget when
it is appended and credited when its segment is dropped.

With ``--data-dir`` the log is ``filtex_broker.streams.durable.DurableStreamLog``, which keeps the
same segments in files and overrides the hooks here (a segment started, sealed, a message
written, memory short, a segment's messages wanted).
"""

from __future__ import annotations

import bisect
import time
from array import array
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Final

from filtex_broker.nodes.budget import MemoryBudget, bytes_cost
from filtex_broker.streams.summaries import SegmentSummary
from filtex_proton.matcher import STREAM_FILTER_FIELD, FieldRef
from filtex_proton.plugin import FilterMessage

__all__ = ["PER_RECORD", "Segment", "StreamLog", "segment_bytes"]

PER_RECORD: Final = 32
"""Bytes one message costs in a segment besides its ``bytes`` object: two list slots (16), its
arrival time (8, in an array), the lists' spare room and its share of the block summaries;
measured with tracemalloc (about 28, rounded up; tests/broker/streams/test_stream_memory.py
fails if the model falls behind)."""


def segment_bytes(max_bytes: int) -> int:
    """How many bytes a segment takes before the next one starts: an eighth of the stream's
    bound (retention drops at most that much at once), from 64 KiB to 8 MiB."""
    return max(64 * 1024, min(8 * 1024 * 1024, max_bytes // 8))


@dataclass(slots=True)
class Segment:
    """Consecutive messages from ``first`` on: its index (first offset, count, arrival times,
    size, summary) and, while held in memory, its messages."""

    first: int
    times: array[int] = field(default_factory=lambda: array("q"))
    """Arrival times in ms, 8 bytes each (an array: no int object per message)."""
    datas: list[bytes] = field(default_factory=list)
    origins: list[Hashable | None] = field(default_factory=list)
    size: int = 0
    """The message bytes it holds."""
    cost: int = 0
    """What it is charged to the memory budget (0 while its messages are on disk only)."""
    summary: SegmentSummary = field(default_factory=SegmentSummary)
    """The tracked fields' values in its messages, block by block (the fields tracked when
    it started)."""
    count: int = 0
    first_time: int = 0
    """Arrival of its first message (ms; 0 while it is empty)."""
    last_time: int = 0

    @property
    def next(self) -> int:
        return self.first + self.count


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class StreamLog:
    """Append-only; read by offset; the oldest segments dropped by retention."""

    def __init__(self, max_bytes: int, max_age_s: float | None = None,
                 budget: MemoryBudget | None = None,
                 clock: Callable[[], int] = _now_ms) -> None:
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.budget = budget if budget is not None else MemoryBudget()
        self.clock = clock
        self.segment_bytes = segment_bytes(max_bytes)
        self.segments: list[Segment] = []
        self.size = 0
        """The message bytes held."""
        self.next_offset = 0
        """The offset the next message gets."""
        self.dropped_segments = 0
        self.on_commit: Callable[[], None] | None = None
        """Told when :attr:`readable` moves on after the append (a durable log: once on disk;
        the node wakes its readers)."""
        self.tracked: frozenset[FieldRef] = frozenset({STREAM_FILTER_FIELD})
        """The fields new segments summarise: ``x-stream-filter-value`` and every field a
        reader's filter has pinned (:meth:`track`)."""

    def track(self, refs: Iterable[FieldRef]) -> None:
        """Summarise these fields too, from the next segment on (a segment's summary has the
        fields it started with: one without a field rules nothing out on it)."""
        self.tracked = self.tracked | frozenset(refs)

    @property
    def first_offset(self) -> int:
        """The oldest offset held (``next_offset`` when empty)."""
        return self.segments[0].first if self.segments else self.next_offset

    @property
    def readable(self) -> int:
        """Offsets below this may be given to readers (in memory: all, at once)."""
        return self.next_offset

    def __len__(self) -> int:
        return self.next_offset - self.first_offset

    # -- writing -------------------------------------------------------------------

    def append(self, data: bytes, origin: Hashable | None = None,
               message: FilterMessage | None = None) -> int:
        """Store one message (``message``: the same, with the view the broker already read);
        returns its offset. Never refuses: retention makes room."""
        now = self.clock()
        segments = self.segments
        segment = segments[-1] if segments else None
        if segment is None or segment.size >= self.segment_bytes:
            if segment is not None:
                self._seal(segment)
            segment = self._start()
        elif now < segment.last_time:
            now = segment.last_time  # arrival times never go back (a clock step)
        offset = self.next_offset
        cost = PER_RECORD + bytes_cost(len(data))
        segment.times.append(now)
        segment.datas.append(data)
        segment.origins.append(origin)
        segment.summary.add(message or FilterMessage(data))
        segment.size += len(data)
        segment.cost += cost
        if not segment.count:
            segment.first_time = now
        segment.count += 1
        segment.last_time = now
        self.size += len(data)
        self.next_offset = offset + 1
        self._written(offset, now, data)
        self.budget.charge(cost)
        self.retain(now)
        return offset

    def _start(self) -> Segment:
        """A new segment from the next offset on, the one written from now on."""
        segment = Segment(self.next_offset, summary=SegmentSummary(self.tracked))
        self.segments.append(segment)
        return segment

    def _seal(self, segment: Segment) -> None:
        """``segment`` is complete: the next message starts a new one (a durable log writes
        the summary)."""

    def _written(self, offset: int, at_ms: int, data: bytes) -> None:
        """A message was appended to the last segment (a durable log writes its record)."""

    def _short_of_memory(self) -> bool:
        """Whether to drop old segments for the memory budget (a durable log drops the bytes it
        caches instead, and keeps the segments)."""
        return self.budget.blocked

    def loaded(self, segment: Segment) -> Segment:
        """``segment`` with its messages in memory (a durable log may read them from disk)."""
        return segment

    def retain(self, now: int | None = None) -> int:
        """Drop the oldest segments beyond the bounds; returns how many were dropped."""
        dropped = 0
        segments = self.segments
        while len(segments) > 1 and (self.size > self.max_bytes or self._short_of_memory()):
            self._drop()
            dropped += 1
        if self.max_age_s is not None and segments:
            cutoff = (self.clock() if now is None else now) - int(self.max_age_s * 1000)
            while segments and segments[0].count and segments[0].last_time < cutoff:
                self._drop()
                dropped += 1
        return dropped

    def _drop(self) -> Segment:
        segment = self.segments.pop(0)
        self.size -= segment.size
        self.dropped_segments += 1
        self.budget.credit(segment.cost)
        return segment

    def clear(self) -> None:
        """Drop everything (the node is deleted): the budget gets it all back."""
        while self.segments:
            self._drop()

    # -- reading -------------------------------------------------------------------

    def segment_index(self, offset: int) -> int:
        """The index in :attr:`segments` of the segment holding ``offset`` (``len(segments)``
        at or past the end; 0 before the oldest offset held)."""
        segments = self.segments
        if not segments or offset < segments[0].first:
            return 0
        if offset >= self.next_offset:
            return len(segments)
        if offset >= segments[-1].first:
            return len(segments) - 1
        return bisect.bisect_right(segments, offset, key=lambda s: s.first) - 1

    def _segment_of(self, offset: int) -> Segment | None:
        segments = self.segments
        if not segments or offset < segments[0].first or offset >= self.next_offset:
            return None
        return segments[self.segment_index(offset)]

    def read(self, offset: int) -> tuple[bytes, Hashable | None] | None:
        """The message at ``offset`` and its origin; None if it is not held."""
        segment = self._segment_of(offset)
        if segment is None:
            return None
        segment = self.loaded(segment)
        at = offset - segment.first
        if at >= len(segment.datas):
            return None  # unreadable on disk
        return segment.datas[at], segment.origins[at]

    def time_of(self, offset: int) -> int | None:
        segment = self._segment_of(offset)
        return None if segment is None else self.loaded(segment).times[offset - segment.first]

    def offset_at(self, at_ms: int) -> int:
        """The first offset that arrived at ``at_ms`` or later (``next_offset`` if none)."""
        for segment in self.segments:
            if segment.count and segment.last_time >= at_ms:
                return segment.first + bisect.bisect_left(self.loaded(segment).times, at_ms)
        return self.next_offset
