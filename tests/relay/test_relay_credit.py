"""Relay mode: the upstream credit keeps a consumer's window coming, and no more than that."""

from __future__ import annotations

import time
import uuid

from proton import Message
from proton.utils import BlockingConnection

from .relay_rabbit import Rabbit
from .relay_support import RelayFactory, accepted_ids

TOTAL = 100
WINDOW = 10


def test_a_consumer_that_stops_takes_a_bounded_share_of_the_upstream(
    rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    """The relay keeps the consumer's window (the most credit it granted) coming from the
    upstream: once the consumer stops granting credit, at most its window waits in the relay
    and at most its window was sent to it; everything else stays available upstream. RabbitMQ
    3.10 sets the queue's credit from a flow without deducting what is on its way, so it sends
    up to what was in flight beyond it: the relay tops up at half a window, hence 2.5."""
    queue = f"/queue/credit-{uuid.uuid4().hex[:8]}"
    direct = BlockingConnection(rabbit.url, allowed_mechs="ANONYMOUS PLAIN", timeout=20)
    sender = direct.create_sender(queue)
    for i in range(TOTAL):
        sender.send(Message(id=i, body=i))
    relay = relay_factory(rabbit.url)
    downstream = BlockingConnection(relay.address, timeout=20)
    # a window of WINDOW, never topped up: the client takes nothing
    stalled = downstream.create_receiver(queue, name="stalled", credit=WINDOW)
    deadline = time.monotonic() + 10
    while "upstream link 'stalled@relay' attached" not in relay.log():
        assert time.monotonic() < deadline, relay.log()
        time.sleep(0.05)  # polling the relay's log file
    time.sleep(1.0)  # whatever the relay would take, it has taken by now
    other = direct.create_receiver(queue, name="other", credit=TOTAL)
    rest = accepted_ids(other, timeout=1.0)
    assert len(rest) >= TOTAL - 2.5 * WINDOW, f"the relay took {TOTAL - len(rest)}"
    stalled.close()  # what it had goes back upstream, and nothing is lost
    downstream.close()
    rest += accepted_ids(other, timeout=2.0)
    assert sorted(map(int, rest)) == list(range(TOTAL))
    direct.close()

