"""``filtex-spark``: select and replay on the corpus archive, replay against a real AMQP peer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

from proton import Delivery

from filtex_proton.amqp import RawMessageView, Section
from filtex_proton.filterset import decode_filter_set
from filtex_proton.spark.cli import main

from .cli_support import FILTER, expected_bytes, run
from .conftest import Corpus, OtherPython, engine_matches, spark_unavailable
from .sink import Sink, fetch_raw, free_port, run_sink, stop_sink

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FILTER_SET = {
    "urgent": {"descriptor": "amqp:header-filter", "value": {"priority": {"ubyte": 9}}},
    "orders": {"descriptor": 288, "value": "p.subject LIKE 'order%'"},
}


def engine_count(corpus: Corpus, described: Any, addresses: set[int] | None = None) -> int:
    filter_set = decode_filter_set(described)
    return sum(engine_matches(filter_set, data) for i, data in enumerate(corpus.data)
               if addresses is None or i % 4 in addresses)


@pytest.mark.parametrize("path", ["auto", "udf", "column"])
def test_select_count(spark: SparkSession, corpus: Corpus, path: str) -> None:
    status, out = run(["select", "--archive", str(corpus.directory), "--filter", FILTER,
                       "--count", "--path", path, "--master", "local[2]"])
    assert status == 0
    assert out.splitlines()[-1] == str(len(expected_bytes(corpus, FILTER)))


def test_select_a_filter_set_file_for_one_address(spark: SparkSession, corpus: Corpus,
                                                  tmp_path: Path) -> None:
    from .conftest import ADDRESSES

    filters = tmp_path / "filters.json"
    filters.write_text(json.dumps(FILTER_SET))
    status, out = run(["select", "--archive", str(corpus.directory), "--filter-set",
                       str(filters), "--address", ADDRESSES[1], "--count"])
    assert status == 0
    from filtex_proton.filters.typed_json import filter_set_from_json

    described = filter_set_from_json(FILTER_SET)
    assert int(out.splitlines()[-1]) == engine_count(corpus, described, {1})
    status, out = run(["select", "--archive", str(corpus.directory), "--filter-set", "-",
                       "--count"], stdin=json.dumps(FILTER_SET))
    assert int(out.splitlines()[-1]) == engine_count(corpus, described)


def test_select_out_writes_an_archive(spark: SparkSession, corpus: Corpus, tmp_path: Path) -> None:
    from filtex_proton.spark import read_archive

    target = tmp_path / "selected"
    status, out = run(["select", "--archive", str(corpus.directory), "--filter", FILTER,
                       "--out", str(target), "--count"])
    assert status == 0
    want = expected_bytes(corpus, FILTER)
    assert int(out.splitlines()[-1]) == len(want)
    selected: DataFrame = read_archive(spark, target)
    got = [bytes(r["raw"]) for r in selected.orderBy("arrival_ms", "sequence").collect()]
    assert got == want
    # The selection is an archive: the same filter selects all of it again.
    status, out = run(["select", "--archive", str(target), "--filter", FILTER, "--count"])
    assert out.splitlines()[-1] == str(len(want))


def test_select_and_out_with_an_address_too_long_for_a_file_name(
    spark: SparkSession, tmp_path: Path,
) -> None:
    from filtex_proton.amqp.message import encode_message
    from filtex_proton.archive import address_partition
    from filtex_proton.spark import ArchiveWriter, read_archive_table

    long = "orders/" + "€" * 100 + "/:*?"  # 315 bytes, some escaped
    lookalike = address_partition(long)  # a short address equal to its directory value
    archive, target = tmp_path / "archive", tmp_path / "out"
    with ArchiveWriter(archive, flush_interval=None, fsync=False, handle_sigterm=False) as w:
        for i in range(6):
            w.append([long, lookalike][i % 2], encode_message(
                properties={"subject": "order"}, header={"priority": i}), 1_700_000_000_000 + i)
    status, out = run(["select", "--archive", str(archive), "--address", long, "--filter",
                       "h.priority >= 2", "--out", str(target), "--count"])
    assert status == 0 and out.splitlines()[-1] == "2"  # priorities 2 and 4, not the twin's
    table = read_archive_table(target, ["address", "priority"])
    assert table.to_pydict() == {"address": [long, long], "priority": [2, 4],
                                 "arrival_ms": [1_700_000_000_002, 1_700_000_000_004],
                                 "sequence": table.column("sequence").to_pylist()}
    status, out = run(["select", "--archive", str(archive), "--address", lookalike, "--filter",
                       "h.priority >= 0", "--count"])
    assert out.splitlines()[-1] == "3"



def test_an_archive_from_a_newer_schema_version_is_refused(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    from filtex_proton.amqp.message import encode_message
    from filtex_proton.archive import ArchiveWriter

    with ArchiveWriter(tmp_path, flush_interval=None, fsync=False, handle_sigterm=False) as w:
        w.append("q", encode_message(properties={"subject": "s"}, body="x"), 1_700_000_000_000)
    (segment,) = tmp_path.rglob("*.parquet")
    table = pq.read_table(segment)
    newer = {**(table.schema.metadata or {}), b"filtex.archive.schema_version": b"99"}
    pq.write_table(table.replace_schema_metadata(newer), segment)
    status, _ = run(["select", "--archive", str(tmp_path), "--filter", FILTER, "--count"])
    assert status == 1
    assert "schema version 99, newer than" in capsys.readouterr().err


@pytest.mark.parametrize("workers", ["without filtex_proton", "of another Python"])
def test_what_the_workers_lack_is_said_in_one_line(
        spark: SparkSession, corpus: Corpus, workers: str, request: pytest.FixtureRequest,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Spark's Python workers (a cluster's, say) without filtex_proton, or under another minor
    version of Python: the filter the engine evaluates is named, and what to do about it."""
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if workers == "of another Python":
        other: OtherPython = request.getfixturevalue("other_python")
        python = other.executable
        said = (f"run Python {other.version}, this is Python {mine}, and they cannot run its "
                "UDFs, which evaluate filter 'sql' (amqp:sql-filter): point PYSPARK_PYTHON "
                f"where the workers run at a Python {mine} with filtex-proton, or run "
                f"filtex-spark under Python {other.version}")
    else:
        python = request.getfixturevalue("python_without_filtex")
        said = ("cannot import filtex_proton, which evaluates filter 'sql' (amqp:sql-filter): "
                f"pip install filtex-proton there, into the Python {mine} they run "
                "(PYSPARK_PYTHON where the workers run)")
    spark.conf.set("spark.sql.execution.pyspark.python", python)
    try:
        status, _ = run(["select", "--archive", str(corpus.directory), "--filter", FILTER,
                         "--count", "--path", "udf"])
    finally:
        spark.conf.unset("spark.sql.execution.pyspark.python")
    assert status == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        f"filtex-spark: Spark's Python workers {said}"


