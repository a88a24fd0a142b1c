"""Shared by the tests of the relay in front of third-party brokers: relay processes, AMQP client
helpers (filters, capabilities, durable subscriptions, browsing), the relay console's counters."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from proton import (
    Condition,
    ConnectionException,
    Data,
    Delivery,
    Described,
    Link,
    Message,
    Terminus,
    Timeout,
    symbol,
)
from proton.reactor import Copy, Filter, LinkOption
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender, LinkDetached

from tests.relay.relay_support import RelayProcess
from upstreams.process import free_port

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
        [sys.executable, "-m", "filtex_broker", "--listen", "127.0.0.1:0", "--ready-file",
         str(ready),
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


def shapes(count: int = 6, *, durable: bool = False) -> list[Message]:
    """``count`` messages: n = 0..count-1, odd n red, even n blue (``durable``: persistent,
    for a broker restart)."""
    return [Message(body=n, durable=durable,
                    properties={"colour": "red" if n % 2 else "blue", "n": n})
            for n in range(count)]


def send(conn: BlockingConnection, address: str, messages: list[Message],
         options: Sequence[LinkOption] = ()) -> None:
    sender = conn.create_sender(address, options=list(options) or None)
    for message in messages:
        sender.send(message)  # waits for the outcome; raises unless accepted
    close(sender)


class Capability(LinkOption):  # type: ignore[misc]  # untyped in python-qpid-proton 0.40
    """A node capability (``topic``, ``queue``...) on the link's source (a receiver's) or
    target (a sender's)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def apply(self, link: Any) -> None:
        terminus = link.source if link.is_receiver else link.target
        terminus.capabilities.put_array(False, Data.SYMBOL)
        terminus.capabilities.enter()
        terminus.capabilities.put_symbol(self.name)
        terminus.capabilities.exit()


def receiver(conn: BlockingConnection, address: str,
             filters: dict[str, Described] | None = None, *, name: str | None = None,
             credit: int | None = None, options: Sequence[LinkOption] = ()) -> BlockingReceiver:
    """A receiver with these filters (and other ``options``); a fresh name unless ``name``."""
    every = [*options, *([Filter({symbol(k): v for k, v in filters.items()})] if filters
                         else [])]
    return conn.create_receiver(address, name=name or f"it-{uuid.uuid4().hex[:8]}",
                                credit=credit, options=every or None)


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


def drain_messages(rcv: BlockingReceiver, wait: float = 1.0) -> list[Message]:
    """Receive and accept until ``wait`` seconds pass quietly; the messages, in order."""
    got = []
    while True:
        try:
            got.append(rcv.receive(timeout=wait))
        except Timeout:
            return got
        rcv.accept()


def settle_modified(rcv: BlockingReceiver, *, failed: bool, undeliverable: bool) -> None:
    """Settle the oldest unsettled message as ``modified`` with these fields."""
    delivery = rcv.fetcher.unsettled[0]
    delivery.local.failed = failed
    delivery.local.undeliverable = undeliverable
    rcv.settle(Delivery.MODIFIED)


def nothing_more(rcv: BlockingReceiver, wait: float = 1.0) -> bool:
    try:
        rcv.receive(timeout=wait)
    except Timeout:
        return True
    return False


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


# -- node kinds, durable subscriptions, browsing ------------------------------------------------

JMS_NO_LOCAL = symbol("apache.org:no-local-filter:list")
PROPERTIES = symbol("amqp:application-properties-filter")


class Capabilities(LinkOption):
    """Source capabilities of a receiver (target capabilities of a sender): ``queue`` or
    ``topic``, as Qpid JMS says which kind of node it means."""

    def __init__(self, *capabilities: str) -> None:
        self.capabilities = capabilities

    def apply(self, link: Link) -> None:
        terminus = link.source if link.is_receiver else link.target
        terminus.capabilities.put_array(False, Data.SYMBOL)
        terminus.capabilities.enter()
        for capability in self.capabilities:
            terminus.capabilities.put_symbol(symbol(capability))
        terminus.capabilities.exit()


QUEUE = Capabilities("queue")
TOPIC = Capabilities("topic")


class Durable(LinkOption):
    """A durable subscription as Qpid JMS asks for one: unsettled-state durability, expiry
    never (with ``TOPIC``, a stable link name and a stable container id)."""

    def apply(self, link: Link) -> None:
        link.source.durability = Terminus.DELIVERIES
        link.source.expiry_policy = Terminus.EXPIRE_NEVER


def connect_as(url: str, container_id: str) -> BlockingConnection:
    """A connection with a fixed container id (durable subscriptions are named by it)."""
    return BlockingConnection(url, timeout=30, container_id=container_id)


def numbered(count: int, start: int = 0, *, durable: bool = False) -> list[Message]:
    """Messages id = body = n, colour red for odd n and blue for even n."""
    return [Message(id=n, body=n, durable=durable,
                    properties={"colour": "red" if n % 2 else "blue", "n": n})
            for n in range(start, start + count)]


def drain(rcv: BlockingReceiver, quiet: float = 1.0) -> list[Any]:
    """Receive and accept until ``quiet`` seconds pass without a message; the bodies."""
    return [message.body for message in drain_messages(rcv, quiet)]


def browse(conn: BlockingConnection, address: str, quiet: float = 1.0) -> list[Any]:
    """The bodies a queue holds, read with distribution-mode copy: nothing is consumed."""
    browser = receiver(conn, address, credit=100, options=[Copy()])
    try:
        return drain(browser, quiet)
    finally:
        close(browser)


def abandon(conn: BlockingConnection) -> None:
    """Let go of a connection whose peer was killed: wait until the client sees the socket
    gone, then close (closing first would wait ``timeout`` for a close that never comes)."""
    with contextlib.suppress(ConnectionException, Timeout):
        conn.wait(lambda: False, timeout=10)  # ends with ConnectionException once gone
    with contextlib.suppress(ConnectionException, Timeout):
        conn.close()


def detached(rcv: BlockingReceiver, wait: float = 30.0) -> Condition | None:
    """Wait for the peer to detach ``rcv``; its error (None if it did not detach)."""
    try:
        rcv.receive(timeout=wait)
    except LinkDetached as exc:
        return exc.link.remote_condition
    except Timeout:
        return None
    raise AssertionError("a message arrived on a link expected to be detached")


# -- relay processes and what their console counts ----------------------------------------------


class Relays:
    """The relay processes one test starts (``tests/relay/relay_support.RelayProcess``), each
    with the console on a free loopback port; all stopped by :meth:`stop_all`."""

    def __init__(self, workdir: Path, upstream: str, *common: str) -> None:
        self.workdir = workdir
        self.upstream = upstream
        self.common = common
        self.started: list[RelayProcess] = []
        self.consoles: dict[int, str] = {}

    def start(self, *extra: str) -> RelayProcess:
        console = f"127.0.0.1:{free_port()}"
        started = RelayProcess(self.upstream, self.workdir / f"relay{len(self.started) + 1}",
                               *self.common, "--console", console, *extra)
        self.started.append(started)
        self.consoles[id(started)] = console
        return started

    def links(self, started: RelayProcess) -> dict[str, dict[str, Any]]:
        """Every relay link the console of ``started`` lists, by link name."""
        url = f"http://{self.consoles[id(started)]}/api/overview"
        with urllib.request.urlopen(url, timeout=10) as response:
            overview = json.loads(response.read())
        return {link["name"]: link for node in overview["nodes"] for link in node["links"]}

    def received(self, started: RelayProcess, link: str) -> int:
        """Messages the relay's upstream link for ``link`` has taken from the upstream."""
        return int(self.links(started)[link]["received"])

    def stop_all(self) -> None:
        for started in self.started:
            if started.process.poll() is None:
                started.stop()


def upstream_links(started: RelayProcess, count: int, timeout: float = 30.0) -> None:
    """Wait until the relay's log shows ``count`` upstream links attached (a topic drops what
    is published before its subscriptions exist)."""
    eventually(lambda: started.log().count("upstream link"), lambda n: n >= count,
               "upstream links attached", timeout)
