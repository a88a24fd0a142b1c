"""``filtex-spark`` against a real standalone Spark cluster on loopback, compared with local mode.

The cluster is pyspark's own master and worker classes (``bin/spark-class``), one master and one
worker on 127.0.0.1, started for this module and stopped after it, every wait bounded. The
command on the cluster runs as a fresh ``filtex-spark`` process, as a user would run it, and is
compared with the same command in local mode (run in this
process, on the test session) and with the engine. Each command on the cluster costs a driver
and an executor JVM (about 40 s here), so one command runs there: ``replay`` on the UDF path,
where the cluster matters most (our engine in the executor's Python workers, the matches
streamed back to the driver); every command and path runs in local mode in ``test_spark_cli``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .cli_support import FILTER, expected_bytes, run
from .conftest import Corpus, spark_unavailable
from .sink import Sink, free_port, run_sink, stop_sink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.slow

STARTUP_SECONDS = 120
COMMAND_SECONDS = 300


@dataclass
class Cluster:
    master: str
    logs: Path


def _spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def _wait_for(log: Path, pattern: str, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        found = re.search(pattern, text)
        if found:
            return found.group(0)
        if process.poll() is not None:
            raise AssertionError(f"{log.name} exited {process.returncode}:\n{text[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"no {pattern!r} in {log.name} within {STARTUP_SECONDS} s")


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = spark_unavailable()
    if reason is not None:
        pytest.skip(reason)
    if not _spark_class().exists():
        pytest.skip("this PySpark has no bin/spark-class")
    logs = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
           "SPARK_LOG_DIR": str(logs), "PYSPARK_PYTHON": sys.executable}
    port = free_port()
    master = _start([str(_spark_class()), "org.apache.spark.deploy.master.Master",
                     "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(free_port())], logs / "master.log", env)
    processes = [master]
    try:
        _wait_for(logs / "master.log", r"I have been elected leader", master)
        url = f"spark://127.0.0.1:{port}"
        worker = _start([str(_spark_class()), "org.apache.spark.deploy.worker.Worker",
                         "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
                         "--work-dir", str(logs / "work"), "--webui-port", str(free_port()),
                         url], logs / "worker.log", env)
        processes.append(worker)
        _wait_for(logs / "worker.log", r"Successfully registered with master", worker)
        yield Cluster(url, logs)
    finally:
        for process in reversed(processes):
            _stop(process)


def filtex_spark(*argv: str) -> subprocess.CompletedProcess[str]:
    """A fresh ``filtex-spark`` process (its driver is this machine's, on loopback)."""
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    env.pop("PYSPARK_PYTHON", None)  # filtex-spark sets it to its own interpreter
    result = subprocess.run([str(Path(sys.executable).parent / "filtex-spark"), *argv],
                            capture_output=True, text=True, timeout=COMMAND_SECONDS,
                            check=False, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def on_the_cluster(cluster: Cluster, *argv: str) -> str:
    """``filtex-spark --master spark://... ARGV`` in a fresh process; its stdout."""
    applications = len(list((cluster.logs / "work").glob("app-*")))
    stdout = filtex_spark("--master", cluster.master, "--conf", "spark.cores.max=2",
                          "--conf", "spark.executor.memory=1g", *argv).stdout
    assert len(list((cluster.logs / "work").glob("app-*"))) > applications, (
        "the worker started no executor: the command did not run on the cluster")
    return stdout


def in_local_mode(*argv: str) -> str:
    """The same command in local mode, in this process (the test session's local[2])."""
    status, out = run(list(argv))
    assert status == 0, out
    return out


def test_replay_on_the_udf_path_of_the_cluster_equals_local_mode(
        spark: SparkSession, cluster: Cluster, corpus: Corpus) -> None:
    """The UDF path: the engine itself runs in the Python workers of the cluster's executor."""
    path = "udf"
    got = []
    for where in (on_the_cluster, in_local_mode):
        sink = Sink(free_port())
        container, thread = run_sink(sink)
        argv = ("replay", "--archive", str(corpus.directory), "--filter", FILTER,
                "--path", path, "--to", f"amqp://{sink.url}/replayed")
        try:
            where(cluster, *argv) if where is on_the_cluster else in_local_mode(*argv)
        finally:
            stop_sink(container, thread, sink)
        got.append(sink.accepted)
    assert got[0] == got[1] == expected_bytes(corpus, FILTER)  # the very bytes, archive order
