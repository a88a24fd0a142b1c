"""Spark's own server processes for the tests (a standalone cluster, a Spark Connect server),
started from the installed PySpark's scripts: each in a process group of its own, its output in
a log file, every wait bounded, stopped with its whole group."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

STARTUP_SECONDS = 120


def spark_script(name: str) -> Path:
    """``bin/NAME`` of the installed PySpark (``spark-class``, ``spark-submit``)."""
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / name


def start_logged(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``argv`` in a new process group, stdout and stderr into ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def wait_for_log(log: Path, pattern: str, process: subprocess.Popen[bytes]) -> re.Match[str]:
    """The first match of ``pattern`` in ``log``, waiting for it while ``process`` runs."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        found = re.search(pattern, text)
        if found:
            return found
        if process.poll() is not None:
            raise AssertionError(f"{log.name} exited {process.returncode}:\n{text[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"no {pattern!r} in {log.name} within {STARTUP_SECONDS} s:\n"
                         f"{log.read_text(errors='replace')[-3000:] if log.exists() else ''}")


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's group (its JVM and the Python workers below it), SIGKILL after
    30 s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
