"""What Spark read for an action: records from its stages' input metrics, bytes from the JVM.

Why: an index is worth what it saves in reading. Spark's input metrics count the records its
Parquet scans returned after partition pruning and row group and page skipping; their byte
count misses what parquet-mr reads outside Spark's file-system callback (the map columns
read 0.5 MiB where the process read 6 MiB), so in local mode the bytes are the JVM's own
``rchar`` (Linux ``/proc/PID/io``: every byte ``read()`` returned, page cache or not).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Read", "measure_read"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Read(Generic[T]):
    """An action's result and what its stages read."""

    result: T
    bytes: int | None
    """Bytes the driver's JVM read meanwhile (local mode on Linux; else None)."""
    records: int
    input_bytes: int
    """Bytes Spark's stage input metrics counted (an undercount for Parquet)."""


def measure_read(spark: SparkSession, action: Callable[[], T]) -> Read[T]:
    """Run ``action`` (a Spark action such as ``df.count``) and sum the input metrics of the
    stages of the jobs it started. Jobs other threads start meanwhile are counted too."""
    context = spark.sparkContext
    tracker = context.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    io = _jvm_io(spark) if (context.master or "").startswith("local") else None
    started = _rchar(io)
    result = action()
    ended = _rchar(io)
    store = context._jsc.sc().statusStore()
    read = records = 0
    for job in set(tracker.getJobIdsForGroup()) - before:
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info is not None else ():
            try:
                data = store.lastStageAttempt(stage)
            except Exception:  # a stage that never ran (skipped): it read nothing
                continue
            read += data.inputBytes()
            records += data.inputRecords()
    process = None if started is None or ended is None else ended - started
    return Read(result, process, records, read)


def _jvm_io(spark: SparkSession) -> Path | None:
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    path = Path(f"/proc/{pid}/io")
    return path if path.exists() else None


def _rchar(io: Path | None) -> int | None:
    if io is None:
        return None
    try:
        for line in io.read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None