def test_select_shows_matches_as_typed_json(spark: SparkSession, corpus: Corpus) -> None:
    status, out = run(["select", "--archive", str(corpus.directory), "--filter", FILTER,
                       "--show", "3"])
    assert status == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 3
    assert all(line["properties"]["subject"].startswith("order") for line in lines)
    assert [line["sequence"] for line in lines] == sorted(line["sequence"] for line in lines)


def test_usage_errors() -> None:
    assert run(["select", "--archive", "x", "--filter", "a = "])[0] == 1
    assert run(["select", "--archive", "x", "--filter-set", "-"], stdin="{nope")[0] == 2
    assert run(["select", "--archive", "x", "--filter", "a + 1 > 2", "--path", "column"])[0] == 2
    assert run(["select", "--archive", "x", "--filter", "a = 1", "--master", "local[1]",
                "--remote", "sc://127.0.0.1:1"])[0] == 2
    status, out = run(["explain", "--filter", "a + 1 > 2 AND p.subject = 'x'"])
    assert status == 0 and "column+udf" in out
    with pytest.raises(SystemExit):
        main(["--help"])


def test_help_shows_a_real_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["select", "--help"])
    text = capsys.readouterr().out
    assert "filtex-spark select --archive" in text and "--filter-set filters.json" in text
    assert "filtex-spark select --remote sc://" in text


# ----------------------------------------------------------------------------- replay


