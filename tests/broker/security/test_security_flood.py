"""A flood of wrong passwords does not lock out a client with good credentials.

The flood speaks real SASL over real sockets from another loopback address
(127.0.0.2) and keeps ``IN_FLIGHT`` wrong-password attempts open at all
times; checked one after the other on the event loop (~40 ms of scrypt each),
those alone would take longer than the good client's own timeout. The good
client is a python-qpid-proton connection authenticating with PLAIN.
"""

from __future__ import annotations

import errno
import logging
import selectors
import socket
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from proton import symbol
from proton.utils import BlockingConnection

from filtex_broker.security.sasl import SASL_HEADER, frame
from filtex_broker.security.users import hash_password
from filtex_proton.amqp import decode_value

from ..broker_clients import BrokerFactory, message, send

IN_FLIGHT = 500
GOOD_CLIENT_TIMEOUT = 15.0
"""IN_FLIGHT checks in a row on the event loop would take ~20 s: more than this."""
FLOOD_SOURCE = "127.0.0.2"
CONNECTING = 8
"""Connections the flood opens at a time (the broker's listen backlog is 10)."""
SASL_OUTCOME = 0x44


def sasl_outcome(data: bytes) -> int | None:
    """The code of the ``sasl-outcome`` frame in what the broker sent (None: there was none)."""
    pos = len(SASL_HEADER)
    while pos + 8 <= len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        if pos + size > len(data):
            break
        value, _ = decode_value(data[pos + 8:pos + size])
        if int(value.descriptor) == SASL_OUTCOME:
            return int(value.value[0])
        pos += size
    return None


def mechanisms_received(data: bytes) -> bool:
    """Whether the broker's SASL header and ``sasl-mechanisms`` frame are all there."""
    head = len(SASL_HEADER)
    return len(data) >= head + 4 and len(data) >= head + int.from_bytes(data[head:head + 4], "big")


class Flood(threading.Thread):
    """Keeps ``size`` wrong-password PLAIN attempts in flight until stopped; counts outcomes.

    The first ``size`` connections are accepted and offered the mechanisms
    before any of them sends its ``sasl-init``; then all do, at once: a burst
    of ``size`` checks due in the same event-loop round. After that, every
    finished attempt is replaced by a new one.
    """

    def __init__(self, host: str, port: int, size: int) -> None:
        super().__init__(name="wrong-password-flood", daemon=True)
        self.address = (host, port)
        self.size = size
        self.outcomes: Counter[int | None] = Counter()
        self.init = frame(0x41, [symbol("PLAIN"), b"\0alice\0guess"])
        self.parked: list[socket.socket] = []
        self.waiting = 0
        """Connections not offered the mechanisms yet (kept below the listen backlog)."""
        self.stopping = threading.Event()
        self.in_flight = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            with selectors.DefaultSelector() as selector:
                while not self.stopping.is_set():
                    while len(selector.get_map()) < self.size and self.waiting < CONNECTING:
                        self._open(selector)
                    for key, _ in selector.select(0.1):
                        self._step(selector, key)
                    if not self.in_flight.is_set() and len(self.parked) == self.size:
                        for sock in self.parked:  # the burst
                            self._send(sock, self.init)
                        self.in_flight.set()
                for key in list(selector.get_map().values()):
                    key.fileobj.close()  # type: ignore[union-attr]
        except BaseException as exc:  # reported by the test
            self.failure = exc
            self.in_flight.set()

    def _open(self, selector: selectors.BaseSelector) -> None:
        sock = socket.socket()
        sock.bind((FLOOD_SOURCE, 0))
        sock.setblocking(False)
        code = sock.connect_ex(self.address)
        assert code in (0, errno.EINPROGRESS), errno.errorcode.get(code)
        selector.register(sock, selectors.EVENT_WRITE, bytearray())
        self.waiting += 1

    @staticmethod
    def _send(sock: socket.socket, data: bytes) -> None:
        sock.setblocking(True)
        sock.sendall(data)
        sock.setblocking(False)

    def _step(self, selector: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
        sock: socket.socket = key.fileobj  # type: ignore[assignment]
        received: bytearray = key.data
        if key.events == selectors.EVENT_WRITE:  # connected: say we speak SASL
            self._send(sock, SASL_HEADER)
            selector.modify(sock, selectors.EVENT_READ, received)
            return
        try:
            chunk = sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except ConnectionError:
            chunk = b""
        if chunk:
            offered_before = mechanisms_received(bytes(received))
            received += chunk
            if not offered_before and mechanisms_received(bytes(received)):
                self.waiting -= 1
                if self.in_flight.is_set():
                    self._send(sock, self.init)
                else:
                    self.parked.append(sock)
            return
        selector.unregister(sock)
        sock.close()
        if not mechanisms_received(bytes(received)):
            self.waiting -= 1
        self.outcomes[sasl_outcome(bytes(received))] += 1


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    path = tmp_path / "users.toml"
    path.write_text(f'[users.alice]\npassword = "{hash_password("alice-pw")}"\n'
                    'send = ["orders.#"]\nreceive = ["orders.#"]\n')
    return path


def test_a_good_client_gets_in_during_a_wrong_password_flood(
    broker_factory: BrokerFactory, users_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="filtex.broker.auth")
    running = broker_factory(users=str(users_file), auth_timeout=60.0)
    host, port = running.broker.addresses[0]
    flood = Flood(host, port, IN_FLIGHT)
    flood.start()
    try:
        assert flood.in_flight.wait(60)
        assert flood.failure is None, flood.failure
        good = BlockingConnection(running.url, timeout=GOOD_CLIENT_TIMEOUT, user="alice",
                                  password="alice-pw", allowed_mechs="PLAIN")
        try:
            send(good.create_sender("orders.flood"), message("still served"))
            receiver = good.create_receiver("orders.flood")
            assert receiver.receive(timeout=GOOD_CLIENT_TIMEOUT).body == "still served"
            receiver.accept()
        finally:
            good.close()
        # The flood goes on until its address is held back (the per-address back-off).
        deadline = time.monotonic() + 60
        while "holding back further failed outcomes" not in caplog.text:
            assert time.monotonic() < deadline, f"no back-off: {flood.outcomes}"
            time.sleep(0.1)
    finally:
        flood.stopping.set()
        flood.join(30)
    assert flood.failure is None, flood.failure
    assert 0 not in flood.outcomes, "a wrong password got in"
    assert flood.outcomes[1] > 0, f"no attempt was checked and refused: {flood.outcomes}"
    assert flood.outcomes[4] > 1, f"no attempts were failed fast with sys-temp: {flood.outcomes}"
    summaries = caplog.text.count("failed fast with sys-temp")
    assert 1 <= summaries < flood.outcomes[4]  # summarised, not one line per refused attempt
