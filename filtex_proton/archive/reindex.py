"""Rewriting an archive's segments with an index (the migration of an archive written before).

Why in place, segment by segment: each segment is replaced atomically (written under a hidden
name, renamed over the old one), so readers see either the old or the indexed file, and an
archive can be migrated while the broker keeps writing new segments into it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.dataset as pads

from filtex_proton.archive.index import ArchiveIndex
from filtex_proton.archive.reader import archive_segments
from filtex_proton.archive.schema import ARCHIVE_SCHEMA
from filtex_proton.archive.writer import write_segment

__all__ = ["reindex_archive"]


def reindex_archive(directory: str | os.PathLike[str], index: ArchiveIndex | None, *,
                    target: str | os.PathLike[str] | None = None, compression: str = "zstd",
                    row_group_rows: int = 16_384, fsync: bool = True) -> int:
    """Rewrite every segment of ``directory`` with ``index`` (None: the plain layout), in place
    or under ``target`` (same relative paths); returns how many segments were written.

    Older readable schema versions are written in the current one (their missing columns
    NULL, as readers see them anyway).
    """
    source = Path(directory)
    destination = source if target is None else Path(target)
    written = 0
    for path, _, _ in archive_segments(source):
        table = pads.dataset(path, format="parquet", schema=ARCHIVE_SCHEMA).to_table()
        write_segment(table, destination / Path(path).relative_to(source),
                      compression=compression, row_group_rows=row_group_rows, index=index,
                      fsync=fsync)
        written += 1
    return written
