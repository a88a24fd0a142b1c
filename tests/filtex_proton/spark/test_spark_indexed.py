"""The indexed layout (ArchiveIndex): the same answers as the engine, and less read.

The seeded corpus is written again with an index on four application properties and on the
properties fields, in row groups of 64 rows and pages of 16, so that Spark's Parquet reader
really skips row groups and pages on this small archive. Every answer is compared with the
engine's, message by message: an index that dropped a matching message (an absent property,
a NULL, a value of another type) would show here.
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

import pyarrow.compute as pc
import pyarrow.parquet as pq
from proton import Described, symbol

from filtex_proton.archive import (
    BUCKET_COLUMN,
    MAX_BUCKETS,
    ArchiveIndex,
    ArchiveWriter,
    archive_dataset,
    index_column,
    read_archive_table,
    reindex_archive,
    segment_index,
)
from filtex_proton.archive.index import bucket_of, bucket_value
from filtex_proton.archive.layout import address_directory
from filtex_proton.filterset import decode_filter_set
from filtex_proton.spark import apply_filter, measure_read, plan, read_archive, select_archive
from filtex_proton.spark.hints import bucket_hint, bucket_keeps, index_hint
from filtex_proton.spark.ir import and_, to_column
from filtex_proton.spark.session import archive_spark_schema

from .conftest import (
    ADDRESSES,
    BASE_ARRIVAL,
    FILTER_SETS,
    MESSAGES,
    Corpus,
    engine_matches,
    first_sequence,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NOW = 1_795_000_000_000
INDEX = ArchiveIndex(properties=("region", "s", "é😀", "n"), page_rows=16)
#: Equality, IN, NULL and absent cases on indexed properties (and a few that must not be hinted).
TEXTS = [
    "region = 'AMER'", "region = 'EMEA' AND p.subject = 'order.created'",
    "region IN ('AMER', 'x', '')", "region = 'x' OR region IS NULL", "region IS NULL",
    "region IS NOT NULL", "region <> 'AMER'", "NOT region = 'AMER'", "NOT (region <> 'x')",
    "region = '2023-11-14T22:13:20Z'", "region IN ('2023-11-14T22:13:20Z', 'x')",
    "s = ''", "s IN ('x', 'sym')", "[é😀] = 'é😀'", "n = 'x' OR s = 'x'",
    "region = 'AMER' OR b = 'x'", "region = 'nowhere'", "s = 'x' AND region IN ('x', 'AMER')",
    "p.subject = 'order.created'", "p.group_id = 'g1'", "p.to = 'x'",
]
#: The same cases as application-properties filters (their own translation) and SQL.
EXTRA: list[dict[str, Described]] = [
    *({"s": Described(symbol("amqp:sql-filter"), text)} for text in TEXTS),
    *({"p": Described(symbol("amqp:application-properties-filter"), {key: value})}
      for key, value in [("region", "AMER"), ("region", "&s:ER"), ("s", ""), ("n", "x"),
                         ("region", "2023-11-14T22:13:20Z")]),
]


def _write_corpus(directory: Path, index: ArchiveIndex | None, segment_rows: int = 700) -> Path:
    """The corpus written through ArchiveWriter with ``index``, row groups of 64 rows."""
    with ArchiveWriter(directory, segment_rows=segment_rows, row_group_rows=64,
                       flush_interval=None, fsync=False, handle_sigterm=False,
                       index=index) as writer:
        for number, message in enumerate(MESSAGES):
            writer.append(ADDRESSES[number % len(ADDRESSES)], message,
                          BASE_ARRIVAL + number * 60_000)
    return directory


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_corpus(tmp_path_factory.mktemp("indexed"), INDEX)


@pytest.fixture(scope="module")
def indexed_df(spark: SparkSession, indexed: Path) -> DataFrame:
    return read_archive(spark, indexed)  # not cached: Spark's Parquet reader must do the skipping


def _sequences(df: DataFrame, start: int) -> list[int]:
    return sorted(row["sequence"] - start for row in df.select("sequence").collect())


def _engine(described: object) -> list[int]:
    filter_set = decode_filter_set(described)  # type: ignore[arg-type]
    return [m for m, data in enumerate(MESSAGES) if engine_matches(filter_set, data)]


def _sql(text: str) -> dict[str, Described]:
    return {"s": Described(symbol("amqp:sql-filter"), text)}


def test_segments_are_sorted_and_carry_the_index(indexed: Path) -> None:
    files = archive_dataset(indexed).files
    assert len(files) >= 8
    for path in files:
        parquet = pq.ParquetFile(path)
        assert segment_index(parquet.schema_arrow) == ArchiveIndex(INDEX.properties)
        table = parquet.read()
        for column in INDEX.columns[:1]:  # the first key sorts the segment
            values = table.column(column).to_pylist()
            assert values == sorted(values)
        assert pc.all(pc.is_valid(table.column(index_column("region")))).as_py()
        group = parquet.metadata.row_group(0)
        leaves = [group.column(i).path_in_schema for i in range(group.num_columns)]
        assert [leaves[s.column_index] for s in group.sorting_columns] == list(INDEX.columns)
        for column in INDEX.columns:
            chunk = group.column(leaves.index(column))
            assert chunk.has_column_index and chunk.has_offset_index
            if chunk.statistics.null_count < chunk.num_values:  # none for a NULL column
                assert chunk.bloom_filter_offset is not None and chunk.bloom_filter_offset > 0
    # Sorting changed no row: the pyarrow reader gives the same archive, in archive order.
    table = read_archive_table(indexed, ["raw"])
    assert table.column("raw").to_pylist() == MESSAGES


def test_the_hinted_predicate_equals_the_engine_on_regular_rows(
        spark: SparkSession, indexed: Path, corpus: Corpus, expected: list[list[bool]]) -> None:
    """Every filter set that translates entirely and gets a hint, ``hint AND predicate`` as a
    column, on every regular row of the indexed archive: a hint FALSE where the engine says TRUE
    would show. (Without a hint the predicate is the one test_spark_differential checks.)"""
    from pyspark.sql import functions as F  # noqa: N812

    df = read_archive(spark, indexed).coalesce(2).cache()
    sets = [*FILTER_SETS, *EXTRA]
    answers = [*expected, *([engine_matches(decode_filter_set(d), m) for m in MESSAGES]
                            for d in EXTRA)]
    hinted = 0
    columns = []
    for index, described in enumerate(sets):
        planned = plan(described, now_ms=NOW)
        if all(f.path == "column" for f in planned.filters):
            hint = index_hint(planned.column_predicate, df.columns)
            if hint == and_():
                continue
            hinted += 1
            predicate = to_column(and_(hint, planned.column_predicate))
            columns.append((index, F.when(F.col("regular"), F.coalesce(predicate, F.lit(False)))))
    assert hinted >= 15
    start = first_sequence(df)
    for offset in range(0, len(columns), 10):
        chunk = columns[offset:offset + 10]
        rows = df.select("sequence", *(c.alias(f"f{i}") for i, c in chunk)).collect()
        for row in rows:
            message = row["sequence"] - start
            if corpus.regular[message]:
                for i, _ in chunk:
                    assert bool(row[f"f{i}"]) == answers[i][message], (sets[i], message)
    df.unpersist()


def test_apply_filter_on_the_indexed_layout_equals_the_engine(indexed_df: DataFrame,
                                                               expected: list[list[bool]]) -> None:
    start = first_sequence(indexed_df)
    for index in range(0, len(FILTER_SETS), 40):
        result = apply_filter(indexed_df, FILTER_SETS[index], now_ms=NOW)
        assert _sequences(result, start) == [m for m, ok in enumerate(expected[index]) if ok], \
            FILTER_SETS[index]
    for described in EXTRA:
        result = apply_filter(indexed_df, described, now_ms=NOW)
        assert _sequences(result, start) == _engine(described), described


@pytest.mark.parametrize(("text", "share"), [
    ("region = 'AMER'", 0.5),  # the first sort key: a few pages per segment
    ("s IN ('x', 'sym')", 1.0),  # sorted second: row groups ruled out by min/max, Bloom filters
    ("p.subject = 'order.created'", 1.0),  # a tenth of the corpus: less to skip
])
def test_spark_reads_less_of_the_indexed_layout(spark: SparkSession, indexed_df: DataFrame,
                                                corpus: Corpus, text: str, share: float) -> None:
    old = read_archive(spark, corpus.directory)
    matches = len(_engine(_sql(text)))
    read_old = measure_read(spark, apply_filter(old, _sql(text), now_ms=NOW).count)
    read_indexed = measure_read(spark, apply_filter(indexed_df, _sql(text), now_ms=NOW).count)
    assert read_old.result == read_indexed.result == matches
    assert matches <= read_indexed.records < read_old.records * share, (read_indexed, read_old)


def test_only_index_columns_every_segment_has_are_read(spark: SparkSession, indexed: Path,
                                                       corpus: Corpus, tmp_path: Path) -> None:
    """An archive partly indexed (segments written before an index, or with another one) gets
    no index column that some segment lacks: its rows would read NULL there and be dropped."""
    assert index_column("region") in read_archive(spark, indexed).columns
    assert not [c for c in read_archive(spark, corpus.directory).columns
                if c.startswith("index_")]
    mixed = tmp_path / "mixed"
    shutil.copytree(indexed, mixed)
    old = archive_dataset(corpus.directory).files[0]
    target = mixed / Path(old).relative_to(corpus.directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(old, target.with_name("part-0-old.parquet"))
    df = read_archive(spark, mixed)
    assert not [c for c in df.columns if c.startswith("index_")]
    # Both writers' rows (their sequences count from different starts): compare the bytes.
    got = [row["raw"] for row in
           apply_filter(df, _sql("region = 'AMER'"), now_ms=NOW).select("raw").collect()]
    copied = {bytes(r) for r in pq.read_table(old, columns=["raw"]).column("raw").to_pylist()}
    want = [MESSAGES[m] for m in _engine(_sql("region = 'AMER'"))]
    assert sorted(bytes(r) for r in got) == sorted(
        want + [data for data in want if data in copied])  # the old segment's copies too


def test_reindex_migrates_an_old_archive_in_place(spark: SparkSession, corpus: Corpus,
                                                  tmp_path: Path) -> None:
    migrated = tmp_path / "migrated"
    shutil.copytree(corpus.directory, migrated)
    written = reindex_archive(migrated, INDEX, fsync=False)
    assert written == len(archive_dataset(corpus.directory).files)
    df = read_archive(spark, migrated)
    assert index_column("n") in df.columns
    assert read_archive_table(migrated, ["raw"]).column("raw").to_pylist() == MESSAGES
    start = first_sequence(df)
    for text in ("region = 'AMER'", "region IS NULL"):
        assert _sequences(apply_filter(df, _sql(text), now_ms=NOW), start) == _engine(_sql(text))


def test_addresses_still_prune_an_indexed_archive(spark: SparkSession, indexed: Path) -> None:
    """read_archive hands Spark the checked files by name: the address partitions still
    select, shortened and odd addresses included."""
    for address in ADDRESSES:
        df = read_archive(spark, indexed, [address])
        want = sum(1 for n in range(len(MESSAGES)) if ADDRESSES[n % len(ADDRESSES)] == address)
        assert df.count() == want
        assert {row["address"] for row in df.select("address").distinct().collect()} == {address}


def test_select_out_of_an_indexed_archive_is_a_plain_archive(spark: SparkSession, indexed: Path,
                                                            tmp_path: Path) -> None:
    """``filtex-spark select --out`` writes the archive's columns (plain layout): Spark cannot
    write the index metadata, and files with unknown columns would be refused."""
    from filtex_proton.spark.cli import main

    target = tmp_path / "selected"
    status = main(["select", "--archive", str(indexed), "--filter", "region = 'AMER'",
                   "--out", str(target), "--count"], stdout=io.StringIO())
    assert status == 0
    got = sorted(bytes(r["raw"]) for r in read_archive(spark, target).select("raw").collect())
    assert got == sorted(MESSAGES[m] for m in _engine(_sql("region = 'AMER'")))


# ----------------------------------------------------------------------------- bucketed layout

BUCKETED = ArchiveIndex(properties=("region", "s", "é😀", "n"), page_rows=16, buckets=4)
#: Filters that pin region (the bucket key) to strings, and some that must not prune.
BUCKET_TEXTS = [*TEXTS, "region IN ('AMER', 'EMEA')", "region = 'AMER' AND s = 'x'",
                "region = 'AMER' OR region = 'EMEA'", "s = 'x'"]


@pytest.fixture(scope="module")
def bucketed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus as ArchiveWriter(index=BUCKETED) writes it: each segment in 4 bucket files."""
    return _write_corpus(tmp_path_factory.mktemp("bucketed"), BUCKETED)


