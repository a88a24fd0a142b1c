"""The durable store (``--data-dir``): one fsync'ed append-only log per durable node.

A queue, and each durable topic subscription, writes its own log file: an
``enqueue`` record for every message it takes in (the bytes as they arrived,
and a store id; ``timed`` instead for a message that expires or waits for a scheduled
delivery: its expiry and visibility in ms since the epoch first, so that a ttl counted from
arrival is not counted again from the restart), an ``ack`` record when the message leaves (accepted,
rejected into the dead-letter queue, dropped), a ``replace`` record when its
bytes change (the header's delivery-count after a failed delivery), and
``meta`` records saying what the log belongs to (queue name, or topic,
container-id, link name and source filter set of a durable subscription).

Writes are batched (group commit): the reactor thread appends records to
in-memory buffers and never blocks on the disk; one writer thread writes and
fsyncs whatever has accumulated, then wakes the reactor, which only then
accepts the producers' deliveries whose records are in that batch. So a
producer's ``accepted`` means "on disk", and the fsync rate adapts to the
load: one per batch, however many messages the batch holds.

Every record carries a CRC-32; recovery replays each log up to the first
record that is short or fails its CRC (a write torn by a crash), keeps the
discarded bytes next to the log (``.torn``) and truncates it. A log that is
mostly acknowledged records is compacted: rewritten, off the reactor thread,
as its meta and its live messages, then renamed over the old file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from filtex_broker.store.records import (
    ACK,
    ENQUEUE,
    META,
    OVERHEAD,
    REPLACE,
    TIMED,
    TIMES,
    read_log,
    record,
    timed_or_enqueue,
)

if TYPE_CHECKING:
    from filtex_broker.nodes.entry import Entry

__all__ = ["COMPACT_MIN_BYTES", "Account", "Journal", "LogFile", "Recovered", "Store",
           "StoreLockedError"]

log = logging.getLogger("filtex.broker")

COMPACT_MIN_BYTES: Final = 4 * 1024 * 1024
"""A log is compacted once it is this large and at most a quarter of it is still live."""
SUFFIX: Final = ".log"
STREAMS: Final = "streams"
"""The folder of the streams' folders (``<data-dir>/streams/<escaped name>/``)."""
RETRY_PAUSE: Final = 0.1
"""Seconds between attempts to rewrite a log whose write failed (disk full: no busy loop)."""

Callback = Callable[[bool], None]
"""Called on the reactor thread once a batch is on disk (True) or could not be written."""


class Account(Protocol):
    """Where the store's write buffers are charged while they wait for the disk (the broker's
    memory budget, ``filtex_broker.nodes.budget.MemoryBudget``)."""

    def charge(self, cost: int) -> None: ...

    def credit(self, cost: int) -> None: ...


class StoreLockedError(OSError):
    """Another broker process is using the data directory."""


@dataclass(slots=True)
class Recovered:
    """What one log held when the broker started: its meta and its live messages in order."""

    journal: Journal
    meta: dict[str, Any]
    messages: list[tuple[int, bytes]] = field(default_factory=list)
    times: dict[int, tuple[int | None, int | None]] = field(default_factory=dict)
    """Expiry and visibility (ms since the epoch) of the messages that have them, by id."""


class LogFile:
    """One append-only file the store's writer thread writes (a node's log, a stream segment):
    what the reactor thread has appended and the writer not yet taken, and the writer's state."""

    __slots__ = ("broken", "buffer", "dropped", "fd", "path", "size", "snapshot", "store")

    def __init__(self, store: Store, path: Path) -> None:
        self.store = store
        self.path = path
        self.buffer = bytearray()
        """Records not yet handed to the writer."""
        self.snapshot: bytes | None = None
        """A compacted image waiting to replace the file (the writer renames it in)."""
        self.dropped = False
        self.fd = -1
        """Owned by the writer thread."""
        self.broken = False
        """A write failed (writer thread): nothing more is appended until it is rewritten whole."""
        self.size = 0

    def rewrite(self) -> None:
        """A write failed: hand the store the whole file again (:meth:`Store.replace_image`)."""
        raise NotImplementedError


