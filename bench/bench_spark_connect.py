"""Spark Connect benchmark: a selective `filtex-spark select` through a warm Spark Connect server,
against the one-shot local command and against the same query in a warm local session.

Run:  python bench/bench_spark_connect.py --size 10000000 --cache /var/tmp/spark-bench-10m

The archive is bench_spark.py's (RabbitMQ's workload with a ``customer`` property; generated
on first use, with its layouts), the query ``filtex-spark select --count --filter
"customer = 'c4242'"`` (1 message in 100,000; duplicates dropped, as the command does), on the
bucketed layout (the files chosen in the client: one of 32 per directory) and on the old one
(every file). Per layout, in one run, each variant alone on the machine:

1. **one-shot local**: the ``filtex-spark select`` process, its own JVM each time (wall time);
2. **warm local session**: the same command in this process (``cli.main``), on a local
   session started before and kept;
3. **warm server**: the same command in this process with ``--remote``, through a Spark
   Connect server started from the installed PySpark (``sbin/start-connect-server.sh``,
   ``local[*]``, on loopback) and warmed;
4. **one-shot client**: the ``filtex-spark select --remote`` process against the warm server
   (wall time: Python's start and imports, no JVM).

The local session's JVM is stopped before the server starts. Each variant runs ``--repeat``
times (the warm ones after ``--warm-up`` untimed runs); the best and the median are
printed, with ratios against the one-shot local command and the warm local session. Every run
must print the same count. Results go into docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import io
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench_spark import archive, archive_options, twin

from filtex_proton.spark.cli import main as filtex_spark
from filtex_proton.spark.connect import CONNECT_MODE

ROOT = Path(__file__).resolve().parent.parent
QUERY = ["select", "--count", "--filter", "customer = 'c4242'"]
CLI = str(Path(sys.executable).parent / "filtex-spark")


def _env() -> dict[str, str]:
    """This tree first on the path, no Spark Connect URL inherited."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_REMOTE", CONNECT_MODE)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def in_a_process(*argv: str) -> int:
    """``filtex-spark ARGV`` as a fresh process; the count it printed."""
    done = subprocess.run([CLI, *argv], capture_output=True, text=True, env=_env(),
                          timeout=600, check=False)
    if done.returncode != 0:
        sys.exit(f"filtex-spark {' '.join(argv)}: exit {done.returncode}: {done.stderr[-2000:]}")
    return int(done.stdout.splitlines()[-1])


def in_this_process(*argv: str) -> int:
    """``filtex-spark ARGV`` in this process (``cli.main``); the count it printed."""
    out = io.StringIO()
    status = filtex_spark(list(argv), stdout=out)
    if status != 0:
        sys.exit(f"filtex-spark {' '.join(argv)}: exit {status}")
    return int(out.getvalue().splitlines()[-1])


def timed(run: Callable[[], int], repeat: int, *, warm_up: int = 0
          ) -> tuple[list[float], int]:
    """Wall times of ``repeat`` runs (after ``warm_up`` untimed ones), and the count."""
    counts = set()
    for _ in range(warm_up):
        counts.add(run())
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        counts.add(run())
        seconds.append(time.perf_counter() - started)
    if len(counts) != 1:
        sys.exit(f"the runs disagree: {counts}")
    return seconds, counts.pop()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(master: str, logs: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A Spark Connect server of the installed PySpark, in the foreground of its own process
    group, listening on loopback only; its URL once it accepts connections."""
    import pyspark

    port = free_port()
    script = Path(pyspark.__file__).parent / "sbin" / "start-connect-server.sh"
    settings = {"spark.connect.grpc.binding.address": "127.0.0.1",
                "spark.connect.grpc.binding.port": str(port),
                "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.ui.enabled": "false", "spark.sql.session.timeZone": "UTC"}
    env = {**_env(), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_PID_DIR": str(logs), "SPARK_LOG_DIR": str(logs)}
    with (logs / "server.log").open("wb") as log:
        process = subprocess.Popen(
            [str(script), "--wait", "--master", master, "--driver-memory", "2g",
             *(f"--conf={key}={value}" for key, value in settings.items())],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 180
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return process, f"sc://127.0.0.1:{port}"
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                os.killpg(process.pid, signal.SIGKILL)
                sys.exit(f"the server did not start: {(logs / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)


def load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    archive_options(parser, 10_000_000)  # bench_spark.py's archive, generated if missing
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per variant")
    parser.add_argument("--warm-up", type=int, default=3,
                        help="untimed runs before the warm variants' timed ones")
    parser.add_argument("--master", default="local[*]", help="of the local session and server")
    args = parser.parse_args()

    old = archive(args.cache, args.size)
    layouts = {"bucketed": twin(old, "bucketed"), "old": old}
    print(f"{args.size:,} messages, {os.cpu_count()} cores, load average {load()} "
          f"({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC)")
    results: dict[tuple[str, str], tuple[list[float], int]] = {}
    variants = ["one-shot local", "warm local session", "warm server", "one-shot client"]
    for name, path in layouts.items():
        argv = [*QUERY, "--archive", str(path)]
        results[name, variants[0]] = timed(partial(in_a_process, *argv), args.repeat)
        results[name, variants[1]] = timed(
            partial(in_this_process, *argv, "--master", args.master), args.repeat,
            warm_up=args.warm_up)
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()  # the local JVM idles from here on
    with tempfile.TemporaryDirectory(prefix="filtex-bench-connect-") as logs:
        process, url = start_server(args.master, Path(logs))
        try:
            for name, path in layouts.items():
                argv = [*QUERY, "--archive", str(path), "--remote", url]
                results[name, variants[2]] = timed(partial(in_this_process, *argv),
                                                   args.repeat, warm_up=args.warm_up)
                results[name, variants[3]] = timed(partial(in_a_process, *argv), args.repeat)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(60)
    counts = {count for _, count in results.values()}
    if len(counts) != 1:
        sys.exit(f"the variants disagree: {results}")
    print(f"every run counted {counts.pop()} matches; load average at the end {load()}\n")
    print(f"{'layout':9} {'variant':20} {'best s':>8} {'median s':>9} "
          f"{'vs one-shot local':>18} {'vs warm local':>14}")
    for name in layouts:
        one_shot = min(results[name, variants[0]][0])
        warm_local = min(results[name, variants[1]][0])
        for variant in variants:
            seconds = results[name, variant][0]
            best = min(seconds)
            print(f"{name:9} {variant:20} {best:8.3f} {statistics.median(seconds):9.3f} "
                  f"{one_shot / best:17.1f}x {warm_local / best:13.2f}x")


if __name__ == "__main__":
    main()
