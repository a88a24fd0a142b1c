"""The archive writer: bounded buffers, atomic fsynced segments, flushed on exit and SIGTERM."""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import secrets
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from filtex_proton.archive.index import BUCKET_COLUMN, INDEX_KEY, ArchiveIndex
from filtex_proton.archive.layout import address_directory
from filtex_proton.archive.rows import message_row
from filtex_proton.archive.schema import ARCHIVE_SCHEMA

__all__ = [
    "ArchiveStats",
    "ArchiveWriter",
    "write_segment",
]

log = logging.getLogger("filtex.archive")



@dataclass(slots=True)
class ArchiveStats:
    """What the writer did, for the broker's metrics."""

    appended: int = 0
    written: int = 0
    segments: int = 0
    dropped: int = 0
    """Rows lost because a segment could not be written (logged each time)."""
    irregular: int = 0


@dataclass(slots=True)
class _Partition:
    rows: list[dict[str, Any]]
    size: int
    since: float


class ArchiveWriter:
    """Appends messages to a Parquet archive, one segment file per flushed partition.

    Row groups of ``row_group_rows`` let Spark skip the ones whose statistics
    and dictionaries rule a filter out (``p.subject = 'x'`` reads only the row
    groups that hold an ``x``). With ``index`` (:class:`ArchiveIndex`) each segment is
    also sorted by its keys and gets Bloom filters, a page index and small pages, so that an
    equality on an indexed key reads a few pages of a few row groups.

    Safe for a long-running broker: buffering is bounded (``segment_rows`` per
    partition, ``max_buffer_bytes`` in all), segments appear atomically (written
    under a hidden name, fsynced, renamed), a background thread flushes what is
    older than ``flush_interval`` seconds, and the buffer is flushed on
    :meth:`close`, at interpreter exit and on SIGTERM (``handle_sigterm``:
    chained to the previous handler, installed only from the main thread).
    Write errors in automatic flushes are logged and counted, never raised
    into :meth:`append`; :meth:`flush` and :meth:`close` raise them.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        segment_rows: int = 100_000,
        max_buffer_bytes: int = 64 * 2**20,
        flush_interval: float | None = 60.0,
        compression: str = "zstd",
        row_group_rows: int = 16_384,
        fsync: bool = True,
        handle_sigterm: bool = True,
        index: ArchiveIndex | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segment_rows = segment_rows
        self.max_buffer_bytes = max_buffer_bytes
        self.flush_interval = flush_interval
        self.compression = compression
        self.row_group_rows = row_group_rows
        self.fsync = fsync
        self.index = index
        self.stats = ArchiveStats()
        self._lock = threading.RLock()
        self._partitions: dict[tuple[str, str, bool], _Partition] = {}
        self._buffered = 0
        self._writer_id = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._segments = itertools.count()
        # Orders messages of one millisecond; starting from the clock keeps it
        # increasing across restarts of the writer.
        self._sequence = time.time_ns() // 1000
        self._closed = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if flush_interval is not None:
            self._thread = threading.Thread(target=self._flush_periodically,
                                            name="filtex-archive-flush", daemon=True)
            self._thread.start()
        self._previous_handler: Any = None
        if handle_sigterm and threading.current_thread() is threading.main_thread():
            self._previous_handler = signal.signal(signal.SIGTERM, self._on_sigterm)
        atexit.register(self._at_exit)

    # -- appending -----------------------------------------------------------

    def append(self, address: str, data: bytes, arrival_ms: int,
               sequence: int | None = None) -> None:
        """Archive one message that arrived at ``address`` at ``arrival_ms`` (ms since epoch).

        ``sequence``: the row's number, for a caller that numbers messages itself
        (increasing; the broker does, so that a message sent again after a crash
        of its writer process keeps its number); default: the writer's own count.
        """
        with self._lock:
            if self._closed:
                raise ValueError("the archive writer is closed")
            self._sequence = self._sequence + 1 if sequence is None else sequence
            sequence = self._sequence
        row = message_row(data, address=address, arrival_ms=arrival_ms, sequence=sequence)
        size = len(row["raw"]) + 256
        with self._lock:
            key = (address, row["date"], row["regular"])
            partition = self._partitions.get(key)
            if partition is None:
                partition = self._partitions[key] = _Partition([], 0, time.monotonic())
            partition.rows.append(row)
            partition.size += size
            self._buffered += size
            self.stats.appended += 1
            self.stats.irregular += not row["regular"]
            if len(partition.rows) >= self.segment_rows:
                self._write_quietly(key)
            while self._buffered > self.max_buffer_bytes and self._partitions:
                largest = max(self._partitions, key=lambda k: self._partitions[k].size)
                self._write_quietly(largest)

    @property
    def last_sequence(self) -> int:
        """The ``sequence`` of the row appended last (before any: the writer's start value)."""
        return self._sequence

    def oldest_buffered(self) -> int | None:
        """The ``sequence`` of the oldest row not yet written (None: all written or dropped).

        Every row with a smaller sequence is in a segment file or counted in
        ``stats.dropped``: the broker's writer process tells the broker which
        messages it no longer needs to keep for a resend this way.
        """
        with self._lock:
            return min((p.rows[0]["sequence"] for p in self._partitions.values() if p.rows),
                       default=None)

    # -- flushing ------------------------------------------------------------

    def flush(self) -> None:
        """Write every buffered row; raises the first write error (after trying them all)."""
        with self._lock:
            self._write_all()

    def _write_all(self) -> None:
        """Write every partition, even after one fails; then raise the first failure."""
        failure: BaseException | None = None
        for key in list(self._partitions):
            try:
                self._write(key)
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def close(self) -> None:
        """Flush and stop; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        atexit.unregister(self._at_exit)
        if self._previous_handler is not None:
            try:
                if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                    signal.signal(signal.SIGTERM, self._previous_handler)
            except ValueError:  # not the main thread
                pass
        with self._lock:
            self._write_all()

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _flush_periodically(self) -> None:
        assert self.flush_interval is not None
        while not self._stop.wait(self.flush_interval):
            with self._lock:
                now = time.monotonic()
                for key in [k for k, p in self._partitions.items()
                            if now - p.since >= self.flush_interval]:
                    self._write_quietly(key)

    def _at_exit(self) -> None:
        try:
            self.close()
        except Exception:  # at exit there is no one left to tell but the log
            log.exception("archive: flush at exit failed")

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        """Flush (not close: a process that stops gracefully may still append), then do
        what the previous handler would have done."""
        try:
            self.flush()
        except Exception:
            log.exception("archive: flush on SIGTERM failed")
        previous = self._previous_handler
        if callable(previous):
            previous(signum, frame)
        elif previous in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    def _write_quietly(self, key: tuple[str, str, bool]) -> None:
        try:
            self._write(key)
        except Exception:
            log.exception("archive: cannot write a segment for %r; its rows are dropped", key)

    def _write(self, key: tuple[str, str, bool]) -> None:
        """Write one partition's buffer as a segment file (atomically); caller holds the lock."""
        partition = self._partitions.pop(key, None)
        if partition is None or not partition.rows:
            return
        self._buffered -= partition.size
        address, date, regular = key
        folder = (self.directory / address_directory(address) / f"date={date}" /
                  f"regular={'true' if regular else 'false'}")
        name = (f"part-{partition.rows[0]['arrival_ms']:013d}-{self._writer_id}-"
                f"{next(self._segments):06d}.parquet")
        try:
            # The partition columns are in the rows too; from_pylist takes the schema's only.
            table = pa.Table.from_pylist(partition.rows, schema=ARCHIVE_SCHEMA)
            write_segment(table, folder / name, compression=self.compression,
                          row_group_rows=self.row_group_rows, index=self.index,
                          fsync=self.fsync)
        except Exception:
            self.stats.dropped += len(partition.rows)
            raise
        self.stats.written += len(partition.rows)
        self.stats.segments += 1


def write_segment(table: pa.Table, path: Path, *, compression: str = "zstd",
                  row_group_rows: int = 16_384, index: ArchiveIndex | None = None,
                  fsync: bool = True) -> list[Path]:
    """Write one segment file atomically (a hidden temporary name, fsynced, renamed, the
    directory fsynced), sorted and indexed as ``index`` says; returns the files written (one
    per bucket for a bucketed index: in bucket directories below ``path``'s)."""
    if index is None:
        _write_file(table, path, {}, compression, row_group_rows, fsync)
        return [path]
    written = []
    table = index.apply(table)
    table = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), INDEX_KEY: index.metadata()})
    for bucket, rows in index.split(table).items():
        # A bucketed segment: one file per bucket, in the bucket's directory (docs/ARCHIVE.md).
        # (index columns escape as %XX: a '%' itself escaped, as Spark reads directory names)
        folder = f"{BUCKET_COLUMN}={bucket.replace('%', '%25')}"
        where = path.parent / folder / path.name if bucket else path
        _write_file(rows, where, index.write_options(rows, row_group_rows), compression,
                    row_group_rows, fsync)
        written.append(where)
    return written


def _write_file(table: pa.Table, path: Path, options: dict[str, Any], compression: str,
                row_group_rows: int, fsync: bool) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, temporary, compression=compression,
                       row_group_size=row_group_rows, **options)
        if fsync:
            _fsync(temporary)
        os.replace(temporary, path)
        if fsync:
            _fsync(path.parent, directory=True)
    except Exception:
        temporary.unlink(missing_ok=True)
        raise


def _fsync(path: Path, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