def _bucket_files(directory: Path) -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for name in archive_dataset(directory).files:
        folder = Path(name).parent.name
        key = folder.partition("=")[2] if folder.startswith(f"{BUCKET_COLUMN}=") else ""
        found.setdefault(key, []).append(Path(name))
    return found


def _same_as_engine(df: DataFrame, texts: list[str], start: int | None = None) -> None:
    start = first_sequence(df) if start is None else start
    for text in texts:
        assert _sequences(apply_filter(df, _sql(text), now_ms=NOW), start) == \
            _engine(_sql(text)), text


def test_bucketed_segments_split_by_the_first_key(bucketed: Path) -> None:
    files = _bucket_files(bucketed)
    assert sorted(files) == [bucket_value(index_column("region"), 4, b) for b in range(4)]
    for value, paths in files.items():
        for path in paths:
            table = pq.read_table(path)
            assert segment_index(table.schema) == ArchiveIndex(BUCKETED.properties, buckets=4)
            buckets = {bucket_of(v, 4) for v in table.column(index_column("region")).to_pylist()}
            assert {bucket_value(index_column("region"), 4, b) for b in buckets} == {value}
    assert sorted(read_archive_table(bucketed, ["raw"]).column("raw").to_pylist()) == \
        sorted(MESSAGES)


