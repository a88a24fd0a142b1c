"""Priority over the wire: AMQP 1.0 part 3 §3.2.1 header priority (default 4; the broker reads
0..9, higher first, as Artemis and ActiveMQ). Priority ordering within a queue is not in the
broker yet: this test fails until it is.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..broker_clients import RunningBroker, connect, nothing_more, send
from .lifetime_clients import serving, take, timed


@pytest.fixture(scope="module")
def shared() -> Iterator[RunningBroker]:
    with serving() as running:
        yield running


def test_a_consumer_takes_the_highest_priority_first(shared: RunningBroker) -> None:
    """Priorities 1, 1, 9, no header (4), 9, queued before the consumer: 9, 9, 4, 1, 1, in
    arrival order within a priority."""
    case = address = "lifetime.priority"
    conn = connect(shared.url)
    send(conn.create_sender(address), timed(case, "p1-a", priority=1),
         timed(case, "p1-b", priority=1), timed(case, "p9-a", priority=9), timed(case, "p4"),
         timed(case, "p9-b", priority=9))
    receiver = conn.create_receiver(address, credit=10)
    assert [m.body for m in take(receiver, 5)] == ["p9-a", "p9-b", "p4", "p1-a", "p1-b"]
    assert nothing_more(conn, receiver)
    conn.close()
