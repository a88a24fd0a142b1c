"""The records of the durable store's logs: framing (length, CRC-32, type, id) and kinds.

Shared by the nodes' logs (``filtex_broker.store.log``) and the streams' segment files.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from filtex_broker.nodes.entry import Entry

__all__ = ["ACK", "ENQUEUE", "META", "OVERHEAD", "REPLACE", "TIMED", "TIMES", "parse", "read_log",
           "record", "timed_or_enqueue"]

log = logging.getLogger("filtex.broker")

_HEAD: Final = struct.Struct("<IIBQ")
"""length (of type, id and payload), CRC-32 (of the same), type, id."""
OVERHEAD: Final = _HEAD.size
_FIXED: Final = _HEAD.size - 8  # the bytes the length covers beyond the payload

META: Final = 1
ENQUEUE: Final = 2
ACK: Final = 3
REPLACE: Final = 4
TIMED: Final = 5
TIMES: Final = struct.Struct("<qq")
"""A timed record's expiry and visibility (ms since the epoch; 0: none) before the message."""

def record(kind: int, ident: int, payload: bytes = b"") -> bytes:
    """One framed record: header with length and CRC, then the payload."""
    body = struct.pack("<BQ", kind, ident) + payload
    return struct.pack("<II", len(body), zlib.crc32(body)) + body


def parse(data: bytes) -> tuple[list[tuple[int, int, bytes]], int]:
    """The records of a log and the offset where the intact part ends (a torn tail after)."""
    records: list[tuple[int, int, bytes]] = []
    pos = 0
    end = len(data)
    while pos + 8 <= end:
        length, crc = struct.unpack_from("<II", data, pos)
        stop = pos + 8 + length
        if length < _FIXED or stop > end:
            break
        body = data[pos + 8 : stop]
        if zlib.crc32(body) != crc:
            break
        kind, ident = struct.unpack_from("<BQ", body)
        records.append((kind, ident, body[_FIXED:]))
        pos = stop
    return records, pos


def read_log(path: Path) -> tuple[list[tuple[int, int, bytes]], int]:
    """The records of a log file, its torn tail (if any) cut off: moved to ``<name>.torn`` and
    the file truncated where the intact part ends (returned too)."""
    data = path.read_bytes()
    records, intact = parse(data)
    if intact < len(data):
        torn = path.with_suffix(".torn")
        torn.write_bytes(data[intact:])
        with path.open("r+b") as handle:
            handle.truncate(intact)
            os.fsync(handle.fileno())
        log.warning("store: %s: torn or corrupt record at byte %d; %d byte(s) discarded "
                    "(kept in %s)", path.name, intact, len(data) - intact, torn.name)
    return records, intact


def timed_or_enqueue(entry: Entry, ident: int) -> bytes:
    """``enqueue``, or ``timed`` with the entry's expiry and visibility if it has either."""
    lifetime = entry.lifetime
    if lifetime.expires_ms is None and lifetime.visible_ms is None:
        return record(ENQUEUE, ident, entry.data)
    times = TIMES.pack(lifetime.expires_ms or 0, lifetime.visible_ms or 0)
    return record(TIMED, ident, times + entry.data)
