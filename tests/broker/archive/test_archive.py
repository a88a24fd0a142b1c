"""``filtex-broker --archive``: what nodes accept ends up in the Parquet archive, typed.

Real brokers (a subprocess for the console script and SIGTERM, threads elsewhere),
real proton senders and receivers over sockets; the archive is read back with
``filtex_proton.spark`` (pyarrow alone, and Spark for the filter comparison).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

from proton import Delivery, symbol, ubyte, uint  # noqa: E402

from filtex_broker.archive.process import ArchiveOpenError, WriterProcess  # noqa: E402
from filtex_broker.archive.wire import BATCH, CLOSE, Progress, encode_batch  # noqa: E402
from filtex_broker.config import ConfigError, load_config  # noqa: E402
from filtex_broker.nodes.queue import Queue  # noqa: E402
from filtex_proton.amqp.message import encode_message  # noqa: E402
from filtex_proton.archive import (  # noqa: E402
    ArchiveVersionError,
    ArchiveWriter,
    address_directory,
    check_archive,
    describe_typed,
    iter_raw,
    message_row,
    read_archive_table,
    rows_to_table,
)

from ..broker_clients import (  # noqa: E402
    TIMEOUT,
    BrokerFactory,
    DiskFull,
    RunningBroker,
    connect,
    raw_receiver,
    send_raw,
    sql,
    wait_for,
    wait_received,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO = Path(__file__).resolve().parents[3]
LONG_ADDRESS = "archive/" + "ü" * 140 + "/end?x=1"  # > 240 bytes escaped, unsafe characters


def order(i: int, region: str, *, to: str | None = None) -> bytes:
    """A message with typed fields the archive must keep apart (uint vs long, symbol)."""
    properties: dict[str, Any] = {"subject": f"order.{i % 3}", "message-id": i}
    if to is not None:
        properties["to"] = to
    return encode_message(
        header={"priority": ubyte(i % 10), "durable": i % 2 == 0},
        properties=properties,
        message_annotations={symbol("x-opt-seq"): uint(i)},
        application_properties={"region": region, "n": i, "u": uint(i)},
        body=f"body {i}",
    )


def send_all(url: str, address: str | None, messages: list[bytes]) -> None:
    conn = connect(url)
    sender = conn.create_sender(address)
    for data in messages:
        assert send_raw(conn, sender, data).remote_state == Delivery.ACCEPTED
    conn.close()


def stop(running: RunningBroker) -> None:
    """Stop a threaded broker: its archive is flushed and closed when ``run`` returns."""
    running.broker.stop()
    running.thread.join(TIMEOUT)
    assert not running.thread.is_alive()


# ----------------------------------------------------------------------------- the process


@pytest.fixture
def archiving_process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str, Path]]:
    archive = tmp_path / "archive"
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "filtex_broker", "--listen", "127.0.0.1:0", "--ready-file",
         str(ready),
         "--archive", str(archive)],
        cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    deadline = time.monotonic() + TIMEOUT
    while not ready.exists():  # the broker writes it atomically once bound
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the broker did not start"
        time.sleep(0.02)
    yield proc, ready.read_text().split()[0], archive
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_flushes_every_accepted_message_with_typed_columns(
    archiving_process: tuple[subprocess.Popen[str], str, Path], signum: int,
) -> None:
    proc, url, archive = archiving_process
    orders = [order(i, ["AMER", "EMEA", "APAC"][i % 3]) for i in range(60)]
    audit = [encode_message(properties={"subject": "audit"}, body=b"\x00\x01")]
    send_all(url, "orders", orders)
    send_all(url, "audit", audit)
    os.killpg(proc.pid, signum)  # to the group, as a terminal's Ctrl-C: the writer is not in it
    assert proc.wait(timeout=TIMEOUT) == 0
    assert proc.stderr is not None
    log = proc.stderr.read()
    assert "archive closed: 61 message(s) archived" in log and "0 lost" in log
    assert "unexpectedly" not in log and "could not be archived" not in log

    table = read_archive_table(archive)
    rows = table.to_pylist()
    assert [r["raw"] for r in rows if r["address"] == "orders"] == orders  # in arrival order
    assert [r["raw"] for r in rows if r["address"] == "audit"] == audit
    first = next(r for r in rows if r["address"] == "orders")
    assert first["subject"] == "order.0" and first["priority"] == 0 and first["durable"] is True
    assert first["to"] is None and first["ttl"] is None  # absent fields are NULL
    assert first["regular"] is True and first["decode_error"] is None
    app = dict(first["application_properties"])
    assert set(app) == {"string:region", "string:n", "string:u"}
    assert (app["string:n"]["type"], app["string:u"]["type"]) == ("long", "uint")
    assert type(describe_typed(app["string:u"])) is uint
    annotations = dict(first["message_annotations"])
    assert annotations["symbol:x-opt-seq"]["type"] == "uint"
    assert first["message_id"]["type"] == "ulong" and first["message_id"]["long"] == 0
    assert all(r["date"] == time.strftime("%Y-%m-%d", time.gmtime(r["arrival_ms"] / 1000))
               for r in rows)


# ----------------------------------------------------------------------------- which nodes


def test_archive_nodes_archives_only_matching_addresses(
    broker_factory: BrokerFactory, tmp_path: Path,
) -> None:
    running = broker_factory(archive=str(tmp_path), archive_nodes=("orders.*", "audit"))
    send_all(running.url, "orders.eu", [order(1, "EMEA")])
    send_all(running.url, "orders", [order(2, "EMEA")])  # no dot: not orders.*
    send_all(running.url, "audit", [order(3, "AMER")])
    send_all(running.url, None, [order(4, "AMER", to="orders.us"), order(5, "AMER", to="x")])
    stop(running)
    table = read_archive_table(tmp_path, ["address", "message_id"])
    assert table.column("address").to_pylist() == ["orders.eu", "audit", "orders.us"]
    assert [v["long"] for v in table.column("message_id").to_pylist()] == [1, 3, 4]


def test_archive_index_sorts_and_indexes_the_segments_the_broker_writes(
    broker_factory: BrokerFactory, tmp_path: Path,
) -> None:
    """``--archive-index region``: the writer process indexes the property (and the fields),
    and reading the archive back gives every message, in archive order."""
    import pyarrow.parquet as pq

    from filtex_proton.archive import ArchiveIndex, archive_segments, index_column

    running = broker_factory(archive=str(tmp_path), archive_index=("region",))
    regions = ["EMEA", "AMER", "APJ", "AMER", "EMEA", "AMER"]
    send_all(running.url, "orders", [order(i, r) for i, r in enumerate(regions)])
    stop(running)
    segments = archive_segments(tmp_path)
    assert [index for _, _, index in segments] == [ArchiveIndex(("region",))]
    table = pq.read_table(segments[0][0])
    assert table.column(index_column("region")).to_pylist() == sorted(f"={r}" for r in regions)
    archived = read_archive_table(tmp_path, ["message_id"]).column("message_id").to_pylist()
    assert [v["long"] for v in archived] == list(range(len(regions)))


def test_archive_index_buckets_split_the_segments_the_broker_writes(
    broker_factory: BrokerFactory, tmp_path: Path,
) -> None:
    """``--archive-index region --archive-index-buckets 4``: one file per bucket present, in
    ``index_bucket=`` directories, each holding only its bucket's rows; every message read back."""
    import pyarrow.parquet as pq

    from filtex_proton.archive import ArchiveIndex, archive_segments, index_column
    from filtex_proton.archive.index import bucket_of, bucket_value

    running = broker_factory(archive=str(tmp_path), archive_index=("region",),
                             archive_index_buckets=4)
    regions = ["EMEA", "AMER", "APJ", "AMER", "EMEA", "AMER", "LATAM", "x"]
    send_all(running.url, "orders", [order(i, r) for i, r in enumerate(regions)])
    stop(running)
    segments = archive_segments(tmp_path)
    column = index_column("region")
    assert {index for _, _, index in segments} == {ArchiveIndex(("region",), buckets=4)}
    folders = set()
    for path, _, _ in segments:
        folder = Path(path).parent.name
        folders.add(folder)
        values = pq.read_table(path).column(column).to_pylist()
        assert {f"index_bucket={bucket_value(column, 4, bucket_of(v, 4))}" for v in values} \
            == {folder}
    assert folders == {f"index_bucket={bucket_value(column, 4, bucket_of('=' + r, 4))}"
                       for r in regions}
    archived = read_archive_table(tmp_path, ["message_id"]).column("message_id").to_pylist()
    assert sorted(v["long"] for v in archived) == list(range(len(regions)))


