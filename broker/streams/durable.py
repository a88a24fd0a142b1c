"""A stream's log on disk (``--stream`` with ``--data-dir``): one file per segment, a bounded cache.

Each segment is a file in the stream's folder (``segment_file``: the records), written through
the durable store's writer thread and group commit (``filtex_broker.store.log.Store``), so a
producer's delivery is accepted once its record is on disk, as on a durable queue. Readers are
given only what is on disk (``readable``): an offset a reader saw is never
renumbered by a crash.

Memory holds every segment's index (first offset, count, first and last arrival, size, summary)
and the messages of the segment being written plus at most :data:`CACHED_SEGMENTS` sealed ones
(the most recently read or sealed); a reader of another segment reads its file whole. A sealed
segment stays in memory until its file is on disk (a failed write is rewritten from memory).
Only what is held is charged to the memory budget; when the budget is blocked the cache is given
back, never the segments. Retention deletes whole files, oldest first.

At start-up (:meth:`DurableStreamLog.recover`) the folder is read back: a sealed segment's index
from its last record, the last segment record by record up to a torn tail (cut off and kept
beside it, as a queue log's); a segment whose summary is missing or unreadable has it rebuilt
from its messages; a file that cannot be read at all is renamed aside (``.bad``) with a warning.
"""

from __future__ import annotations

import functools
import logging
from array import array
from collections.abc import Hashable
from pathlib import Path
from typing import Final

from filtex_broker.nodes.budget import MemoryBudget, bytes_cost
from filtex_broker.store.log import LogFile, Store
from filtex_broker.store.records import parse, read_log
from filtex_broker.streams import segment_file
from filtex_broker.streams.log import PER_RECORD, Segment, StreamLog
from filtex_broker.streams.summaries import SegmentSummary
from filtex_proton.matcher import STREAM_FILTER_FIELD, FieldRef
from filtex_proton.plugin import FilterMessage

__all__ = ["CACHED_SEGMENTS", "DurableStreamLog", "SegmentFile"]

log = logging.getLogger("filtex.broker")

CACHED_SEGMENTS: Final = 4
"""Sealed segments whose messages stay in memory (besides the one being written): at most
4 × 8 MiB per stream with the largest segments."""

Runs = list[tuple[int, Hashable | None]]
"""A segment's origins while its messages are on disk only: (index, origin) where each run of
one origin starts (no-local still works after the messages are read back)."""


class SegmentFile(LogFile):
    """One segment's file as the store's writer sees it."""

    __slots__ = ("owner", "runs", "saved", "sealed", "segment")

    def __init__(self, owner: DurableStreamLog, segment: Segment) -> None:
        super().__init__(owner.store, owner.directory / segment_file.file_name(segment.first))
        self.owner = owner
        self.segment = segment
        self.sealed = False
        """Its summary record is written (nothing more is)."""
        self.saved = False
        """Sealed and on disk: its messages may leave memory."""
        self.runs: Runs = []

    def image(self) -> bytes | None:
        """The whole file, from memory (None: its messages are not in memory)."""
        segment = self.segment
        if len(segment.datas) != segment.count:
            return None
        parts = [segment_file.header(segment.first)]
        parts.extend(segment_file.message(segment.first + at, when, data)
                     for at, (when, data) in enumerate(zip(segment.times, segment.datas,
                                                           strict=True)))
        if self.sealed:
            parts.append(_summary_record(segment))
        return b"".join(parts)

    def rewrite(self) -> None:
        image = self.image()
        if image is None:
            log.error("stream %r: %s cannot be rewritten (its messages are not in memory)",
                      self.owner.name, self.path.name)
            return
        self.store.replace_image(self, image)


