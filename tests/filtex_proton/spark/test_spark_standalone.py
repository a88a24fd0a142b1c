"""``filtex-spark`` against a real standalone Spark cluster on loopback, compared with the engine.

The cluster is pyspark's own master and worker classes (``bin/spark-class``), one master and one
worker on 127.0.0.1, started for this module and stopped after it, every wait bounded. The
command on the cluster runs as a fresh ``filtex-spark`` process, as a user would run it, and its
answer is compared with the engine's (which the same command in local mode gives too:
``test_spark_cli``). Each command on the cluster costs a driver and an executor JVM (about 40 s
here), so one command runs there: ``replay`` on the UDF path, where the cluster matters most
(our engine in the executor's Python workers, the matches streamed back to the driver); every
command and path runs in local mode in ``test_spark_cli``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from .cli_support import FILTER, expected_bytes
from .conftest import Corpus, spark_unavailable
from .sink import Sink, free_port, run_sink, stop_sink
from .spark_processes import spark_script, start_logged, stop_group, wait_for_log

pytestmark = pytest.mark.slow

COMMAND_SECONDS = 300


@dataclass
class Cluster:
    master: str
    logs: Path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    reason = spark_unavailable()
    if reason is not None:
        pytest.skip(reason)
    if not spark_script("spark-class").exists():
        pytest.skip("this PySpark has no bin/spark-class")
    logs = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1",
           "SPARK_LOG_DIR": str(logs), "PYSPARK_PYTHON": sys.executable}
    port = free_port()
    spark_class = str(spark_script("spark-class"))
    master = start_logged([spark_class, "org.apache.spark.deploy.master.Master",
                           "--host", "127.0.0.1", "--port", str(port),
                           "--webui-port", str(free_port())], logs / "master.log", env)
    processes = [master]
    try:
        wait_for_log(logs / "master.log", r"I have been elected leader", master)
        url = f"spark://127.0.0.1:{port}"
        worker = start_logged([spark_class, "org.apache.spark.deploy.worker.Worker",
                               "--host", "127.0.0.1", "--cores", "2", "--memory", "2g",
                               "--work-dir", str(logs / "work"), "--webui-port",
                               str(free_port()), url], logs / "worker.log", env)
        processes.append(worker)
        wait_for_log(logs / "worker.log", r"Successfully registered with master", worker)
        yield Cluster(url, logs)
    finally:
        for process in reversed(processes):
            stop_group(process)


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


def test_replay_on_the_udf_path_of_the_cluster_equals_the_engine(
        cluster: Cluster, corpus: Corpus) -> None:
    """The UDF path: the engine itself runs in the Python workers of the cluster's executor."""
    sink = Sink(free_port())
    container, thread = run_sink(sink)
    try:
        on_the_cluster(cluster, "replay", "--archive", str(corpus.directory), "--filter", FILTER,
                       "--path", "udf", "--to", f"amqp://{sink.url}/replayed")
    finally:
        stop_sink(container, thread, sink)
    assert sink.accepted == expected_bytes(corpus, FILTER)  # the very bytes, archive order
