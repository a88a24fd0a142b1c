"""Spark benchmark: RabbitMQ's published SQL-filter workload over a Parquet archive.

Run:  python bench/bench_spark.py --size 1000000           (about 5 minutes the first time)
      python bench/bench_spark.py --size 10000000 --cache /data/filtex-bench
      python bench/bench_spark.py --size 10000000 --cache /data/filtex-bench --selective-only

The workload is RabbitMQ's (blog, 2025-09-23): messages with a ~40-byte body,
a priority, a subject naming an event type, a creation time and an application
property ``region``; one ``order.created`` every 100,000 messages; the filter
below. The archive is generated once, through ArchiveWriter, and cached under
``--cache`` (reused when its size matches). Creation times lie 30 days after
generation, so that the filter's ``UTC() - 3600000`` window keeps matching while
the cached archive is reused.

One run measures messages scanned per second, end to end from Parquet, three
ways: the Column path (the filter as Spark expressions), the UDF path (the
engine in an Arrow UDF over the raw bytes) and the in-process evaluator
(FilterSet.matches on RawMessageView, one Python process reading the raw
column with pyarrow), checks that all three count the same matches, and
prints the ratios. The Column path is also measured with Parquet filter
pushdown off ("no skipping"): every row group read, none skipped by its
statistics and dictionaries. Results go into docs/PERFORMANCE.md.

Indexed layouts: the same segments are also rewritten with an
``ArchiveIndex`` (``reindex_archive``: sorted segments, Bloom filters, page
index; the application property ``customer`` indexed, as ``--archive-index
customer`` does; and bucketed by customer into 32 files per directory,
``reindex_archive(..., merge=True)``), and
selective equality filters (1 match in 100,000) are counted on both layouts,
with the bytes Spark read (its stages' input metrics) and the rows its Parquet
scan returned after skipping. The ``chosen`` row is the bucketed layout through
``select_archive``: the files a filter can match in chosen in Python, per query
(reading the footers and making the DataFrame within the timing), as
``filtex-spark select`` does.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

from proton import timestamp, ubyte

from filtex_proton.amqp.message import RawMessageView, encode_message
from filtex_proton.archive import ArchiveIndex, archive_dataset, reindex_archive
from filtex_proton.spark import (
    ArchiveWriter,
    apply_filter,
    as_filter_set,
    explain,
    measure_read,
    read_archive,
    select_archive,
    spark_session,
)

FILTER = (
    "p.subject='order.created' AND p.creation_time > UTC()-3600000 AND region IN "
    "('AMER','EMEA') AND (h.priority>4 OR price>=99.99 OR premium_customer=TRUE)"
)
EVENTS = ["order.updated", "order.shipped", "order.cancelled", "payment.received",
          "payment.refunded", "invoice.sent", "customer.created", "cart.abandoned"]
REGIONS = ["AMER", "EMEA", "APJ"]
EVERY = 100_000
CUSTOMERS = 100_000  # customer = 'c<n>': 1 message in 100,000 on average
SELECTIVE = {
    "subject (field)": "p.subject = 'order.created'",
    "customer (app. property)": "customer = 'c4242'",
    "customer IN (2 values)": "customer IN ('c4242', 'c77')",
    "RabbitMQ filter": FILTER,
}
#: The indexed layouts: as ``--archive-index customer`` writes (sorted by customer first), as
#: the broker writes without ``--archive-index`` (sorted by subject first), and bucketed by
#: customer with each directory's segments merged (``reindex_archive(..., merge=True)``: one
#: file per bucket, so that Spark plans, opens and schedules one file in BUCKETS).
BUCKETS = 32
LAYOUTS = {"indexed": ArchiveIndex(properties=("customer",)), "subject": ArchiveIndex(),
           "bucketed": ArchiveIndex(properties=("customer",), buckets=BUCKETS)}
MERGED = frozenset({"bucketed"})
RABBITMQ = {"SQL only": 404_645, "with Bloom filter": 4_870_000}


def _generate(part: int, parts: int, size: int, directory: str, base_ms: int) -> None:
    """One worker's share of the archive (messages part, part + parts, ...)."""
    rng = random.Random(part)
    created = base_ms + 30 * 86_400_000
    with ArchiveWriter(directory, segment_rows=250_000, max_buffer_bytes=1 << 28,
                       flush_interval=None, fsync=False, handle_sigterm=False) as writer:
        for index in range(part, size, parts):
            priority, region = rng.randrange(10), rng.choice(REGIONS)
            if index % EVERY == EVERY // 2:  # one order.created in 100k; these three match:
                subject = "order.created"
                priority, region = [(7, "AMER"), (2, "EMEA"), (9, "EMEA"), (5, "APJ")][
                    index // EVERY % 4]
            else:
                subject = rng.choice(EVENTS)
            data = encode_message(
                header={"priority": ubyte(priority)},
                properties={"subject": subject,
                            "creation-time": timestamp(created + rng.randrange(3_600_000))},
                application_properties={"region": region,
                                        "customer": f"c{rng.randrange(CUSTOMERS)}"},
                body=rng.randbytes(40),
                body_kind="data",
            )
            writer.append("orders", data, base_ms + index // 1000)


def archive(cache: Path, size: int) -> Path:
    """The archive of ``size`` messages under ``cache`` (and its indexed twins beside it),
    generated unless already there (a missing twin is made from it)."""
    directory = cache / f"rabbitmq-{size}"
    marker = directory / "_GENERATED.json"
    if not marker.exists():
        for old in (directory, *(twin(directory, layout) for layout in LAYOUTS)):
            shutil.rmtree(old, ignore_errors=True)
        directory.mkdir(parents=True)
        parts = max(1, os.cpu_count() or 1)
        started = time.perf_counter()
        base_ms = time.time_ns() // 1_000_000
        with multiprocessing.Pool(parts) as pool:
            pool.starmap(_generate,
                         [(p, parts, size, str(directory), base_ms) for p in range(parts)])
        took = time.perf_counter() - started
        marker.write_text(json.dumps({"size": size, "generated_ms": base_ms, "seconds": took,
                                      "layouts": []}))
        print(f"generated {size:,} messages in {took:.0f} s")
    described = json.loads(marker.read_text())
    for layout, index in LAYOUTS.items():
        if layout in described.get("layouts", ()):
            continue
        started = time.perf_counter()
        shutil.rmtree(twin(directory, layout), ignore_errors=True)
        # The same segments, sorted and indexed, exactly as ArchiveWriter(index=...) writes
        # them (merged per directory and bucket for the MERGED layouts).
        segments = reindex_archive(directory, index, target=twin(directory, layout),
                                   fsync=False, merge=layout in MERGED)
        print(f"{layout} layout: {segments} segments in {time.perf_counter() - started:.0f} s")
        described["layouts"] = sorted({*described.get("layouts", ()), layout})
        marker.write_text(json.dumps(described))
    return directory


def twin(directory: Path, layout: str) -> Path:
    """Where the archive in an indexed layout is."""
    return directory.with_name(f"{directory.name}-{layout}")


def _bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.rglob("*.parquet"))


def in_process(directory: Path) -> int:
    """The broker's evaluator, one process: read the raw column, evaluate each message."""
    matches = as_filter_set(FILTER).matches
    view = RawMessageView
    count = 0
    for batch in archive_dataset(directory).to_batches(columns=["raw"], batch_size=65_536):
        for data in batch.column(0).to_pylist():
            if matches(view(data)):
                count += 1
    return count


def engine_counts(directory: Path, filters: dict[str, str]) -> dict[str, int]:
    """How many messages each filter matches by the engine (one pass over the raw bytes)."""
    sets = {name: as_filter_set(text) for name, text in filters.items()}
    counts = dict.fromkeys(filters, 0)
    for batch in archive_dataset(directory).to_batches(columns=["raw"], batch_size=65_536):
        for data in batch.column(0).to_pylist():
            for name, filter_set in sets.items():
                counts[name] += filter_set.matches(RawMessageView(data))
    return counts


def timed(function: Callable[[], int], repeat: int) -> tuple[float, int]:
    """The best wall time of ``repeat`` runs, and the result (the same each time)."""
    best, result = float("inf"), -1
    for _ in range(repeat):
        started = time.perf_counter()
        got = function()
        best = min(best, time.perf_counter() - started)
        assert result in (-1, got), f"{result} then {got}"
        result = got
    return best, result


def archive_options(parser: argparse.ArgumentParser, size: int) -> None:
    """``--size`` (default ``size``) and ``--cache``: which generated archive, kept where."""
    parser.add_argument("--size", type=int, default=size, help="messages in the archive")
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "filtex-bench-spark",
                        help="where the generated archive is kept between runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    archive_options(parser, 1_000_000)
    parser.add_argument("--repeat", type=int, default=2, help="runs per Spark path (best kept)")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--skip-in-process", action="store_true",
                        help="do not run the (slow) single-process evaluator")
    parser.add_argument("--selective-only", action="store_true",
                        help="only the selective filters on the old and indexed layouts")
    args = parser.parse_args()

    directory = archive(args.cache, args.size)
    if args.selective_only:
        spark = spark_session(args.master, app_name="filtex-bench-spark")
        spark.sparkContext.setLogLevel("ERROR")
        selective(spark, directory, args.size, args.repeat, engine=not args.skip_in_process)
        spark.stop()
        return
    print(explain(FILTER))
    spark = spark_session(args.master, app_name="filtex-bench-spark")
    spark.sparkContext.setLogLevel("ERROR")
    df = read_archive(spark, directory)

    def column() -> int:
        return apply_filter(df, FILTER, path="column").count()

    def udf() -> int:
        return apply_filter(df, FILTER, path="udf").count()

    def column_full_scan() -> int:
        spark.conf.set("spark.sql.parquet.filterPushdown", "false")
        try:
            return column()
        finally:
            spark.conf.set("spark.sql.parquet.filterPushdown", "true")

    results: dict[str, tuple[float, int]] = {
        "spark column path": timed(column, args.repeat),
        "column, no skipping": timed(column_full_scan, args.repeat),
        "spark udf path": timed(udf, args.repeat),
    }
    if not args.skip_in_process:
        results["in-process evaluator"] = timed(lambda: in_process(directory), 1)
    counts = {count for _, count in results.values()}
    assert len(counts) == 1, f"the paths disagree: {results}"
    size = args.size
    print(f"\n{size:,} messages, {_bytes(directory) / 2**20:,.0f} MiB of Parquet, "
          f"{os.cpu_count()} cores, {counts.pop():,} matches (the same on every path)\n")
    print(f"{'path':24} {'seconds':>8} {'msg/s':>14}")
    rates: dict[str, float] = {}
    for name, (seconds, _) in results.items():
        rates[name] = size / seconds
        print(f"{name:24} {seconds:8.2f} {rates[name]:14,.0f}")
    print()
    base = rates.get("in-process evaluator")
    if base:
        for name in ("spark column path", "spark udf path"):
            print(f"{name} / in-process evaluator: {rates[name] / base:.1f}x")
    print(f"spark column path / spark udf path: "
          f"{rates['spark column path'] / rates['spark udf path']:.1f}x")
    for label, rate in RABBITMQ.items():
        print(f"spark column path / RabbitMQ published ({label}, {rate:,} msg/s): "
              f"{rates['spark column path'] / rate:.1f}x")
    selective(spark, directory, size, args.repeat, engine=not args.skip_in_process)
    spark.stop()