def test_without_archive_index_fields_the_broker_writes_the_plain_layout(
    broker_factory: BrokerFactory, tmp_path: Path,
) -> None:
    from filtex_proton.archive import archive_segments

    running = broker_factory(archive=str(tmp_path), archive_index_fields=False)
    send_all(running.url, "orders", [order(1, "EMEA")])
    stop(running)
    assert [index for _, _, index in archive_segments(tmp_path)] == [None]


def test_without_archive_nodes_every_node_is_archived_and_dead_letters_are_not_producers(
    broker_factory: BrokerFactory, tmp_path: Path,
) -> None:
    running = broker_factory(archive=str(tmp_path))
    send_all(running.url, "a", [order(1, "EMEA")])
    send_all(running.url, "b", [order(2, "EMEA")])
    stop(running)
    assert read_archive_table(tmp_path, ["address"]).column("address").to_pylist() == ["a", "b"]


def test_long_and_unsafe_address_is_archived_under_a_safe_directory(
    broker_factory: BrokerFactory, tmp_path: Path,
) -> None:
    running = broker_factory(archive=str(tmp_path))
    messages = [order(i, "EMEA") for i in range(3)]
    send_all(running.url, LONG_ADDRESS, messages)
    stop(running)
    directory = address_directory(LONG_ADDRESS)
    assert len(directory.encode()) <= 240 and (tmp_path / directory).is_dir()
    table = read_archive_table(tmp_path, ["address", "raw"])
    assert table.column("address").to_pylist() == [LONG_ADDRESS] * 3
    assert table.column("raw").to_pylist() == messages


