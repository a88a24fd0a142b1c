"""The broker's handle on one archive writer process (:mod:`filtex_broker.archive.child`).

A subprocess running a module, not ``multiprocessing``: the broker is threaded
(fork is unsafe), and a plain ``python -m`` child neither re-imports the
broker's ``__main__`` nor inherits its sockets. It runs in a session of its own,
so a terminal's Ctrl-C goes to the broker only, which then closes the archive.
"""

from __future__ import annotations

import json
import logging
import select
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final

from filtex_broker.archive.wire import ACK, FAILED, READY, Progress, read_frame, write_frame

__all__ = ["ArchiveOpenError", "WriterProcess"]

log = logging.getLogger("filtex.broker.archive")

START_TIMEOUT: Final = 120.0
"""Seconds a new writer may take to import pyarrow and open the archive."""


class ArchiveOpenError(OSError):
    """The archive cannot be opened (no pyarrow, a directory that cannot be created)."""


class WriterProcess:
    """One running writer: :meth:`send` frames to it; its progress is passed to
    ``on_progress`` from a reader thread, and ``exited`` is set (and ``on_exit``
    called) when its output ends."""

    def __init__(self, directory: Path, on_progress: Callable[[Progress], None],
                 on_exit: Callable[[], None], *, retain_bytes: int,
                 index: tuple[str, ...] = (), index_fields: bool = False,
                 index_buckets: int = 0) -> None:
        level = logging.getLevelName(log.getEffectiveLevel())
        indexing = json.dumps({"properties": list(index), "fields": index_fields,
                               "buckets": index_buckets})
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "filtex_broker.archive.child", str(directory), str(level),
             str(retain_bytes), indexing],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
        )
        self.pid = self._proc.pid
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._input: IO[bytes] = self._proc.stdin
        self._output: IO[bytes] = self._proc.stdout
        self._on_progress = on_progress
        self._on_exit = on_exit
        self.exited = threading.Event()
        """The writer's output ended: it closed after :meth:`close`, or it died."""
        self.last: Progress | None = None
        self._reader: threading.Thread | None = None
        self._await_ready()
        self._reader = threading.Thread(target=self._read, name=f"filtex-archive-{self.pid}",
                                        daemon=True)
        self._reader.start()

    def _await_ready(self) -> None:
        fd = self._output.fileno()
        waiting = select.poll()  # not select(2): a busy broker's descriptors pass 1023
        waiting.register(fd, select.POLLIN)
        readable = waiting.poll(START_TIMEOUT * 1000)
        frame = read_frame(fd) if readable else None
        if frame is not None and frame[0] == READY:
            return
        self.kill()
        if frame is not None and frame[0] == FAILED:
            raise ArchiveOpenError(frame[1].decode("utf-8", "replace"))
        raise ArchiveOpenError(f"the archive writer process did not start (status "
                               f"{self._proc.returncode}); its error is in the log above")

    def _read(self) -> None:
        fd = self._output.fileno()
        while (frame := read_frame(fd)) is not None:
            if frame[0] == ACK:
                self.last = Progress.decode(frame[1])
                self._on_progress(self.last)
        self.exited.set()
        self._on_exit()

    def send(self, kind: int, payload: bytes = b"") -> bool:
        """Write one frame; False if the writer is gone (its output will end too)."""
        try:
            write_frame(self._input.fileno(), kind, payload)
        except (BrokenPipeError, ValueError):  # ValueError: our end is closed already
            return False
        return True

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit status once the writer has exited and its output is read; None on timeout."""
        if not self.exited.wait(timeout):
            return None
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """Stop it now (it lost its broker, or would not finish); what it buffered is lost."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        if self._reader is not None:
            self._reader.join(30)  # it reads the end of the output, then ends
        self.release()

    def release(self) -> None:
        """After it exited: close our ends of the pipes."""
        self._input.close()
        self._output.close()
