"""Qpid Proton C++ (Debian's libqpid-proton-cpp12-dev) against filtex-broker.

The stock examples ``colour_send.cpp`` and ``selected_recv.cpp`` (from
libqpid-proton11-dev-examples: a JMS selector ``colour = 'green'`` built with the
C++ encoder) run unchanged; ``cpp/filtered_receive.cpp`` attaches with a
described ``amqp:sql-filter`` and then with a malformed one, and prints what
the C++ API reported as JSON. All three are compiled here with the system g++.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from .interop_support import BrokerAddress

SOURCE = Path(__file__).resolve().parent / "cpp" / "filtered_receive.cpp"
EXAMPLES = Path("/usr/share/proton/examples/cpp")
HEADER = Path("/usr/include/proton/container.hpp")


def _compile(compiler: str, source: Path, output: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [compiler, "-O1", "-std=c++17", f"-I{EXAMPLES}", "-o", str(output), str(source),
         "-lqpid-proton-cpp"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler (apt-get install g++)")
    if not HEADER.is_file():
        pytest.skip("Qpid Proton C++ headers missing (apt-get install libqpid-proton-cpp12-dev)")
    if not (EXAMPLES / "selected_recv.cpp").is_file():
        pytest.skip("Qpid Proton C++ examples missing "
                    "(apt-get install libqpid-proton11-dev-examples)")
    out = tmp_path_factory.mktemp("proton-cpp")
    sources = {"receive": SOURCE, "colour_send": EXAMPLES / "colour_send.cpp",
               "selected_recv": EXAMPLES / "selected_recv.cpp"}
    builds = {name: _compile(compiler, source, out / name) for name, source in sources.items()}
    for name, build in builds.items():  # compiled in parallel
        _, errors = build.communicate(timeout=300)
        if build.returncode != 0:
            pytest.skip(f"cannot build {sources[name].name} against Qpid Proton C++: "
                        f"{errors.strip()[-2000:]}")
    return {name: out / name for name in sources}


def _lines_then_stop(argv: list[str], count: int, timeout: float = 20.0) -> list[str]:
    """Run a program that never exits by itself (selected_recv); keep its first lines."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(timeout, process.kill)
    watchdog.start()
    lines: list[str] = []
    try:
        assert process.stdout is not None
        while len(lines) < count and (line := process.stdout.readline()):
            lines.append(line.strip())
    finally:
        watchdog.cancel()
        process.kill()
        process.communicate()
    return lines


@pytest.fixture(scope="module")
def cpp_run(programs: dict[str, Path], interop_broker: BrokerAddress) -> dict[str, Any]:
    url, queue = interop_broker.url, "proton-cpp-queue"
    # stock sender: 10 messages, id 1..10, property colour green (odd ids) / red (even ids)
    sent = subprocess.run([str(programs["colour_send"]), "-a", f"{url}/{queue}", "-m", "10"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert sent.returncode == 0 and "all messages confirmed" in sent.stdout, sent.stderr
    green = _lines_then_stop([str(programs["selected_recv"]), url, queue], 5)
    done = subprocess.run(
        [str(programs["receive"]), url, queue, "colour = 'red' AND p.message_id > 4", "3",
         "colour = "], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, f"filtered_receive failed ({done.returncode}): {done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    result["stock_selected_recv"] = green
    return result


def test_stock_selected_recv_gets_only_green(cpp_run: dict[str, Any]) -> None:
    assert cpp_run["stock_selected_recv"] == ["green 1", "green 3", "green 5", "green 7",
                                              "green 9"]


def test_cpp_sql_filter_gets_only_matches(cpp_run: dict[str, Any]) -> None:
    assert cpp_run["bodies"] == ["red 6", "red 8", "red 10"]


def test_cpp_reports_the_refused_attach(cpp_run: dict[str, Any]) -> None:
    refusal = cpp_run["refusal"]
    assert refusal["attach_seen"], "on_receiver_open must run for the reply attach"
    assert refusal["source_empty"], "the reply attach must carry a null source"
    assert refusal["condition"] == "amqp:invalid-field"
    assert "filter 'cpp-bad' (amqp:sql-filter)" in refusal["description"]
    assert "unexpected end of expression" in refusal["description"]
