"""Links that come and go give their memory back: soak tests on real processes and sockets.

A client process (``bench/link_churn.py``) attaches and detaches links on one long-lived
connection, cycle after cycle, while the test reads the broker's resident memory
(``/proc/PID/status``) after a warm-up and again after the measured cycles: what a cycle
leaves behind must stay under :data:`BOUND` bytes. Each kind of cycle is run against
filtex-broker (with ``--metrics`` and ``--console``, whose counters are kept per node and
per link), through filtex-broker in relay mode (the relay's memory and its upstream's,
another filtex-broker), and against ``examples/plugin_broker.py``, which frees its links
with the plugin's :class:`~filtex_proton.release.EndpointReleaser`.

Before links were freed, each of these cycles kept 2 to 13 KB (docs/PERFORMANCE.md): 300 cycles
of a leak that small grow the resident size by 600 KB, ten times what the bound allows.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from .fault_clients import REPO, BrokerProcess

BOUND = 200
"""Bytes of resident memory one cycle may leave behind, after warm-up."""
WARMUP = 150
CYCLES = 500
RELAY_WARMUP = 80
RELAY_CYCLES = 300
"""Relayed attaches wait for the upstream's answer (and for ended sessions to be answered):
fewer cycles, the same bound."""
EXAMPLE_KINDS = ("connection", "session", "receiver", "sender", "refused", "in-session")
"""What the plugin example serves (it has neither topics, nor dynamic nodes, nor browsing)."""


def _load_churn() -> ModuleType:
    spec = importlib.util.spec_from_file_location("link_churn", REPO / "bench" / "link_churn.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


churn = _load_churn()


def _assert_flat(growth: list[float], names: list[str], kind: str) -> None:
    for name, per_cycle in zip(names, growth, strict=True):
        assert per_cycle < BOUND, (
            f"{name}: each {kind!r} cycle left {per_cycle:.0f} bytes of resident memory "
            f"behind (bound {BOUND})")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("churned"), "--log-level", "ERROR",
                            "--metrics", "127.0.0.1:0", "--console", "127.0.0.1:0")
    process.start()
    yield process
    assert process.stop() == 0, process.log()


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[BrokerProcess, BrokerProcess]]:
    upstream = BrokerProcess(tmp_path_factory.mktemp("upstream"), "--log-level", "ERROR")
    upstream.start()
    relay = BrokerProcess(tmp_path_factory.mktemp("relay"), "--log-level", "ERROR",
                          "--upstream", f"amqp://{upstream.url}")
    relay.start()
    yield relay, upstream
    assert relay.stop() == 0, relay.log()
    assert upstream.stop() == 0, upstream.log()


@pytest.fixture(scope="module")
def example() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"127.0.0.1:{probe.getsockname()[1]}"
    process = subprocess.Popen(
        [sys.executable, str(REPO / "examples" / "plugin_broker.py"), "--listen", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    host, port = url.rsplit(":", 1)
    deadline = time.monotonic() + 30
    while True:  # polling for readiness: the example writes no ready file
        assert process.poll() is None, "the plugin example exited during start-up"
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the plugin example is not listening"
            time.sleep(0.05)
    yield url, process
    process.terminate()
    assert process.wait(30) == 0


@pytest.mark.parametrize("kind", churn.KINDS)
def test_a_cycle_leaves_nothing_in_the_broker(broker: BrokerProcess, kind: str) -> None:
    assert broker.proc is not None
    growth = churn.growth_per_cycle([broker.proc.pid], broker.url, kind, warmup=WARMUP,
                                    cycles=CYCLES)
    _assert_flat(growth, ["filtex-broker"], kind)
    assert broker.proc.poll() is None


@pytest.mark.parametrize("kind", churn.KINDS)
def test_a_relayed_cycle_leaves_nothing_in_the_relay_or_its_upstream(
        relay: tuple[BrokerProcess, BrokerProcess], kind: str) -> None:
    relayed, upstream = relay
    assert relayed.proc is not None and upstream.proc is not None
    growth = churn.growth_per_cycle([relayed.proc.pid, upstream.proc.pid], relayed.url, kind,
                                    warmup=RELAY_WARMUP, cycles=RELAY_CYCLES)
    _assert_flat(growth, ["the relay", "its upstream"], kind)


@pytest.mark.parametrize("kind", EXAMPLE_KINDS)
def test_a_container_on_the_plugin_frees_its_links_with_the_releaser(
        example: tuple[str, subprocess.Popen[bytes]], kind: str) -> None:
    url, process = example
    growth = churn.growth_per_cycle([process.pid], url, kind, warmup=WARMUP, cycles=CYCLES)
    _assert_flat(growth, ["examples/plugin_broker.py"], kind)


def test_the_churn_client_is_a_documented_command() -> None:
    """``bench/link_churn.py --help`` shows an example (users run it against their broker)."""
    result = subprocess.run([sys.executable, str(REPO / "bench" / "link_churn.py"), "--help"],
                            capture_output=True, text=True, timeout=60, check=True)
    assert "example:" in result.stdout and "--kind" in result.stdout
    assert Path(REPO / "bench" / "link_churn.py").exists()