class DurableStreamLog(StreamLog):
    """A :class:`StreamLog` whose segments are files; memory holds their index and a cache."""

    def __init__(self, name: str, store: Store, max_bytes: int, max_age_s: float | None = None,
                 budget: MemoryBudget | None = None) -> None:
        super().__init__(max_bytes, max_age_s, budget)
        self.name = name
        self.store = store
        self.directory = store.stream_directory(name)
        self.files: dict[int, SegmentFile] = {}
        """Each segment's file, by its first offset."""
        self.cache: dict[int, None] = {}
        """The sealed segments holding their messages, least recently used first."""
        self.committed = 0
        """Offsets below this are on disk."""
        self.loads = 0
        """Segments read back from disk for a reader."""
        self._committing = False
        self.recover()

    # -- writing ---------------------------------------------------------------------------

    def _start(self) -> Segment:
        segment = super()._start()
        file = SegmentFile(self, segment)
        self.files[segment.first] = file
        self.store.append(file, segment_file.header(segment.first))
        return segment

    def _written(self, offset: int, at_ms: int, data: bytes) -> None:
        file = self.files[self.segments[-1].first]
        self.store.append(file, segment_file.message(offset, at_ms, data))
        if not self._committing:
            self._await_commit()

    def _seal(self, segment: Segment) -> None:
        file = self.files[segment.first]
        if file.sealed:
            return
        file.sealed = True
        self.store.append(file, _summary_record(segment))
        self.cache[segment.first] = None
        self.store.after_commit(functools.partial(self._saved, file))

    def _saved(self, file: SegmentFile, ok: bool) -> None:
        if file.dropped:
            return
        if not ok:  # the store rewrites the file from memory: wait for that write
            self.store.after_commit(functools.partial(self._saved, file))
            return
        file.saved = True
        self._trim()

    def _await_commit(self) -> None:
        self._committing = True
        self.store.after_commit(functools.partial(self._committed, self.next_offset))

    def _committed(self, upto: int, ok: bool) -> None:
        self._committing = False
        if ok and upto > self.committed:
            self.committed = upto
            if self.on_commit is not None:
                self.on_commit()
        if self.next_offset > self.committed and not self._committing:
            self._await_commit()

    # -- memory and retention ----------------------------------------------------------------

    def _short_of_memory(self) -> bool:
        if self.budget.blocked:
            for first in list(self.cache):
                self._evict(first)
        return False  # the segments are on disk: memory is no reason to drop them

    def retain(self, now: int | None = None) -> int:
        dropped = super().retain(now)
        if not self.segments:
            self._start()  # an empty segment file keeps where the offsets go on
        return dropped

    def _drop(self) -> Segment:
        segment = super()._drop()
        self.cache.pop(segment.first, None)
        file = self.files.pop(segment.first)
        file.dropped = True
        self.store.drop(file)
        return segment

    def _trim(self) -> None:
        """Evict the least recently used sealed segments beyond :data:`CACHED_SEGMENTS`."""
        excess = len(self.cache) - CACHED_SEGMENTS
        for first in list(self.cache):
            if excess <= 0:
                break
            if self._evict(first):
                excess -= 1

    def _evict(self, first: int) -> bool:
        file = self.files[first]
        if not file.saved:
            return False  # not on disk yet: a failed write is rewritten from memory
        segment = file.segment
        file.runs = _runs(segment.origins)
        segment.times, segment.datas, segment.origins = array("q"), [], []
        self.budget.credit(segment.cost)
        segment.cost = 0
        del self.cache[first]
        return True

    # -- reading ---------------------------------------------------------------------------------

    @property
    def readable(self) -> int:
        return self.committed

    def loaded(self, segment: Segment) -> Segment:
        first = segment.first
        if len(segment.datas) == segment.count:
            if first in self.cache:
                self.cache[first] = self.cache.pop(first)  # the most recently used
            return segment
        file = self.files[first]
        try:
            contents = segment_file.read(parse(file.path.read_bytes())[0])
        except (OSError, ValueError) as exc:
            log.error("stream %r: cannot read %s: %s", self.name, file.path.name, exc)
            return segment
        if contents.next != segment.next:
            log.error("stream %r: %s holds offsets %d to %d, not to %d", self.name,
                      file.path.name, first, contents.next, segment.next)
        segment.times, segment.datas = contents.times, contents.datas
        segment.origins = _expand(file.runs, len(contents.datas))
        segment.cost = sum(PER_RECORD + bytes_cost(len(data)) for data in contents.datas)
        self.budget.charge(segment.cost)
        self.cache[first] = None
        self.loads += 1
        self._trim()
        return segment

    # -- start-up ----------------------------------------------------------------------------

    def recover(self) -> None:
        """Read the stream's folder back (see the module docstring)."""
        for leftover in self.directory.glob("*.compact"):  # a rewrite cut short by a crash
            leftover.unlink()
        paths = sorted(p for p in self.directory.glob("*" + segment_file.SUFFIX)
                       if segment_file.first_of(p) is not None)
        fields = self.tracked
        floor = 0
        torn = False
        for number, path in enumerate(paths):
            first = segment_file.first_of(path)
            assert first is not None
            if self.segments and first != self.next_offset:
                if torn:  # written in the batch the crash cut: never accepted, offsets reused
                    _set_aside(self.name, path, "written after a torn record")
                    continue
                log.warning("stream %r: offsets %d to %d are missing", self.name,
                            self.next_offset, first - 1)
            floor = max(floor, first)  # (an unreadable file's offsets are not reused)
            recovered = self._recover_segment(path, first, number == len(paths) - 1, fields)
            if recovered is None:
                continue
            segment, torn = recovered
            fields = segment.summary.refs
            self.segments.append(segment)
            self.size += segment.size
            self.next_offset = segment.next
        self.next_offset = self.committed = max(self.next_offset, floor)
        recent = [s.summary.refs for s in self.segments[-2:]]
        self.tracked = frozenset({STREAM_FILTER_FIELD}).union(*recent)
        if self.segments:
            log.info("stream %r: recovered %d segment(s), offsets %d to %d", self.name,
                     len(self.segments), self.first_offset, self.next_offset - 1)
        last = self.segments[-1] if self.segments else None
        if last is None:
            if self.next_offset:
                self._start()  # an empty segment keeps where the offsets go on
        elif self.files[last.first].sealed or last.next != self.next_offset:
            self._seal(last)  # (an unreadable file after it: its offsets are not reused)
            self._start()

    def _recover_segment(self, path: Path, first: int, last: bool,
                         fields: frozenset[FieldRef]) -> tuple[Segment, bool] | None:
        """A segment from its file, and whether its tail was torn (None: set aside)."""
        try:
            index = None if last else segment_file.tail(path)
        except OSError:
            index = None
        if index is not None and index.next >= first:
            segment = Segment(first, size=index.size, summary=index.summary,
                              count=index.next - first, first_time=index.first_time,
                              last_time=index.last_time)
            file = SegmentFile(self, segment)
            file.sealed = file.saved = True
            self.files[first] = file
            return segment, False
        try:
            size = path.stat().st_size
            records, intact = read_log(path)
            contents = segment_file.read(records)
        except (OSError, ValueError) as exc:
            _set_aside(self.name, path, str(exc))
            return None
        datas, times = contents.datas, contents.times
        sealed = contents.sealed
        if sealed is not None:
            summary = sealed.summary
        else:
            summary = SegmentSummary(fields)
            for data in datas:
                summary.add(FilterMessage(data))
        segment = Segment(first, times, datas, [None] * len(datas),
                          size=sum(len(data) for data in datas), summary=summary,
                          count=len(datas), first_time=times[0] if times else 0,
                          last_time=times[-1] if times else 0)
        segment.cost = sum(PER_RECORD + bytes_cost(len(data)) for data in datas)
        self.budget.charge(segment.cost)
        file = SegmentFile(self, segment)
        self.files[first] = file
        if len(records) != len(datas) + 1 + (sealed is not None):  # records out of place
            file.rewrite()
        if sealed is not None:
            file.sealed = True
            self.cache[first] = None
            self.store.after_commit(functools.partial(self._saved, file))
        elif not last or contents.bad_summary:
            self._seal(segment)  # sealed with the summary it lacked
        return segment, intact < size


def _summary_record(segment: Segment) -> bytes:
    return segment_file.summary(segment.next, segment.first_time, segment.last_time,
                                segment.size, segment.summary)


def _set_aside(name: str, path: Path, reason: str) -> None:
    aside = path.with_suffix(".bad")
    log.warning("stream %r: %s set aside as %s: %s", name, path.name, aside.name, reason)
    try:
        path.rename(aside)
    except OSError as exc:
        log.error("stream %r: cannot rename %s: %s", name, path.name, exc)


def _runs(origins: list[Hashable | None]) -> Runs:
    runs: Runs = []
    previous: Hashable | None = None
    for at, origin in enumerate(origins):
        if origin is not previous:
            runs.append((at, origin))
            previous = origin
    return runs


def _expand(runs: Runs, count: int) -> list[Hashable | None]:
    origins: list[Hashable | None] = [None] * count
    if not runs:
        return origins
    for (start, origin), (end, _) in zip(runs, [*runs[1:], (count, None)], strict=True):
        stop = min(end, count)
        if origin is not None and start < stop:
            origins[start:stop] = [origin] * (stop - start)
    return origins