def test_apply_filter_on_the_bucketed_layout_equals_the_engine(
        spark: SparkSession, bucketed: Path, expected: list[list[bool]]) -> None:
    df = read_archive(spark, bucketed)
    assert BUCKET_COLUMN in df.columns
    _same_as_engine(df, BUCKET_TEXTS)
    start = first_sequence(df)
    for described in EXTRA[len(TEXTS):]:
        assert _sequences(apply_filter(df, described, now_ms=NOW), start) == \
            _engine(described), described
    for index in range(0, len(FILTER_SETS), 50):
        result = apply_filter(df, FILTER_SETS[index], now_ms=NOW)
        assert _sequences(result, start) == [m for m, ok in enumerate(expected[index]) if ok], \
            FILTER_SETS[index]


@pytest.mark.parametrize(("text", "values"), [
    ("region = 'AMER'", ["AMER"]),
    ("region IN ('AMER', 'EMEA')", ["AMER", "EMEA"]),
    ("region = 'EMEA' AND p.subject = 'order.created'", ["EMEA"]),
    ("region = 'AMER' OR region = 'x'", ["AMER", "x"]),
])
def test_spark_never_opens_the_other_buckets_files(spark: SparkSession, bucketed: Path,
                                                   tmp_path: Path, text: str,
                                                   values: list[str]) -> None:
    """The files of the buckets the filter cannot match in are made unreadable: the answer is
    still the engine's, so Spark pruned them when it planned (never opened). A filter that pins
    nothing must read them (and fails), which shows the damage would be seen. Only regular
    rows' files: irregular rows are evaluated by the engine, whatever their bucket."""
    damaged = tmp_path / "damaged"
    shutil.copytree(bucketed, damaged)
    keep = {bucket_value(index_column("region"), 4, bucket_of("=" + v, 4)) for v in values}
    assert len(keep) < 4
    files = _bucket_files(damaged)
    for value, paths in files.items():
        if value not in keep:
            for path in paths:  # (irregular rows are the engine's, from every file: kept)
                if path.parent.parent.name == "regular=true":
                    path.write_bytes(b"PAR1 not a segment PAR1")
    df = (spark.read.schema(archive_spark_schema([index_column(k) for k in BUCKETED.properties],
                                                 bucketed=True))
          .option("basePath", str(damaged)).parquet(*(str(p) for ps in files.values()
                                                      for p in ps)))
    _same_as_engine(df, [text], first_sequence(read_archive(spark, bucketed)))
    with pytest.raises(Exception, match=r"(?i)parquet|footer|magic|corrupt"):
        apply_filter(df, _sql("region IS NULL"), now_ms=NOW).count()


