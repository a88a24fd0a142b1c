"""Qpid Proton C (Debian's libqpid-proton11-dev) against filtex-broker.

The stock example sender (``/usr/share/proton/examples/c/send.c`` from
libqpid-proton11-dev-examples) fills a queue; ``c/filtered_receive.c``, compiled
here with the system compiler, attaches with a described ``amqp:sql-filter`` and
then with a malformed one, and prints what Proton C saw as JSON.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .interop_support import BrokerAddress

SOURCE = Path(__file__).resolve().parent / "c" / "filtered_receive.c"
STOCK_SEND = Path("/usr/share/proton/examples/c/send.c")
HEADER = Path("/usr/include/proton/proactor.h")


def _compiler_flags() -> list[str]:
    pkg_config = shutil.which("pkg-config")
    if pkg_config:
        found = subprocess.run([pkg_config, "--cflags", "--libs", "libqpid-proton"],
                               capture_output=True, text=True, check=False)
        if found.returncode == 0:
            return found.stdout.split()
    return ["-lqpid-proton"]


def _compile(compiler: str, source: Path, output: Path) -> None:
    built = subprocess.run([compiler, "-O1", "-Wall", "-o", str(output), str(source),
                            *_compiler_flags()],
                           capture_output=True, text=True, timeout=120, check=False)
    if built.returncode != 0:
        pytest.skip(f"cannot build {source.name} against Qpid Proton C: {built.stderr.strip()}")


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler (apt-get install gcc)")
    if not HEADER.is_file():
        pytest.skip("Qpid Proton C headers missing (apt-get install libqpid-proton11-dev)")
    if not STOCK_SEND.is_file():
        pytest.skip("Qpid Proton C examples missing "
                    "(apt-get install libqpid-proton11-dev-examples)")
    out = tmp_path_factory.mktemp("proton-c")
    built = {"receive": out / "filtered_receive", "send": out / "send"}
    _compile(compiler, SOURCE, built["receive"])
    _compile(compiler, STOCK_SEND, built["send"])
    return built


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, f"{Path(argv[0]).name} failed ({done.returncode}): {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def c_run(programs: dict[str, Path], interop_broker: BrokerAddress) -> dict[str, Any]:
    host, port = interop_broker.host, str(interop_broker.port)
    # the stock sender: 10 messages, message-id ulong 1..10, body {"sequence": n}
    sent = _run([str(programs["send"]), host, port, "proton-c-queue", "10"])
    assert "10 messages sent and acknowledged" in sent
    output = _run([str(programs["receive"]), host, port, "proton-c-queue",
                   "p.message_id % 3 = 0 OR p.message_id = 10", "10", "p.message_id >"])
    result: dict[str, Any] = json.loads(output)
    return result


def test_proton_c_receiver_gets_only_matches(c_run: dict[str, Any]) -> None:
    assert c_run["received_ids"] == [3, 6, 9, 10]


def test_proton_c_reports_the_refused_attach(c_run: dict[str, Any]) -> None:
    refusal = c_run["refusal"]
    assert refusal["attach_seen"], "Proton C must see the reply attach"
    assert refusal["source_null"], "the reply attach must carry a null source"
    assert refusal["condition"] == "amqp:invalid-field"
    assert "filter 'c-bad' (amqp:sql-filter)" in refusal["description"]
    assert "unexpected end of expression" in refusal["description"]
    assert refusal["info"] == "{:field=:filter}"
