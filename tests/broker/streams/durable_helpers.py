"""What the durable stream tests share: a stream on a data directory, opened, written to disk,
closed and opened again in this process (no sockets)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from filtex_broker.nodes.budget import MemoryBudget
from filtex_broker.nodes.node import NodeLimits
from filtex_broker.store.log import Store
from filtex_broker.streams.durable import DurableStreamLog
from filtex_broker.streams.node import Stream
from filtex_proton.plugin import FilterMessage

from .stream_helpers import message

NAME = "events.d"
SEGMENT = 64 * 1024
"""The smallest segment: a stream bound of 8 × 64 KiB (or less) gives it."""


class DurableStream:
    """A store on ``directory`` and the stream ``NAME`` in it (reopened by :meth:`reopen`)."""

    def __init__(self, directory: Path, max_bytes: int = 8 * SEGMENT,
                 max_age_s: float | None = None, budget: MemoryBudget | None = None) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.budget = budget if budget is not None else MemoryBudget()
        self._woken = threading.Event()
        self.store = Store(directory, self._woken.set, account=self.budget)
        self.log = DurableStreamLog(NAME, self.store, max_bytes, max_age_s, self.budget)
        self.stream = Stream(NAME, NodeLimits(10, 1000), self.budget, max_bytes=max_bytes,
                             log=self.log)

    @property
    def folder(self) -> Path:
        return self.log.directory

    def publish(self, numbers: range, padding: int = 1000, **annotations: object) -> None:
        for n in numbers:
            self.stream.publish(FilterMessage(message(n, padding, **annotations)))

    def commit(self) -> None:
        """Wait until everything appended is on disk and readable (as the reactor would)."""
        self.pump(lambda: self.store.pending() or self.log.committed < self.log.next_offset)
        assert not self.store.pending(), "the store did not write"

    def pump(self, until: Callable[[], bool], rounds: int = 300) -> None:
        """Run the store's callbacks as the reactor would, while ``until`` holds (at most
        ``rounds`` wake-ups or 0.1 s waits)."""
        for _ in range(rounds):
            if not until():
                return
            self._woken.wait(0.1)
            self._woken.clear()
            self.store.complete()

    def reopen(self) -> DurableStream:
        """Close cleanly and open a new store and stream on the same directory."""
        self.commit()
        self.store.close()
        return DurableStream(self.directory, self.max_bytes, self.max_age_s)

    def close(self) -> None:
        self.store.close()

    def segment_files(self) -> list[Path]:
        return sorted(self.folder.glob("*.seg"))
