"""``filtex-broker --archive``: what nodes accept ends up in the Parquet archive, typed.

Real brokers (a subprocess for the console script and SIGTERM, threads elsewhere),
real proton senders and receivers over sockets; the archive is read back with
``filtex_proton.spark`` (pyarrow alone, and Spark for the filter comparison).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

from proton import Delivery, uint  # noqa: E402

from filtex_broker.config import ConfigError, load_config  # noqa: E402
from filtex_broker.nodes.queue import Queue  # noqa: E402
from filtex_broker.store.log import LogFile  # noqa: E402
from filtex_proton.amqp.message import encode_message  # noqa: E402
from filtex_proton.archive import (  # noqa: E402
    address_directory,
    describe_typed,
    read_archive_table,
)

from ..broker_clients import (  # noqa: E402
    TIMEOUT,
    BrokerFactory,
    DiskFull,
    connect,
    raw_receiver,
    send_raw,
    wait_for,
    wait_received,
)
from .archive_support import LONG_ADDRESS, REPO, order, send_all, stop  # noqa: E402

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
    assert isinstance(node, Queue) and isinstance(node.journal, LogFile)
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
