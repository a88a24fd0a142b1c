"""``--archive``: what nodes accept goes to the Parquet archive, built in a writer process.

Building a row costs tens of microseconds of Python per message. On a thread
of the broker's process that work held the interpreter lock the reactor
needs, and the broker ran at the archive's pace (docs/PERFORMANCE.md), so the
rows are built and written by a writer process (:mod:`filtex_broker.archive.child`).
The reactor only appends ``(address, bytes, arrival)`` to a queue; a feeder
thread sends the queue in batches down a pipe, so the reactor never waits
for the pipe either.

Flow control, not loss: a producer whose messages would be archived gets no
more credit while ``max_pending_bytes`` or more are pending (offered, and not
yet turned into rows by the writer process), and is topped up again once that
is down to half (woken through the broker's waker pipe). What can be pending
beyond the bound is what was already granted as credit.

The broker keeps every batch until the writer process reports it *written*
(in segment files, or lost to a write error, logged and counted). If the
process dies, the broker logs it, starts a new one and sends those batches
again: nothing that reached the archive is lost to a crash of the writer, and
a batch that was partly written before the crash is archived partly twice
(at least once; docs/ARCHIVE.md). Rows are lost only when the disk refuses
them (full, no permission): the broker goes on.
"""

from __future__ import annotations

import collections
import fnmatch
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from filtex_broker.archive.process import ArchiveOpenError, WriterProcess
from filtex_broker.archive.wire import BATCH, CLOSE, Item, Progress, encode_batch
from filtex_broker.log_rate import due
from filtex_broker.nodes.node import RoomToWait

if TYPE_CHECKING:
    from filtex_broker.nodes.node import Stalled

__all__ = ["ArchiveOpenError", "Archiver", "ArchiverStats"]

log = logging.getLogger("filtex.broker.archive")

BATCH_MESSAGES: Final = 512
"""Messages per frame to the writer process (at most)."""
BATCH_BYTES: Final = 1 << 20
"""Message bytes per frame (at most, unless one message is larger)."""
RETAIN_BYTES: Final = 64 * 2**20
"""Message bytes kept for a resend (appended, not yet written) before the writer process
writes everything it buffers, so that the broker's copy stays bounded."""
_IDLE_WAIT: Final = 0.5
"""Seconds the feeder sleeps when idle before looking again (it is woken sooner)."""
_GATHER: Final = 0.002
"""Seconds the feeder lets a queue it was woken for fill, so that frames carry batches."""
_RESTART_DELAY: Final = (0.1, 5.0)
"""First and longest pause before starting a writer process again (doubled per failure)."""
_CLOSE_ATTEMPTS: Final = 3
"""Writer processes tried while closing before what is unwritten is given up (and logged)."""
_CLOSE_WAIT: Final = 300.0
"""Seconds one writer process may take to write and close the archive."""


@dataclass(slots=True)
class ArchiverStats:
    """What the archive did, for the log and the metrics (all writer processes together)."""

    offered: int = 0
    """Messages handed over by the reactor."""
    appended: int = 0
    """Messages the writer process turned into rows (once each, even if sent again)."""
    written: int = 0
    """Rows written to segment files (a batch sent again after a crash may count twice)."""
    segments: int = 0
    errors: int = 0
    """Append or write failures, each logged by the writer process."""
    dropped: int = 0
    """Rows lost because their segment could not be written."""
    stalls: int = 0
    """Times a producer was left without credit because the archive was behind."""
    restarts: int = 0
    """Times the writer process died and was started again."""


@dataclass(slots=True)
class _Batch:
    number: int
    frame: bytes
    size: int
    """Message bytes in it."""
    count: int


