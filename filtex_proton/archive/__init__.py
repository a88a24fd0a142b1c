"""The message archive: typed Parquet rows built from raw message bytes (docs/ARCHIVE.md).

Why this shape: Spark must answer "would this filter have matched?" exactly as the broker
would, and fast. Every header and properties field gets a typed column, so the common filters
become plain column comparisons; the map sections keep each value's AMQP type, so the spec's
comparison rules can be applied; and the raw bytes are kept, so anything the columns cannot
express exactly is evaluated by our own engine over the very bytes the broker saw.

Only :mod:`pyarrow` is needed (no Spark): the broker's ``--archive`` writes with
:class:`ArchiveWriter`, ``filtex-spark`` reads with Spark, and anything can read with
:func:`read_archive_table` or build rows with :func:`message_row`. The modules that need
pyarrow are imported on first use of their names: :mod:`filtex_proton.archive.columns`
(the column names a planner needs) works without it.
"""

from typing import TYPE_CHECKING

from filtex_proton.lazy import lazy_attribute

if TYPE_CHECKING:
    from filtex_proton.archive.index import (
        BUCKET_COLUMN,
        INDEXABLE_FIELDS,
        MAX_BUCKETS,
        ArchiveIndex,
        common_index_columns,
        index_column,
        segment_index,
    )
    from filtex_proton.archive.layout import (
        MAX_DIRECTORY_BYTES,
        address_directory,
        address_partition,
        arrival_date,
    )
    from filtex_proton.archive.reader import (
        READABLE_VERSIONS,
        ArchiveVersionError,
        SegmentFile,
        archive_dataset,
        archive_segments,
        check_archive,
        check_segments,
        iter_raw,
        list_segments,
        read_archive_table,
        segment_version,
    )
    from filtex_proton.archive.reindex import reindex_archive
    from filtex_proton.archive.rows import (
        describe_typed,
        message_row,
        rows_to_table,
        typed_key,
        typed_value,
    )
    from filtex_proton.archive.schema import (
        ARCHIVE_SCHEMA,
        COLUMN_OF_FIELD,
        DECIMAL_SCALE,
        KEY_TYPES,
        MAP_COLUMNS,
        PARTITION_COLUMNS,
        SCHEMA_VERSION,
        TYPED_MAP,
        TYPED_VALUE,
    )
    from filtex_proton.archive.writer import ArchiveStats, ArchiveWriter, write_segment

__all__ = [
    "ARCHIVE_SCHEMA",
    "BUCKET_COLUMN",
    "COLUMN_OF_FIELD",
    "DECIMAL_SCALE",
    "INDEXABLE_FIELDS",
    "KEY_TYPES",
    "MAP_COLUMNS",
    "MAX_BUCKETS",
    "MAX_DIRECTORY_BYTES",
    "PARTITION_COLUMNS",
    "READABLE_VERSIONS",
    "SCHEMA_VERSION",
    "TYPED_MAP",
    "TYPED_VALUE",
    "ArchiveIndex",
    "ArchiveStats",
    "ArchiveVersionError",
    "ArchiveWriter",
    "SegmentFile",
    "address_directory",
    "address_partition",
    "archive_dataset",
    "archive_segments",
    "arrival_date",
    "check_archive",
    "check_segments",
    "common_index_columns",
    "describe_typed",
    "index_column",
    "iter_raw",
    "list_segments",
    "message_row",
    "read_archive_table",
    "reindex_archive",
    "rows_to_table",
    "segment_index",
    "segment_version",
    "typed_key",
    "typed_value",
    "write_segment",
]

#: Where the names live, those that need no pyarrow first (planning needs only them).
_MODULES = tuple(f"{__name__}.{module}" for module in (
    "columns", "layout", "schema", "index", "rows", "reader", "reindex", "writer"))


def __getattr__(name: str) -> object:
    return lazy_attribute(__name__, name, __all__, _MODULES)