def test_bucket_hints_only_where_exact(spark: SparkSession, bucketed: Path) -> None:
    """The bucket condition: only for a key pinned to strings; evaluated on bucket values, it
    keeps each string's bucket for any bucket count, every other key's, NULL and unparsable."""
    from pyspark.sql import functions as F  # noqa: N812

    columns = read_archive(spark, bucketed).columns
    for text in ("region IS NULL", "region <> 'AMER'", "NOT region = 'AMER'",
                 "region = 'AMER' OR b = 'x'"):
        assert bucket_hint(plan(_sql(text), now_ms=NOW).column_predicate, columns) is None
    assert bucket_hint(plan(_sql("region = 'AMER'"), now_ms=NOW).column_predicate,
                       [c for c in columns if c != BUCKET_COLUMN]) is None
    hint = bucket_hint(plan(_sql("region IN ('AMER', 'EMEA')"), now_ms=NOW).column_predicate,
                       columns)
    assert hint is not None and "AMER" not in hint  # CRCs, not the values
    region = index_column("region")
    values = [bucket_value(region, count, b) for count in (1, 4, 7, MAX_BUCKETS)
              for b in range(count)]
    wanted = {bucket_value(region, count, bucket_of("=" + v, count))
              for count in (1, 4, 7, MAX_BUCKETS) for v in ("AMER", "EMEA")}
    others = [bucket_value(index_column("s"), 4, 1), "index_region.x.1", "index_region",
              "index_region.0.0", None]
    rows = spark.createDataFrame([(v,) for v in values + others], f"{BUCKET_COLUMN} string")
    kept = {row[0] for row in rows.where(F.expr(hint)).collect()}
    assert kept == wanted | set(others)
    assert len(wanted) < len(values)


