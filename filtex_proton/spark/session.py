"""Spark sessions and archive DataFrames.

Every PySpark entry point of the project goes through :func:`spark_session`,
which points Spark's Python workers at this very interpreter: the UDF path
imports filtex_proton in the workers, and a worker started from another
Python (the system one, say) would not have it.

In local mode nothing listens beyond loopback: Spark would otherwise bind its
driver and block manager to the host's first non-loopback interface and its UI
to every interface, so a laptop running a local query would expose them on its
network. A cluster master is left as the user configured it. A Spark Connect server
(``remote``) is the server's business: this process only talks to it (connect.py).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final

import pyarrow as pa

from filtex_proton.archive import (
    ARCHIVE_SCHEMA,
    BUCKET_COLUMN,
    PARTITION_COLUMNS,
    ArchiveIndex,
    address_partition,
    archive_segments,
    common_index_columns,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = [
    "LOCAL_MODE_SETTINGS", "QUERY_SETTINGS", "archive_spark_schema", "drop_archive_duplicates",
    "read_archive", "read_segments", "spark_session", "use_this_python",
]

LOOPBACK = "127.0.0.1"
LOCAL_MODE_SETTINGS: dict[str, str] = {
    "spark.driver.host": LOOPBACK,
    "spark.driver.bindAddress": LOOPBACK,  # the driver's RPC endpoint and its block manager
    "spark.ui.enabled": "false",  # asked for with --conf spark.ui.enabled=true: on loopback
}
"""What a local master gets unless the caller's config says otherwise."""

QUERY_SETTINGS: dict[str, str] = {
    # On, PySpark records the Python call site of every Column and DataFrame operation in
    # the JVM (for error messages): about six round trips to the JVM each, hundreds per
    # filter, more than the rest of a selective query's Python side.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
}
"""What every session gets unless the caller's config says otherwise (results unchanged)."""

_BUCKET_DIRECTORY: Final = f"{os.sep}{BUCKET_COLUMN}="
"""In the path of a bucketed segment's file (its ``index_bucket=`` directory)."""


def use_this_python(*, force: bool = True) -> None:
    """Make Spark's Python workers (and the driver) run ``sys.executable``.

    ``force=False`` keeps values the user set (a cluster whose workers have
    their own interpreter path).
    """
    for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        if force or not os.environ.get(name):
            os.environ[name] = sys.executable


