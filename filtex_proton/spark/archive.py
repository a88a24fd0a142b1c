"""The message archive: typed Parquet rows built from raw message bytes (docs/ARCHIVE.md).

Why this shape: Spark must answer "would this filter have matched?" exactly as
the broker would, and fast. Every header and properties field gets a typed
column, so the common filters become plain column comparisons; the map
sections keep each value's AMQP type (``uint 5`` is not ``long 5``, a symbol
is not a string), so the comparison rules of the spec can be applied in Spark;
and the raw bytes are kept, so anything the columns cannot express exactly is
evaluated by our own engine over the very bytes the broker saw.

Only :mod:`pyarrow` is needed here (no Spark): the broker's ``--archive`` uses
:class:`ArchiveWriter`, and anything can build rows with :func:`message_row`.
"""

from __future__ import annotations

import atexit
import datetime as dt
import decimal
import functools
import hashlib
import itertools
import logging
import os
import secrets
import signal
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from filtex_proton.amqp.bid import as_decimal
from filtex_proton.amqp.codec import DecodeError, decode_at, skip_value
from filtex_proton.amqp.message import RawMessageView
from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS, Kind, amqp_type_name, kind_of
from filtex_proton.amqp.view import Section
from filtex_proton.sql import iso8601

__all__ = [
    "ARCHIVE_SCHEMA",
    "COLUMN_OF_FIELD",
    "DECIMAL_SCALE",
    "KEY_TYPES",
    "MAP_COLUMNS",
    "PARTITION_COLUMNS",
    "READABLE_VERSIONS",
    "SCHEMA_VERSION",
    "TYPED_MAP",
    "TYPED_VALUE",
    "ArchiveStats",
    "ArchiveVersionError",
    "ArchiveWriter",
    "address_directory",
    "address_partition",
    "archive_dataset",
    "check_archive",
    "describe_typed",
    "iter_raw",
    "message_row",
    "read_archive_table",
    "rows_to_table",
    "segment_version",
    "typed_key",
    "typed_value",
]

log = logging.getLogger("filtex.archive")

#: Bumped whenever a column is added, removed or changes meaning (docs/ARCHIVE.md).
SCHEMA_VERSION: Final = 2
_VERSION_KEY: Final = b"filtex.archive.schema_version"

#: The exact decimal slot: 38 digits, 18 after the point; every AMQP integer fits.
DECIMAL_PRECISION: Final = 38
DECIMAL_SCALE: Final = 18
_DECIMAL_QUANTUM: Final = decimal.Decimal(1).scaleb(-DECIMAL_SCALE)
_DECIMAL_LIMIT: Final = decimal.Decimal(10) ** (DECIMAL_PRECISION - DECIMAL_SCALE)
_WIDE: Final = decimal.Context(prec=200, Emax=999_999, Emin=-999_999)

LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1

#: One AMQP value with its type: the type name and the slot(s) that hold the value.
TYPED_VALUE: Final = pa.struct([
    pa.field("type", pa.string()),
    pa.field("boolean", pa.bool_()),
    pa.field("long", pa.int64()),
    pa.field("decimal", pa.decimal128(DECIMAL_PRECISION, DECIMAL_SCALE)),
    pa.field("double", pa.float64()),
    pa.field("string", pa.string()),
    pa.field("binary", pa.binary()),
])

#: A map section: typed key (``"string:region"``, ``"symbol:x-opt-foo"``) -> typed value.
TYPED_MAP: Final = pa.map_(pa.string(), TYPED_VALUE)