# ----------------------------------------------------------------------------- back-pressure


def test_a_slow_archive_stalls_producers_and_loses_nothing(
    broker_factory: BrokerFactory, tmp_path: Path,
) -> None:
    # One byte of queue: every credit top-up finds the archive "behind" and waits for the
    # writer thread to wake the producer; all messages still arrive, none is lost.
    running = broker_factory(archive=str(tmp_path), archive_max_pending_bytes=1, credit_window=4)
    messages = [order(i, "EMEA") for i in range(200)]
    send_all(running.url, "q", messages)
    archiver = running.broker.archive
    assert archiver is not None
    stop(running)
    assert archiver.stats.offered == archiver.stats.appended == 200
    assert archiver.stats.stalls > 0
    assert read_archive_table(tmp_path, ["raw"]).column("raw").to_pylist() == messages


def test_a_stuck_archive_holds_back_its_producers_not_the_broker(
    broker_factory: BrokerFactory, tmp_path: Path,
) -> None:
    running = broker_factory(archive=str(tmp_path), archive_nodes=("archived",),
                             archive_max_pending_bytes=1000, credit_window=10)
    archiver = running.broker.archive
    assert archiver is not None
    messages = [order(i, "EMEA") for i in range(100)]
    sender = threading.Thread(target=send_all, args=(running.url, "archived", messages))
    os.kill(archiver.writer_pid, signal.SIGSTOP)  # the writer process cannot take anything
    try:
        sender.start()
        deadline = time.monotonic() + TIMEOUT
        while archiver.stats.stalls == 0:  # waiting for the broker to withhold credit
            assert time.monotonic() < deadline, "the producer was never stalled"
            time.sleep(0.01)
        # The reactor is not blocked: other nodes are served meanwhile.
        send_all(running.url, "other", [order(7, "AMER")])
        conn = connect(running.url)
        _, handler = raw_receiver(conn, "other", credit=1)
        assert len(wait_received(conn, handler, 1)) == 1
        conn.close()
        taken = archiver.stats.offered
        assert taken < len(messages)  # at most what was granted before the stall
        assert sender.is_alive()
    finally:
        os.kill(archiver.writer_pid, signal.SIGCONT)
    sender.join(TIMEOUT)
    assert not sender.is_alive()
    stop(running)
    assert archiver.stats.restarts == 0  # stopped is not dead
    assert read_archive_table(tmp_path, ["raw"]).column("raw").to_pylist() == messages