def test_replay_to_a_peer_in_archive_order(spark: SparkSession, corpus: Corpus) -> None:
    sink = Sink(free_port())
    container, thread = run_sink(sink)
    try:
        status, out = run(["replay", "--archive", str(corpus.directory), "--filter", FILTER,
                           "--to", f"amqp://{sink.url}/backfill"])
    finally:
        stop_sink(container, thread, sink)
    want = expected_bytes(corpus, FILTER)
    assert status == 0, out
    assert sink.accepted == want  # the very bytes, in archive order
    assert sink.addresses == {"backfill"}
    assert f"replayed {len(want)} messages" in out


def test_replay_sends_again_what_is_released_or_lost(spark: SparkSession, corpus: Corpus,
                                                     tmp_path: Path) -> None:
    def policy(data: bytes, seen: int) -> Any:
        if seen in (1, 2, 7):
            return Delivery.RELEASED
        if seen == 12:
            return "drop"  # the connection fails: what was in flight is sent again
        return Delivery.ACCEPTED

    sink = Sink(free_port(), policy)
    container, thread = run_sink(sink)
    checkpoint = tmp_path / "checkpoint.json"
    try:
        status, out = run(["replay", "--archive", str(corpus.directory), "--filter", FILTER,
                           "--to", f"amqp://{sink.url}/q", "--window", "1",
                           "--checkpoint", str(checkpoint)])
    finally:
        stop_sink(container, thread, sink)
    want = expected_bytes(corpus, FILTER)
    assert status == 0, out
    assert sink.accepted == want  # window 1: strict order even across retries
    assert "4 sent again" in out and "1 reconnects" in out
    saved = json.loads(checkpoint.read_text())
    assert saved["sent"] == len(want)
    # A second run resumes after the checkpoint: nothing left to send.
    sink = Sink(free_port())
    container, thread = run_sink(sink)
    try:
        status, out = run(["replay", "--archive", str(corpus.directory), "--filter", FILTER,
                           "--to", f"amqp://{sink.url}/q", "--window", "1",
                           "--checkpoint", str(checkpoint)])
    finally:
        stop_sink(container, thread, sink)
    assert status == 2 or sink.accepted == []  # another target is another replay
    assert "another replay" in out or sink.accepted == []


def test_replay_resumes_after_a_stop(spark: SparkSession, corpus: Corpus, tmp_path: Path) -> None:
    """Stopped by SIGTERM part way (exit 0), then resumed from the checkpoint: everything
    arrives, at least once, in order."""
    slow_until = threading.Event()

    def policy(data: bytes, seen: int) -> Any:
        if seen == 20:
            os.kill(os.getpid(), signal.SIGTERM)
        if seen >= 20 and not slow_until.is_set():
            time.sleep(0.01)
        return Delivery.ACCEPTED

    checkpoint = tmp_path / "resume.json"
    port = free_port()
    sink = Sink(port, policy)
    container, thread = run_sink(sink)
    args = ["replay", "--archive", str(corpus.directory), "--filter", FILTER, "--to",
            f"amqp://{sink.url}/q", "--checkpoint", str(checkpoint), "--window", "5"]
    try:
        status, out = run(args)
        first = list(sink.accepted)
        assert status == 0 and "stopped" in out
        slow_until.set()
        status, out = run(args)
        assert status == 0, out
    finally:
        stop_sink(container, thread, sink)
    want = expected_bytes(corpus, FILTER)
    assert 20 <= len(first) < len(want)
    done = sink.accepted
    # At least once: every message, in order, with at most a window's worth sent twice.
    deduplicated = list(dict.fromkeys(done))
    assert sorted(deduplicated, key=want.index) == want == [d for d in deduplicated]
    assert len(done) - len(want) <= 5


def test_replay_gives_up_when_nobody_listens(spark: SparkSession, corpus: Corpus) -> None:
    status, out = run(["replay", "--archive", str(corpus.directory), "--filter", FILTER,
                       "--to", f"amqp://127.0.0.1:{free_port()}/q", "--retries", "1"])
    assert status == 1 and "replayed 0 messages" in out