def spark_session(master: str | None = None, *, remote: str | None = None,
                  app_name: str = "filtex-spark",
                  config: Mapping[str, str] | None = None) -> SparkSession:
    """A SparkSession for archives: ``master`` as given, else what spark-submit set, else
    ``local[*]``. Local masters always use this interpreter for the workers and listen on
    loopback only (``config`` wins over :data:`LOCAL_MODE_SETTINGS`).

    ``remote`` (``sc://HOST:PORT``; with neither ``master`` nor ``remote``, ``$SPARK_REMOTE``
    as PySpark reads it): a session of that Spark Connect server instead, with no JVM here
    (:func:`~filtex_proton.spark.connect.connect_session`). A ``master`` given wins over
    ``$SPARK_REMOTE``, which PySpark's builder would otherwise follow.
    """
    if master is not None and remote is not None:
        raise ValueError("a master or a Spark Connect server (remote), not both")
    if master is None and remote is None:
        remote = os.environ.get("SPARK_REMOTE") or None
    if remote is not None:
        from filtex_proton.spark.connect import connect_session

        return connect_session(remote, config=config)
    os.environ.pop("SPARK_REMOTE", None)

    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    submitted = SparkConf().get("spark.master")
    chosen = master or submitted or "local[*]"
    local = chosen.startswith("local")
    use_this_python(force=local)
    builder = SparkSession.builder.appName(app_name)
    if master or not submitted:
        builder = builder.master(chosen)
    settings = {"spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false",
                **QUERY_SETTINGS}
    if local:
        # Read by the JVM when it starts (the UI binds to it); a value the user set stays.
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
        settings.update(LOCAL_MODE_SETTINGS)
    settings.update(config or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _spark_type(arrow_type: pa.DataType) -> DataType:
    from pyspark.sql import types as T  # noqa: N812

    if pa.types.is_boolean(arrow_type):
        return T.BooleanType()
    if pa.types.is_int16(arrow_type):
        return T.ShortType()
    if pa.types.is_int64(arrow_type):
        return T.LongType()
    if pa.types.is_float64(arrow_type):
        return T.DoubleType()
    if pa.types.is_string(arrow_type):
        return T.StringType()
    if pa.types.is_binary(arrow_type):
        return T.BinaryType()
    if pa.types.is_decimal(arrow_type):
        return T.DecimalType(arrow_type.precision, arrow_type.scale)
    if pa.types.is_map(arrow_type):
        return T.MapType(_spark_type(arrow_type.key_type), _spark_type(arrow_type.item_type), True)
    if pa.types.is_struct(arrow_type):
        return T.StructType([T.StructField(f.name, _spark_type(f.type), True)
                             for f in arrow_type])
    raise TypeError(f"no Spark type for {arrow_type}")


def archive_spark_schema(index_columns: Iterable[str] = (), *,
                         bucketed: bool = False) -> StructType:
    """The archive's columns as Spark reads them (and these application property index
    columns), the partition columns last (and ``index_bucket`` if ``bucketed``)."""
    from pyspark.sql import types as T  # noqa: N812

    fields = [T.StructField(f.name, _spark_type(f.type), f.nullable) for f in ARCHIVE_SCHEMA]
    fields += [T.StructField(name, T.StringType(), True) for name in index_columns]
    fields += [T.StructField(name, T.BooleanType() if name == "regular" else T.StringType(), True)
               for name in (*PARTITION_COLUMNS, *((BUCKET_COLUMN,) if bucketed else ()))]
    return T.StructType(fields)


def read_archive(spark: SparkSession, directory: str | os.PathLike[str],
                 addresses: Iterable[str] | None = None, *, since: str | None = None,
                 until: str | None = None) -> DataFrame:
    """An archive directory as a DataFrame (``address``, ``date`` and ``regular`` from the
    directory names), only the rows of ``addresses`` if given, and of the days ``since`` to
    ``until`` (ISO dates, UTC, both included) if given.

    The schema is given, not inferred: an address such as ``123`` stays a string.
    ``address`` is the real address also where the directory holds a shortened one
    (``long_address`` is set there). ``addresses`` and the days are applied to the directory
    names first, so that Spark reads only their directories.

    The ``index_<key>`` columns of the application properties that every segment indexes
    (docs/ARCHIVE.md) are columns of the DataFrame too, and Spark then reads exactly the
    segments checked (one written meanwhile without them would read NULL there);
    :func:`~filtex_proton.spark.apply_filter` uses them to let Spark skip what cannot match.
    An archive with bucketed segments has an ``index_bucket`` column (NULL for the segments
    that are not), by which Spark skips whole files.
    """
    path = os.fspath(directory)
    if not os.path.isdir(path):  # a remote URL is read as it is: Spark reads its footers
        return _where(_read(spark, path, [([path], False)], []), addresses, since, until)
    segments = archive_segments(path)  # a local archive: refuse newer versions before Spark
    if not common_index_columns(i for _, _, i in segments) and not any(
            _BUCKET_DIRECTORY in file for file, _, _ in segments):
        # Nothing to add: Spark lists the directory itself (one path, listed serially).
        return _where(_read(spark, path, [([path], False)], []), addresses, since, until)
    return read_segments(spark, path, segments, addresses, since=since, until=until)


def read_segments(spark: SparkSession, directory: str,
                  segments: Sequence[tuple[str, int, ArchiveIndex | None]],
                  addresses: Iterable[str] | None = None, *, since: str | None = None,
                  until: str | None = None) -> DataFrame:
    """:func:`read_archive` of these checked segment files of a local archive only
    (``archive_segments``/``check_segments``), with the index columns they all have."""
    indexes = sorted(common_index_columns(i for _, _, i in segments))
    bucketed = [file for file, _, _ in segments if _BUCKET_DIRECTORY in file]
    plain = [file for file, _, _ in segments if _BUCKET_DIRECTORY not in file]
    if not segments:  # nothing to read (handed the directory, Spark would list all of it)
        return _where(spark.createDataFrame([], archive_spark_schema()), addresses, since,
                      until)
    groups: list[tuple[list[str], bool]] = []
    if bucketed:  # Spark cannot infer partitions of two depths at once: read each apart
        groups.append((bucketed, True))
    if plain:
        groups.append((plain, False))
    return _where(_read(spark, directory, groups, indexes), addresses, since, until)


def _read(spark: SparkSession, path: str, groups: list[tuple[list[str], bool]],
          indexes: list[str]) -> DataFrame:
    """The files of each group, with bucket directories or without, as one DataFrame."""
    from pyspark.sql import functions as F  # noqa: N812

    frames = []
    bucket_column = any(bucket_dirs for _, bucket_dirs in groups)
    with _listed_in_the_driver(spark, max(len(files) for files, _ in groups)):
        for files, bucket_dirs in groups:
            frame = (spark.read.schema(archive_spark_schema(indexes, bucketed=bucket_dirs))
                     .option("basePath", path).option("recursiveFileLookup", "false")
                     .parquet(*files))
            if bucket_column and not bucket_dirs:
                frame = frame.withColumn(BUCKET_COLUMN, F.lit(None).cast("string"))
            frames.append(frame)
    return frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])


