"""The archive read back: older schema versions, an unknown one refused, replay into a broker in
archive order, and Spark's filter over the archive against what a live filtered consumer got.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

from proton.utils import BlockingConnection  # noqa: E402

from filtex_broker.nodes.queue import Queue  # noqa: E402
from filtex_proton.archive import (  # noqa: E402
    ArchiveVersionError,
    ArchiveWriter,
    check_archive,
    iter_raw,
    message_row,
    read_archive_table,
    rows_to_table,
)

from ..broker_clients import (  # noqa: E402
    TIMEOUT,
    BrokerFactory,
    RunningBroker,
    connect,
    raw_receiver,
    sql,
    wait_received,
)

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql import SparkSession

from .archive_support import LONG_ADDRESS, order, send_all, stop  # noqa: E402

# ----------------------------------------------------------------------------- schema versions


def write_segment(directory: Path, table: pyarrow.Table, version: bytes | None) -> Path:
    import pyarrow.parquet as pq

    folder = directory / "address=q" / "date=2023-11-14" / "regular=true"
    folder.mkdir(parents=True)
    metadata = None if version is None else {b"filtex.archive.schema_version": version}
    path = folder / "part-0.parquet"
    pq.write_table(table.replace_schema_metadata(metadata), path)
    return path


def version_2_rows(n: int) -> pyarrow.Table:
    rows = [message_row(order(i, "EMEA"), address="q", arrival_ms=1_700_000_000_000 + i,
                        sequence=i) for i in range(n)]
    return rows_to_table(rows).drop_columns(["address", "date", "regular"])


def test_a_version_1_archive_is_read_with_long_address_null(tmp_path: Path) -> None:
    old = version_2_rows(3).drop_columns(["long_address"])  # version 1 had no long_address
    write_segment(tmp_path, old, b"1")
    assert check_archive(tmp_path) == {1: 1}
    table = read_archive_table(tmp_path, ["address", "raw", "long_address", "subject"])
    assert table.column("address").to_pylist() == ["q"] * 3
    assert table.column("long_address").to_pylist() == [None] * 3
    assert table.column("raw").to_pylist() == [order(i, "EMEA") for i in range(3)]
    assert table.column("subject").to_pylist() == ["order.0", "order.1", "order.2"]


@pytest.mark.parametrize(("version", "message"), [
    (b"3", r"written with archive schema version 3, newer than the version 2 this "
           r"filtex-proton reads; upgrade"),
    (None, r"not a filtex archive segment \(no filtex.archive.schema_version"),
    (b"0", r"archive schema version 0 is not one this filtex-proton reads \(\[1, 2\]\)"),
    (b"two", r"unreadable archive schema version b'two'"),
])
def test_an_archive_of_an_unknown_schema_version_is_refused_clearly(
    tmp_path: Path, version: bytes | None, message: str,
) -> None:
    with ArchiveWriter(tmp_path, flush_interval=None, fsync=False, handle_sigterm=False) as w:
        w.append("ok", order(1, "EMEA"), 1_700_000_000_000)
    path = write_segment(tmp_path, version_2_rows(1), version)
    with pytest.raises(ArchiveVersionError, match=message) as refused:
        read_archive_table(tmp_path)
    assert str(path) in str(refused.value)  # names the file
    with pytest.raises(ArchiveVersionError):
        list(iter_raw(tmp_path))


# ----------------------------------------------------------------------------- replay


def test_replay_from_the_archive_into_a_broker_keeps_archive_order(
    broker_factory: BrokerFactory, tmp_path: Path,
) -> None:
    from filtex_proton.spark.replay import Position, Replayer

    running = broker_factory(archive=str(tmp_path))
    messages = [order(i, "EMEA") for i in range(300)]
    send_all(running.url, "orders", messages)
    stop(running)
    table = read_archive_table(tmp_path, ["raw", "address"])
    source = [(r["raw"], Position(r["arrival_ms"], r["sequence"], r["address"]))
              for r in table.to_pylist()]
    target = broker_factory()  # a fresh broker: the replay's destination
    conn = connect(target.url)
    _, handler = raw_receiver(conn, "replayed", credit=len(messages))
    # Taken as they arrive: the order the replay sent them in (a backlog of these messages
    # would be delivered by their header priority, 0..9, not in arrival order).
    _wait_for_credit(conn, target, "replayed")
    result = Replayer(f"amqp://{target.url}/replayed", source, window=64).run()
    assert result.error is None and result.accepted == len(messages) and result.rejected == 0
    assert [data for data, _ in wait_received(conn, handler, len(messages))] == messages
    conn.close()


def _wait_for_credit(conn: BlockingConnection, running: RunningBroker, address: str) -> None:
    """Until the queue's consumer has its credit (the client sends it as it runs): from then on
    each message is delivered on arrival, in arrival order."""
    def ready() -> bool:
        node = running.broker.registry.nodes.get(address)
        return isinstance(node, Queue) and any(c.credit > 0 for c in node.consumers)
    conn.wait(ready, timeout=TIMEOUT, msg=f"a consumer with credit on {address!r}")


# ----------------------------------------------------------------------------- Spark


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """The same local session the Spark tests use (``getOrCreate`` shares it in one run)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        pytest.skip("pyspark is not installed (pip install -e '.[spark]')")
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and Path(java_home, "bin", "java").exists()):
        pytest.skip("no Java runtime for Spark")
    from filtex_proton.spark import spark_session

    session = spark_session("local[2]", app_name="filtex-spark-tests", config={
        "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
        "spark.ui.enabled": "false", "spark.driver.memory": "2g",
    })
    session.sparkContext.setLogLevel("ERROR")
    yield session