#: Header/properties field name -> (column, Arrow type, the AMQP type a conforming value has).
#: ``None`` as the AMQP type: polymorphic (message-id, correlation-id), stored as TYPED_VALUE.
_FIELD_COLUMNS: Final[dict[str, tuple[str, pa.DataType, str | None]]] = {
    "durable": ("durable", pa.bool_(), "boolean"),
    "priority": ("priority", pa.int16(), "ubyte"),
    "ttl": ("ttl", pa.int64(), "uint"),
    "first-acquirer": ("first_acquirer", pa.bool_(), "boolean"),
    "delivery-count": ("delivery_count", pa.int64(), "uint"),
    "message-id": ("message_id", TYPED_VALUE, None),
    "user-id": ("user_id", pa.binary(), "binary"),
    "to": ("to", pa.string(), "string"),
    "subject": ("subject", pa.string(), "string"),
    "reply-to": ("reply_to", pa.string(), "string"),
    "correlation-id": ("correlation_id", TYPED_VALUE, None),
    "content-type": ("content_type", pa.string(), "symbol"),
    "content-encoding": ("content_encoding", pa.string(), "symbol"),
    "absolute-expiry-time": ("absolute_expiry_time", pa.int64(), "timestamp"),
    "creation-time": ("creation_time", pa.int64(), "timestamp"),
    "group-id": ("group_id", pa.string(), "string"),
    "group-sequence": ("group_sequence", pa.int64(), "uint"),
    "reply-to-group-id": ("reply_to_group_id", pa.string(), "string"),
}
assert list(_FIELD_COLUMNS) == [n for n, _ in HEADER_FIELDS] + [n for n, _ in PROPERTIES_FIELDS]

#: AMQP field name (hyphenated) -> archive column name.
COLUMN_OF_FIELD: Final[Mapping[str, str]] = {f: c for f, (c, _, _) in _FIELD_COLUMNS.items()}

#: Map section -> archive column.
MAP_COLUMNS: Final[Mapping[Section, str]] = {
    Section.DELIVERY_ANNOTATIONS: "delivery_annotations",
    Section.MESSAGE_ANNOTATIONS: "message_annotations",
    Section.APPLICATION_PROPERTIES: "application_properties",
    Section.FOOTER: "footer",
}

#: The key types a *regular* row's map section may have (AMQP 1.0 §3.2.3, §3.2.5, §3.2.10).
KEY_TYPES: Final[Mapping[Section, frozenset[str]]] = {
    Section.DELIVERY_ANNOTATIONS: frozenset({"symbol", "ulong"}),
    Section.MESSAGE_ANNOTATIONS: frozenset({"symbol", "ulong"}),
    Section.APPLICATION_PROPERTIES: frozenset({"string"}),
    Section.FOOTER: frozenset({"symbol", "ulong"}),
}

#: Directory partition keys, outermost first; their values are in the paths, not the files.
#: ``regular`` is one so that Spark prunes whole directories: the engine's branch over
#: irregular rows reads no file at all when there are none.
PARTITION_COLUMNS: Final = ("address", "date", "regular")

ARCHIVE_SCHEMA: Final = pa.schema(
    [
        pa.field("arrival_ms", pa.int64(), nullable=False),
        pa.field("sequence", pa.int64(), nullable=False),
        pa.field("decode_error", pa.string()),
        *(pa.field(column, arrow_type) for column, arrow_type, _ in _FIELD_COLUMNS.values()),
        *(pa.field(column, TYPED_MAP) for column in MAP_COLUMNS.values()),
        pa.field("nonconforming", TYPED_MAP),
        pa.field("raw", pa.binary(), nullable=False),
        pa.field("long_address", pa.string()),
    ],
    metadata={_VERSION_KEY: str(SCHEMA_VERSION).encode()},
)

# Format codes that start a compound value (its bytes are archived, not its contents).
_COMPOUND_NAMES: Final[dict[int, str]] = {
    0x00: "described", 0x45: "list", 0xC0: "list", 0xD0: "list", 0xC1: "map", 0xD1: "map",
    0xE0: "array", 0xF0: "array",
}
_DECIMAL_NAMES: Final[dict[int, str]] = {0x74: "decimal32", 0x84: "decimal64", 0x94: "decimal128"}
_u32x2 = struct.Struct(">II").unpack_from
_MISSING: Final[Any] = object()
#: Kinds whose archived form needs the value's own encoding, not just the decoded value.
_NEEDS_ENCODING: Final = frozenset({Kind.DECIMAL, Kind.MAP, Kind.LIST, Kind.ARRAY,
                                    Kind.DESCRIBED})


# ----------------------------------------------------------------------------- typed values


def _exact_decimal(value: decimal.Decimal) -> decimal.Decimal | None:
    """The value in the decimal slot, or ``None`` when it does not fit exactly."""
    if not value.is_finite() or abs(value) >= _DECIMAL_LIMIT:
        return None
    scaled = value.quantize(_DECIMAL_QUANTUM, context=_WIDE)
    return scaled if scaled == value else None


