"""CI: what one documented install gives, checked in the fresh virtualenv it was made in.

    python .ci/install_check.py plain|console|spark|metrics

Run by ``.ci/run`` after ``pip install .`` (``plain``) or ``pip install '.[EXTRA]'`` in a
virtualenv of its own, so that a dependency missing from an extra, or one pulled in where the
docs say it is not, fails CI. Each install must:

- put only ``filtex*`` import names into site-packages (``filtex_proton``, ``filtex_broker``);
- have exactly the optional dependencies its extra names (none for ``plain``);
- run the broker (a filtered receive through it, then SIGTERM: exit 0), check a filter
  (``filtex check``) and plan one for Spark (``filtex-spark explain``), which need no extra;
- give what its extra adds: the console's page, history and tester (``console``), the
  Prometheus endpoint (``metrics``), the broker's archive read back by ``filtex-spark select``
  on a local Spark, and its Spark Connect client (``--remote``) (``spark``);
- refuse what another extra adds with one line naming that extra, exit 2.

Only the standard library and what the install itself brought (python-qpid-proton) are used.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from proton import Described, Message, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection

BIN = Path(sys.executable).parent
#: The modules each extra brings (pyproject.toml's optional dependencies).
EXTRA_MODULES = {
    "console": {"aiohttp"},
    "metrics": {"prometheus_client"},
    "spark": {"pyspark", "pyarrow", "pandas", "tqdm", "grpc", "grpc_status"},  # grpc: --remote
}
#: What each extra's feature is, as the flag or command that needs it.
NEEDS = {
    "console": ["filtex-broker", "--listen", "127.0.0.1:0", "--console", "127.0.0.1:0"],
    "metrics": ["filtex-broker", "--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"],
    "spark": ["filtex-spark", "select", "--archive", ".", "--filter", "a = 1", "--count"],
}


def fail(message: str) -> None:
    sys.exit(f"install check: {message}")


def run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True,
                          timeout=timeout, check=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def check_modules(extra: str) -> None:
    """The install has its extra's modules and no other extra's."""
    wanted = EXTRA_MODULES.get(extra, set())
    for name in sorted(set().union(*EXTRA_MODULES.values())):
        present = importlib.util.find_spec(name) is not None
        if name in wanted and not present:
            fail(f"'.[{extra}]' did not install {name}")
        if name not in wanted and present:
            fail(f"{name} is installed by {'.' if extra == 'plain' else f'.[{extra}]'}, "
                 "which the docs say does not bring it")


def check_import_names() -> None:
    """The distribution installs ``filtex_proton`` and ``filtex_broker`` and no other top-level
    name (a generic one such as ``broker`` could clash with another distribution's)."""
    files = importlib.metadata.files("filtex-proton") or []
    tops = {file.parts[0] for file in files
            if len(file.parts) > 1 and not file.parts[0].endswith((".dist-info", "__pycache__"))
            and file.suffix == ".py"}
    if tops != {"filtex_proton", "filtex_broker"}:
        fail(f"the wheel's top-level import names are {sorted(tops)}, "
             "not filtex_proton and filtex_broker")
    for name in sorted(tops):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None or "site-packages" not in spec.origin:
            fail(f"{name} is not imported from the install: {spec}")


def check_no_extra_needed() -> None:
    checked = run("filtex", "check", "JMSPriority > 4 AND region LIKE 'eu-%'")
    if checked.returncode != 0 or "h.priority" not in checked.stdout + checked.stderr:
        fail(f"filtex check: {checked.returncode} {checked.stdout} {checked.stderr}")
    explained = run("filtex-spark", "explain", "--filter", "p.subject = 'o' AND a.amount > 5")
    if explained.returncode != 0 or "translated exactly" not in explained.stdout:
        fail(f"filtex-spark explain: {explained.returncode} {explained.stderr}")


def check_refused_without(extra: str) -> None:
    """A feature of another extra: one line naming that extra, exit 2, no traceback."""
    result = run(*NEEDS[extra], timeout=120)
    lines = result.stderr.strip().splitlines()
    if (result.returncode != 2 or "Traceback" in result.stderr or not lines
            or f"pip install 'filtex-proton[{extra}]'" not in lines[-1]):
        fail(f"{' '.join(NEEDS[extra])} without the {extra} extra: exit {result.returncode}, "
             f"{result.stderr!r}")


@contextmanager
def broker(*flags: str) -> Iterator[str]:
    """A filtex-broker of this install, listening; SIGTERM at the end must exit 0."""
    with tempfile.TemporaryDirectory() as tmp:
        ready = Path(tmp) / "ready"
        log = (Path(tmp) / "broker.log").open("w")
        process = subprocess.Popen([str(BIN / "filtex-broker"), "--listen", "127.0.0.1:0",
                                    "--ready-file", str(ready), *flags],
                                   stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while not ready.exists():
                if process.poll() is not None or time.monotonic() > deadline:
                    fail(f"the broker did not start: {(Path(tmp) / 'broker.log').read_text()}")
                time.sleep(0.1)
            yield ready.read_text().split()[0]
        finally:
            process.send_signal(signal.SIGTERM)
            status = process.wait(60)
            log.close()
            if status != 0:
                fail(f"the broker exited {status} on SIGTERM: "
                     f"{(Path(tmp) / 'broker.log').read_text()}")


def filtered_receive(address: str, count: int = 6) -> None:
    """``count`` messages in, the even ``n`` out through an amqp:sql-filter."""
    connection = BlockingConnection(address, timeout=30)
    try:
        receiver = connection.create_receiver("orders", options=Filter(
            {symbol("f"): Described(symbol("amqp:sql-filter"), "n % 2 = 0")}), credit=count)
        sender = connection.create_sender("orders")
        for n in range(count):
            sender.send(Message(body=f"order {n}", properties={"n": n}))
        got = []
        for _ in range(count // 2):
            got.append(receiver.receive(timeout=30).properties["n"])
            receiver.accept()
        if got != list(range(0, count, 2)):
            fail(f"the filtered receiver got {got}")
    finally:
        connection.close()


def http_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return str(answer.read().decode())


def http_json(url: str, body: object = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        found = json.loads(answer.read())
    assert isinstance(found, dict)
    return found


def check_console() -> None:
    port = free_port()
    with broker("--console", f"127.0.0.1:{port}", "--console-sample-interval", "0.2") as at:
        filtered_receive(at)
        base = f"http://127.0.0.1:{port}"
        if "filtex-broker" not in http_text(base + "/"):
            fail("the console's page")
        tested = http_json(base + "/api/test", {"text": "n % 2 = 0 AND p.subject = 'x'",
                                                "kind": "sql", "node": "orders"})
        if not tested["check"]["valid"] or "spark: (subject = 'x')" not in tested["spark"]:
            fail(f"the console's tester: {tested}")
        wait(lambda: len(http_json(base + "/api/history")["times"]) >= 2,
             "two points of history")
        if "orders" not in http_json(base + "/api/history")["nodes"]:
            fail("the console's history has no orders node")


def check_metrics() -> None:
    port = free_port()
    with broker("--metrics", f"127.0.0.1:{port}") as at:
        filtered_receive(at)
        text = http_text(f"http://127.0.0.1:{port}/metrics")
        if 'filtex_messages_in_total{node="orders"} 6.0' not in text:
            fail(f"the metrics do not count the orders: {text[:2000]}")


def check_spark() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        with broker("--archive", tmp) as at:
            filtered_receive(at)
        result = run("filtex-spark", "select", "--archive", tmp, "--filter", "n >= 3",
                     "--count", timeout=600)
        if result.returncode != 0 or result.stdout.strip().splitlines()[-1:] != ["3"]:
            fail(f"filtex-spark select over the broker's archive: exit {result.returncode}, "
                 f"{result.stdout!r} {result.stderr[-2000:]!r}")
        # The Spark Connect client is there: nobody listens, and that is what it says.
        remote = f"sc://127.0.0.1:{free_port()}"
        result = run("filtex-spark", "select", "--remote", remote, "--archive", tmp,
                     "--filter", "n >= 3", "--count", timeout=120)
        lines = result.stderr.strip().splitlines()
        if result.returncode != 2 or not lines or "cannot reach the Spark Connect server" \
                not in lines[-1]:
            fail(f"filtex-spark select --remote {remote}: exit {result.returncode}, "
                 f"{result.stderr[-2000:]!r}")


def wait(condition: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            fail(f"waited {seconds} s for {what}")
        time.sleep(0.1)


CHECKS = {"console": check_console, "metrics": check_metrics, "spark": check_spark}


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1] not in ("plain", *CHECKS):
        sys.exit("usage: python .ci/install_check.py plain|console|spark|metrics")
    extra = sys.argv[1]
    os.chdir(tempfile.gettempdir())  # the installed package, not the source tree, is imported
    check_import_names()
    check_modules(extra)
    check_no_extra_needed()
    with broker() as address:
        filtered_receive(address)
    if extra in CHECKS:
        CHECKS[extra]()
    for other in NEEDS:
        if other != extra:
            check_refused_without(other)
    print(f"install check: {'.' if extra == 'plain' else f'.[{extra}]'} gives what the docs say")


if __name__ == "__main__":
    main()
