"""cli-proton-python (PyPI; the messaging-QE command-line clients) against filtex-broker.

Its receiver's ``--recv-selector`` sends a JMS selector
(``apache.org:selector-filter:string``); a bad selector is refused and the
client reports the link error and exits non-zero.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from typing import Any

import pytest

from .interop_support import BrokerAddress

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("cli_proton_python") is None,
    reason="cli-proton-python is not installed (pip install cli-proton-python)")


def _client(kind: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", f"cli_proton_python.{kind}", *args],
                          capture_output=True, text=True, timeout=60, check=False)


def _send(url: str, count: int, content: str, *properties: str) -> None:
    argv = ["-b", url, "-c", str(count), "--msg-content", content, "--log-msgs", "none"]
    for item in properties:
        argv += ["-P", item]
    done = _client("sender", *argv)
    assert done.returncode == 0, done.stderr


def _receive(url: str, count: int, *extra: str) -> list[dict[str, Any]]:
    done = _client("receiver", "-b", url, "-c", str(count), "-t", "20",
                   "--log-msgs", "json", *extra)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def test_cli_receiver_selector_delivers_only_matches(interop_broker: BrokerAddress,
                                                     address: str) -> None:
    url = f"{interop_broker.url}/{address}"
    _send(url, 2, "blue", "colour=blue", "size~7")
    _send(url, 2, "red-big", "colour=red", "size~7")
    _send(url, 2, "red-small", "colour=red", "size~1")
    matched = _receive(url, 2, "--recv-selector", "colour = 'red' AND size > 2")
    assert [m["content"] for m in matched] == ["red-big", "red-big"]
    assert all(m["properties"] == {"colour": "red", "size": 7} for m in matched)
    # the non-matching messages were not consumed: an unselective receiver gets them in order
    rest = _receive(url, 4)
    assert [m["content"] for m in rest] == ["blue", "blue", "red-small", "red-small"]


def test_cli_receiver_reports_a_refused_selector(interop_broker: BrokerAddress,
                                                 address: str) -> None:
    done = _client("receiver", "-b", f"{interop_broker.url}/{address}", "-c", "1", "-t", "20",
                   "--recv-selector", "colour = = 'red'")
    assert done.returncode != 0
    assert "Link error: filter 'selector' (apache.org:selector-filter:string): syntax error" \
        in done.stderr
    assert "line 1, column 10" in done.stderr