class Journal(LogFile):
    """One durable node's log. Called on the reactor thread; the store does the IO."""

    __slots__ = ("_filter", "ids", "live", "meta", "next_id")

    def __init__(self, store: Store, path: Path, meta: dict[str, Any]) -> None:
        super().__init__(store, path)
        self.meta = meta
        self.ids: dict[Entry, int] = {}
        """Store id of every live entry, in enqueue order."""
        self.next_id = 1
        self.live = 0
        """Bytes of the file that still matter (the records of live messages)."""
        self._filter: bytes = bytes.fromhex(meta.get("filter", ""))

    # -- records (reactor thread) -------------------------------------------------------

    def enqueue(self, entry: Entry) -> None:
        ident = self.next_id
        data = timed_or_enqueue(entry, ident)  # first: nothing is noted of a record not made
        self.next_id += 1
        self.ids[entry] = ident
        self.live += entry.size + OVERHEAD
        self.store.append(self, data)

    def adopt(self, entry: Entry, ident: int) -> None:
        """A recovered message, already on disk under ``ident``."""
        self.ids[entry] = ident
        self.live += entry.size + OVERHEAD
        self.next_id = max(self.next_id, ident + 1)

    def ack(self, entry: Entry) -> None:
        ident = self.ids.pop(entry, None)
        if ident is None:
            return
        self.live -= entry.size + OVERHEAD
        self.store.append(self, record(ACK, ident))
        if self.size > COMPACT_MIN_BYTES and self.live * 4 < self.size:
            self.compact()

    def replace(self, entry: Entry, data: bytes) -> None:
        ident = self.ids.get(entry)
        if ident is not None:
            self.live += len(data) - entry.size
            self.store.append(self, record(REPLACE, ident, data))

    def remember_filter(self, encoded: bytes) -> None:
        """A consumer attached: a durable subscription remembers the filter set it gave."""
        if self.meta.get("kind") != "subscription":
            return
        if encoded and encoded != self._filter:
            self._filter = encoded
            self.meta = {**self.meta, "filter": encoded.hex()}
            self.store.append(self, self.meta_record())

    def meta_record(self) -> bytes:
        return record(META, 0, json.dumps(self.meta, sort_keys=True).encode())

    def rewrite(self) -> None:
        self.compact()

    def compact(self) -> None:
        """Replace the log by its meta and its live messages (written by the writer thread)."""
        parts = [self.meta_record()]
        parts.extend(timed_or_enqueue(entry, ident) for entry, ident in self.ids.items())
        image = b"".join(parts)
        self.store.replace_image(self, image)
        self.live = len(image)
        log.info("store: compacting %s (%d live messages, %d -> %d bytes)",
                 self.path.name, len(self.ids), self.size, len(image))

    def drop(self) -> None:
        """The node is gone for good: its log is deleted."""
        if not self.dropped:
            self.dropped = True
            self.ids.clear()
            self.store.drop(self)

    def __repr__(self) -> str:
        return f"<Journal {self.path.name} {self.meta}>"


