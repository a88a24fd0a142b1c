"""What an operator reads first: the start-up line names what differs from the defaults, each
connection is logged once, ``--help`` shows an example of each mode."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from filtex_broker.config import describe, load_config

from .broker_clients import connect
from .fault_clients import REPO, BrokerProcess


def test_the_start_up_line_names_only_what_differs_from_the_defaults() -> None:
    assert describe(load_config([], env={})) == "all defaults"
    changed = describe(load_config(["--listen", "127.0.0.1:5673", "--max-queue-bytes", "1GiB",
                                    "--max-sql-length", "100", "--upstream",
                                    "amqp://up:5672", "--upstream-password", "secret"], env={}))
    assert changed == ("listen=127.0.0.1:5673, max_queue_bytes=1073741824, max_sql_length=100, "
                       "upstream='amqp://up:5672', upstream_password=(set)")
    assert "secret" not in changed


def test_each_connection_is_logged_once(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path)
    client = connect(broker.start())
    client.close()
    assert broker.stop() == 0
    log = broker.log()
    assert log.count("connection 1 opened") == 1 and "Accepted connection" not in log, log
    assert "starting with listen=127.0.0.1:0, ready_file=" in log, log


def test_help_shows_an_example_of_each_mode() -> None:
    shown = subprocess.run([sys.executable, "-m", "filtex_broker", "--help"], cwd=REPO,
                           capture_output=True, text=True, timeout=60, check=True).stdout
    for flag in ("--upstream amqp://", "--data-dir /", "--console 127.0.0.1:", "--metrics 127",
                 "--archive /", "--users users.toml"):
        assert flag in shown, flag