_DISCOVERY: Final = "spark.sql.sources.parallelPartitionDiscovery.threshold"
_DISCOVERY_DEFAULT: Final = 32


@contextlib.contextmanager
def _listed_in_the_driver(spark: SparkSession, paths: int) -> Iterator[None]:
    """Spark lists more than ``parallelPartitionDiscovery.threshold`` paths (32) in a Spark
    job, which costs a local query more than the listing (40 segment files: ~0.1 s); the
    files handed over were listed here already, so Spark only needs their status: raised for
    this read only, then put back."""
    if paths <= _DISCOVERY_DEFAULT:
        yield
        return
    before = spark.conf.get(_DISCOVERY)
    if before is not None and int(before) >= paths:
        yield
        return
    spark.conf.set(_DISCOVERY, str(paths))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(_DISCOVERY)
        else:
            spark.conf.set(_DISCOVERY, before)


def _where(df: DataFrame, addresses: Iterable[str] | None, since: str | None,
           until: str | None) -> DataFrame:
    """The days and addresses selected (on the directory values first, so that Spark prunes
    directories), and ``address`` the real one."""
    from pyspark.sql import functions as F  # noqa: N812

    if since is not None:
        df = df.where(F.col("date") >= since)  # ISO dates sort as strings
    if until is not None:
        df = df.where(F.col("date") <= until)
    wanted = None if addresses is None else list(dict.fromkeys(addresses))
    if wanted is not None:
        df = df.where(F.col("address").isin([address_partition(a) for a in wanted]))
    df = df.withColumn("address", F.coalesce(F.col("long_address"), F.col("address")))
    if wanted is not None:
        df = df.where(F.col("address").isin(wanted))
    return df


def drop_archive_duplicates(df: DataFrame) -> DataFrame:
    """Each archived message once: the copies an at-least-once archive can hold dropped.

    A copy (a batch written again after the broker's writer process died) has the same
    ``address``, ``arrival_ms`` and ``sequence`` (the broker numbers messages before handing them
    over) and the same bytes; the bytes' 64-bit hash is part of the key too, so that two
    brokers archiving one address in the same millisecond never merge two messages.
    """
    from pyspark.sql import functions as F  # noqa: N812

    keyed = df.withColumn("_raw_hash", F.xxhash64("raw"))
    return keyed.dropDuplicates(["address", "arrival_ms", "sequence", "_raw_hash"]).drop(
        "_raw_hash")
