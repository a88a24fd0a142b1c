"""The pipe between the broker and its archive writer process: typed, length-prefixed frames.

Why frames of whole batches: the broker pays for the hand-off per frame (one
pickle and one write of a few hundred messages), not per message, and the
writer process gets everything it needs to build the rows in one read. The
pipe is private to the two processes, so ``pickle`` is safe here and is the
fastest encoding CPython has for a list of ``(address, bytes, int)``.
"""

from __future__ import annotations

import os
import pickle
import struct
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ACK",
    "BATCH",
    "CLOSE",
    "FAILED",
    "READY",
    "Item",
    "Progress",
    "decode_batch",
    "encode_batch",
    "read_frame",
    "write_frame",
]

_HEADER: Final = struct.Struct("!IB")
"""Payload length, frame kind."""

BATCH: Final = 1
"""Broker → writer: ``(batch number, first row sequence, [(address, bytes, arrival ms), ...])``."""
CLOSE: Final = 2
"""Broker → writer: write everything, close the archive, report and exit."""
READY: Final = 3
"""Writer → broker: the archive is open (the first frame)."""
FAILED: Final = 4
"""Writer → broker: the archive cannot be opened (UTF-8 text: why); the writer exits."""
ACK: Final = 5
"""Writer → broker: a :class:`Progress`."""

Item = tuple[str, bytes, int]
"""One message for the archive: address, the bytes as they arrived, arrival (ms since epoch)."""


@dataclass(frozen=True, slots=True)
class Progress:
    """How far one writer process is; its counters count from its own start."""

    appended: int
    """Every batch up to this number has been turned into rows (in the writer's buffer)."""
    durable: int
    """Every batch up to this number is in segment files (or lost to a write error)."""
    written: int
    """Rows written to segment files."""
    segments: int
    dropped: int
    """Rows lost because their segment could not be written."""
    errors: int
    """Append and write failures, each logged by the writer process."""
    final: bool = False
    """The archive is closed: the last frame before the writer exits."""

    _FORMAT = struct.Struct("!qqqqqq?")

    def encode(self) -> bytes:
        return self._FORMAT.pack(self.appended, self.durable, self.written, self.segments,
                                 self.dropped, self.errors, self.final)

    @classmethod
    def decode(cls, payload: bytes) -> Progress:
        return cls(*cls._FORMAT.unpack(payload))


def encode_batch(number: int, first_sequence: int, items: list[Item]) -> bytes:
    """A batch; its messages get the row sequences ``first_sequence``, ``first_sequence + 1`` …"""
    return pickle.dumps((number, first_sequence, items), protocol=pickle.HIGHEST_PROTOCOL)


def decode_batch(payload: bytes) -> tuple[int, int, list[Item]]:
    number, first_sequence, items = pickle.loads(payload)
    return int(number), int(first_sequence), items


def write_frame(fd: int, kind: int, payload: bytes = b"") -> None:
    """Write one whole frame (blocking); raises ``OSError`` (EPIPE) if the reader is gone."""
    view = memoryview(_HEADER.pack(len(payload), kind) + payload)
    while view:
        view = view[os.write(fd, view):]


def read_frame(fd: int) -> tuple[int, bytes] | None:
    """Read one whole frame; None at end of file (the other process closed the pipe or died)."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    length, kind = _HEADER.unpack(header)
    payload = _read_exact(fd, length)
    if payload is None:
        return None
    return kind, payload


def _read_exact(fd: int, size: int) -> bytes | None:
    if size == 0:
        return b""
    chunks: list[bytes] = []
    missing = size
    while missing:
        chunk = os.read(fd, min(missing, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        missing -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