def test_a_partly_bucketed_archive(spark: SparkSession, bucketed: Path, corpus: Corpus,
                                   tmp_path: Path) -> None:
    """Bucketed segments beside plain ones and beside segments bucketed by another key: Spark
    reads each kind apart (union), the plain ones with ``index_bucket`` NULL; none is pruned
    wrongly."""
    from pyspark.sql import functions as F  # noqa: N812

    mixed = tmp_path / "mixed"
    shutil.copytree(bucketed, mixed)
    old = Path(archive_dataset(corpus.directory).files[0])
    target = mixed / old.relative_to(corpus.directory)
    shutil.copy(old, target.with_name("part-0-old.parquet"))
    by_s = tmp_path / "by_s"
    reindex_archive(corpus.directory, ArchiveIndex(properties=("s", "region"), buckets=3),
                    target=by_s, fsync=False)
    other = Path(_bucket_files(by_s)[bucket_value(index_column("s"), 3, 0)][0])
    copied_other = mixed / other.relative_to(by_s)
    copied_other = copied_other.with_name("part-1-other.parquet")
    copied_other.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(other, copied_other)
    df = read_archive(spark, mixed)
    assert BUCKET_COLUMN in df.columns
    assert df.where(F.col(BUCKET_COLUMN).isNull()).count() == pq.read_metadata(old).num_rows
    copies = [*pq.read_table(old, columns=["raw"]).column("raw").to_pylist(),
              *pq.read_table(other, columns=["raw"]).column("raw").to_pylist()]
    for text in ("region = 'AMER'", "region IN ('AMER', 'EMEA')", "region IS NULL",
                 "s = 'x' AND region = 'AMER'"):
        got = sorted(bytes(r["raw"]) for r in
                     apply_filter(df, _sql(text), now_ms=NOW).select("raw").collect())
        want = [MESSAGES[m] for m in _engine(_sql(text))]
        assert got == sorted(want + [d for d in copies if d in set(want)]), text


