"""Rewriting an archive's segments with an index (the migration of an archive written before).

Why in place, segment by segment: each segment is replaced atomically (written under a hidden
name, renamed over the old one), so readers see either the old or the indexed file, and an
archive can be migrated while the broker keeps writing new segments into it.

``merge=True`` also merges each partition directory's segments into one file (per bucket, for
a bucketed index): Spark's cost per query grows with the files it plans, opens and schedules,
so an archive read by selective filters wants few, large files. The merged files are written
before the old ones are removed, so a reader listing in between sees each message twice (the
copies that ``drop_archive_duplicates`` drops), never none.
"""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from filtex_proton.archive.index import BUCKET_COLUMN, ArchiveIndex
from filtex_proton.archive.reader import archive_segments
from filtex_proton.archive.schema import ARCHIVE_SCHEMA
from filtex_proton.archive.writer import write_segment

__all__ = ["reindex_archive"]


def reindex_archive(directory: str | os.PathLike[str], index: ArchiveIndex | None, *,
                    target: str | os.PathLike[str] | None = None, compression: str = "zstd",
                    row_group_rows: int = 16_384, fsync: bool = True, merge: bool = False) -> int:
    """Rewrite every segment of ``directory`` with ``index`` (None: the plain layout), in place
    or under ``target`` (same relative paths); returns how many files were written (one per
    segment and bucket; ``merge``: one per partition directory and bucket).

    Older readable schema versions are written in the current one (their missing columns
    NULL, as readers see them anyway).
    """
    source = Path(directory)
    destination = source if target is None else Path(target)
    # A segment is one file, or the files of one name in a directory's buckets.
    groups: dict[tuple[Path, str], list[Path]] = defaultdict(list)
    for found, _, _ in archive_segments(source):
        path = Path(found)
        groups[_partition_dir(path), "" if merge else path.name].append(path)
    destination.mkdir(parents=True, exist_ok=True)
    written = 0
    for (folder, _), paths in sorted(groups.items()):
        name = min(p.name for p in paths)  # the oldest segment's name (names sort by arrival)
        with tempfile.TemporaryDirectory(prefix=".reindex-", dir=destination) as scratch:
            # First each file split by bucket (bounded memory: one file, then one bucket),
            # then each bucket's rows written as one segment.
            parts: dict[str, list[Path]] = defaultdict(list)
            for number, path in enumerate(paths):
                table = _read(str(path))
                split = {"": table} if index is None else {
                    bucket: rows.select(ARCHIVE_SCHEMA.names)
                    for bucket, rows in index.split(index.apply(table)).items()}
                for order, (bucket, rows) in enumerate(split.items()):
                    part = Path(scratch) / f"{number}-{order}.parquet"  # each its own file
                    pq.write_table(rows, part, compression="none")
                    parts[bucket].append(part)
            where = destination / folder.relative_to(source) / name
            new: set[Path] = set()
            for files in parts.values():
                table = pa.concat_tables(_read(str(f)) for f in files)
                new.update(write_segment(table, where, compression=compression,
                                         row_group_rows=row_group_rows, index=index,
                                         fsync=fsync))
        written += len(new)
        if destination == source:
            for path in paths:
                if path not in new:
                    path.unlink(missing_ok=True)
    return written


def _read(path: str) -> pa.Table:
    return pads.dataset(path, format="parquet", schema=ARCHIVE_SCHEMA).to_table()


def _partition_dir(path: Path) -> Path:
    """The ``regular=`` directory of a segment (above its bucket directory, if any)."""
    parent = path.parent
    return parent.parent if parent.name.startswith(f"{BUCKET_COLUMN}=") else parent