class Store:
    """The data directory: the logs, the writer thread, the group commit."""

    def __init__(self, directory: Path, wake: Callable[[], None],
                 account: Account | None = None) -> None:
        self.directory = directory
        self.account = account
        """Charged the bytes of records appended and not yet written (reactor thread)."""
        self._released = 0
        """Bytes the writer has written (or given up on) since :meth:`complete` last credited
        the account (under the lock)."""
        directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise StoreLockedError(
                f"data directory {directory} is in use by another broker") from None
        self._wake = wake
        self._cond = threading.Condition()
        self._dirty: dict[LogFile, None] = {}
        self._waiting: list[tuple[Callback, int]] = []
        """Callbacks with the number of the last batch written when each was registered."""
        self._done: list[tuple[Callback, bool]] = []
        self._closing = False
        self._failed = False
        self._broken: list[LogFile] = []
        """Logs whose last write failed: rewritten whole by :meth:`complete` (the file may
        end in a partial record, and recovery stops at the first bad one)."""
        self._appended = 0
        """Changes handed to the store (reactor thread, under the lock)."""
        self._written = 0
        """The value of ``_appended`` the last written batch covered (writer thread)."""
        self._batch_number = 0
        self._last_written_batch = 0
        self._last_failed_batch = 0
        """A callback is only told ``ok`` if no batch failed since the last one written before
        it was registered: its change may have been in the failed batch, and a later batch
        that writes nothing (or other logs) says nothing about it."""
        self._journals: dict[str, Journal] = {}
        """Recovered logs by node key, until a node claims them."""
        self._files: dict[LogFile, None] = {}
        """Logs with an open file descriptor (writer thread; closed at :meth:`close`)."""
        self._thread = threading.Thread(target=self._writer, name="filtex-store", daemon=True)
        self._thread.start()

    # -- recovery -------------------------------------------------------------------------

    def recover(self) -> list[Recovered]:
        """Read every log in the directory (once, at start); torn tails are cut off."""
        found: list[Recovered] = []
        for leftover in self.directory.glob("*.compact"):  # a compaction cut short by a crash
            leftover.unlink()
        for path in sorted(self.directory.glob("*" + SUFFIX), key=lambda p: p.stat().st_mtime):
            recovered = self._recover_file(path)
            if recovered is None:
                continue
            key = node_key(recovered.meta)
            previous = self._journals.get(key)
            if previous is not None:  # two logs for one node: a crash mid-move; keep the newer
                log.warning("store: %s and %s both hold %s; keeping the newer", previous.path.name,
                            path.name, key)
                found = [r for r in found if r.journal is not previous]
            self._journals[key] = recovered.journal
            found.append(recovered)
        return found

    def _recover_file(self, path: Path) -> Recovered | None:
        records, intact = read_log(path)
        meta: dict[str, Any] | None = None
        messages: dict[int, bytes] = {}
        times: dict[int, tuple[int | None, int | None]] = {}
        highest = 0
        for kind, ident, payload in records:
            if kind == META:
                meta = json.loads(payload)
            elif kind == TIMED:
                expires, visible = TIMES.unpack_from(payload)
                times[ident] = (expires or None, visible or None)
                messages[ident] = payload[TIMES.size :]
                highest = max(highest, ident)
            elif kind == ENQUEUE or (kind == REPLACE and ident in messages):
                messages[ident] = payload
                highest = max(highest, ident)
            elif kind == ACK:
                messages.pop(ident, None)
        if meta is None:
            log.warning("store: %s has no intact meta record; removed", path.name)
            path.unlink()
            return None
        journal = Journal(self, path, meta)
        journal.size = intact
        journal.next_id = highest + 1  # ids are never reused within a log
        log.info("store: recovered %s: %d message(s)", describe(meta), len(messages))
        return Recovered(journal, meta, list(messages.items()),
                         {ident: when for ident, when in times.items() if ident in messages})

    # -- journals (reactor thread) -----------------------------------------------------------

    def for_queue(self, address: str) -> Journal:
        """The log of a new queue (``filtex_broker.nodes.node.Durability``)."""
        return self.journal(queue_meta(address))

    def for_subscription(self, topic: str, container_id: str, link_name: str) -> Journal:
        """The log of a new durable subscription (``filtex_broker.nodes.node.Durability``)."""
        return self.journal(subscription_meta(topic, container_id, link_name))

    def journal(self, meta: dict[str, Any]) -> Journal:
        """The log of a node: the recovered one, or a new file."""
        key = node_key(meta)
        journal = self._journals.pop(key, None)
        if journal is not None:
            return journal
        journal = Journal(self, self.directory / f"{uuid.uuid4().hex}{SUFFIX}", meta)
        self.append(journal, journal.meta_record())
        return journal

    def unclaimed(self) -> list[Journal]:
        """Recovered logs no node claimed; forgotten, so new nodes get fresh files."""
        journals = list(self._journals.values())
        self._journals.clear()
        return journals

    # -- streams: a folder of segment files each -----------------------------------------------

    def stream_directory(self, name: str) -> Path:
        """Where the stream ``name`` keeps its segment files (created and synced once)."""
        path = self.directory / STREAMS / _escape(name)
        if not path.is_dir():
            path.mkdir(parents=True, exist_ok=True)
            self._sync_directory(path.parent)
            self._sync_directory(self.directory)
        return path

    def stream_names(self) -> list[str]:
        """The streams the data directory holds (recreated at start-up)."""
        folder = self.directory / STREAMS  # (no such folder: no stream)
        return sorted(urllib.parse.unquote(p.name) for p in folder.glob("*") if p.is_dir())

    def append(self, journal: LogFile, data: bytes) -> None:
        with self._cond:
            journal.buffer += data
            journal.size += len(data)
            self._mark(journal)
        if self.account is not None:
            self.account.charge(len(data))

    def replace_image(self, journal: LogFile, image: bytes) -> None:
        with self._cond:
            freed = _pending(journal)
            journal.snapshot = image
            journal.buffer = bytearray()
            journal.size = len(image)
            self._mark(journal)
        if self.account is not None:
            self.account.charge(len(image) - freed)

    def drop(self, journal: LogFile) -> None:
        with self._cond:
            freed = _pending(journal)
            journal.buffer = bytearray()
            journal.snapshot = None
            self._mark(journal)
        if self.account is not None:
            self.account.credit(freed)

    def _mark(self, journal: LogFile) -> None:
        """One more change for the writer (called holding the lock); wake it if it sleeps."""
        self._appended += 1
        if not self._dirty:
            self._cond.notify()
        self._dirty[journal] = None

    # -- group commit ------------------------------------------------------------------------

    def pending(self) -> bool:
        """Whether some change is not on disk yet (a producer must then wait to accept).

        Not ``bool(self._dirty)``: a batch the writer has taken but not yet
        fsynced is no longer dirty, and not yet durable either.
        """
        return self._appended != self._written

    def after_commit(self, callback: Callback) -> None:
        """Run ``callback`` on the reactor thread once what was appended so far is on disk."""
        with self._cond:
            self._waiting.append((callback, self._last_written_batch))
            self._cond.notify()

    def complete(self) -> None:
        """Run the callbacks of the batches written since the last call (reactor thread)."""
        with self._cond:
            done, self._done = self._done, []
            broken, self._broken = self._broken, []
            released, self._released = self._released, 0
        if released and self.account is not None:
            self.account.credit(released)  # those buffers are gone
        for journal in dict.fromkeys(broken):
            if not journal.dropped:
                journal.rewrite()  # retried once per wake-up while the disk keeps failing
        for callback, ok in done:
            callback(ok)

    # -- the writer thread ----------------------------------------------------------------------

    def _writer(self) -> None:
        while True:
            with self._cond:
                while not self._dirty and not self._waiting and not self._closing:
                    self._cond.wait()
                if self._closing and not self._dirty and not self._waiting:
                    return
                batch = [(j, j.snapshot, bytes(j.buffer), j.dropped) for j in self._dirty]
                taken = sum(_pending(j) for j in self._dirty)
                for journal in self._dirty:
                    journal.snapshot = None
                    journal.buffer = bytearray()
                self._dirty = {}
                callbacks, self._waiting = self._waiting, []
                covered = self._appended
            broken = self._write_batch(batch)
            ok = not broken
            with self._cond:
                self._released += taken
                self._batch_number += 1
                if ok:
                    self._written = covered
                    self._last_written_batch = self._batch_number
                else:
                    self._last_failed_batch = self._batch_number
                self._broken.extend(broken)
                self._done.extend((callback, ok and self._last_failed_batch <= registered)
                                  for callback, registered in callbacks)
            if broken:
                time.sleep(RETRY_PAUSE)  # then the reactor rewrites the broken logs
            if callbacks or broken or taken:
                self._wake()

    def _write_batch(
        self, batch: list[tuple[LogFile, bytes | None, bytes, bool]]
    ) -> list[LogFile]:
        """Write and fsync each log of the batch; returns those that failed."""
        broken: list[LogFile] = []
        for journal, snapshot, data, dropped in batch:
            try:
                if dropped:
                    self._remove(journal)
                    continue
                if snapshot is not None:
                    self._install(journal, snapshot)
                    journal.broken = False
                if data:
                    if journal.broken:  # its file may end in a partial record: not after that
                        raise OSError(f"{journal.path.name} awaits its rewrite after a failure")
                    self._write(journal, data)
            except OSError as exc:
                journal.broken = True
                broken.append(journal)
                if not self._failed:
                    log.error("store: cannot write %s: %s (producers are refused until it works)",
                              journal.path, exc)
                self._failed = True
        if not broken and self._failed:
            log.info("store: writing again")
            self._failed = False
        return broken

    def _open(self, journal: LogFile) -> int:
        if journal.fd < 0:
            created = not journal.path.exists()
            journal.fd = os.open(journal.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._files[journal] = None
            if created:
                self._sync_directory(journal.path.parent)
        return journal.fd

    def _write(self, journal: LogFile, data: bytes) -> None:
        fd = self._open(journal)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)

    def _install(self, journal: LogFile, image: bytes) -> None:
        """Write a compacted image beside the log, then rename it over the log."""
        tmp = journal.path.with_suffix(".compact")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, image)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._close_file(journal)
        os.replace(tmp, journal.path)
        self._sync_directory(journal.path.parent)

    def _close_file(self, journal: LogFile) -> None:
        if journal.fd >= 0:
            self._files.pop(journal, None)
            fd, journal.fd = journal.fd, -1
            os.close(fd)

    def _remove(self, journal: LogFile) -> None:
        self._close_file(journal)
        journal.path.unlink(missing_ok=True)
        self._sync_directory(journal.path.parent)

    @staticmethod
    def _sync_directory(directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # -- the end -------------------------------------------------------------------------------

    def close(self) -> None:
        """Write what is pending, stop the writer, release the directory."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()
        self.complete()
        for journal in list(self._files):
            with contextlib.suppress(OSError):
                self._close_file(journal)
        with contextlib.suppress(OSError):
            os.close(self._lock_fd)


def _pending(journal: LogFile) -> int:
    """The bytes of a log waiting for the writer (its buffer and any compacted image)."""
    snapshot = journal.snapshot
    return len(journal.buffer) + (0 if snapshot is None else len(snapshot))


def _escape(name: str) -> str:
    """A stream's name as one visible file name (reversible: ``urllib.parse.unquote``)."""
    escaped = urllib.parse.quote(name, safe="")
    return "%2E" + escaped[1:] if escaped.startswith(".") else escaped


def node_key(meta: dict[str, Any]) -> str:
    """What identifies a node across restarts (a log belongs to exactly one)."""
    if meta.get("kind") == "subscription":
        return json.dumps(["subscription", meta.get("container"), meta.get("link")])
    return json.dumps(["queue", meta.get("name")])


def describe(meta: dict[str, Any]) -> str:
    if meta.get("kind") == "subscription":
        return (f"durable subscription {meta.get('link')!r} of {meta.get('container')!r} "
                f"on topic {meta.get('topic')!r}")
    return f"queue {meta.get('name')!r}"


def queue_meta(name: str) -> dict[str, Any]:
    return {"kind": "queue", "name": name}


def subscription_meta(topic: str, container: str, link: str) -> dict[str, Any]:
    return {"kind": "subscription", "topic": topic, "container": container, "link": link}