def test_reindex_migrates_to_merged_buckets_and_back(spark: SparkSession, tmp_path: Path) -> None:
    """``reindex_archive(merge=True)`` in place: one file per partition directory and bucket,
    the old segments gone; then back to the plain layout, no bucket directory left. The same
    answers all along."""
    migrated = _write_corpus(tmp_path / "migrated", None, segment_rows=50)  # several segments
    segments = [Path(f) for f in archive_dataset(migrated).files]
    directories = {f.parent for f in segments}
    assert len(segments) >= 2 * len(directories)  # per directory
    written = reindex_archive(migrated, BUCKETED, fsync=False, merge=True)
    files = archive_dataset(migrated).files
    assert written == len(files) <= 4 * len(directories)
    assert all(f"{BUCKET_COLUMN}=" in f for f in files)
    assert sorted(read_archive_table(migrated, ["raw"]).column("raw").to_pylist()) == \
        sorted(MESSAGES)
    _same_as_engine(read_archive(spark, migrated), ["region = 'AMER'", "region IS NULL",
                                                    "region IN ('AMER', 'EMEA')"])
    assert reindex_archive(migrated, None, fsync=False) == len(directories)
    assert not [f for f in archive_dataset(migrated).files if f"{BUCKET_COLUMN}=" in f]
    assert not list(migrated.rglob(f"{BUCKET_COLUMN}=*/*.parquet"))
    df = read_archive(spark, migrated)
    assert BUCKET_COLUMN not in df.columns
    _same_as_engine(df, ["region = 'AMER'", "region IS NULL"])


# ----------------------------------------------------------------------------- files chosen first

def _of_address_since(path: Path, directory: str, day: str) -> bool:
    """Whether a segment file is under this address's directory, on ``day`` or later."""
    return path.parent.parent.parent.name == directory and path.parent.parent.name >= day


def _damage(directory: Path, keep: Callable[[Path], bool]) -> list[Path]:
    """Every segment file ``keep`` rejects replaced by bytes no reader can take (not even its
    footer): reading one, Spark or the version check, fails."""
    damaged = []
    for name in archive_dataset(directory, check=False).files:
        path = Path(name)
        if not keep(path):
            path.write_bytes(b"PAR1 not a segment PAR1")
            damaged.append(path)
    return damaged


def _bucket_dir(path: Path) -> str:
    folder = path.parent.name
    return folder.partition("=")[2] if folder.startswith(f"{BUCKET_COLUMN}=") else ""


def test_select_archive_equals_the_engine(spark: SparkSession, bucketed: Path, indexed: Path,
                                          corpus: Corpus, expected: list[list[bool]]) -> None:
    """The files chosen in Python (bucketed, indexed, old layout): every answer is the
    engine's, NULL, absent and other-typed keys, IN across buckets and irregular rows (whose
    files are always read) included."""
    start = first_sequence(read_archive(spark, bucketed))
    for text in BUCKET_TEXTS:
        assert _sequences(select_archive(spark, bucketed, _sql(text), now_ms=NOW), start) == \
            _engine(_sql(text)), text
    for described in EXTRA[len(TEXTS):]:
        assert _sequences(select_archive(spark, bucketed, described, now_ms=NOW), start) == \
            _engine(described), described
    starts = {d: first_sequence(read_archive(spark, d)) for d in (indexed, corpus.directory)}
    for index in range(0, len(FILTER_SETS), 50):
        want = [m for m, ok in enumerate(expected[index]) if ok]
        for directory, first in ((bucketed, start), *starts.items()):
            result = select_archive(spark, directory, FILTER_SETS[index], now_ms=NOW)
            assert _sequences(result, first) == want, (directory, FILTER_SETS[index])
    assert not all(corpus.regular)  # the corpus has irregular rows: their branch was tested


