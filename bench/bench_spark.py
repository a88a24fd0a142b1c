"""Spark benchmark: RabbitMQ's published SQL-filter workload over a Parquet archive.

Run:  python bench/bench_spark.py --size 1000000           (about 5 minutes the first time)
      python bench/bench_spark.py --size 10000000 --cache /data/filtex-bench

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

from proton import timestamp, ubyte

from filtex_proton.amqp.message import RawMessageView, encode_message
from filtex_proton.archive import archive_dataset
from filtex_proton.spark import (
    ArchiveWriter,
    apply_filter,
    as_filter_set,
    explain,
    read_archive,
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
                application_properties={"region": region},
                body=rng.randbytes(40),
                body_kind="data",
            )
            writer.append("orders", data, base_ms + index // 1000)


def archive(cache: Path, size: int) -> Path:
    """The archive of ``size`` messages under ``cache``, generated unless already there."""
    directory = cache / f"rabbitmq-{size}"
    marker = directory / "_GENERATED.json"
    if marker.exists() and json.loads(marker.read_text())["size"] == size:
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    parts = max(1, os.cpu_count() or 1)
    started = time.perf_counter()
    base_ms = time.time_ns() // 1_000_000
    with multiprocessing.Pool(parts) as pool:
        pool.starmap(_generate, [(p, parts, size, str(directory), base_ms) for p in range(parts)])
    took = time.perf_counter() - started
    marker.write_text(json.dumps({"size": size, "generated_ms": base_ms, "seconds": took}))
    print(f"generated {size:,} messages in {took:.0f} s ({size / took:,.0f} msg/s, "
          f"{_bytes(directory) / 2**20:,.0f} MiB)")
    return directory


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--size", type=int, default=1_000_000, help="messages in the archive")
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "filtex-bench-spark",
                        help="where the generated archive is kept between runs")
    parser.add_argument("--repeat", type=int, default=2, help="runs per Spark path (best kept)")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--skip-in-process", action="store_true",
                        help="do not run the (slow) single-process evaluator")
    args = parser.parse_args()

    directory = archive(args.cache, args.size)
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
    spark.stop()


if __name__ == "__main__":
    main()