def test_replay_through_the_filtex_broker(spark: SparkSession, corpus: Corpus) -> None:
    """Re-published into a real broker queue, and received from it with the same filter.

    The corpus holds messages a broker's door check refuses (irregular sections, kept to test
    the archive's exactness): the broker rejects those (amqp:decode-error), the replay counts
    them as rejected and exits 1, and every other match arrives, in archive order, taken as it
    arrives by a consumer attached first, with credit for all: but for those whose
    absolute-expiry-time has passed (AMQP 1.0 part 3 §3.2.4; the corpus has some from 2023),
    which the broker dead-letters instead. (A backlog would come by priority: §3.2.1.) A ttl
    comes as the broker forwards it: what is left of it."""
    broker_module = pytest.importorskip("filtex_broker.server")
    from filtex_broker.config import BrokerConfig
    from filtex_broker.nodes.lifetime import lifetime_of
    from filtex_broker.nodes.queue import Queue
    from filtex_broker.nodes.rewrites import without_expiry
    from filtex_proton.plugin import FilterMessage, InvalidMessageError, validate_message

    def acceptable(data: bytes) -> bool:
        try:
            validate_message(data)
        except InvalidMessageError:
            return False
        return True

    matches = expected_bytes(corpus, FILTER)
    accepted = [data for data in matches if acceptable(data)]
    assert accepted and len(accepted) < len(matches)  # the corpus has both kinds
    broker = broker_module.Broker(BrokerConfig(listen=(("127.0.0.1", 0),)))
    thread = broker.start_in_thread()
    try:
        host, port = broker.addresses[0]
        started = int(time.time() * 1000)
        alive = [data for data in accepted
                 if (lifetime_of(FilterMessage(data), started).expires_ms or started) >= started]
        assert 0 < len(alive) < len(accepted)  # the corpus has both
        fetched: list[bytes] = []
        fetcher = threading.Thread(target=lambda: fetched.extend(fetch_raw(
            f"{host}:{port}", "replayed", idle=60.0, credit=len(matches), count=len(alive))))
        fetcher.start()

        def ready() -> bool:
            node = broker.registry.nodes.get("replayed")
            return isinstance(node, Queue) and any(c.credit > 0 for c in node.consumers)
        deadline = time.monotonic() + 30
        while not ready():
            assert time.monotonic() < deadline, "the consumer never got its credit"
            time.sleep(0.02)
        status, out = run(["replay", "--archive", str(corpus.directory), "--filter", FILTER,
                           "--to", f"amqp://{host}:{port}/replayed"])
        assert status == 1, out
        assert f"({len(matches) - len(accepted)} rejected," in out
        fetcher.join(60)
    finally:
        broker.stop()
        thread.join(30)
    # As sent, but for a ttl, which goes out as what is left of it (§3.2.1): at most as sent.
    assert [without_expiry(data) for data in fetched] == [without_expiry(data) for data in alive]
    for got, sent in zip(fetched, alive, strict=True):
        assert (ttl_of(got) or 0) <= (ttl_of(sent) or 0)
        assert properties_of(got) == properties_of(sent)


def ttl_of(data: bytes) -> int | None:
    ttl = (RawMessageView(data).section(Section.HEADER) or {}).get("ttl")
    return ttl if isinstance(ttl, int) else None


def properties_of(data: bytes) -> object:
    return RawMessageView(data).section(Section.PROPERTIES)