class Archiver(RoomToWait):
    """The broker's side of the archive: which addresses, the queue, stalled producers, and
    the writer process.

    ``offer``, ``has_room``, ``stall`` and ``resume_stalled`` run on the reactor
    thread only; the feeder thread pops the queue and talks to the writer
    process; the writer's reader thread records its progress. The per-message
    path (``offer``) takes no lock; batches are handed over under ``_lock``.
    """

    def __init__(
        self,
        directory: Path,
        patterns: tuple[str, ...] = (),
        *,
        max_pending_bytes: int = 64 * 2**20,
        wake: Callable[[], None] = lambda: None,
        index: tuple[str, ...] = (),
        index_fields: bool = False,
        index_buckets: int = 0,
    ) -> None:
        super().__init__()
        self.directory = directory
        self.index = index
        """Application property keys the writer indexes (``ArchiveIndex.properties``)."""
        self.index_fields = index_fields
        """Whether it indexes the properties fields too (``ArchiveIndex.fields``)."""
        self.index_buckets = index_buckets
        """Files per segment, by the first key (``ArchiveIndex.buckets``; 0: one)."""
        self.patterns = patterns
        """Glob patterns (``fnmatch``) on the address; empty: every node is archived."""
        self.max_pending_bytes = max_pending_bytes
        self.stats = ArchiverStats()
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ArchiveOpenError(f"cannot open the archive {directory}: {exc}") from None
        self._wake = wake
        self._wanted: dict[str, bool] = {}
        self._queue: collections.deque[Item] = collections.deque()
        self._offered_bytes = 0  # reactor thread only
        self._appended_bytes = 0  # the writer's reader thread only
        self._room_signalled = False
        self._sleeping = False
        self._closing = False
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._sent: collections.deque[_Batch] = collections.deque()
        """Batches sent and not yet turned into rows; then they move to ``_unwritten``."""
        self._unwritten: collections.deque[_Batch] = collections.deque()
        """Batches turned into rows and not yet written: sent again if the writer dies."""
        self._numbers = itertools.count(1)
        self._sequence = time.time_ns() // 1000
        """The next row's ``sequence`` (feeder thread). Numbered here, not by the writer, so that
        a message sent again keeps it; from the clock, so that it grows across restarts."""
        self._earlier = Progress(0, 0, 0, 0, 0, 0)
        """The counters of the writer processes that died (``written`` … ``errors``)."""
        self._restart_delay = _RESTART_DELAY[0]
        self._process = self._start_process()
        self._thread = threading.Thread(target=self._run, name="filtex-archive", daemon=True)
        self._thread.start()

    @property
    def writer_pid(self) -> int:
        """The process id of the current writer process (for operators, and the tests)."""
        return self._process.pid

    # -- reactor thread ------------------------------------------------------------------

    def wants(self, address: str) -> bool:
        """Whether messages to ``address`` are archived (decided once per address)."""
        wanted = self._wanted.get(address)
        if wanted is None:
            wanted = not self.patterns or any(
                fnmatch.fnmatchcase(address, pattern) for pattern in self.patterns)
            if len(self._wanted) > 100_000:  # dynamic addresses must not grow this forever
                self._wanted.clear()
            self._wanted[address] = wanted
        return wanted

    def pending_bytes(self) -> int:
        return self._offered_bytes - self._appended_bytes

    def has_room(self) -> bool:
        return self._offered_bytes - self._appended_bytes < self.max_pending_bytes

    def offer(self, address: str, data: bytes) -> None:
        """Queue an accepted message for the archive, arriving now (never blocks, never drops)."""
        self._queue.append((address, data, time.time_ns() // 1_000_000))
        self._offered_bytes += len(data)
        self.stats.offered += 1
        if self._sleeping:
            self._event.set()

    def stall(self, producer: Stalled) -> None:
        """No credit for ``producer`` until the writer has caught up (counted, logged)."""
        if producer not in self.stalled:
            super().stall(producer)
            self.stats.stalls += 1
            if due(self.stats.stalls):
                log.warning("archive behind (%d bytes queued): producers wait for it "
                            "[%d stalls so far]", self.pending_bytes(), self.stats.stalls)

    def resume_stalled(self) -> None:
        """The writer signalled room (via the waker): top the waiting producers up."""
        self._room_signalled = False
        self.room_available()

    # -- the feeder thread ---------------------------------------------------------------

    def _run(self) -> None:
        while True:
            if self._process.exited.is_set() and not self._restart():
                return  # closing, and no writer process would start: given up (logged)
            batch = self._take()
            if batch is not None:
                with self._lock:
                    self._sent.append(batch)
                self._process.send(BATCH, batch.frame)  # if it died: restarted, sent again
            elif self._closing:
                self._finish()
                return
            else:
                self._sleep()

    def _take(self) -> _Batch | None:
        """The next frame's worth of the queue, encoded; None if the queue is empty."""
        queue = self._queue
        items: list[Item] = []
        size = 0
        while queue and len(items) < BATCH_MESSAGES and size < BATCH_BYTES:
            item = queue.popleft()
            items.append(item)
            size += len(item[1])
        if not items:
            return None
        number, first = next(self._numbers), self._sequence
        self._sequence += len(items)
        return _Batch(number, encode_batch(number, first, items), size, len(items))

    def _sleep(self) -> None:
        self._sleeping = True
        if not self._queue and not self._closing and not self._process.exited.is_set():
            self._event.wait(_IDLE_WAIT)  # checked after announcing the sleep
        self._sleeping = False
        self._event.clear()
        self._signal_room()  # a producer may have stalled just after the last progress
        if self._queue and not self._closing:
            time.sleep(_GATHER)

    def _finish(self) -> None:
        """Everything is sent: ask the writer to write it all and close; again if it dies."""
        for _ in range(_CLOSE_ATTEMPTS):
            if self._process.exited.is_set() and not self._restart():
                return
            self._process.send(CLOSE)
            self._process.wait(_CLOSE_WAIT)
            last = self._process.last
            if last is not None and last.final:
                self._process.release()
                return
        self._process.kill()

    # -- writer processes ----------------------------------------------------------------

    def _start_process(self) -> WriterProcess:
        return WriterProcess(self.directory, self._on_progress, self._event.set,
                             retain_bytes=max(RETAIN_BYTES, self.max_pending_bytes),
                             index=self.index, index_fields=self.index_fields,
                             index_buckets=self.index_buckets)

    def _restart(self) -> bool:
        """The writer died: start another and send it what is unwritten; False if given up."""
        dead = self._process
        status = dead.wait(30)
        dead.kill()
        self.stats.restarts += 1
        with self._lock:
            self._fold(dead.last)
            again = [*self._unwritten, *self._sent]
        log.error("archive: the writer process %d exited unexpectedly (status %s); starting "
                  "another, and sending it again the %d message(s) not yet written "
                  "[%d restart(s) so far]", dead.pid, status, sum(b.count for b in again),
                  self.stats.restarts)
        attempts = 0
        while True:
            time.sleep(self._restart_delay)
            self._restart_delay = min(self._restart_delay * 2, _RESTART_DELAY[1])
            try:
                self._process = self._start_process()
                break
            except ArchiveOpenError as exc:
                attempts += 1
                log.error("archive: cannot start a writer process: %s [attempt %d]", exc,
                          attempts)
                if self._closing and attempts >= _CLOSE_ATTEMPTS:
                    return False
        for batch in again:
            if not self._process.send(BATCH, batch.frame):
                break  # dead again: the next round restarts it
        return True

    def _fold(self, last: Progress | None) -> None:
        """Keep a dead writer's counters (``_lock`` held)."""
        if last is not None:
            earlier = self._earlier
            self._earlier = Progress(0, 0, earlier.written + last.written,
                                     earlier.segments + last.segments,
                                     earlier.dropped + last.dropped,
                                     earlier.errors + last.errors)

    def _on_progress(self, progress: Progress) -> None:
        """The writer's reader thread: count what was appended, forget what is written."""
        with self._lock:
            sent, unwritten = self._sent, self._unwritten
            while sent and sent[0].number <= progress.appended:
                batch = sent.popleft()
                self._appended_bytes += batch.size
                self.stats.appended += batch.count
                unwritten.append(batch)
            while unwritten and unwritten[0].number <= progress.durable:
                unwritten.popleft()
            earlier, stats = self._earlier, self.stats
            stats.written = earlier.written + progress.written
            stats.segments = earlier.segments + progress.segments
            stats.dropped = earlier.dropped + progress.dropped
            stats.errors = earlier.errors + progress.errors
        self._restart_delay = _RESTART_DELAY[0]  # this one works
        self._signal_room()

    def _signal_room(self) -> None:
        """Wake the reactor (once) if producers wait and the pending bytes are down to half."""
        if (self.stalled and not self._room_signalled
                and self.pending_bytes() <= self.max_pending_bytes // 2):
            self._room_signalled = True
            self._wake()

    # -- shutdown ------------------------------------------------------------------------

    def close(self, timeout: float = 600.0) -> None:
        """Archive what is queued, have the writer write and close everything, and stop;
        logs what was archived, and what was lost, if anything."""
        self._closing = True
        self._event.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("archive: the writer did not finish in %.0f s", timeout)
            self._process.kill()
        with self._lock:
            unwritten = sum(b.count for b in (*self._sent, *self._unwritten))
        unwritten += len(self._queue)
        if unwritten:
            log.error("archive: %d message(s) could not be archived (no working writer "
                      "process)", unwritten)
        stats = self.stats
        log.info("archive closed: %d message(s) archived to %s, %d segment(s), %d lost to "
                 "write errors", stats.written, self.directory, stats.segments, stats.dropped)