def test_a_write_error_is_logged_counted_and_the_broker_goes_on(
    broker_factory: BrokerFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.INFO, "filtex.broker.archive")
    (tmp_path / address_directory("blocked")).write_text("a file where a directory must go")
    running = broker_factory(archive=str(tmp_path))
    send_all(running.url, "blocked", [order(1, "EMEA"), order(2, "EMEA")])
    send_all(running.url, "fine", [order(3, "EMEA")])
    conn = connect(running.url)
    _, handler = raw_receiver(conn, "blocked", credit=10)
    assert len(wait_received(conn, handler, 2)) == 2  # the node kept its messages
    conn.close()
    archiver = running.broker.archive
    assert archiver is not None
    stop(running)
    assert archiver.stats.dropped == 2 and archiver.stats.errors >= 1
    assert archiver.stats.written == 1 and archiver.stats.restarts == 0
    assert "2 lost to write errors" in caplog.text
    assert "the final flush" in capfd.readouterr().err  # logged by the writer process
    (tmp_path / address_directory("blocked")).unlink()  # the obstacle is no Parquet file
    assert read_archive_table(tmp_path, ["address"]).column("address").to_pylist() == ["fine"]


# ----------------------------------------------------------------------------- the writer process


def test_a_killed_writer_process_is_restarted_and_nothing_is_lost(
    broker_factory: BrokerFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "filtex.broker.archive")
    running = broker_factory(archive=str(tmp_path))
    archiver = running.broker.archive
    assert archiver is not None
    first = [order(i, "EMEA") for i in range(150)]
    send_all(running.url, "orders", first)
    wait_for(lambda: archiver.stats.appended == len(first), "the writer never appended")
    dead = archiver.writer_pid
    os.kill(dead, signal.SIGKILL)  # its rows were only buffered: the broker still has them
    wait_for(lambda: archiver.stats.restarts == 1 and archiver.writer_pid != dead,
             "the writer was not restarted")
    second = [order(i, "AMER") for i in range(150, 300)]
    send_all(running.url, "orders", second)  # and the broker went on
    stop(running)
    assert f"the writer process {dead} exited unexpectedly" in caplog.text
    assert "150 message(s) not yet written" in caplog.text
    # Sent again to the new writer: in the archive once (nothing was written before the kill),
    # numbered by the broker, in arrival order.
    table = read_archive_table(tmp_path, ["raw", "sequence"])
    assert table.column("raw").to_pylist() == first + second
    sequences = table.column("sequence").to_pylist()
    assert sequences == sorted(sequences) and len(set(sequences)) == 300
    assert archiver.stats.appended == archiver.stats.offered == 300
    assert archiver.stats.written == 300


def test_a_writer_that_cannot_be_restarted_stalls_archiving_not_the_broker(
    broker_factory: BrokerFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "filtex.broker.archive")
    archive = tmp_path / "archive"
    running = broker_factory(archive=str(archive), archive_nodes=("archived",))
    archiver = running.broker.archive
    assert archiver is not None
    send_all(running.url, "archived", [order(1, "EMEA")])
    wait_for(lambda: archiver.stats.appended == 1, "the writer did not append")
    archive.rename(tmp_path / "elsewhere")
    archive.write_text("a file where the archive must be")  # no new writer can open it
    os.kill(archiver.writer_pid, signal.SIGKILL)
    wait_for(lambda: "cannot start a writer process" in caplog.text, "no restart was tried")
    send_all(running.url, "other", [order(2, "AMER")])  # the broker serves on
    conn = connect(running.url)
    _, handler = raw_receiver(conn, "archived", credit=10)
    assert len(wait_received(conn, handler, 1)) == 1  # the node has its message
    conn.close()
    stop(running)  # gives up on the archive after a few more attempts, and exits cleanly
    assert "archive: 1 message(s) could not be archived" in caplog.text
    assert archiver.stats.restarts == 1 and archiver.stats.appended == 1


def test_the_writer_process_ignores_sigint_and_has_its_own_session(
    broker_factory: BrokerFactory, tmp_path: Path,
) -> None:
    running = broker_factory(archive=str(tmp_path))
    archiver = running.broker.archive
    assert archiver is not None
    pid = archiver.writer_pid
    assert os.getsid(pid) == pid  # a terminal's Ctrl-C (to our process group) misses it
    os.kill(pid, signal.SIGINT)
    os.kill(pid, signal.SIGTERM)  # a service manager signalling every process: ignored too
    send_all(running.url, "q", [order(1, "EMEA")])
    wait_for(lambda: archiver.stats.appended == 1, "the writer did not append")
    assert archiver.writer_pid == pid and archiver.stats.restarts == 0
    stop(running)
    with pytest.raises(ProcessLookupError):  # the broker stopped it
        os.kill(pid, 0)
    assert read_archive_table(tmp_path, ["raw"]).column("raw").to_pylist() == [order(1, "EMEA")]


