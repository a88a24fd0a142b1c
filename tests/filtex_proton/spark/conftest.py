"""Fixtures: one local SparkSession for the whole run, one Spark Connect server for the whole
run (started on first use), and a corpus archive with its answers.

Spark tests skip (with the reason) where PySpark or Java is missing; CI installs
both (the ``spark`` extra is part of ``test``), so there they run.

PySpark serves one kind of session per process: while its mode switch is set
(``filtex_proton.spark.connect.CONNECT_MODE``; making a Connect session sets it),
``pyspark.sql.functions`` builds Connect columns. Each test starts with it unset; the tests on
the Connect session set it for their own duration.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from filtex_proton.amqp import DecodeError
from filtex_proton.amqp.message import RawMessageView
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.spark.connect import CONNECT_MODE

from .corpus import filter_sets, messages
from .sink import free_port
from .spark_processes import spark_script, start_logged, stop_group, wait_for_log

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ROOT = Path(__file__).resolve().parents[3]
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


@pytest.fixture(autouse=True)
def _classic_columns() -> Iterator[None]:
    """Each test starts building classic columns, and so does the next one."""
    os.environ.pop(CONNECT_MODE, None)
    yield
    os.environ.pop(CONNECT_MODE, None)


@contextlib.contextmanager
def connect_columns() -> Iterator[None]:
    """Connect columns meanwhile; then what was before."""
    before = os.environ.get(CONNECT_MODE)
    os.environ[CONNECT_MODE] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = before


@dataclass
class ConnectServer:
    url: str
    pid: int
    log: Path


SERVER_SETTINGS = {
    "spark.connect.grpc.binding.address": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",  # and the block manager
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
}


def fresh_environ() -> dict[str, str]:
    """This process's environment without what its Connect sessions leave in it (a Spark
    Connect URL, PySpark's mode switch): a process started with it begins as a user's does."""
    return {key: value for key, value in os.environ.items()
            if key not in ("SPARK_REMOTE", CONNECT_MODE)}


def _start_connect_server(log: Path) -> subprocess.Popen[bytes]:
    env = fresh_environ()
    env.update(SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    settings = {**SERVER_SETTINGS, "spark.connect.grpc.binding.port": str(free_port())}
    return start_logged(
        [str(spark_script("spark-submit")), "--class",
         "org.apache.spark.sql.connect.service.SparkConnectServer", "--name",
         "filtex-connect-tests", "--master", "local[2]", "--driver-memory", "1g",
         *(f"--conf={key}={value}" for key, value in settings.items())], log, env)


_USE_THE_SERVER = frozenset({"connect_server", "connect_spark", "connect_archive_df",
                             "any_archive_df"})
_STARTED: list[tuple[subprocess.Popen[bytes], Path]] = []
"""The server started when the tests were collected, and its log."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """When collected tests use the Spark Connect server, it starts now, in the background:
    its JVM starts (some 15 s) while the tests before them run."""
    if spark_unavailable() is None and any(_USE_THE_SERVER & set(getattr(item, "fixturenames", ()))
                                           for item in session.items):
        log = Path(tempfile.mkdtemp(prefix="filtex-connect-tests-")) / "server.log"
        _STARTED.append((_start_connect_server(log), log))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for process, log in _STARTED:
        stop_group(process)
        if exitstatus == 0:
            shutil.rmtree(log.parent, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that used the Spark Connect server shows the end of its log."""
    report = yield
    if report.failed and _STARTED and _USE_THE_SERVER & set(getattr(item, "fixturenames", ())):
        text = _STARTED[0][1].read_text(errors="replace")
        report.sections.append(("Spark Connect server log (the end)", text[-5000:]))
    return report


