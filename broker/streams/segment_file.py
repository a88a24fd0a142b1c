"""A durable stream segment's file: its records, and reading them back.

One file per segment, ``<first offset, 20 digits>.seg``, in the store's record format
(``filtex_broker.store.records.record``: length, CRC-32, type, id, payload; the CRC covers type, id
and payload). Records, in order:

- ``header`` (id: the first offset), written when the segment starts, so that even an empty
  segment says where the stream's offsets go on after a restart;
- one ``message`` per message (id: its offset; payload: arrival ms as an i64, then the bytes as
  they arrived). Origins are not kept: no-local compares connections, which a restart ends;
- ``summary``, once, when the segment is sealed (id: the next offset; payload: first and last
  arrival ms and the message bytes as i64s, ``SegmentSummary.encode()``, then the length of the
  whole record as a u32, so that start-up reads a sealed segment's index from its last bytes
  without reading its messages).
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from filtex_broker.store.records import parse, record
from filtex_broker.streams.summaries import SegmentSummary

__all__ = [
    "HEADER", "MESSAGE", "SUFFIX", "SUMMARY", "Contents", "Sealed", "file_name", "first_of",
    "header", "message", "read", "summary", "tail",
]

HEADER: Final = 16
MESSAGE: Final = 17
SUMMARY: Final = 18
SUFFIX: Final = ".seg"

_TIME: Final = struct.Struct("<q")
_INDEX: Final = struct.Struct("<qqq")
_LENGTH: Final = struct.Struct("<I")
_FRAME: Final = 17
"""A record's bytes besides its payload: length and CRC (8), type (1), id (8)."""


@dataclass(frozen=True, slots=True)
class Sealed:
    """What a sealed segment's summary record says: its index."""

    next: int
    first_time: int
    last_time: int
    size: int
    summary: SegmentSummary


@dataclass(slots=True)
class Contents:
    """The intact records of a segment file, read in order."""

    first: int
    times: array[int] = field(default_factory=lambda: array("q"))
    datas: list[bytes] = field(default_factory=list)
    sealed: Sealed | None = None
    """Its summary record, if it ends with a valid one."""
    bad_summary: bool = False
    """A summary record was there, unreadable (the summary is rebuilt from the messages)."""

    @property
    def next(self) -> int:
        return self.first + len(self.datas)


def file_name(first: int) -> str:
    return f"{first:020d}{SUFFIX}"


def first_of(path: Path) -> int | None:
    """The first offset a segment file's name says (None: not a segment file's name)."""
    stem = path.name.removesuffix(SUFFIX)
    return int(stem) if path.name.endswith(SUFFIX) and stem.isdigit() else None


def header(first: int) -> bytes:
    return record(HEADER, first)


def message(offset: int, at_ms: int, data: bytes) -> bytes:
    return record(MESSAGE, offset, _TIME.pack(at_ms) + data)


def summary(next_offset: int, first_time: int, last_time: int, size: int,
            batch: SegmentSummary) -> bytes:
    blob = batch.encode()
    length = _FRAME + _INDEX.size + len(blob) + _LENGTH.size
    return record(SUMMARY, next_offset, _INDEX.pack(first_time, last_time, size) + blob
                  + _LENGTH.pack(length))


def _sealed(ident: int, payload: bytes, length: int) -> Sealed:
    """A summary record's index; ValueError if it is not one."""
    if len(payload) < _INDEX.size + _LENGTH.size:
        raise ValueError("summary record too short")
    if _LENGTH.unpack_from(payload, len(payload) - _LENGTH.size)[0] != length:
        raise ValueError("summary record length mismatch")
    first_time, last_time, size = _INDEX.unpack_from(payload)
    batch = SegmentSummary.decode(payload[_INDEX.size : -_LENGTH.size])
    return Sealed(ident, first_time, last_time, size, batch)


def read(records: list[tuple[int, int, bytes]]) -> Contents:
    """A segment from its intact records (``filtex_broker.store.records.parse``). Raises
    ``ValueError`` if it does not start with a header. Reading stops at the first record out
    of place (a message not at the next offset, anything after the summary)."""
    if not records or records[0][0] != HEADER:
        raise ValueError("no segment header")
    contents = Contents(records[0][1])
    times, datas = contents.times, contents.datas
    for kind, ident, payload in records[1:]:
        if kind == MESSAGE and ident == contents.next and len(payload) >= _TIME.size:
            times.append(_TIME.unpack_from(payload)[0])
            datas.append(payload[_TIME.size :])
            continue
        if kind == SUMMARY and ident == contents.next:
            try:
                contents.sealed = _sealed(ident, payload, _FRAME + len(payload))
            except ValueError:
                contents.bad_summary = True
        break
    return contents


def tail(path: Path) -> Sealed | None:
    """A sealed segment's index from the end of its file, without reading its messages (None:
    the file does not end with a valid summary record)."""
    with path.open("rb") as handle:
        end = handle.seek(0, 2)
        if end < _FRAME + _INDEX.size + _LENGTH.size:
            return None
        handle.seek(end - _LENGTH.size)
        (length,) = _LENGTH.unpack(handle.read(_LENGTH.size))
        if not _FRAME + _INDEX.size + _LENGTH.size <= length <= end:
            return None
        handle.seek(end - length)
        data = handle.read(length)
    records, intact = parse(data)
    if intact != length or len(records) != 1 or records[0][0] != SUMMARY:
        return None
    _, ident, payload = records[0]
    try:
        return _sealed(ident, payload, length)
    except ValueError:
        return None
