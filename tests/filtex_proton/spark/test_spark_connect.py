"""``filtex-spark`` through a Spark Connect server: the test session's one (conftest).

A command runs as a fresh process, as a user runs it: no JVM starts in it and it listens on
nothing; the others run in this process, on the session's Connect session. A Python without
filtex_proton for the server's workers is this interpreter with the package hidden
(``tests/hidden_extras``: importing it raises ModuleNotFoundError, as where it is not
installed), chosen per session (``spark.sql.execution.pyspark.python``), so that one server
serves both kinds of worker. The Column and UDF paths themselves are compared with the
engine through the server in ``test_spark_differential``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from filtex_proton.spark.connect import CONNECT_MODE

from .cli_support import FILTER, expected_bytes, run
from .conftest import ConnectServer, Corpus, OtherPython, connect_columns, fresh_environ
from .listening import run_watching
from .sink import Sink, free_port, run_sink, stop_sink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

UNTRANSLATED = "a + 1 > 2"  # arithmetic: evaluated by the engine


def filtex_spark(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """A fresh ``filtex-spark`` process: status, stdout, stderr. It must start no JVM and
    listen on nothing."""
    result, sockets, names = run_watching(
        [str(Path(sys.executable).parent / "filtex-spark"), *argv],
        {**fresh_environ(), **(env or {})})
    assert "java" not in names, names
    assert sockets == set()
    return result.returncode, result.stdout, result.stderr


@pytest.fixture(scope="module")
def session_without_filtex(connect_spark: SparkSession, connect_server: ConnectServer,
                           python_without_filtex: str) -> Iterator[SparkSession]:
    """Another session of the server, whose Python workers lack filtex_proton (made after the
    session the helper returns, which stays PySpark's default)."""
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    with connect_columns():
        session = RemoteSession.builder.remote(connect_server.url).create()
        session.conf.set("spark.sql.execution.pyspark.python", python_without_filtex)
    yield session  # type: ignore[misc]
    session.stop()


def test_select_as_a_process(connect_server: ConnectServer, corpus: Corpus) -> None:
    want = str(len(expected_bytes(corpus, FILTER)))
    status, out, err = filtex_spark("select", "--remote", connect_server.url, "--archive",
                                    str(corpus.directory), "--filter", FILTER, "--count")
    assert status == 0, err
    assert out.splitlines()[-1] == want


def test_select_through_spark_remote(connect_server: ConnectServer, corpus: Corpus,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``$SPARK_REMOTE`` as ``--remote``, on the UDF path (this session's Connect session)."""
    monkeypatch.setenv("SPARK_REMOTE", connect_server.url)
    status, out = run(["select", "--archive", str(corpus.directory), "--filter", FILTER,
                       "--count", "--path", "udf"])
    assert status == 0
    assert out.splitlines()[-1] == str(len(expected_bytes(corpus, FILTER)))


def test_workers_without_filtex_proton(connect_server: ConnectServer, corpus: Corpus,
                                       python_without_filtex: str) -> None:
    """A filter the engine evaluates fails there: one line naming it and what to install."""
    status, _, err = filtex_spark(
        "select", "--remote", connect_server.url, "--conf",
        f"spark.sql.execution.pyspark.python={python_without_filtex}", "--archive",
        str(corpus.directory), "--filter", UNTRANSLATED, "--count")
    assert status == 1 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (
        f"filtex-spark: the Python workers of the Spark Connect server at {connect_server.url}"
        " cannot import filtex_proton, which evaluates filter 'sql' (amqp:sql-filter): pip "
        f"install filtex-proton there, into the Python {sys.version_info[0]}."
        f"{sys.version_info[1]} they run (PYSPARK_PYTHON where the workers run)")


def test_workers_of_another_python(connect_server: ConnectServer, corpus: Corpus,
                                   other_python: OtherPython) -> None:
    """Workers under another minor version of Python cannot run this one's UDFs: one line
    naming both versions and the two ways out; ``explain --remote`` finds it out first."""
    mine = f"{sys.version_info[0]}.{sys.version_info[1]}"
    setting = f"spark.sql.execution.pyspark.python={other_python.executable}"
    status, _, err = filtex_spark(
        "select", "--remote", connect_server.url, "--conf", setting, "--archive",
        str(corpus.directory), "--filter", UNTRANSLATED, "--count")
    assert status == 1 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == (
        f"filtex-spark: the Python workers of the Spark Connect server at {connect_server.url}"
        f" run Python {other_python.version}, this is Python {mine}, and they cannot run its "
        "UDFs, which evaluate filter 'sql' (amqp:sql-filter): point PYSPARK_PYTHON where the "
        f"workers run at a Python {mine} with filtex-proton, or run filtex-spark under Python "
        f"{other_python.version}")
    status, out, err = filtex_spark("explain", "--remote", connect_server.url, "--conf",
                                    setting, "--filter", UNTRANSLATED)
    assert status == 1, err
    assert (f"its Python workers run Python {other_python.version}, which cannot run a UDF of "
            f"Python {mine}") in out


def test_another_pyspark_is_said_in_one_line(connect_server: ConnectServer,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """What --remote relies on in PySpark's Connect client is checked before a session is
    made: a PySpark without it is named in one line, and the mode switch is left as found."""
    from pyspark.sql.connect.client import SparkConnectClient

    from filtex_proton.spark.connect import ConnectError, connect_session, internals_problems

    assert internals_problems() == []
    assert CONNECT_MODE not in os.environ
    monkeypatch.delattr(SparkConnectClient, "set_retry_policies")
    assert internals_problems() == ["SparkConnectClient.set_retry_policies"]
    assert CONNECT_MODE not in os.environ
    with pytest.raises(ConnectError, match=r"^the Spark Connect client of PySpark \S+ lacks "
                       r"what --remote uses: SparkConnectClient.set_retry_policies \(PySpark "
                       r"4.0 or later"):
        connect_session(connect_server.url)


def test_what_workers_without_filtex_proton_still_do(
        session_without_filtex: SparkSession, connect_server: ConnectServer,
        tmp_path: Path) -> None:
    """The Column path on an archive of regular rows only needs nothing there; asked (as
    ``explain --remote`` asks), the server says what its workers lack."""
    from filtex_proton.amqp.message import encode_message
    from filtex_proton.archive import ArchiveWriter
    from filtex_proton.spark import select_archive
    from filtex_proton.spark.connect import server_report

    with ArchiveWriter(tmp_path, flush_interval=None, fsync=False, handle_sigterm=False) as w:
        for i in range(6):
            w.append("orders", encode_message(properties={"subject": "order"},
                                              header={"priority": i}), 1_700_000_000_000 + i)
    os.environ[CONNECT_MODE] = "1"  # for this test (conftest._classic_columns)
    assert select_archive(session_without_filtex, tmp_path, "h.priority >= 2",
                          path="column").count() == 4
    able, report = server_report(session_without_filtex, connect_server.url, "filter 'f'")
    assert not able
    assert "without filtex_proton (No module named 'filtex_proton')" in report
    assert report.endswith("there the engine cannot evaluate filter 'f': pip install "
                           f"filtex-proton into the server's Python {sys.version_info[0]}."
                           f"{sys.version_info[1]} (PYSPARK_PYTHON)")


def test_explain_asks_the_server(connect_server: ConnectServer) -> None:
    from filtex_proton import __version__

    status, out = run(["explain", "--remote", connect_server.url, "--filter", UNTRANSLATED])
    assert status == 0
    assert f"with filtex_proton {__version__}" in out.splitlines()[-1]


def test_replay_through_the_server(connect_server: ConnectServer, corpus: Corpus) -> None:
    """The matches streamed back from the server, re-published in archive order."""
    sink = Sink(free_port())
    container, thread = run_sink(sink)
    try:
        status, out = run(["replay", "--remote", connect_server.url, "--archive",
                           str(corpus.directory), "--filter", FILTER, "--to",
                           f"amqp://{sink.url}/replayed"])
    finally:
        stop_sink(container, thread, sink)
    assert status == 0, out
    assert sink.accepted == expected_bytes(corpus, FILTER)


def test_the_files_are_chosen_where_the_archive_is_readable(
        connect_spark: SparkSession, corpus: Corpus) -> None:
    """A directory this process reads: it lists the files and hands the server only those of
    the address asked for. The same archive as a URL: the server lists all of it (and prunes
    by directory). The same rows either way."""
    from filtex_proton.spark import as_filter_set, select_archive

    from .conftest import ADDRESSES, engine_matches

    os.environ[CONNECT_MODE] = "1"  # for this test (conftest._classic_columns)
    address = ADDRESSES[0]  # a directory name as it is
    matcher = as_filter_set(FILTER)
    want = sum(engine_matches(matcher, data) for i, data in enumerate(corpus.data)
               if i % len(ADDRESSES) == 0)
    read = {}
    for archive in (str(corpus.directory), corpus.directory.as_uri()):
        df = select_archive(connect_spark, archive, FILTER, [address])
        assert df.count() == want
        read[archive] = df.inputFiles()
    directory = f"/address={address}/"
    assert all(directory in file for file in read[str(corpus.directory)])
    assert not all(directory in file for file in read[corpus.directory.as_uri()])
