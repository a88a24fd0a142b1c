"""Helpers for the lifetime tests: a broker shared by a module, timed messages, dead letters.

Every message a test sends carries the application property ``scenario`` (the test's name),
so a test reads its own dead letters from the broker-wide dead-letter queue with an SQL filter
and leaves the others' alone; a module shares one broker (the tests wait for real time to
pass, the broker's start would only add to it).
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from proton import Endpoint, Message, Timeout, symbol, timestamp
from proton.utils import BlockingConnection, BlockingReceiver

from filtex_broker.config import BrokerConfig
from filtex_broker.server import Broker

from ..broker_clients import TIMEOUT, RunningBroker, nothing_more, sql

DEAD_LETTERS = "DLQ"
"""The broker's default dead-letter address."""
REASON = symbol("x-opt-dead-letter-reason")
DESCRIPTION = symbol("x-opt-dead-letter-description")
NODE = symbol("x-opt-dead-letter-node")
DELIVERY_DELAY = symbol("x-opt-delivery-delay")
DELIVERY_TIME = symbol("x-opt-delivery-time")


@contextmanager
def serving(**overrides: Any) -> Iterator[RunningBroker]:
    """A broker in a background thread for a whole module (tests/broker/conftest.py's
    ``broker_factory`` starts one per test)."""
    overrides.setdefault("shutdown_grace", 0.5)
    broker = Broker(BrokerConfig(listen=(("127.0.0.1", 0),), **overrides))
    thread = broker.start_in_thread()
    try:
        yield RunningBroker(broker, thread)
    finally:
        broker.stop()
        thread.join(60)
        assert not thread.is_alive(), "the broker did not stop"
        assert broker.error is None


def now_ms() -> int:
    """The wall clock in ms since the epoch, the clock of absolute-expiry-time."""
    return int(time.time() * 1000)


def timed(case: str, body: str, *, ttl: int | None = None, expiry: int | None = None,
          delay: int | None = None, at: int | None = None, priority: int | None = None,
          ) -> Message:
    """A message of test ``case``: ``ttl`` (header.ttl) and ``delay`` (x-opt-delivery-delay) in
    ms, ``expiry`` (properties.absolute-expiry-time) and ``at`` (x-opt-delivery-time) in ms
    since the epoch. Its id and subject are set so a test can check they come through."""
    annotations: dict[symbol, Any] = {}
    if delay is not None:
        annotations[DELIVERY_DELAY] = delay
    if at is not None:
        annotations[DELIVERY_TIME] = timestamp(at)
    m = Message(body=body, id=f"{case}/{body}", subject=f"subject {body}",
                properties={"scenario": case, "body": body}, annotations=annotations or None)
    if ttl is not None:
        m.ttl = ttl / 1000  # proton's Message takes seconds; the header holds ms
    if expiry is not None:
        m.expiry_time = expiry / 1000
    if priority is not None:
        m.priority = priority
    return m


def of_case(case: str) -> Any:
    """The source filter that takes only test ``case``'s messages."""
    return sql(f"scenario = '{case}'")


def take(receiver: BlockingReceiver, count: int, timeout: float = TIMEOUT) -> list[Message]:
    """Receive ``count`` messages and accept each."""
    out = []
    for _ in range(count):
        out.append(receiver.receive(timeout=timeout))
        receiver.accept()
    return out


def none_until(receiver: BlockingReceiver, deadline: float) -> bool:
    """True if nothing arrives before ``deadline`` (``time.monotonic()``): a message that
    must not come yet. Returns at once if the deadline has passed."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return True
    try:
        receiver.receive(timeout=remaining)
    except Timeout:
        return True
    return False


def dead_letters(conn: BlockingConnection, case: str, count: int) -> list[Message]:
    """The test's dead letters, taken (accepted) from the dead-letter queue in the order they
    were dead-lettered: exactly ``count`` of them."""
    receiver = conn.create_receiver(DEAD_LETTERS, options=of_case(case), credit=count + 5)
    got = take(receiver, count)
    assert nothing_more(conn, receiver), f"more than {count} dead letter(s) of {case}"
    return got


def drained(conn: BlockingConnection, receiver: BlockingReceiver) -> None:
    """Drain the link: once the broker answers, it has sent all it had for it."""
    link = receiver.link
    link.drain(0)
    conn.wait(lambda: not link.draining(), timeout=TIMEOUT, msg="waiting for the drain")


def detach(conn: BlockingConnection, receiver: BlockingReceiver) -> None:
    """Close the link and wait for the broker's detach."""
    link = receiver.link
    link.close()
    conn.wait(lambda: bool(link.state & Endpoint.REMOTE_CLOSED), timeout=TIMEOUT,
              msg="waiting for the detach")


def annotations_of(m: Message) -> dict[str, Any]:
    return {str(k): v for k, v in (m.annotations or {}).items()}


def expired_at(m: Message) -> int:
    """The expiry a dead letter's description names (ISO 8601 UTC, to the ms), in ms."""
    found = re.fullmatch(r"its ttl or absolute-expiry-time passed at "
                         r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{3})Z",
                         annotations_of(m)[DESCRIPTION])
    assert found is not None, annotations_of(m)
    seconds = calendar.timegm(time.strptime(found.group(1), "%Y-%m-%dT%H:%M:%S"))
    return seconds * 1000 + int(found.group(2))


def same_message(dead: Message, sent: Message) -> None:
    """The dead letter carries the message as it was sent, besides its annotations and but for
    its expiry: no ttl, no absolute-expiry-time (proton reads an absent one as 0)."""
    assert dead.body == sent.body
    assert dead.id == sent.id
    assert dead.subject == sent.subject
    assert dead.properties == sent.properties
    assert dead.ttl == 0 and dead.expiry_time == 0
    assert dead.priority == sent.priority
