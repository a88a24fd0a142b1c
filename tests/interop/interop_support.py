"""Shared by the interop tests (a module, not conftest, so imports stay unambiguous).

Besides the broker's address: what the compiled client programs (Go's
go-amqp, Rust's fe2o3-amqp) have in common. They are built once into a cache
directory, take the same arguments (``PROGRAM HOST:PORT ADDRESS COUNT
FILTERS_JSON [--send-shapes]``) and print the same JSON, so one table of filter
cases and one check serve every stack.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..integration.integration_support import close, connect, send, shapes, take

SQL = 0x0000000000000120
PROPERTIES = 0x0000000000000173
APPLICATION_PROPERTIES = 0x0000000000000174
SELECTOR = 0x0000468C00000004


@dataclass(frozen=True)
class BrokerAddress:
    """Where the interop broker listens."""

    host: str
    port: int

    @property
    def url(self) -> str:
        return f"{self.host}:{self.port}"


def cache_dir(name: str) -> Path:
    """``$FILTEX_INTEROP_CACHE/NAME`` (default ``~/.cache/filtex-proton/interop``): builds
    kept between test sessions, so only the first one pays for compiling a client."""
    configured = os.environ.get("FILTEX_INTEROP_CACHE")
    root = Path(configured) if configured else Path.home() / ".cache" / "filtex-proton" / "interop"
    path = root / name
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def build_lock(directory: Path) -> Iterator[None]:
    """One build at a time per cache directory (two test sessions may share it)."""
    with (directory / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def toolchain_or_skip(name: str, version_argv: list[str], minimum: tuple[int, int],
                      why: str, *usual: Path) -> str:
    """The path of tool ``name`` (on PATH, else in one of its ``usual`` directories, for a
    run whose PATH lacks them); skip when it is missing or older than ``minimum``."""
    tool = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), *map(str, usual)]))
    if tool is None:
        pytest.skip(f"{name} is not installed ({why})")
    shown = subprocess.run([tool, *version_argv], capture_output=True, text=True, timeout=60,
                           check=False).stdout
    found = re.search(r"(\d+)\.(\d+)", shown)
    if found is None or (int(found[1]), int(found[2])) < minimum:
        pytest.skip(f"{name} is too old: {shown.strip()!r} ({why})")
    return tool


def download_or_skip(argv: list[str], cwd: Path, env: Mapping[str, str], what: str) -> None:
    """Fetch a client's pinned dependencies; a registry that cannot be reached skips."""
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot download {what} (is the registry reachable?): "
                    f"{done.stderr.strip()[-1500:]}")


def build(argv: list[str], cwd: Path, env: Mapping[str, str]) -> None:
    """Compile a client whose dependencies are already here: a failure is a test failure."""
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=1200, check=False)
    assert done.returncode == 0, f"{' '.join(argv)} failed: {done.stderr.strip()[-3000:]}"


@dataclass(frozen=True)
class FilterCase:
    """A filter set as the client sends it, and the shapes (n = 0..5, odd n red) it
    must be given. Each expected list ends with n = 5, the last one sent: a queue
    keeps its order, so a message the filter wrongly passed would arrive before it
    and show.

    The shapes are ``shapes()`` sent with python-qpid-proton, or, with
    ``client_sends``, the client's own (``--send-shapes``: header priority n;
    message-id ulong n+1, subject ``order.<n>``, creation-time 1700000000000+n;
    application properties n as long, int, byte and float), so that the broker
    evaluates filters on the bytes of another encoder."""

    name: str
    filters: tuple[Mapping[str, Any], ...]
    expected: tuple[int, ...]
    client_sends: bool = False

    def argument(self) -> str:
        return json.dumps(list(self.filters))


def filter_entry(key: str, descriptor: str | int, value: Any) -> Mapping[str, Any]:
    """One filter as the client programs read it (a symbol is a str, a code an int)."""
    return {"key": key, "descriptor": descriptor, "value": value}


