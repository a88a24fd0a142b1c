"""The archive's writer process (``python -m filtex_broker.archive.child``): restarted when
killed, its own session, batches reported only once they are in a segment, early writes when the
broker's copy would grow too large, a clear error when it cannot open the archive.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

from filtex_broker.archive.process import ArchiveOpenError, WriterProcess  # noqa: E402
from filtex_broker.archive.wire import BATCH, CLOSE, Progress, encode_batch  # noqa: E402
from filtex_proton.archive import read_archive_table  # noqa: E402

from ..broker_clients import (  # noqa: E402
    TIMEOUT,
    BrokerFactory,
    connect,
    raw_receiver,
    wait_for,
    wait_received,
)
from .archive_support import order, send_all, stop  # noqa: E402

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
