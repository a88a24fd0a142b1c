"""``--archive``: every message a node accepts goes to the Parquet archive, off the reactor.

Appending a row costs tens of microseconds (decoding every section, building
typed columns), too much for the reactor thread, so the reactor only puts
``(address, bytes, arrival)`` on a queue and a writer thread feeds
:class:`filtex_proton.spark.archive.ArchiveWriter`.

When the writer falls behind, the queue is bounded the way a node is: by
flow control, not by loss. A producer whose messages would be archived gets
no more credit while the queue holds ``max_pending_bytes`` or more, and is
topped up again once the writer has brought it down to half (woken through
the broker's waker pipe). What can be queued beyond the bound is what was
already granted as credit. Nothing is dropped on purpose, and the reactor never
waits. Rows are lost only when the disk refuses them (full, no permission):
that is logged and counted, and the broker goes on.
"""

from __future__ import annotations

import collections
import fnmatch
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from broker.node import Stalled
    from filtex_proton.spark.archive import ArchiveWriter

__all__ = ["ArchiveOpenError", "Archiver", "ArchiverStats"]

log = logging.getLogger("filtex.broker.archive")

_IDLE_WAIT: Final = 0.5
"""Seconds the writer sleeps when idle before looking again (it is woken sooner)."""


class ArchiveOpenError(OSError):
    """The archive cannot be opened (no pyarrow, a directory that cannot be created)."""


def _open_writer(directory: Path) -> ArchiveWriter:
    try:
        from filtex_proton.spark.archive import ArchiveWriter
    except ImportError as exc:
        raise ArchiveOpenError(f"--archive needs pyarrow (pip install 'filtex-proton[spark]'):"
                                 f" {exc}") from None
    try:
        return ArchiveWriter(directory, handle_sigterm=False)  # the broker handles signals
    except OSError as exc:
        raise ArchiveOpenError(f"cannot open the archive {directory}: {exc}") from None


@dataclass(slots=True)
class ArchiverStats:
    """What the archive hand-off did; the writer's own counters are in ``writer.stats``."""

    offered: int = 0
    """Messages handed over by the reactor."""
    appended: int = 0
    """Messages the writer thread turned into rows."""
    errors: int = 0
    """Append or write failures (each logged); their rows are in ``writer.stats.dropped``."""
    stalls: int = 0
    """Times a producer was left without credit because the archive was behind."""


class Archiver:
    """The reactor's side of the archive: which addresses, the queue, and stalled producers.

    ``offer``, ``has_room``, ``stall`` and ``resume_stalled`` run on the reactor
    thread only; the writer thread only pops the queue and counts what it wrote.
    Each byte counter has one writer thread, so no lock is needed on the hot path.
    """

    def __init__(
        self,
        directory: Path,
        patterns: tuple[str, ...] = (),
        *,
        max_pending_bytes: int = 64 * 2**20,
        wake: Callable[[], None] = lambda: None,
        writer: ArchiveWriter | None = None,
    ) -> None:
        self.directory = directory
        self.patterns = patterns
        """Glob patterns (``fnmatch``) on the address; empty: every node is archived."""
        self.max_pending_bytes = max_pending_bytes
        self.writer = writer or _open_writer(directory)
        self.stats = ArchiverStats()
        self._wake = wake
        self._wanted: dict[str, bool] = {}
        self._queue: collections.deque[tuple[str, bytes, int]] = collections.deque()
        self._offered_bytes = 0  # reactor thread only
        self._written_bytes = 0  # writer thread only
        self._stalled: list[Stalled] = []
        self._room_signalled = False
        self._sleeping = False
        self._closing = False
        self._event = threading.Event()
        self._thread = threading.Thread(target=self._run, name="filtex-archive", daemon=True)
        self._thread.start()

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
        return self._offered_bytes - self._written_bytes

    def has_room(self) -> bool:
        return self._offered_bytes - self._written_bytes < self.max_pending_bytes

    def offer(self, address: str, data: bytes) -> None:
        """Queue an accepted message for the writer (never blocks, never drops)."""
        self._queue.append((address, data, time.time_ns() // 1_000_000))
        self._offered_bytes += len(data)
        self.stats.offered += 1
        if self._sleeping:
            self._event.set()

    def stall(self, producer: Stalled) -> None:
        """No credit for ``producer`` until the writer has caught up."""
        if producer not in self._stalled:
            self._stalled.append(producer)
            self.stats.stalls += 1
            if self.stats.stalls <= 10 or self.stats.stalls % 1000 == 0:
                log.warning("archive behind (%d bytes queued): producers wait for it "
                            "[%d stalls so far]", self.pending_bytes(), self.stats.stalls)

    def unstall(self, producer: Stalled) -> None:
        if producer in self._stalled:
            self._stalled.remove(producer)

    def resume_stalled(self) -> None:
        """The writer signalled room (via the waker): top the waiting producers up."""
        self._room_signalled = False
        if self._stalled and self.has_room():
            waiting, self._stalled = self._stalled, []
            for producer in waiting:
                producer.resume()

    # -- writer thread -------------------------------------------------------------------

    def _run(self) -> None:
        queue = self._queue
        while True:
            try:
                address, data, arrival_ms = queue.popleft()
            except IndexError:
                if self._closing:
                    return
                self._sleeping = True
                if not queue and not self._closing:  # checked after announcing the sleep
                    self._event.wait(_IDLE_WAIT)
                self._sleeping = False
                self._event.clear()
                self._signal_room()  # a producer may have stalled just as the queue emptied
                continue
            self._append(address, data, arrival_ms)
            self._written_bytes += len(data)
            self._signal_room()

    def _signal_room(self) -> None:
        """Wake the reactor (once) if producers wait and the queue is down to half."""
        if (self._stalled and not self._room_signalled
                and self.pending_bytes() <= self.max_pending_bytes // 2):
            self._room_signalled = True
            self._wake()

    def _append(self, address: str, data: bytes, arrival_ms: int) -> None:
        try:
            self.writer.append(address, data, arrival_ms)
            self.stats.appended += 1
        except Exception as exc:  # the broker must outlive its disk
            self.stats.errors += 1
            if self.stats.errors <= 10 or self.stats.errors % 1000 == 0:
                log.error("archive: cannot append a message to %r: %s [%d errors so far]",
                          address, exc, self.stats.errors)

    # -- shutdown ------------------------------------------------------------------------

    def close(self, timeout: float = 300.0) -> None:
        """Archive what is queued, flush the writer and stop; logs what was lost, if anything."""
        self._closing = True
        self._event.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("archive: the writer did not finish in %.0f s; %d queued messages are "
                      "not archived", timeout, len(self._queue))
        try:
            self.writer.close()
        except Exception as exc:
            self.stats.errors += 1
            log.error("archive: the final flush to %s failed: %s", self.directory, exc)
        written = self.writer.stats
        lost = self.stats.offered - written.written
        log.info("archive closed: %d message(s) archived to %s, %d segment(s), %d lost to "
                 "write errors", written.written, self.directory, written.segments, lost)