#: Cases every stack can express. go-amqp sends a symbolic descriptor only as the
#: filter's own key, so the symbolic ones use the descriptor as the key.
CASES = (
    FilterCase("sql-symbolic-descriptor",
               (filter_entry("amqp:sql-filter", "amqp:sql-filter", "colour = 'red' AND n > 2"),),
               (3, 5)),
    FilterCase("sql-numeric-and-header",
               (filter_entry("recent", SQL, "n >= 4"),
                filter_entry("amqp:header-filter", "amqp:header-filter", {"priority": 4})),
               (4, 5)),
    FilterCase("jms-selector-numeric-descriptor",
               (filter_entry("apache.org:selector-filter:string", SELECTOR, "colour = 'red'"),),
               (1, 3, 5)),
    FilterCase("application-properties-and-sql",
               (filter_entry("amqp:application-properties-filter",
                             "amqp:application-properties-filter", {"colour": "red"}),
                filter_entry("not-one", SQL, "n <> 1")),
               (3, 5)),
    FilterCase("application-properties-numeric-and-true-filter",
               (filter_entry("red", APPLICATION_PROPERTIES, {"colour": "red"}),
                filter_entry("amqp:true-filter", "amqp:true-filter", True)),
               (1, 3, 5)),
    FilterCase("client-encoded-messages",
               (filter_entry("amqp:sql-filter", "amqp:sql-filter",
                             "h.priority >= 2 AND p.message_id <> 4 AND n32 > 1 AND small < 9"
                             " AND f > 1.5 AND p.creation_time >= 1700000000002"),
                filter_entry("orders", PROPERTIES, {"subject": "&p:order."})),
               (2, 4, 5), client_sends=True),
)


def _application_properties(n: int, client_sends: bool) -> dict[str, Any]:
    sent: dict[str, Any] = {"colour": "red" if n % 2 else "blue", "n": n}
    if client_sends:
        sent.update(n32=n, small=n, f=n + 0.5)
    return sent


def expected(case: FilterCase) -> dict[str, Any]:
    """What :func:`filtered_receive` must return for ``case``. The client's own messages have
    header priority n, so the broker delivers them, queued, highest priority first (AMQP 1.0
    part 3 §3.2.1); python-qpid-proton's all have the default priority: in order."""
    order = sorted(case.expected, reverse=True) if case.client_sends else list(case.expected)
    rest = [n for n in range(6) if n not in case.expected]
    return {
        "bodies": order,
        "properties": [_application_properties(n, case.client_sends) for n in order],
        "echoed": {f["key"]: f["value"] for f in case.filters},
        "rest": sorted(rest, reverse=True) if case.client_sends else rest,
    }


def run_client(program: Path, broker: BrokerAddress, address: str, count: int,
               filters: str, *options: str) -> dict[str, Any]:
    done = subprocess.run([str(program), broker.url, address, str(count), filters, *options],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"{program.name} failed ({done.returncode}): {done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def filtered_receive(program: Path, broker: BrokerAddress, address: str,
                     case: FilterCase) -> dict[str, Any]:
    """Send the six shapes (python-qpid-proton or the client), let the client take what
    its filter set passes, then take what is left with an unfiltered receiver."""
    conn = connect(broker.url)
    try:
        if not case.client_sends:
            send(conn, address, shapes())
        result = run_client(program, broker, address, len(case.expected), case.argument(),
                            *(["--send-shapes"] if case.client_sends else []))
        assert "received" in result, f"the attach was refused: {result}"
        rest = conn.create_receiver(address)
        left = take(rest, 6 - len(case.expected))
        close(rest)
    finally:
        conn.close()
    return {
        "bodies": [m["body"] for m in result["received"]],
        "properties": [m["properties"] for m in result["received"]],
        "echoed": result["echoed"],
        "rest": left,
    }
