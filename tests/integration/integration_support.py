"""Shared by the container tests: the relay process, AMQP client helpers, Artemis's Jolokia."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from proton import Condition, Described, Message, Timeout, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender, LinkDetached

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 60.0
SELECTOR = symbol("apache.org:selector-filter:string")
SQL = symbol("amqp:sql-filter")

T = TypeVar("T")


@contextmanager
def relay(workdir: Path, upstream: str, *extra: str) -> Iterator[str]:
    """Run ``filtex-broker --upstream UPSTREAM EXTRA...`` on an ephemeral port; yield host:port."""
    ready = workdir / f"relay-{uuid.uuid4().hex[:6]}.ready"
    log = (workdir / "relay.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "broker", "--listen", "127.0.0.1:0", "--ready-file", str(ready),
         "--upstream", upstream, *extra],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not ready.exists():
            assert process.poll() is None, f"the relay exited during start-up; see {log.name}"
            assert time.monotonic() < deadline, "the relay did not become ready"
            time.sleep(0.05)  # polling for the ready file
        yield ready.read_text().split()[0]
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def eventually(probe: Callable[[], T], done: Callable[[T], bool], what: str,
               timeout: float = 30.0) -> T:
    """Poll ``probe`` until ``done`` holds for its value; fail with the last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still {value!r} after {timeout} s")
        time.sleep(0.2)  # polling a remote broker's state


def connect(url: str, user: str | None = None, password: str | None = None
            ) -> BlockingConnection:
    if user is None:
        return BlockingConnection(url, timeout=30)
    return BlockingConnection(url, timeout=30, user=user, password=password,
                              allowed_mechs="PLAIN", allow_insecure_mechs=True)


def shapes() -> list[Message]:
    """Six messages: n = 0..5, odd n red, even n blue."""
    return [Message(body=n, properties={"colour": "red" if n % 2 else "blue", "n": n})
            for n in range(6)]


def send(conn: BlockingConnection, address: str, messages: list[Message]) -> None:
    sender = conn.create_sender(address)
    for message in messages:
        sender.send(message)  # waits for the outcome; raises unless accepted
    close(sender)


def receiver(conn: BlockingConnection, address: str,
             filters: dict[str, Described] | None = None) -> BlockingReceiver:
    options = Filter({symbol(k): v for k, v in filters.items()}) if filters else None
    return conn.create_receiver(address, name=f"it-{uuid.uuid4().hex[:8]}", options=options)


def close(link: BlockingSender | BlockingReceiver) -> None:
    link.close()  # type: ignore[no-untyped-call]  # untyped in python-qpid-proton 0.40


def refusal(conn: BlockingConnection, address: str, filters: dict[str, Described]) -> Condition:
    """Attach with a filter set that must be refused; the refusal's error condition."""
    try:
        receiver(conn, address, filters)
    except LinkDetached as detached:
        link = detached.link
    else:
        raise AssertionError("the attach was not refused")
    assert link.remote_source.type == 0, "the refusing attach must carry a null source"
    condition = link.remote_condition
    assert condition is not None, "the detach must carry an error"
    return condition


def take(rcv: BlockingReceiver, count: int) -> list[Any]:
    bodies = []
    for _ in range(count):
        bodies.append(rcv.receive(timeout=30).body)
        rcv.accept()
    return bodies


def nothing_more(rcv: BlockingReceiver, wait: float = 1.0) -> bool:
    try:
        rcv.receive(timeout=wait)
    except Timeout:
        return True
    return False


def take_all(rcv: BlockingReceiver, wait: float = 1.0) -> list[Any]:
    """Receive and accept until ``wait`` passes quietly; the bodies, in arrival order."""
    bodies = []
    while True:
        try:
            message = rcv.receive(timeout=wait)
        except Timeout:
            return bodies
        bodies.append(message.body)
        rcv.accept()


def take_until(rcv: BlockingReceiver, wanted: set[Any], timeout: float = 30.0) -> list[Any]:
    """Receive and accept until every body in ``wanted`` has arrived (each wait up to
    ``timeout``: across an upstream's restart); all bodies received, duplicates included."""
    bodies: list[Any] = []
    while not wanted <= set(bodies):
        bodies.append(rcv.receive(timeout=timeout).body)
        rcv.accept()
    return bodies


def selector_and_sql() -> dict[str, Described]:
    """The JMS selector can be pushed down; the SQL filter is evaluated by the relay."""
    return {"jms-selector": Described(SELECTOR, "colour = 'red'"),
            "big": Described(SQL, "n > 1")}


class Jolokia:
    """Artemis management over Jolokia (``/console/jolokia``), enough for these tests."""

    def __init__(self, base_url: str, user: str, password: str) -> None:
        self.url = base_url.rstrip("/") + "/console/jolokia/"
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        # an Origin Jolokia's default CORS policy allows, in case strict checking is on
        self.headers = {"Authorization": f"Basic {token}", "Content-Type": "application/json",
                        "Origin": "http://localhost"}
        self._broker: str | None = None

    def request(self, body: dict[str, Any]) -> Any:
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.url, data=data, headers=self.headers, method="POST")
        with urllib.request.urlopen(req, timeout=10) as response:
            reply = json.loads(response.read())
        if reply.get("status") != 200:
            raise RuntimeError(f"jolokia {body.get('operation', body['type'])}: "
                               f"{reply.get('error', reply)}")
        return reply["value"]

    def ping(self) -> bool:
        try:
            self.broker()
        except (OSError, RuntimeError, ValueError):
            return False
        return True

    def broker(self) -> str:
        """The broker MBean name, e.g. ``org.apache.activemq.artemis:broker="0.0.0.0"``."""
        if self._broker is None:
            names = self.request({"type": "search",
                                  "mbean": "org.apache.activemq.artemis:broker=*"})
            brokers = [n for n in names if "," not in n.split(":", 1)[1]]
            if not brokers:
                raise RuntimeError(f"no Artemis broker MBean among {names}")
            self._broker = brokers[0]
        return self._broker

    def exec(self, operation: str, *arguments: Any) -> Any:
        return self.request({"type": "exec", "mbean": self.broker(), "operation": operation,
                             "arguments": list(arguments)})

    def create_anycast_queue(self, name: str) -> None:
        config = {"name": name, "address": name, "routing-type": "ANYCAST", "durable": True,
                  "auto-create-address": True}
        self.exec("createQueue(java.lang.String)", json.dumps(config))

    def queue(self, name: str) -> dict[str, Any]:
        options = json.dumps({"field": "name", "operation": "EQUALS", "value": name})
        found = json.loads(self.exec("listQueues(java.lang.String,int,int)", options, 1, 10))
        rows = [row for row in found["data"] if row.get("name") == name]
        return rows[0] if rows else {}

    def consumers(self) -> list[dict[str, Any]]:
        found = json.loads(self.exec("listConsumers(java.lang.String,int,int)", "", 1, 500))
        rows: list[dict[str, Any]] = found["data"]
        return rows

    def consumer_filters(self, queue: str) -> list[str]:
        """The filter string of every consumer on ``queue`` (empty string: no filter)."""
        return [str(row.get("filter") or "") for row in self.consumers()
                if queue in {str(v) for v in row.values()}]
