"""SIGHUP reloads the users file: a real ``filtex-broker`` process, real signals, real clients.

Passwords and grants change without a restart; a connection keeps who it
authenticated as and gets the new grants on its next attach; a broken file
is logged and the one in force stays.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import ConnectionException
from proton.utils import BlockingConnection, LinkDetached

from filtex_broker.security.users import hash_password

from ..broker_clients import TIMEOUT, connect, message, send

REPO = Path(__file__).resolve().parents[3]
UNAUTHORIZED = "amqp:unauthorized-access"


class BrokerProcess:
    """``python -m filtex_broker`` with a users file, its log in a file."""

    def __init__(self, workdir: Path, users: Path) -> None:
        ready = workdir / "ready"
        self.log_path = workdir / "broker.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "filtex_broker", "--listen", "127.0.0.1:0", "--ready-file",
             str(ready), "--users", str(users)],
            cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + TIMEOUT
        while not ready.exists():
            assert self.process.poll() is None, self.log()
            assert time.monotonic() < deadline, f"the broker did not start: {self.log()}"
            time.sleep(0.05)
        self.url = ready.read_text().split()[0]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def hangup_until(self, text: str) -> None:
        """Send SIGHUP and wait until the log says ``text`` once more than before."""
        before = self.log().count(text)
        self.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + TIMEOUT
        while self.log().count(text) <= before:
            assert self.process.poll() is None, f"the broker died on SIGHUP: {self.log()}"
            assert time.monotonic() < deadline, f"no {text!r} after SIGHUP: {self.log()}"
            time.sleep(0.05)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(TIMEOUT)
        finally:
            self._log.close()


def write_users(path: Path, text: str) -> None:
    """Replace the file atomically, as an operator's tooling (or filtex-broker-users) would."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@pytest.fixture
def users(tmp_path: Path) -> Path:
    path = tmp_path / "users.toml"
    write_users(path, f'[users.alice]\npassword = "{hash_password("old-pw")}"\n'
                      'send = ["orders.#"]\nreceive = ["orders.#"]\n')
    return path


@pytest.fixture
def broker_process(tmp_path: Path, users: Path) -> Iterator[BrokerProcess]:
    running = BrokerProcess(tmp_path, users)
    try:
        yield running
    finally:
        assert running.stop() == 0, running.log()


def plain(url: str, user: str, password: str) -> BlockingConnection:
    return connect(url, user=user, password=password, allowed_mechs="PLAIN")


def test_sighup_applies_new_passwords_and_grants_and_keeps_a_bad_file_out(
    broker_process: BrokerProcess, users: Path
) -> None:
    url = broker_process.url
    kept = plain(url, "alice", "old-pw")  # stays open across the reloads
    try:
        with pytest.raises(LinkDetached) as refused:
            kept.create_receiver("audit.eu", name="before")
        assert refused.value.link.remote_condition.name == UNAUTHORIZED

        write_users(users, f'[users.alice]\npassword = "{hash_password("new-pw")}"\n'
                           'send = ["orders.#", "audit.#"]\nreceive = ["audit.#"]\n'
                           f'[users.carol]\npassword = "{hash_password("carol-pw")}"\n'
                           'send = ["audit.#"]\n')
        broker_process.hangup_until("reloaded: 2 user(s)")
        assert "reloaded: 2 user(s)" in broker_process.log()

        # The open connection is still alice, with the new grants on its next attach.
        receiver = kept.create_receiver("audit.eu", name="after")
        send(kept.create_sender("audit.eu"), message("after the reload"))
        assert receiver.receive(timeout=TIMEOUT).body == "after the reload"
        receiver.accept()
        with pytest.raises(LinkDetached):
            kept.create_receiver("orders.eu")  # receive on orders.# was taken away

        # New connections: the old password is gone, the new one and the new user work.
        with pytest.raises(ConnectionException, match=UNAUTHORIZED):
            plain(url, "alice", "old-pw")
        plain(url, "alice", "new-pw").close()
        carol = plain(url, "carol", "carol-pw")
        send(carol.create_sender("audit.eu"), message("from carol"))
        carol.close()

        # A broken file: logged, the one in force stays, the broker keeps serving.
        write_users(users, '[users.alice]\nsend = ["ord*"]\n')
        broker_process.hangup_until("users file NOT reloaded")
        assert "ord*" in broker_process.log()
        plain(url, "carol", "carol-pw").close()
        still = kept.create_receiver("audit.eu", name="still")
        assert still.link.remote_source.address == "audit.eu"
    finally:
        kept.close()
