"""``python -m upstreams``: its arguments as a user types them (no broker is started here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from upstreams.cli import parse

ROOT = Path(__file__).resolve().parent.parent


def test_arguments_after_the_double_dash_go_to_filtex_broker() -> None:
    """As the help's own example writes it: options between the broker and ``--``."""
    args = parse(["artemis", "--queue", "orders", "--relay", "127.0.0.1:5672", "--",
                  "--console", "127.0.0.1:8162", "--upstream-idle-timeout", "10"])
    assert args.broker == "artemis" and args.queue == ["orders"]
    assert args.relay == "127.0.0.1:5672"
    assert args.relay_args == ["--console", "127.0.0.1:8162", "--upstream-idle-timeout", "10"]


def test_without_a_double_dash_nothing_goes_to_filtex_broker() -> None:
    args = parse(["broker-j", "--relay", "127.0.0.1:5672"])
    assert args.relay_args == []


@pytest.mark.parametrize(("argv", "says"), [
    (["artemis", "--", "--console", "127.0.0.1:8162"], "need --relay"),
    (["artemis", "--relay", "127.0.0.1:5672", "--console", "x"], "unrecognized arguments"),
    (["rabbitmq"], "invalid choice"),
])
def test_a_mistake_is_one_line_and_exit_2(argv: list[str], says: str) -> None:
    result = subprocess.run([sys.executable, "-m", "upstreams", *argv], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and says in result.stderr, result.stderr