def test_the_console_script_runs_in_a_fresh_process(tmp_path: Path) -> None:
    if spark_unavailable():
        pytest.skip(spark_unavailable() or "")
    status = subprocess.run([sys.executable, "-m", "filtex_proton.spark.cli", "explain",
                             "--filter", "h.priority > 4"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert status.returncode == 0 and "column" in status.stdout


def test_spark_submit_runs_the_same_entry_point(corpus: Corpus) -> None:
    """spark-submit (which picks the master) runs cli.py as the application."""
    if spark_unavailable():
        pytest.skip(spark_unavailable() or "")
    import pyspark

    from filtex_proton.spark import cli

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    if not submit.exists():
        pytest.skip("this PySpark has no bin/spark-submit")
    done = subprocess.run(
        [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", cli.__file__,
         "select", "--archive", str(corpus.directory), "--filter", FILTER, "--count",
         "--path", "udf"],
        capture_output=True, text=True, timeout=240, check=False,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == str(len(expected_bytes(corpus, FILTER)))


# ----------------------------------------------------------------------------- duplicates


def _archive_with_copies(directory: Path) -> list[bytes]:
    """Five messages, then the same five written again (a batch re-sent after the writer process
    died: same address, arrival, sequence and bytes), and one other message that shares a copy's
    address, arrival and sequence (another broker, the same millisecond). Returns the distinct
    messages in archive order."""
    from filtex_proton.amqp.message import encode_message
    from filtex_proton.archive import ArchiveWriter

    arrival = 1_700_000_000_000
    batch = [(arrival + i, i, encode_message(properties={"subject": f"order.{i}"}, body=i))
             for i in range(5)]
    for _ in range(2):
        with ArchiveWriter(directory, flush_interval=None, handle_sigterm=False) as writer:
            for when, sequence, data in batch:
                writer.append("orders", data, when, sequence=sequence)
    other = encode_message(properties={"subject": "order.other"}, body="another broker")
    with ArchiveWriter(directory, flush_interval=None, handle_sigterm=False) as writer:
        writer.append("orders", other, arrival + 2, sequence=2)
    distinct = [data for _, _, data in batch]
    return [*distinct[:3], other, *distinct[3:]] if other > distinct[2] else [
        *distinct[:2], other, *distinct[2:]]


@pytest.mark.parametrize("path", ["column", "udf"])
def test_select_drops_the_archives_copies_unless_asked(spark: SparkSession, tmp_path: Path,
                                                      path: str) -> None:
    _archive_with_copies(tmp_path)
    argv = ["select", "--archive", str(tmp_path), "--filter", "p.subject LIKE 'order.%'",
            "--count", "--path", path]
    assert run(argv) == (0, "6\n")
    assert run([*argv, "--keep-duplicates"]) == (0, "11\n")


def test_replay_sends_each_archived_message_once(spark: SparkSession, tmp_path: Path) -> None:
    distinct = _archive_with_copies(tmp_path)
    sink = Sink(free_port())
    container, thread = run_sink(sink)
    try:
        status, out = run(["replay", "--archive", str(tmp_path), "--filter",
                           "p.subject LIKE 'order.%'", "--to", f"amqp://{sink.url}/once"])
    finally:
        stop_sink(container, thread, sink)
    assert status == 0, out
    assert sorted(sink.accepted) == sorted(distinct)
    assert len(sink.accepted) == 6


def test_select_by_day_prunes_the_date_directories(spark: SparkSession, corpus: Corpus) -> None:
    """``--day``/``--since``/``--until``: the messages that arrived on those UTC days (the
    archive's ``date=`` directories), each bound included."""
    import datetime as dt

    from .conftest import BASE_ARRIVAL

    days = [dt.datetime.fromtimestamp((BASE_ARRIVAL + i * 60_000) / 1000, dt.UTC).date()
            .isoformat() for i in range(len(corpus.data))]
    first, middle, *_, last = sorted(set(days))
    assert len(set(days)) >= 3
    text = "p.subject LIKE 'order%'"
    from filtex_proton.spark import as_filter_set

    matcher = as_filter_set(text)

    def want(keep: set[str]) -> int:
        return sum(engine_matches(matcher, data) for data, day in zip(corpus.data, days,
                                                                      strict=True)
                   if day in keep)

    for flags, keep in [(["--day", middle], {middle}),
                        (["--since", middle], set(days) - {first}),
                        (["--until", middle], {first, middle}),
                        (["--since", first, "--until", first], {first}),
                        (["--since", last, "--until", first], set())]:
        status, out = run(["select", "--archive", str(corpus.directory), "--filter", text,
                           "--count", *flags])
        assert status == 0, flags
        assert int(out.splitlines()[-1]) == want(keep), flags
        assert want(keep) > 0 or not keep
        assert want(keep) < len(expected_bytes(corpus, text)) or keep == set(days)


def test_day_options_refuse_bad_dates(capsys: pytest.CaptureFixture[str], corpus: Corpus) -> None:
    with pytest.raises(SystemExit) as exited:
        run(["select", "--archive", str(corpus.directory), "--filter", FILTER, "--day",
             "2023-13-01"])
    assert exited.value.code == 2
    assert "not a date (YYYY-MM-DD): '2023-13-01'" in capsys.readouterr().err
    status, _ = run(["select", "--archive", str(corpus.directory), "--filter", FILTER,
                     "--day", "2023-11-15", "--since", "2023-11-14"])
    assert status == 2
    assert "--day cannot be combined with --since/--until" in capsys.readouterr().err
