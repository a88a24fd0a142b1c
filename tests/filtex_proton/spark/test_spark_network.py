"""Local mode listens on loopback only: the session helper, the CLI, and the UI when asked for;
so does the tests' Spark Connect server (its gRPC port too).

Spark's defaults bind the driver and its block manager to the host's first non-loopback
interface and the UI to every interface; a local query must not expose them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .cli_support import FILTER, expected_bytes
from .conftest import ConnectServer, Corpus, spark_unavailable
from .listening import beyond_loopback, descendants, listening, run_watching

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

UI_PORTS = range(4040, 4057)  # Spark tries 4040 and the next 16


def test_the_session_helper_listens_on_loopback_only(spark: SparkSession) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.driver.host") == "127.0.0.1"
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    jvm = gateway.proc.pid
    sockets = listening(descendants(jvm))
    assert sockets, "the JVM listens on nothing? (the driver's RPC endpoint is missing)"
    assert beyond_loopback(sockets) == set()


def test_the_cli_listens_on_loopback_only_ui_included(corpus: Corpus) -> None:
    """A fresh ``filtex-spark`` process, the UI asked for (``--conf`` wins over our default
    of no UI): the UI comes up, on loopback like everything else."""
    if spark_unavailable():
        pytest.skip(spark_unavailable() or "")
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    cli = str(Path(sys.executable).parent / "filtex-spark")
    result, sockets, _ = run_watching(
        [cli, "--conf", "spark.ui.enabled=true", "select", "--archive", str(corpus.directory),
         "--filter", FILTER, "--count"], env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == str(len(expected_bytes(corpus, FILTER)))
    assert {port for _, port in sockets} & set(UI_PORTS), f"no UI among {sockets}"
    assert beyond_loopback(sockets) == set()


def test_the_connect_server_listens_on_loopback_only(connect_server: ConnectServer) -> None:
    """Its gRPC port, its driver's RPC endpoint and block manager: on 127.0.0.1, nothing else."""
    sockets = listening(descendants(connect_server.pid))
    port = int(connect_server.url.rsplit(":", 1)[1])
    assert ("127.0.0.1", port) in sockets
    assert len(sockets) >= 3, sockets  # gRPC, the driver's RPC endpoint, the block manager
    assert beyond_loopback(sockets) == set()