def start_writer(directory: Path, retain_bytes: int) -> tuple[WriterProcess, list[Progress]]:
    progress: list[Progress] = []
    return WriterProcess(directory, progress.append, lambda: None,
                         retain_bytes=retain_bytes), progress


def test_the_writer_reports_a_batch_written_only_once_it_is_in_a_segment(tmp_path: Path) -> None:
    writer, progress = start_writer(tmp_path, retain_bytes=64 * 2**20)
    assert writer.send(BATCH, encode_batch(1, 7, [("q", order(1, "EMEA"), 1_700_000_000_000)]))
    wait_for(lambda: bool(progress), "no progress")
    assert (progress[-1].appended, progress[-1].durable) == (1, 0)  # buffered, not written
    assert not list(tmp_path.rglob("*.parquet"))
    assert writer.send(CLOSE)
    assert writer.wait(TIMEOUT) == 0
    last = progress[-1]
    assert last.final and (last.appended, last.durable, last.written, last.segments) == (1, 1, 1, 1)
    writer.release()



def test_a_writer_starts_when_descriptors_are_above_1023(
    tmp_path: Path, high_descriptors: list[int]
) -> None:
    """A restart in a busy broker makes its pipes there: waiting for the writer's first word
    with select(2) raised 'filedescriptor out of range' and stalled archived producers."""
    writer, progress = start_writer(tmp_path, retain_bytes=64 * 2**20)
    assert writer.send(BATCH, encode_batch(1, 7, [("q", order(1, "EMEA"), 1_700_000_000_000)]))
    assert writer.send(CLOSE)
    assert writer.wait(TIMEOUT) == 0
    assert progress[-1].final and progress[-1].written == 1
    writer.release()


def test_the_writer_writes_early_when_the_brokers_copy_would_grow_too_large(
    tmp_path: Path,
) -> None:
    writer, progress = start_writer(tmp_path, retain_bytes=1)
    assert writer.send(BATCH, encode_batch(1, 7, [("q", order(1, "EMEA"), 1_700_000_000_000)]))
    wait_for(lambda: bool(progress), "no progress")
    assert (progress[-1].appended, progress[-1].durable, progress[-1].written) == (1, 1, 1)
    assert len(list(tmp_path.rglob("*.parquet"))) == 1
    writer.kill()


def test_a_writer_whose_broker_is_gone_writes_what_it_has_and_exits(tmp_path: Path) -> None:
    writer, progress = start_writer(tmp_path, retain_bytes=64 * 2**20)
    items = [("q", order(i, "EMEA"), 1_700_000_000_000 + i) for i in range(3)]
    assert writer.send(BATCH, encode_batch(1, 40, items))
    wait_for(lambda: bool(progress), "no progress")
    writer._input.close()  # as if the broker died: end of input
    assert writer.wait(TIMEOUT) == 0
    table = read_archive_table(tmp_path, ["raw", "sequence"])
    assert table.column("raw").to_pylist() == [data for _, data, _ in items]
    assert table.column("sequence").to_pylist() == [40, 41, 42]  # numbered by the broker
    writer.release()


def test_a_writer_that_cannot_open_the_archive_says_why(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ArchiveOpenError, match=r"cannot open the archive .*file/archive"):
        start_writer(blocker / "archive", retain_bytes=1)


# ----------------------------------------------------------------------------- with --data-dir


def test_with_a_data_dir_only_messages_the_store_wrote_are_archived(
    broker_factory: BrokerFactory, tmp_path: Path, disk_full: DiskFull,
) -> None:
    running = broker_factory(archive=str(tmp_path / "archive"), data_dir=tmp_path / "data")
    conn = connect(running.url)
    sender = conn.create_sender("q")
    messages = [order(i, "EMEA") for i in range(6)]
    outcomes = [send_raw(conn, sender, messages[0]).remote_state]
    disk_full.full = True
    outcomes += [send_raw(conn, sender, data).remote_state for data in messages[1:4]]
    disk_full.full = False
    node = running.broker.registry.lookup("q")
    assert isinstance(node, Queue) and node.journal is not None
    journal = node.journal
    wait_for(lambda: not journal.broken, "the log was not repaired")
    outcomes += [send_raw(conn, sender, data).remote_state for data in messages[4:]]
    conn.close()
    stop(running)
    assert Delivery.REJECTED in outcomes[1:4]  # the store could not write them
    assert outcomes[0] == outcomes[4] == outcomes[5] == Delivery.ACCEPTED
    accepted = [m for m, outcome in zip(messages, outcomes, strict=True)
                if outcome == Delivery.ACCEPTED]
    archived = read_archive_table(tmp_path / "archive", ["raw"]).column("raw").to_pylist()
    assert archived == accepted  # a rejected message is in its node, not in the archive