def selective(spark: SparkSession, directory: Path, size: int, repeat: int, *,
              engine: bool) -> None:
    """Selective filters on the old and the indexed layouts: time, bytes and rows read.

    Every layout's DataFrame is made once (``read_archive``) and each query filters it; the
    last row, ``chosen``, is the bucketed layout through ``select_archive``: the files chosen
    in Python per query, their footers checked and the DataFrame made within the timing.
    """
    print(f"\nold layout {_bytes(directory) / 2**20:,.1f} MiB")
    frames = {"old": read_archive(spark, directory)}
    for layout, index in LAYOUTS.items():
        path = twin(directory, layout)
        print(f"{layout} layout ({', '.join(index.columns)}): {_bytes(path) / 2**20:,.1f} MiB "
              f"({_bytes(path) / _bytes(directory) - 1:+.1%})")
        frames[layout] = read_archive(spark, path)
    def filtered(df: DataFrame) -> Callable[[str], int]:
        return lambda text: apply_filter(df, text, path="column").count()

    bucketed = twin(directory, "bucketed")
    counters = {layout: filtered(df) for layout, df in frames.items()}
    counters["chosen"] = lambda text: select_archive(spark, bucketed, text,
                                                     path="column").count()
    expected = engine_counts(directory, SELECTIVE) if engine else {}
    # Spark's fixed cost per query, whatever the data: a count of an empty DataFrame.
    empty = spark.createDataFrame([], "x int")
    seconds, _ = timed(empty.count, max(3, repeat))
    print(f"\nSpark's fixed cost per query (count of an empty DataFrame): {seconds:.3f} s")
    print("\n(MiB read: what the Spark JVM read, /proc/PID/io rchar; rows read: Spark's input "
          "records after skipping; chosen: bucketed, files chosen in Python per query, "
          "select_archive)")
    print(f"\n{'filter':26} {'layout':8} {'seconds':>8} {'msg/s':>14} {'MiB read':>9} "
          f"{'rows read':>11} {'matches':>8}")
    for name, text in SELECTIVE.items():
        rates: dict[str, float] = {}
        counts: set[int] = set()
        for layout, counter in counters.items():
            def count(counter: Callable[[str], int] = counter, text: str = text) -> int:
                return counter(text)
            seconds, matches = timed(count, repeat)
            read = measure_read(spark, count)
            counts |= {matches, read.result}
            rates[layout] = size / seconds
            print(f"{name:26} {layout:8} {seconds:8.3f} {rates[layout]:14,.0f} "
                  f"{(read.bytes or 0) / 2**20:9.1f} {read.records:11,} {matches:8,}")
        if name in expected:
            counts.add(expected[name])
        assert len(counts) == 1, f"{name}: the layouts (or the engine) disagree: {counts}"
        print(f"{'':26} vs old: " + ", ".join(f"{layout} {rates[layout] / rates['old']:.1f}x"
                                              for layout in counters if layout != "old")
              + (" (counts = the engine's)" if name in expected else ""))
    # Again once the JVM is warm (the first measurement follows its start closely).
    seconds, _ = timed(empty.count, max(5, repeat))
    print(f"\nSpark's fixed cost per query, measured again after the queries: {seconds:.3f} s")


if __name__ == "__main__":
    main()
