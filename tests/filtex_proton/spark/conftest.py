"""Fixtures: one local SparkSession for the whole run, and a corpus archive with its answers.

Spark tests skip (with the reason) where PySpark or Java is missing; CI installs
both (the ``spark`` extra is part of ``test``), so there they run.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from filtex_proton.amqp import DecodeError
from filtex_proton.amqp.message import RawMessageView
from filtex_proton.filterset import FilterSet, decode_filter_set

from .corpus import filter_sets, messages

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ADDRESSES = ["orders", "a/b:c=d%", "ü😀 x", "123"]
BASE_ARRIVAL = 1_700_000_000_000
CORPUS_SIZE = 3000
MESSAGES = messages(seed=7, count=CORPUS_SIZE)
FILTER_SETS = filter_sets(seed=20261122, count=400, data=MESSAGES)


def spark_unavailable() -> str | None:
    """Why Spark tests cannot run here, or ``None``."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install -e '.[spark]')"
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and Path(java_home, "bin", "java").exists()):
        return "no Java runtime (java on PATH or JAVA_HOME) for Spark"
    return None


def engine_view(data: bytes) -> RawMessageView | None:
    """The message as the broker reads it; None for bytes it refuses on arrival."""
    try:
        return RawMessageView(data)
    except DecodeError:
        return None


def engine_verdict(filter_set: FilterSet, view: RawMessageView | None) -> bool:
    """The oracle on a view read once (the broker evaluates every link on one view too)."""
    if len(filter_set) == 0:
        return True
    return view is not None and filter_set.matches(view)


def engine_matches(filter_set: FilterSet, data: bytes) -> bool:
    """The oracle: what the broker's plugin decides for these bytes (plugin.LinkFilter)."""
    return engine_verdict(filter_set, engine_view(data))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    reason = spark_unavailable()
    if reason is not None:
        pytest.skip(reason)
    from filtex_proton.spark import spark_session

    session = spark_session("local[2]", app_name="filtex-spark-tests", config={
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "2g",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
    })
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@dataclass
class Corpus:
    directory: Path
    data: list[bytes]
    """Message bytes by sequence number."""
    regular: list[bool]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """The seeded corpus written through ArchiveWriter: several addresses and segments."""
    from filtex_proton.spark import ArchiveWriter, read_archive_table

    directory = tmp_path_factory.mktemp("archive")
    data = MESSAGES
    with ArchiveWriter(directory, segment_rows=700, flush_interval=None, fsync=False,
                       handle_sigterm=False) as writer:
        for index, message in enumerate(data):
            # Two days, so that date partitions are exercised too.
            arrival = BASE_ARRIVAL + index * 60_000
            writer.append(ADDRESSES[index % len(ADDRESSES)], message, arrival)
    table = read_archive_table(directory, ["raw", "regular"])
    assert table.num_rows == len(data)
    assert table.column("raw").to_pylist() == data  # archive order is append order
    return Corpus(directory, data, table.column("regular").to_pylist())


@pytest.fixture(scope="session")
def archive_df(spark: SparkSession, corpus: Corpus) -> DataFrame:
    from filtex_proton.spark import read_archive

    df = read_archive(spark, corpus.directory).coalesce(2).cache()  # few tasks per job
    assert df.count() == len(corpus.data)
    return df


@pytest.fixture(scope="session")
def expected(corpus: Corpus) -> list[list[bool]]:
    """The engine's verdict, filter set by filter set, message by message (by index)."""
    views = [engine_view(data) for data in corpus.data]
    answers: list[list[bool]] = []
    for described in FILTER_SETS:
        filter_set = decode_filter_set(described)
        answers.append([engine_verdict(filter_set, view) for view in views])
    return answers


def first_sequence(df: Any) -> int:
    """The sequence number the writer gave the first message (they count up from there)."""
    return int(df.agg({"sequence": "min"}).collect()[0][0])