# ----------------------------------------------------------------------------- schema versions


def write_segment(directory: Path, table: pa.Table, version: bytes | None) -> Path:
    import pyarrow.parquet as pq

    folder = directory / "address=q" / "date=2023-11-14" / "regular=true"
    folder.mkdir(parents=True)
    metadata = None if version is None else {b"filtex.archive.schema_version": version}
    path = folder / "part-0.parquet"
    pq.write_table(table.replace_schema_metadata(metadata), path)
    return path


def version_2_rows(n: int) -> pa.Table:
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
    result = Replayer(f"amqp://{target.url}/replayed", source, window=64).run()
    assert result.error is None and result.accepted == len(messages) and result.rejected == 0
    conn = connect(target.url)
    _, handler = raw_receiver(conn, "replayed", credit=len(messages))
    assert [data for data, _ in wait_received(conn, handler, len(messages))] == messages
    conn.close()


# ----------------------------------------------------------------------------- configuration


def test_archive_settings_from_flags_environment_and_toml(tmp_path: Path) -> None:
    config = load_config(["--archive", "/a", "--archive-node", "x.*", "--archive-node", "y"],
                         env={})
    assert (config.archive, config.archive_nodes) == ("/a", ("x.*", "y"))
    config = load_config([], env={"FILTEX_ARCHIVE": "/b", "FILTEX_ARCHIVE_NODES": "p,q",
                                  "FILTEX_ARCHIVE_MAX_PENDING_BYTES": "1000"})
    assert (config.archive, config.archive_nodes, config.archive_max_pending_bytes) == (
        "/b", ("p", "q"), 1000)
    toml = tmp_path / "broker.toml"
    toml.write_text('[broker]\narchive = "/c"\narchive_nodes = ["orders.*"]\n')
    config = load_config(["--config", str(toml)], env={})
    assert (config.archive, config.archive_nodes) == ("/c", ("orders.*",))
    with pytest.raises(ConfigError, match="archive_nodes needs archive"):
        load_config(["--archive-node", "x"], env={})
    config = load_config(["--archive", "/a", "--archive-index", "region", "--archive-index",
                          "customer id", "--no-archive-index-fields"], env={})
    assert (config.archive_index, config.archive_index_fields) == (
        ("region", "customer id"), False)
    config = load_config([], env={"FILTEX_ARCHIVE": "/b", "FILTEX_ARCHIVE_INDEX": "a,b",
                                  "FILTEX_ARCHIVE_INDEX_FIELDS": "false"})
    assert (config.archive_index, config.archive_index_fields) == (("a", "b"), False)
    toml.write_text('[broker]\narchive = "/c"\narchive_index = ["region"]\n')
    config = load_config(["--config", str(toml)], env={})
    assert (config.archive_index, config.archive_index_fields) == (("region",), True)
    with pytest.raises(ConfigError, match="archive_index needs archive"):
        load_config(["--archive-index", "x"], env={})
    config = load_config(["--archive", "/a", "--archive-index", "r", "--archive-index-buckets",
                          "16"], env={})
    assert config.archive_index_buckets == 16
    with pytest.raises(ConfigError, match="archive_index_buckets needs archive_index"):
        load_config(["--archive", "/a", "--archive-index-buckets", "4"], env={})
    with pytest.raises(ConfigError, match="must not be negative"):
        load_config(["--archive", "/a", "--archive-index", "r", "--archive-index-buckets",
                     "-1"], env={})
    with pytest.raises(ConfigError, match="distinct and non-empty"):
        load_config(["--archive", "/a", "--archive-index", "x", "--archive-index", "x"], env={})
    with pytest.raises(ConfigError, match="relay"):
        load_config(["--archive", "/a", "--upstream", "amqp://h:1"], env={})


def test_an_archive_that_cannot_be_opened_is_a_clear_exit_1(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = subprocess.run(
        [sys.executable, "-m", "filtex_broker", "--listen", "127.0.0.1:0", "--archive",
         str(blocker / "archive")],
        cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT, check=False,
    )
    assert result.returncode == 1
    assert "cannot open the archive" in result.stderr


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
