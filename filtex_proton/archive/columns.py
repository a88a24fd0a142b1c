"""The archive's column names and how its index columns and bucket directories are named.

Why a module of its own: planning a filter over an archive (``filtex-spark explain``, the
console's tester) needs the names but not the Arrow types, so this module imports nothing
beyond the standard library and the AMQP field tables, and works without the spark extra.
:mod:`filtex_proton.archive.schema` adds the Arrow types; :mod:`filtex_proton.archive.index`
writes and reads the index.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Final

from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS
from filtex_proton.amqp.view import Section

__all__ = [
    "BUCKET_COLUMN",
    "COLUMN_OF_FIELD",
    "DECIMAL_PRECISION",
    "DECIMAL_SCALE",
    "INDEXABLE_FIELDS",
    "INDEX_PREFIX",
    "KEY_TYPES",
    "LONG_MAX",
    "LONG_MIN",
    "MAP_COLUMNS",
    "MAX_BUCKETS",
    "PARTITION_COLUMNS",
    "bucket_of",
    "bucket_value",
    "index_column",
    "parse_bucket",
]

#: The exact decimal slot: 38 digits, 18 after the point; every AMQP integer fits.
DECIMAL_PRECISION: Final = 38
DECIMAL_SCALE: Final = 18

LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1

#: AMQP header/properties field name (hyphenated) -> archive column name, in section order.
COLUMN_OF_FIELD: Final[Mapping[str, str]] = {
    name: name.replace("-", "_") for name, _ in (*HEADER_FIELDS, *PROPERTIES_FIELDS)}

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

#: The properties fields an index may name (their typed columns are indexed as they are).
INDEXABLE_FIELDS: Final = ("subject", "to", "group-id", "creation-time")
INDEX_PREFIX: Final = "index_"
#: The partition column of a bucketed segment's directory (``index_bucket=<column>.<N>.<b>``).
BUCKET_COLUMN: Final = "index_bucket"
#: Most buckets an index may have (the hints name a key's bucket for every count up to this).
MAX_BUCKETS: Final = 256
_PLAIN: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def index_column(key: str) -> str:
    """The column that indexes application property ``key``: ``index_`` and the key, every
    character but ASCII letters, digits, ``_`` and ``-`` as ``%XX`` per UTF-8 byte (dots and
    spaces would need quoting in Spark, and Spark's Parquet pushdown skips dotted names)."""
    return INDEX_PREFIX + "".join(
        char if char in _PLAIN else "".join(f"%{b:02X}" for b in char.encode("utf-8",
                                                                             "surrogatepass"))
        for char in key)


def bucket_of(value: str, buckets: int) -> int:
    """The bucket of an index column value (CRC-32 of its UTF-8 bytes, modulo ``buckets``):
    stable across processes and versions, as the directory names it is written into."""
    return zlib.crc32(value.encode("utf-8", "surrogatepass")) % buckets


def bucket_value(column: str, buckets: int, bucket: int) -> str:
    """The ``index_bucket`` partition value of bucket ``bucket`` of ``buckets`` by ``column``."""
    return f"{column}.{buckets}.{bucket}"


def parse_bucket(value: str) -> tuple[str, int, int] | None:
    """``(column, buckets, bucket)`` of an ``index_bucket`` value written exactly as
    :func:`bucket_value` writes it (ASCII digits, no leading zeros, at least one bucket);
    None for any other name."""
    column, _, rest = value.partition(".")
    count, _, bucket = rest.partition(".")
    if not (column.startswith(INDEX_PREFIX) and count.isascii() and count.isdigit()
            and bucket.isascii() and bucket.isdigit()):
        return None  # (str.isdigit alone admits digits int() cannot read, such as '²')
    parsed = column, int(count), int(bucket)
    return parsed if parsed[1] > 0 and bucket_value(*parsed) == value else None