@pytest.mark.parametrize(("text", "values"), [
    ("region = 'AMER'", ["AMER"]),
    ("region IN ('AMER', 'EMEA')", ["AMER", "EMEA"]),
    ("region = 'EMEA' AND p.subject = 'order.created'", ["EMEA"]),
    ("region = 'AMER' OR region = 'x'", ["AMER", "x"]),
])
def test_select_archive_never_opens_the_other_buckets_files(
        spark: SparkSession, bucketed: Path, tmp_path: Path, text: str,
        values: list[str]) -> None:
    """The other buckets' files of regular rows are unreadable, footer included, in the real
    archive directory: neither the version check nor Spark opens them (the answer is the
    engine's); a filter that pins nothing reads them and fails, so the damage would show."""
    damaged = tmp_path / "damaged"
    shutil.copytree(bucketed, damaged)
    keep = {bucket_value(index_column("region"), 4, bucket_of("=" + v, 4)) for v in values}
    assert _damage(damaged, lambda path: path.parent.parent.name != "regular=true"
                   or _bucket_dir(path) in keep)
    start = first_sequence(read_archive(spark, bucketed))
    assert _sequences(select_archive(spark, damaged, _sql(text), now_ms=NOW), start) == \
        _engine(_sql(text))
    with pytest.raises(Exception, match=r"(?i)parquet|footer|magic|corrupt"):
        select_archive(spark, damaged, _sql("region IS NULL"), now_ms=NOW)


def test_select_archive_opens_only_the_days_and_addresses_asked_for(
        spark: SparkSession, corpus: Corpus, tmp_path: Path) -> None:
    """Days and addresses are chosen from the directory names too: the other files are never
    opened, and the answer is read_archive's (odd and shortened addresses included)."""
    days = sorted({Path(f).parent.parent.name.partition("=")[2]
                   for f in archive_dataset(corpus.directory).files})
    assert len(days) >= 2
    for address in ADDRESSES:
        damaged = tmp_path / f"damaged-{ADDRESSES.index(address)}"
        shutil.copytree(corpus.directory, damaged)
        assert _damage(damaged, partial(_of_address_since, directory=address_directory(address),
                                        day=f"date={days[-1]}"))
        for described in (_sql("p.subject = 'order.created'"), {}):
            df = read_archive(spark, corpus.directory, [address], since=days[-1])
            want = sorted(bytes(r["raw"]) for r in
                          apply_filter(df, described, now_ms=NOW).select("raw").collect())
            got = select_archive(spark, damaged, described, iter([address]), since=days[-1],
                                 until=days[-1], now_ms=NOW)  # any iterable
            assert sorted(bytes(r["raw"]) for r in got.select("raw").collect()) == want
            assert want or described
            assert {r["address"] for r in got.select("address").collect()} <= {address}


def test_select_archive_leaves_the_engine_out_when_no_row_is_irregular(
        spark: SparkSession, bucketed: Path, corpus: Corpus, tmp_path: Path) -> None:
    """``regular=`` is a directory: with no ``regular=false`` file the engine's pass over
    irregular rows is left out of the plan (no Python UDF, no union); with one it stays."""
    regular_only = tmp_path / "regular-only"
    shutil.copytree(bucketed, regular_only,
                    ignore=lambda folder, names: [n for n in names if n == "regular=false"])
    text = "region IN ('AMER', 'EMEA')"
    plan_text = select_archive(spark, regular_only, _sql(text), now_ms=NOW)._jdf \
        .queryExecution().executedPlan().toString()
    assert "ArrowEvalPython" not in plan_text and "Union" not in plan_text, plan_text
    start = first_sequence(read_archive(spark, bucketed))
    want = [m for m in _engine(_sql(text)) if corpus.regular[m]]
    assert _sequences(select_archive(spark, regular_only, _sql(text), now_ms=NOW), start) == want
    with_irregular = select_archive(spark, bucketed, _sql(text), now_ms=NOW)._jdf \
        .queryExecution().executedPlan().toString()
    assert "ArrowEvalPython" in with_irregular


