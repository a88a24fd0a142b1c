"""What an archive segment indexes, so that a selective filter reads little of it (docs/ARCHIVE.md).

Why this shape: Spark's Parquet reader skips row groups by their min/max statistics,
dictionaries and Bloom filters, and pages by the page index, but only for top-level
columns (never inside the ``application_properties`` map). So an indexed segment has

- its rows **sorted** by the index keys (the operator's application properties first, then
  ``subject``, ``to``, ``group-id``, ``creation-time``), so that equal values share row groups
  and pages and min/max statistics are narrow;
- a **Bloom filter** per row group on every index column (sized by the segment's distinct
  values), which rules out the row groups a key is not in whatever the sort order;
- a **page index** (column and offset indexes) and pages of at most ``page_rows`` rows, so that
  Spark reads only the pages of a row group whose rows can match;
- one top-level string column per indexed application property, ``index_<key>``: ``=`` and
  the value's string slot when the value has one (a string or symbol: the only types an
  equality with a string literal can be TRUE for), else the empty string. Never NULL, so a
  filter that a segment lacks the column for can be recognised (it reads NULL there).

With ``buckets`` (N > 0) a segment is also split by a hash of its first index column into N
files, each in a Hive-style directory ``index_bucket=<column>.<N>.<b>`` below the segment's
``regular=`` directory: Spark prunes those directories when it plans the query (the hints add
``index_bucket`` conditions), so an equality on the first key lists, opens and schedules one
file in N. Rows whose key is absent, NULL or not a string have the index value ``""`` and sit
in that value's bucket; an equality with a string can never be TRUE for them.

The segment's Parquet metadata lists its index (``filtex.archive.index``); readers that do not
know it lose nothing (the index columns are derived from the others), so the schema version
stays 2.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from filtex_proton.archive.columns import (
    BUCKET_COLUMN,
    COLUMN_OF_FIELD,
    INDEXABLE_FIELDS,
    MAX_BUCKETS,
    bucket_of,
    bucket_value,
    index_column,
    parse_bucket,
)

__all__ = [
    "BUCKET_COLUMN",
    "INDEXABLE_FIELDS",
    "INDEX_KEY",
    "MAX_BUCKETS",
    "ArchiveIndex",
    "bucket_of",
    "bucket_value",
    "index_column",
    "parse_bucket",
    "segment_index",
]

#: The Parquet metadata key that lists a segment's index.
INDEX_KEY: Final = b"filtex.archive.index"
@dataclass(frozen=True, slots=True)
class ArchiveIndex:
    """What an :class:`~filtex_proton.archive.ArchiveWriter` indexes in each segment."""

    properties: tuple[str, ...] = ()
    """Application property keys, in sort order (the first sorts the segment)."""
    fields: tuple[str, ...] = INDEXABLE_FIELDS
    """Properties fields (hyphenated AMQP names), sorted after the application properties."""
    bloom_fpp: float = 0.01
    """False-positive rate of the Bloom filters (per row group and column)."""
    page_rows: int = 1024
    """Most rows per data page (the page index's granularity)."""
    buckets: int = 0
    """Split each segment into this many files by a hash of the first application property
    (0: one file); Spark skips the other buckets' files without opening them."""

    def __post_init__(self) -> None:
        unknown = [f for f in self.fields if f not in INDEXABLE_FIELDS]
        if unknown:
            raise ValueError(f"cannot index field(s) {', '.join(unknown)}: only "
                             f"{', '.join(INDEXABLE_FIELDS)}")
        empty = [k for k in self.properties if not k]
        if empty or len(set(self.properties)) != len(self.properties):
            raise ValueError(f"application property keys to index must be distinct and "
                             f"non-empty: {list(self.properties)}")
        if not 0.0 < self.bloom_fpp < 1.0:
            raise ValueError(f"bloom_fpp must be between 0 and 1, not {self.bloom_fpp}")
        if self.page_rows < 1:
            raise ValueError(f"page_rows must be at least 1, not {self.page_rows}")
        if not 0 <= self.buckets <= MAX_BUCKETS or (self.buckets and not self.properties):
            raise ValueError(f"buckets must be 0, or 1 to {MAX_BUCKETS} with an application "
                             f"property to hash, not {self.buckets} with properties "
                             f"{list(self.properties)}")

    @property
    def columns(self) -> tuple[str, ...]:
        """The index columns in sort order."""
        return (*(index_column(k) for k in self.properties),
                *(COLUMN_OF_FIELD[f] for f in self.fields))

    def metadata(self) -> bytes:
        described: dict[str, Any] = {"properties": list(self.properties),
                                     "fields": list(self.fields)}
        if self.buckets:
            described["buckets"] = self.buckets
        return json.dumps(described).encode()

    def apply(self, table: pa.Table) -> pa.Table:
        """The segment's rows with the index columns added, sorted by the index."""
        for key in self.properties:
            entry = pc.map_lookup(table.column("application_properties"),
                                  pa.scalar(f"string:{key}"), "first")
            text = pc.struct_field(entry, "string")
            value = pc.fill_null(pc.binary_join_element_wise("=", text, ""), "")
            table = table.append_column(pa.field(index_column(key), pa.string(),
                                                 nullable=False), value)
        order = [(column, "ascending", "at_end") for column in self.columns]
        if order:
            table = table.sort_by(order)
        return table

    def split(self, table: pa.Table) -> dict[str, pa.Table]:
        """An :meth:`apply`-ed table by bucket (``index_bucket`` value -> its rows, in order);
        the whole table under ``""`` when not bucketed."""
        if not self.buckets:
            return {"": table}
        column = index_column(self.properties[0])
        encoded = pc.dictionary_encode(table.column(column)).combine_chunks()
        of_value = pa.array([bucket_of(v, self.buckets) for v in encoded.dictionary.to_pylist()],
                            pa.int32())
        buckets = pc.take(of_value, encoded.indices)
        return {bucket_value(column, self.buckets, b): table.filter(pc.equal(buckets, b))
                for b in sorted(set(of_value.to_pylist()))}

    def write_options(self, table: pa.Table, row_group_rows: int) -> dict[str, Any]:
        """``pq.write_table`` options for an :meth:`apply`-ed table: Bloom filters sized by the
        distinct values, the page index, small pages, the sort order."""
        bloom: dict[str, Mapping[str, float | int]] = {}
        for column in self.columns:
            distinct = pc.count_distinct(table.column(column)).as_py()
            bloom[column] = {"ndv": max(1, min(row_group_rows, distinct)),
                             "fpp": self.bloom_fpp}
        # Parquet numbers leaf columns (a map is several): from_ordering counts them.
        sorting = pq.SortingColumn.from_ordering(
            table.schema, [(c, "ascending") for c in self.columns], null_placement="at_end")
        return {"bloom_filter_options": bloom, "write_page_index": True,
                "max_rows_per_page": self.page_rows, "sorting_columns": sorting or None}


def segment_index(schema: pa.Schema) -> ArchiveIndex | None:
    """The index a segment was written with (from its Parquet metadata); None: not indexed."""
    text = (schema.metadata or {}).get(INDEX_KEY)
    if text is None:
        return None
    described = json.loads(text)
    return ArchiveIndex(tuple(described.get("properties", ())),
                        tuple(f for f in described.get("fields", ()) if f in INDEXABLE_FIELDS),
                        buckets=int(described.get("buckets", 0)))


def common_index_columns(indexes: Iterable[ArchiveIndex | None]) -> frozenset[str]:
    """The application property index columns every one of these segments has."""
    common: frozenset[str] | None = None
    for index in indexes:
        have = frozenset() if index is None else frozenset(
            index_column(k) for k in index.properties)
        common = have if common is None else common & have
    return common or frozenset()
