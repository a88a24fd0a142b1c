"""Reading an archive with pyarrow alone: version checks first, then a dataset in archive order."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from filtex_proton.archive.index import BUCKET_COLUMN, ArchiveIndex, segment_index
from filtex_proton.archive.schema import (
    ARCHIVE_SCHEMA,
    PARTITIONING,
    SCHEMA_VERSION,
    VERSION_KEY,
    with_partitions,
)

__all__ = [
    "READABLE_VERSIONS",
    "ArchiveVersionError",
    "SegmentFile",
    "archive_dataset",
    "archive_segments",
    "check_archive",
    "check_segments",
    "iter_raw",
    "list_segments",
    "read_archive_table",
    "segment_version",
]

#: Segment footers remembered by :func:`check_segments` (a few hundred bytes each).
FOOTER_CACHE_SIZE: Final = 65_536

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
    text = metadata.get(VERSION_KEY)
    if text is None:
        if _SPARK_KEY in metadata and set(schema.names) == set(ARCHIVE_SCHEMA.names):
            return SCHEMA_VERSION
        raise ArchiveVersionError(f"{where}: not a filtex archive segment (no "
                                  f"{VERSION_KEY.decode()} in its Parquet metadata)")
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


_NULL_PARTITION: Final = "__HIVE_DEFAULT_PARTITION__"


def _unescape(value: str) -> str | None:
    """A directory name's partition value as Spark reads it (ExternalCatalogUtils'
    unescapePathName: each ``%XX`` is the character XX, nothing else changes); None for
    Hive's NULL partition."""
    if value == _NULL_PARTITION:
        return None
    if "%" not in value:
        return value
    out: list[str] = []
    i = 0
    while i < len(value):
        code = value[i + 1:i + 3]
        if value[i] == "%" and len(code) == 2 and all(c in "0123456789abcdefABCDEF"
                                                      for c in code):
            out.append(chr(int(code, 16)))
            i += 3
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """A segment file and the partition values its directory names give (nothing opened)."""

    path: str
    partitions: Mapping[str, str | None]
    """``key=value`` directories below the archive's, unescaped as Spark reads them (None:
    Hive's NULL partition)."""

    @property
    def bucketed(self) -> bool:
        """In an ``index_bucket=`` directory (a bucketed segment's file)."""
        return BUCKET_COLUMN in self.partitions


def list_segments(directory: str | os.PathLike[str]) -> list[SegmentFile]:
    """Every segment file of an archive directory with its partition values, from the
    names alone: no file is opened (a damaged file is only seen when read).

    The files are those pyarrow's dataset discovery finds (names starting with ``.`` or
    ``_`` are hidden), so this is what :func:`archive_segments` checks.
    """
    base = os.fspath(directory)
    # With the schema given, discovery lists and does not inspect any file.
    dataset = pads.dataset(base, format="parquet", partitioning=PARTITIONING,
                           schema=with_partitions(ARCHIVE_SCHEMA))
    found: list[SegmentFile] = []
    for path in dataset.files:
        parts = os.path.relpath(path, base).split(os.sep)[:-1]
        found.append(SegmentFile(path, {key: _unescape(value) for key, sep, value in
                                        (part.partition("=") for part in parts) if sep}))
    return found


def check_segments(paths: Iterable[str]) -> list[tuple[str, int, ArchiveIndex | None]]:
    """These segment files, each with its checked schema version and its index. Raises
    :class:`ArchiveVersionError` at the first one this code cannot read.

    A footer is read once per file as long as the file stays the same (its path, inode, size
    and modification time): a long-lived session querying an archive again (a notebook, a
    service, the bench) pays a ``stat`` per file instead of a footer read (about 2 ms, which
    made a filter that pins no bucket cost 0.06 s more per query over 32 files)."""
    found: list[tuple[str, int, ArchiveIndex | None]] = []
    for path in paths:
        stat = os.stat(path)
        version, index = _checked_footer(path, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        found.append((path, version, index))
    return found


@lru_cache(maxsize=FOOTER_CACHE_SIZE)
def _checked_footer(path: str, inode: int, size: int, mtime_ns: int
                    ) -> tuple[int, ArchiveIndex | None]:
    """A segment's checked version and index, by file identity (a refusal is not cached:
    it raises)."""
    schema = pq.read_schema(path)
    return segment_version(schema, path), segment_index(schema)


def archive_segments(directory: str | os.PathLike[str]
                     ) -> list[tuple[str, int, ArchiveIndex | None]]:
    """Every segment file, its checked schema version and its index (one footer read per
    file). Raises :class:`ArchiveVersionError` at the first segment this code cannot read."""
    return check_segments(segment.path for segment in list_segments(directory))


def check_archive(directory: str | os.PathLike[str]) -> dict[int, int]:
    """Check every segment's schema version (one footer read per file); returns how many
    segments each version has. Raises :class:`ArchiveVersionError` at the first bad one."""
    counts: dict[int, int] = {}
    for _, version, _ in archive_segments(directory):
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
    return pads.dataset(os.fspath(directory), format="parquet", partitioning=PARTITIONING,
                        schema=with_partitions(ARCHIVE_SCHEMA))


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
