"""The archive writer process: ``python -m filtex_broker.archive.child DIR LOG_LEVEL RETAIN_BYTES``.

Building a row costs tens of microseconds of Python per message; in the
broker's process that competed with the reactor for the interpreter lock and
capped the broker at the archive's pace. Here it has an interpreter of its own.

Started by the broker (:mod:`filtex_broker.archive.process`), never by hand: batches
arrive on stdin, progress goes back on the original stdout (fd 1 is pointed at
stderr, so nothing else can corrupt the frames). The broker stops it: SIGINT
and SIGTERM are ignored (a terminal's Ctrl-C reaches the whole process group,
a service manager may signal every process), and end of input (the broker is
gone, even by ``kill -9``) is a clean close like :data:`~filtex_broker.archive.wire.CLOSE`.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import select
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from filtex_broker.archive.wire import (
    ACK,
    BATCH,
    CLOSE,
    FAILED,
    READY,
    Progress,
    decode_batch,
    read_frame,
    write_frame,
)
from filtex_broker.log_rate import due

if TYPE_CHECKING:
    from filtex_proton.archive import ArchiveWriter

__all__ = ["main"]

log = logging.getLogger("filtex.broker.archive")

IDLE_REPORT: Final = 1.0
"""Seconds between looks at what the writer's own timer flushed, when no batch arrives."""


class _Feed:
    """Appends the broker's batches to the writer and tells the broker how far it is."""

    def __init__(self, writer: ArchiveWriter, source: int, sink: int, retain_bytes: int) -> None:
        self.writer = writer
        self.source = source
        self.sink = sink
        self.retain_bytes = retain_bytes
        """The broker keeps a copy of what is not written; past this many bytes, write all."""
        self.errors = 0
        self.appended = 0
        self.durable = 0
        self._unwritten: collections.deque[tuple[int, int, int]] = collections.deque()
        """(batch number, sequence of its last row, its message bytes) of the batches not
        known to be written."""
        self._unwritten_bytes = 0

    def run(self) -> None:
        while True:
            readable, _, _ = select.select([self.source], [], [], IDLE_REPORT)
            if not readable:
                if self._advance():
                    self._report()
                continue
            frame = read_frame(self.source)
            if frame is None or frame[0] == CLOSE:
                self._close()
                return
            kind, payload = frame
            if kind == BATCH:
                self._append(payload)
                self._advance()
                self._report()

    def _append(self, payload: bytes) -> None:
        number, sequence, items = decode_batch(payload)
        writer = self.writer
        size = 0
        for address, data, arrival_ms in items:
            size += len(data)
            try:
                writer.append(address, data, arrival_ms, sequence)
            except Exception as exc:  # one bad message must not cost the others
                self.errors += 1
                if due(self.errors):
                    log.error("archive: cannot append a message to %r: %s [%d errors so far]",
                              address, exc, self.errors)
            sequence += 1
        self._unwritten.append((number, writer.last_sequence, size))
        self._unwritten_bytes += size
        self.appended = number
        if self._unwritten_bytes > self.retain_bytes:
            self._flush()

    def _flush(self) -> None:
        try:
            self.writer.flush()
        except Exception as exc:  # logged and counted; the rows are in stats.dropped
            self.errors += 1
            log.error("archive: writing the buffered rows to %s failed: %s",
                      self.writer.directory, exc)

    def _advance(self) -> bool:
        """Drop the batches whose rows are all written; whether any was."""
        oldest = self.writer.oldest_buffered()
        unwritten = self._unwritten
        moved = False
        while unwritten and (oldest is None or unwritten[0][1] < oldest):
            self.durable, _, size = unwritten.popleft()
            self._unwritten_bytes -= size
            moved = True
        return moved

    def _close(self) -> None:
        try:
            self.writer.close()
        except Exception as exc:  # logged and counted; the rows are in stats.dropped
            self.errors += 1
            log.error("archive: the final flush to %s failed: %s", self.writer.directory, exc)
        self._unwritten.clear()
        self._unwritten_bytes = 0
        self.durable = self.appended
        self._report(final=True)

    def _report(self, *, final: bool = False) -> None:
        stats = self.writer.stats
        progress = Progress(self.appended, self.durable, stats.written, stats.segments,
                            stats.dropped, self.errors, final)
        with contextlib.suppress(BrokenPipeError):  # the broker is gone; written all the same
            write_frame(self.sink, ACK, progress.encode())


def main(argv: Sequence[str] | None = None) -> int:
    """Serve one broker: 0 after a clean close, 1 if the archive cannot be opened."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    directory, level, retain_bytes, indexing = list(sys.argv[1:] if argv is None else argv)
    sink = os.dup(1)  # the progress pipe; fd 1 now goes to stderr with the logs
    os.dup2(2, 1)
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s[writer %(process)d]: "
                               "%(message)s")
    try:  # imported only now: nothing may write to the progress pipe but us
        from filtex_proton.archive import INDEXABLE_FIELDS, ArchiveIndex, ArchiveWriter

        wanted = json.loads(indexing)
        index = None
        if wanted["properties"] or wanted["fields"]:
            index = ArchiveIndex(tuple(wanted["properties"]),
                                 INDEXABLE_FIELDS if wanted["fields"] else (),
                                 buckets=wanted.get("buckets", 0))
        writer = ArchiveWriter(directory, handle_sigterm=False, index=index)
    except Exception as exc:
        write_frame(sink, FAILED, f"cannot open the archive {directory}: {exc}".encode())
        return 1
    write_frame(sink, READY)
    _Feed(writer, 0, sink, int(retain_bytes)).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