def _empty(type_name: str) -> dict[str, Any]:
    return {"type": type_name, "boolean": None, "long": None, "decimal": None, "double": None,
            "string": None, "binary": None}


def typed_value(value: Any, encoded: bytes | None = None) -> tuple[dict[str, Any], bool]:
    """One value as a TYPED_VALUE row, and whether it is *complete*.

    ``encoded`` is the value's own AMQP encoding when the caller has it: its
    first byte tells decimal32/64/128 apart, and a compound value is archived
    as those bytes. A complete value is one a Spark Column expression can
    reason about exactly (not described; a decimal that fits the decimal slot).
    """
    code = encoded[0] if encoded else None
    if code is not None and code in _COMPOUND_NAMES:
        row = _empty(_COMPOUND_NAMES[code])
        row["binary"] = encoded
        return row, code != 0x00
    kind = kind_of(value)
    name = amqp_type_name(value)
    if kind is Kind.DECIMAL and code is not None:
        name = _DECIMAL_NAMES.get(code, name)
    row = _empty(name)
    complete = True
    if kind is Kind.NULL:
        pass
    elif kind is Kind.BOOLEAN:
        row["boolean"] = value
    elif kind is Kind.INTEGER or kind is Kind.TIMESTAMP:
        number = int(value)
        if LONG_MIN <= number <= LONG_MAX:
            row["long"] = number
        else:  # a ulong above 2^63-1
            row["decimal"] = decimal.Decimal(number)
            row["double"] = float(number)
    elif kind is Kind.FLOAT:
        row["double"] = float(value)
    elif kind is Kind.DECIMAL:
        exact = as_decimal(value)
        row["string"] = str(exact)
        row["decimal"] = _exact_decimal(exact)
        if exact.is_finite():
            row["double"] = float(exact)
        complete = row["decimal"] is not None
    elif kind is Kind.CHAR:
        row["string"] = str(value)
        row["long"] = ord(value)
    elif kind is Kind.UUID:
        row["binary"] = value.bytes
        row["string"] = str(value)
    elif kind is Kind.BINARY:
        row["binary"] = bytes(value)
    elif kind is Kind.STRING or kind is Kind.SYMBOL:
        row["string"] = text = str(value)
        # What the text means compared with a timestamp (§6.3.2), read by the engine's own
        # ISO 8601 code, so Spark never has to parse dates. Beyond a long: not complete.
        try:
            millis = iso8601.to_millis(text)
        except Exception:  # the engine would fail the same way: leave it to the engine
            return row, False
        if millis is not None:
            if not LONG_MIN <= millis <= LONG_MAX:
                return row, False
            row["long"] = millis
    else:  # a compound given without its encoding
        from filtex_proton.amqp.codec import encode_value

        row["binary"] = encode_value(value)
        complete = kind is not Kind.DESCRIBED
    return row, complete


def typed_key(key: Any, encoded: bytes | None = None) -> str:
    """The typed-key string of a map key: ``"<AMQP type>:<text>"`` (docs/ARCHIVE.md)."""
    code = encoded[0] if encoded else None
    if code is not None and code in _COMPOUND_NAMES:
        return f"{_COMPOUND_NAMES[code]}:{encoded.hex()}"  # type: ignore[union-attr]
    kind = kind_of(key)
    name = amqp_type_name(key)
    if kind is Kind.DECIMAL and code is not None:
        name = _DECIMAL_NAMES.get(code, name)
    if kind in (Kind.STRING, Kind.SYMBOL, Kind.CHAR):
        text = str(key)
    elif kind is Kind.BOOLEAN:
        text = "true" if key else "false"
    elif kind in (Kind.INTEGER, Kind.TIMESTAMP):
        text = str(int(key))
    elif kind is Kind.FLOAT:
        text = repr(float(key))
    elif kind is Kind.DECIMAL:
        text = str(as_decimal(key))
    elif kind is Kind.UUID:
        text = str(key)
    elif kind is Kind.BINARY:
        text = bytes(key).hex()
    elif kind is Kind.NULL:
        text = ""
    else:
        from filtex_proton.amqp.codec import encode_value

        text = encode_value(key).hex()
    return f"{name}:{text}"