def test_select_archive_on_a_partly_bucketed_archive(spark: SparkSession, bucketed: Path,
                                                     corpus: Corpus, tmp_path: Path) -> None:
    """Plain segments and segments bucketed by another key are always read; an empty choice
    (a key value no bucket file can hold, no plain file) reads nothing and is empty."""
    mixed = tmp_path / "mixed"
    shutil.copytree(bucketed, mixed)
    old = Path(archive_dataset(corpus.directory).files[0])
    shutil.copy(old, (mixed / old.relative_to(corpus.directory)).with_name("part-0-old.parquet"))
    by_s = tmp_path / "by_s"
    reindex_archive(corpus.directory, ArchiveIndex(properties=("s", "region"), buckets=3),
                    target=by_s, fsync=False)
    other = Path(_bucket_files(by_s)[bucket_value(index_column("s"), 3, 0)][0])
    copied = (mixed / other.relative_to(by_s)).with_name("part-1-other.parquet")
    copied.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(other, copied)
    df = read_archive(spark, mixed)
    for text in ("region = 'AMER'", "region IN ('AMER', 'EMEA')", "region IS NULL",
                 "s = 'x' AND region = 'AMER'", "region = 'nowhere'"):
        want = sorted(bytes(r["raw"]) for r in
                      apply_filter(df, _sql(text), now_ms=NOW).select("raw").collect())
        got = sorted(bytes(r["raw"]) for r in
                     select_archive(spark, mixed, _sql(text), now_ms=NOW).select("raw").collect())
        assert got == want, text
    only_buckets = tmp_path / "only-buckets"
    shutil.copytree(bucketed, only_buckets,
                    ignore=lambda folder, names: [n for n in names if n == "regular=false"])
    nothing = select_archive(spark, only_buckets, _sql("region = 'AMER' AND region = 'EMEA'"),
                             now_ms=NOW)
    assert nothing.count() == 0


def test_bucket_keeps_is_the_bucket_hint_in_python(spark: SparkSession, bucketed: Path) -> None:
    """Python's choice of bucket files is Spark's bucket condition on well-formed names, and
    keeps every name it does not recognise (never a file Spark would keep)."""
    from pyspark.sql import functions as F  # noqa: N812

    columns = read_archive(spark, bucketed).columns
    region = index_column("region")
    values = [bucket_value(region, count, b) for count in (1, 4, 7, MAX_BUCKETS)
              for b in range(count)]
    odd = [bucket_value(index_column("s"), 4, 1), "index_region.x.1", "index_region",
           "index_region.0.0", "index_region.04.1", "index_region.4.01", "index_region.4.1.2",
           "index_region.\u0664.1"]
    rows = spark.createDataFrame([(v,) for v in values + odd], f"{BUCKET_COLUMN} string")
    for text in ("region IN ('AMER', 'EMEA')", "region = 'x' AND s = 'y'", "region IS NULL",
                 "region = 'AMER' AND region = 'EMEA'", "region = 'AMER' OR b = 'x'"):
        predicate = plan(_sql(text), now_ms=NOW).column_predicate
        keeps = bucket_keeps(predicate)
        hint = bucket_hint(predicate, columns)
        kept = ({row[0] for row in rows.where(F.expr(hint)).collect()} if hint is not None
                else set(values + odd))
        assert {v for v in values if keeps(v)} == {v for v in values if v in kept}, text
        assert all(keeps(v) for v in odd if v in kept), text
        assert keeps(None)


def test_many_files_are_listed_without_a_spark_job(spark: SparkSession, tmp_path: Path) -> None:
    """More than 32 files handed over: Spark would list them in a job of its own; they were
    listed in Python already, so making the DataFrame runs no job, and the session's setting
    is as before afterwards."""
    many = _write_corpus(tmp_path / "many", INDEX, segment_rows=40)
    assert len(archive_dataset(many).files) > 32
    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    setting = spark.conf.get(key)
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    selected = select_archive(spark, many, _sql("region = 'AMER'"), now_ms=NOW)
    df = read_archive(spark, many)
    assert set(tracker.getJobIdsForGroup()) == before
    assert spark.conf.get(key) == setting
    assert _sequences(selected, first_sequence(df)) == _engine(_sql("region = 'AMER'"))