@pytest.fixture(scope="session")
def connect_server() -> Iterator[ConnectServer]:
    """A Spark Connect server of the installed PySpark (its SparkConnectServer through
    ``bin/spark-submit``, as ``sbin/start-connect-server.sh`` starts it), ``local[2]``,
    listening on loopback only: its gRPC port, driver and block manager, and no UI. Its Python
    workers run this interpreter with this tree first on the path, so that the UDF path works
    there. Started when the tests were collected; its output is in ``server.log`` of a
    ``filtex-connect-tests-*`` temporary directory, shown if it does not start."""
    reason = spark_unavailable()
    if reason is not None:
        pytest.skip(reason)
    if not _STARTED:  # asked for another way (getfixturevalue)
        log = Path(tempfile.mkdtemp(prefix="filtex-connect-tests-")) / "server.log"
        _STARTED.append((_start_connect_server(log), log))
    process, log = _STARTED[0]
    try:
        started = wait_for_log(log, r"Spark Connect server started at: ([\d.]+):(\d+)", process)
        yield ConnectServer(f"sc://{started[1]}:{started[2]}", process.pid, log)
    finally:
        stop_group(process)


@pytest.fixture(scope="session")
def connect_spark(connect_server: ConnectServer) -> Iterator[SparkSession]:
    """A session of the Connect server, made by the session helper (``remote=``)."""
    from filtex_proton.spark import spark_session

    with connect_columns():  # as the helper sets it, undone after
        session = spark_session(remote=connect_server.url)
    yield session
    session.stop()  # before the server stops


@pytest.fixture(scope="session")
def python_without_filtex(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An executable that runs this Python with filtex_proton hidden (``tests/hidden_extras``:
    importing it raises ModuleNotFoundError, as where it is not installed): for Spark's Python
    workers (``spark.sql.execution.pyspark.python``, a setting of the session)."""
    script = tmp_path_factory.mktemp("python") / "python-without-filtex"
    script.write_text(f"""#!/bin/sh
PYTHONPATH="{ROOT / 'tests' / 'hidden_extras'}${{PYTHONPATH:+:$PYTHONPATH}}"
FILTEX_HIDE_MODULES=filtex_proton
export PYTHONPATH FILTEX_HIDE_MODULES
exec "{sys.executable}" "$@"
""")
    script.chmod(0o755)
    return str(script)


@dataclass(frozen=True)
class OtherPython:
    executable: str
    version: str
    """Its minor version, as ``3.12``."""


def _minor_version(executable: str) -> str | None:
    try:
        said = subprocess.run([executable, "-c", "import sys; print(*sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return ".".join(said.split())


@pytest.fixture(scope="session")
def other_python() -> OtherPython:
    """A Python of another minor version than this one (python3.N on PATH, or one of pyenv's),
    the nearest first: Spark's workers under it cannot run this Python's UDFs."""
    mine = sys.version_info[1]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"), "versions")
    for minor in sorted((m for m in range(9, 15) if m != mine), key=lambda m: abs(m - mine)):
        version = f"3.{minor}"
        candidates = [shutil.which(f"python{version}"),
                      *map(str, sorted(pyenv.glob(f"{version}.*/bin/python{version}")))]
        for candidate in filter(None, candidates):
            if _minor_version(candidate) == version:
                return OtherPython(candidate, version)
    pytest.skip(f"no Python 3.9-3.14 other than 3.{mine} here (python3.N on PATH or pyenv's)")


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


def _cached_archive(spark: SparkSession, corpus: Corpus) -> DataFrame:
    from filtex_proton.spark import read_archive

    df = read_archive(spark, corpus.directory).coalesce(2).cache()  # few tasks per job
    assert df.count() == len(corpus.data)
    return df


@pytest.fixture(scope="session")
def archive_df(spark: SparkSession, corpus: Corpus) -> DataFrame:
    return _cached_archive(spark, corpus)


@pytest.fixture(scope="session")
def connect_archive_df(connect_spark: SparkSession, corpus: Corpus) -> DataFrame:
    with connect_columns():
        return _cached_archive(connect_spark, corpus)


@pytest.fixture(params=["local", "connect"])
def any_archive_df(request: pytest.FixtureRequest) -> DataFrame:
    """The corpus archive on the local session, and through the Spark Connect server (the
    test then builds Connect columns)."""
    if request.param == "local":
        df: DataFrame = request.getfixturevalue("archive_df")
        return df
    df = request.getfixturevalue("connect_archive_df")
    os.environ[CONNECT_MODE] = "1"  # for this test (_classic_columns)
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