def test_filter_on_the_archive_equals_what_a_live_filtered_consumer_got(
    broker_factory: BrokerFactory, tmp_path: Path, spark: SparkSession,
) -> None:
    from filtex_proton.amqp.message import RawMessageView
    from filtex_proton.spark import apply_filter, as_filter_set, read_archive

    selector = ("region IN ('AMER', 'EMEA') AND (h.priority > 4 OR u >= 30) "
                "AND p.subject <> 'order.1'")
    running = broker_factory(archive=str(tmp_path))
    conn = connect(running.url)
    _, handler = raw_receiver(conn, "orders", credit=1000, options=sql(selector))
    _wait_for_credit(conn, running, "orders")  # taken as they arrive, not as a backlog by priority
    messages = [order(i, ["AMER", "EMEA", "APAC"][i % 3]) for i in range(90)]
    send_all(running.url, "orders", messages)
    send_all(running.url, LONG_ADDRESS, messages[:5])  # another node: not in the comparison
    expected = [m for m in messages if as_filter_set(selector).matches(RawMessageView(m))]
    assert 0 < len(expected) < len(messages)
    live = [data for data, _ in wait_received(conn, handler, len(expected))]
    assert live == expected
    conn.close()
    stop(running)

    df = read_archive(spark, tmp_path, ["orders"])
    matched = apply_filter(df, selector).orderBy("arrival_ms", "sequence")
    assert [bytes(r["raw"]) for r in matched.select("raw").collect()] == live
    long_rows = read_archive(spark, tmp_path, [LONG_ADDRESS]).select("address").collect()
    assert [r["address"] for r in long_rows] == [LONG_ADDRESS] * 5


def test_matches_spark_wrote_are_read_back_as_the_current_schema_version(
    broker_factory: BrokerFactory, tmp_path: Path, spark: SparkSession,
) -> None:
    import io

    from filtex_proton.spark.cli import main as filtex_spark

    running = broker_factory(archive=str(tmp_path / "archive"))
    messages = [order(i, "EMEA") for i in range(6)]
    send_all(running.url, "orders", messages)
    stop(running)
    out = tmp_path / "selected"
    status = filtex_spark(["select", "--archive", str(tmp_path / "archive"), "--filter",
                           "n >= 3", "--out", str(out), "--count"], stdout=io.StringIO())
    assert status == 0
    # Spark cannot stamp filtex.archive.schema_version; its files have the current columns.
    assert sum(check_archive(out).values()) >= 1 and set(check_archive(out)) == {2}
    assert read_archive_table(out, ["raw"]).column("raw").to_pylist() == messages[3:]