# ----------------------------------------------------------------------------- walking sections


def _compound_items(buf: bytes, offset: int) -> tuple[int, int]:
    """Where the elements of the list or map at ``offset`` start, and how many there are."""
    code = buf[offset]
    if code in (0x40, 0x45):
        return offset + 1, 0
    if code in (0xC0, 0xC1):
        return offset + 3, buf[offset + 2] if buf[offset + 1] else 0
    if code in (0xD0, 0xD1):
        return offset + 9, _u32x2(buf, offset + 1)[1]
    raise DecodeError(f"expected a list or map, found format code 0x{code:02x}", offset)


def _map_entries(buf: bytes, offset: int,
                 decoded: Mapping[Any, Any]) -> dict[Any, tuple[bytes, Any, bytes]]:
    """A map section's entries with each key's and value's own encoding.

    Built the way the decoder builds its dict (``d[key] = value`` in order), so
    that duplicate keys collapse exactly as they do in the view the filters see:
    the first key object stays, the last value wins. Values are taken from the
    view's own ``decoded`` map (the very objects the filters see), keys decoded
    again only to find them.
    """
    pos, count = _compound_items(buf, offset)
    entries: dict[Any, tuple[bytes, Any, bytes]] = {}
    for _ in range(count // 2):
        key_start = pos
        key, pos = decode_at(buf, pos)
        value_start = pos
        pos = skip_value(buf, pos)
        previous = entries.get(key)
        key_bytes = buf[key_start:value_start] if previous is None else previous[0]
        value = decoded.get(key, _MISSING)
        if value is _MISSING:  # a key not equal to itself (NaN): decode the value here
            value = None if buf[value_start] in _COMPOUND_NAMES else decode_at(buf, value_start)[0]
        entries[key] = (key_bytes, value, buf[value_start:pos])
    return entries


def _field_encodings(buf: bytes, offset: int, names: tuple[str, ...]) -> dict[str, bytes]:
    """The encoding of each non-null field of the composite (list) section at ``offset``."""
    pos, count = _compound_items(buf, offset)
    found: dict[str, bytes] = {}
    for index in range(count):
        start = pos
        pos = skip_value(buf, pos)
        if index < len(names) and buf[start] != 0x40:
            found[names[index]] = buf[start:pos]
    return found


_HEADER_NAMES: Final = tuple(name for name, _ in HEADER_FIELDS)
_PROPERTIES_NAMES: Final = tuple(name for name, _ in PROPERTIES_FIELDS)


def _plain(value: Any, declared: str) -> Any:
    """A conforming header/properties value as its column holds it."""
    if declared == "binary":
        return bytes(value)
    if declared in ("string", "symbol"):
        return str(value)
    if declared == "boolean":
        return bool(value)
    return int(value)  # ubyte, uint, timestamp


_DAY_MS: Final = 86_400_000


def _arrival_date(arrival_ms: int) -> str:
    return _date_of_day(arrival_ms // _DAY_MS)  # floor: days before 1970 too


@functools.lru_cache(maxsize=64)
def _date_of_day(day: int) -> str:
    """The ISO date of a day since the epoch (cached: an archive's rows share a few days)."""
    return (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()


_BLANK_ROW: Final[dict[str, Any]] = {
    "arrival_ms": 0, "sequence": 0, "regular": False, "decode_error": None,
    **{column: None for column, _, _ in _FIELD_COLUMNS.values()},
    **{column: None for column in MAP_COLUMNS.values()},
    "nonconforming": None,
}
"""Every column NULL, in schema order; a row starts as a copy (cheaper than building it)."""

_SECTIONS: Final = tuple(Section)
"""Iterating an enum costs more than a tuple; this is once per archived message."""


def _blank_row(data: bytes, address: str, arrival_ms: int, sequence: int) -> dict[str, Any]:
    row = _BLANK_ROW.copy()
    row["arrival_ms"] = arrival_ms
    row["sequence"] = sequence
    row["raw"] = data
    row["long_address"] = None if address_partition(address) == address else address
    row["address"] = address
    row["date"] = _arrival_date(arrival_ms)
    return row


def message_row(data: bytes, *, address: str, arrival_ms: int, sequence: int = 0) -> dict[str, Any]:
    """The archive row of one message: ARCHIVE_SCHEMA's columns plus the partition columns
    ``address``, ``date`` and ``regular``.

    Never raises for bad bytes: a message that does not decode gets a row with
    ``decode_error`` set, ``regular`` false and only ``raw`` and the arrival
    columns filled, so archives keep everything that passed through a node.
    ``sequence`` orders messages that arrived in the same millisecond.
    """
    buf = bytes(data)
    row = _blank_row(buf, address, arrival_ms, sequence)
    try:
        view = RawMessageView(buf)
        sections = {s: view.section(s) for s in _SECTIONS}  # decodes and validates them all
        offsets = {span.section: span.value for span in view.spans if span.section is not None}
    except DecodeError as exc:
        row["decode_error"] = str(exc)
        return row
    regular = True
    nonconforming: list[tuple[str, dict[str, Any]]] = []
    composites = ((Section.HEADER, _HEADER_NAMES), (Section.PROPERTIES, _PROPERTIES_NAMES))
    for section, names in composites:
        fields = sections[section]
        if not fields:
            continue
        encodings: dict[str, bytes] | None = None
        for name, value in fields.items():
            column, _, declared = _FIELD_COLUMNS[name]
            if declared is not None and amqp_type_name(value) == declared:
                row[column] = _plain(value, declared)
                continue
            encoded = None
            if kind_of(value) in _NEEDS_ENCODING:  # the decimal's width, the compound's bytes
                if encodings is None:
                    encodings = _field_encodings(buf, offsets[section], names)
                encoded = encodings.get(name)
            if declared is None:  # message-id, correlation-id: any type, typed
                row[column], complete = typed_value(value, encoded)
                regular &= complete
            else:
                nonconforming.append((name, typed_value(value, encoded)[0]))
                regular = False
    for section, column in MAP_COLUMNS.items():
        if sections[section] is None:
            continue
        allowed = KEY_TYPES[section]
        entries: list[tuple[str, dict[str, Any]]] = []
        seen: set[str] = set()
        found = _map_entries(buf, offsets[section], sections[section] or {})
        for key, (key_bytes, value, value_bytes) in found.items():
            text = typed_key(key, key_bytes)
            if text in seen:  # two keys that differ yet print alike (two NaNs)
                text = f"{text}#{len(entries)}"
                regular = False
            seen.add(text)
            typed, complete = typed_value(value, value_bytes)
            regular &= complete and text.partition(":")[0] in allowed
            entries.append((text, typed))
        row[column] = entries
    row["nonconforming"] = nonconforming or None
    row["regular"] = regular
    return row


# ----------------------------------------------------------------------------- partitions

#: Characters Spark escapes in partition directory names (ExternalCatalogUtils.escapePathName),
#: and ``~``, which marks a shortened address (so a plain name never has one).
_ESCAPED: Final = (frozenset('"#%\'*/:=?\\\x7f{[]^~')
                   | frozenset(chr(c) for c in range(0x20)))
_NULL_PARTITION: Final = "__HIVE_DEFAULT_PARTITION__"
#: Longest directory name written, in bytes (file systems allow 255).
MAX_DIRECTORY_BYTES: Final = 240
_DIGEST_CHARS: Final = 32  # 128 bits of SHA-256: distinct addresses never share a directory
_KEY_PREFIX: Final = "address="


def _escape(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def _name_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@functools.lru_cache(maxsize=4096)
def address_partition(address: str) -> str:
    """The ``address`` partition value of an address: the address itself when its escaped
    directory name fits ``MAX_DIRECTORY_BYTES``, else a prefix of it, ``~`` and a hash.

    A shortened address is not the address: the rows in it carry the real one in
    ``long_address``, and the readers (:func:`read_archive_table`,
    ``session.read_archive``) put it back in ``address``.
    """
    if _name_bytes(_KEY_PREFIX + _escape(address)) <= MAX_DIRECTORY_BYTES:
        return address
    digest = hashlib.sha256(address.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
    budget = MAX_DIRECTORY_BYTES - len(_KEY_PREFIX) - 1 - _DIGEST_CHARS
    cut = 0
    for char in address:  # whole characters and whole %XX escapes only
        budget -= _name_bytes(_escape(char))
        if budget < 0:
            break
        cut += 1
    return f"{address[:cut]}~{digest}"


def address_directory(address: str) -> str:
    """The partition directory of an address, escaped the way Spark and pyarrow read it back.

    Only what Spark itself escapes (and ``~``) becomes ``%XX``: Spark un-escapes
    byte by byte, so other (non-ASCII) characters stay as they are, UTF-8 in the
    file name. An empty address is the partition Spark reads as NULL. An address
    too long for a file name gets :func:`address_partition`'s shortened form.
    """
    if not address:
        return f"{_KEY_PREFIX}{_NULL_PARTITION}"
    value = address_partition(address)
    if value == address:
        return _KEY_PREFIX + _escape(address)
    prefix, _, digest = value.rpartition("~")
    return f"{_KEY_PREFIX}{_escape(prefix)}~{digest}"


# ----------------------------------------------------------------------------- the writer


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
    groups that hold an ``x``).

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
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segment_rows = segment_rows
        self.max_buffer_bytes = max_buffer_bytes
        self.flush_interval = flush_interval
        self.compression = compression
        self.row_group_rows = row_group_rows
        self.fsync = fsync
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
        temporary = folder / f".{name}.tmp"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            # The partition columns are in the rows too; from_pylist takes the schema's only.
            table = pa.Table.from_pylist(partition.rows, schema=ARCHIVE_SCHEMA)
            pq.write_table(table, temporary, compression=self.compression,
                           row_group_size=self.row_group_rows)
            if self.fsync:
                _fsync(temporary)
            os.replace(temporary, folder / name)
            if self.fsync:
                _fsync(folder, directory=True)
        except Exception:
            self.stats.dropped += len(partition.rows)
            temporary.unlink(missing_ok=True)
            raise
        self.stats.written += len(partition.rows)
        self.stats.segments += 1


def _fsync(path: Path, *, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- reading

_PARTITION_FIELDS: Final = (pa.field("address", pa.string()), pa.field("date", pa.string()),
                             pa.field("regular", pa.bool_()))
_PARTITIONING: Final = pads.partitioning(pa.schema(list(_PARTITION_FIELDS)), flavor="hive")


#: Schema versions this code reads, and what differs from the current one.
#: 1: no ``long_address`` column (read as NULL, which it is for every version-1 row).
READABLE_VERSIONS: Final = frozenset({1, SCHEMA_VERSION})


class ArchiveVersionError(ValueError):
    """A segment file this version of filtex-proton cannot read correctly."""


_SPARK_KEY: Final = b"org.apache.spark.sql.parquet.row.metadata"


def segment_version(schema: pa.Schema, where: str) -> int:
    """The schema version in a segment's Parquet key-value metadata, checked.

    Raises :class:`ArchiveVersionError` for a newer version (its columns may mean
    something this code does not know), an unknown older one, or a file that has
    no version at all. One exception: Spark cannot stamp the version, so a file
    Spark wrote (``filtex-spark select --out``) with exactly the current columns
    is taken for the current version.
    """
    metadata = schema.metadata or {}
    text = metadata.get(_VERSION_KEY)
    if text is None:
        if _SPARK_KEY in metadata and set(schema.names) == set(ARCHIVE_SCHEMA.names):
            return SCHEMA_VERSION
        raise ArchiveVersionError(f"{where}: not a filtex archive segment (no "
                                  f"{_VERSION_KEY.decode()} in its Parquet metadata)")
    try:
        version = int(text)
    except ValueError:
        raise ArchiveVersionError(f"{where}: unreadable archive schema version "
                                  f"{text!r}") from None
    if version > SCHEMA_VERSION:
        raise ArchiveVersionError(
            f"{where}: written with archive schema version {version}, newer than the "
            f"version {SCHEMA_VERSION} this filtex-proton reads; upgrade filtex-proton to read it")
    if version not in READABLE_VERSIONS:
        raise ArchiveVersionError(f"{where}: archive schema version {version} is not one this "
                                  f"filtex-proton reads ({sorted(READABLE_VERSIONS)})")
    return version


def check_archive(directory: str | os.PathLike[str]) -> dict[int, int]:
    """Check every segment's schema version (one footer read per file); returns how many
    segments each version has. Raises :class:`ArchiveVersionError` at the first bad one."""
    dataset = pads.dataset(os.fspath(directory), format="parquet", partitioning=_PARTITIONING)
    counts: dict[int, int] = {}
    for path in dataset.files:
        version = segment_version(pq.read_schema(path, filesystem=dataset.filesystem), path)
        counts[version] = counts.get(version, 0) + 1
    return counts


def archive_dataset(directory: str | os.PathLike[str], *, check: bool = True) -> pads.Dataset:
    """The archive as a pyarrow dataset (address and date from the directory names: a
    shortened address there, the real one in ``long_address``; see :func:`address_partition`).

    ``check``: refuse segments of a schema version this code cannot read
    (:func:`check_archive`); older readable versions are read in the current
    schema, their missing columns NULL.
    """
    if check:
        check_archive(directory)
    return pads.dataset(os.fspath(directory), format="parquet", partitioning=_PARTITIONING,
                        schema=_with_partitions(ARCHIVE_SCHEMA))


def _with_partitions(schema: pa.Schema) -> pa.Schema:
    for item in _PARTITION_FIELDS:
        schema = schema.append(item)
    return schema


def read_archive_table(directory: str | os.PathLike[str],
                       columns: Iterable[str] | None = None) -> pa.Table:
    """Read (some columns of) an archive with pyarrow alone, in archive order.

    ``address`` is the real address, also for addresses too long for a directory name.
    """
    wanted = None if columns is None else list(dict.fromkeys([*columns, "arrival_ms",
                                                              "sequence"]))
    reading = wanted
    if wanted is not None and "address" in wanted and "long_address" not in wanted:
        reading = [*wanted, "long_address"]
    table = archive_dataset(directory).to_table(columns=reading)
    if "address" in table.column_names:
        real = pc.coalesce(table.column("long_address"), table.column("address"))
        table = table.set_column(table.column_names.index("address"), "address", real)
        if reading is not wanted:
            table = table.drop_columns(["long_address"])
    return table.sort_by([("arrival_ms", "ascending"), ("sequence", "ascending")])


def iter_raw(directory: str | os.PathLike[str], batch_rows: int = 65536) -> Iterator[bytes]:
    """The raw bytes of every archived message, file by file (not in archive order)."""
    for batch in archive_dataset(directory).to_batches(columns=["raw"], batch_size=batch_rows):
        yield from batch.column(0).to_pylist()


def rows_to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows from :func:`message_row` as one table (partition columns included)."""
    return pa.Table.from_pylist(list(rows), schema=_with_partitions(ARCHIVE_SCHEMA))


# Used by tests and tools that must know what a value is without Spark.
def describe_typed(row: Mapping[str, Any] | None) -> Any:
    """A TYPED_VALUE row back as a Python value of the right AMQP type, where possible."""
    if row is None:
        return None
    from proton import (
        byte,
        char,
        float32,
        int32,
        short,
        symbol,
        timestamp,
        ubyte,
        uint,
        ulong,
        ushort,
    )

    name = row["type"]
    makers: dict[str, Callable[[Any], Any]] = {
        "ubyte": ubyte, "ushort": ushort, "uint": uint, "ulong": ulong, "byte": byte,
        "short": short, "int": int32, "long": int, "timestamp": timestamp,
    }
    if name == "null":
        return None
    if name == "boolean":
        return row["boolean"]
    if name in makers:
        number = row["long"] if row["long"] is not None else int(row["decimal"])
        return makers[name](number)
    if name == "float":
        return float32(row["double"])
    if name == "double":
        return row["double"]
    if name.startswith("decimal"):
        return decimal.Decimal(row["string"])
    if name == "char":
        return char(row["string"])
    if name == "uuid":
        return uuid.UUID(bytes=row["binary"])
    if name == "binary":
        return row["binary"]
    if name == "string":
        return row["string"]
    if name == "symbol":
        return symbol(row["string"])
    return decode_at(row["binary"], 0)[0]  # map, list, array, described: their encoding
