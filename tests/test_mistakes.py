"""A mistake on the command line: one line saying what is wrong, exit 2, never a traceback.

Each command runs as the process a user starts; nothing here needs a broker to be reachable.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from filtex_broker.config import load_config

ROOT = Path(__file__).resolve().parent.parent


def _run(*argv: str, hide: str = "") -> subprocess.CompletedProcess[str]:
    """``python ARGV``; ``hide``: comma-separated modules that look uninstalled there."""
    env = os.environ.copy()
    if hide:
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "hidden_extras"), str(ROOT)])
        env["FILTEX_HIDE_MODULES"] = hide
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False, env=env)


def _assert_one_clear_line(result: subprocess.CompletedProcess[str], program: str,
                           says: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"{program}:") and says in last, result.stderr


@pytest.mark.parametrize(("argv", "says"), [
    (["--disable", "amqp:sql-filtre"], "did you mean 'amqp:sql-filter'?"),
    (["--disable", "nonsense"], "unknown filter type or capability 'nonsense'"),
    (["--max-queue-bytes", "lots"], "max_queue_bytes"),
    (["--max-message-size", "2 parsecs"], "unknown unit"),
    (["--idle-timeout", "-1"], "must not be negative"),
    (["--data-dir", "README.md/data"], "'README.md' is not a directory"),
    (["--stream-max-age", "3 weeks"], "stream_max_age: '3 weeks' is not an age"),
    (["--stream-max-bytes", "1 parsec"], "unknown unit"),
], ids=["disable-typo", "disable-unknown", "size-word", "size-unit", "idle-negative",
        "data-dir-file", "stream-age", "stream-bytes"])
def test_a_broker_flag_mistake(argv: list[str], says: str) -> None:
    _assert_one_clear_line(_run("-m", "filtex_broker", "--listen", "127.0.0.1:0", *argv),
                           "filtex-broker", says)


def test_a_config_file_value_of_the_wrong_type(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text("[broker]\nlisten = 5672\n")
    _assert_one_clear_line(_run("-m", "filtex_broker", "--config", str(toml)), "filtex-broker",
                           "[broker] listen must be a HOST:PORT string or a list of them")


def test_a_second_broker_on_one_data_dir_says_so_first(tmp_path: Path) -> None:
    """The error is the last word, with nothing before it that reads like a normal stop."""
    ready = tmp_path / "ready"
    first = subprocess.Popen([sys.executable, "-m", "filtex_broker", "--listen", "127.0.0.1:0",
                              "--data-dir", str(tmp_path / "data"), "--ready-file", str(ready)],
                             cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)  # waiting for the first broker's ready file
        second = _run("-m", "filtex_broker", "--listen", "127.0.0.1:0", "--data-dir",
                      str(tmp_path / "data"))
        _assert_one_clear_line(second, "filtex-broker", "is in use by another broker")
        assert "broker stopped" not in second.stderr
    finally:
        first.terminate()
        first.wait(30)


#: Every optional dependency: a plain ``pip install .`` has none of them.
NO_EXTRAS = "aiohttp,prometheus_client,pyarrow,pyspark,pandas,tqdm,grpc"


@pytest.mark.parametrize(("argv", "program", "extra"), [
    (["-m", "filtex_broker", "--listen", "127.0.0.1:0", "--console", "127.0.0.1:0"],
     "filtex-broker",
     "console"),
    (["-m", "filtex_broker", "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"],
     "filtex-broker",
     "metrics"),
    (["-m", "filtex_broker", "--listen", "127.0.0.1:0", "--archive", "unused"], "filtex-broker",
     "spark"),
    (["-m", "filtex_proton.spark.cli", "select", "--archive", ".", "--filter", "a = 1",
      "--count"], "filtex-spark", "spark"),
    (["-m", "filtex_proton.spark.cli", "replay", "--archive", ".", "--filter", "a = 1",
      "--to", "amqp://127.0.0.1:1/q"], "filtex-spark", "spark"),
], ids=["console", "metrics", "archive", "spark-select", "spark-replay"])
def test_a_feature_without_its_extra_names_the_extra(argv: list[str], program: str,
                                                     extra: str) -> None:
    _assert_one_clear_line(_run(*argv, hide=NO_EXTRAS), program,
                           f"pip install 'filtex-proton[{extra}]'")


def test_what_needs_no_extra_works_without_any() -> None:
    """``pip install .`` alone: planning a filter for Spark and checking one need no extra."""
    explained = _run("-m", "filtex_proton.spark.cli", "explain", "--filter",
                     "p.subject = 'order' AND a.amount > 100", hide=NO_EXTRAS)
    assert explained.returncode == 0, explained.stderr
    assert "translated exactly to Spark expressions" in explained.stdout
    checked = _run("-m", "filtex_proton.cli", "check", "JMSPriority > 4", hide=NO_EXTRAS)
    assert checked.returncode == 0, checked.stderr
    assert "h.priority" in checked.stdout + checked.stderr


def test_a_missing_archive_is_refused_before_spark_starts(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")
    result = _run("-m", "filtex_proton.spark.cli", "select", "--archive",
                  str(tmp_path / "nowhere"), "--filter", "a = 1", "--count")
    _assert_one_clear_line(result, "filtex-spark", "no such directory")


@pytest.mark.parametrize(("remote", "says"), [
    ("http://head:15002", "'http://head:15002' is not a Spark Connect URL (sc://HOST:PORT)"),
    ("sc://127.0.0.1:{port}", "cannot reach the Spark Connect server at sc://127.0.0.1:{port}"),
], ids=["not-a-url", "nobody-there"])
def test_a_spark_connect_server_that_cannot_be_used(remote: str, says: str) -> None:
    """Said within seconds (PySpark alone would retry for 10 minutes), before any JVM."""
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nobody listens there
    result = _run("-m", "filtex_proton.spark.cli", "select", "--remote",
                  remote.format(port=port), "--archive", ".", "--filter", "a = 1", "--count")
    _assert_one_clear_line(result, "filtex-spark", says.format(port=port))


def test_remote_without_the_spark_connect_client() -> None:
    pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")
    result = _run("-m", "filtex_proton.spark.cli", "select", "--remote", "sc://127.0.0.1:1",
                  "--archive", ".", "--filter", "a = 1", "--count", hide="grpc")
    _assert_one_clear_line(result, "filtex-spark", "--remote needs the Spark Connect client (")
    assert "pip install 'filtex-proton[spark]'" in result.stderr


def test_a_queue_name_rabbit_node_cannot_declare() -> None:
    result = _run("bench/rabbit_node.py", "--queue", "a-b")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "--queue 'a-b': letters, digits and _ only" in result.stderr.strip().splitlines()[-1]


def test_every_byte_setting_takes_units() -> None:
    config = load_config(["--max-queue-bytes", "1GiB", "--max-message-size", "2MiB",
                          "--archive-max-pending-bytes", "500MB", "--max-memory", "2gb"], env={})
    assert (config.max_queue_bytes, config.max_message_size, config.archive_max_pending_bytes,
            config.max_memory) == (1 << 30, 2 << 20, 500_000_000, 2_000_000_000)
    env = load_config([], env={"FILTEX_MAX_QUEUE_BYTES": "64MiB"})
    assert env.max_queue_bytes == 64 << 20


def test_the_spark_package_names_its_functions_whatever_was_imported_first() -> None:
    """``plan`` is a function of the package and the name of its submodule: importing the
    submodule first (as filtex-spark does) must not make the package's ``plan`` the module."""
    result = _run("-c", "import filtex_proton.spark.plan\n"
                        "from filtex_proton.spark import plan\n"
                        "print(callable(plan))", hide=NO_EXTRAS)
    assert result.returncode == 0 and result.stdout.strip() == "True", result.stderr
