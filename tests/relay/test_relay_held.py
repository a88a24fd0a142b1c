"""The ``upstream_held`` limit over RabbitMQ: a queue consumer through the relay never holds more
non-matching messages than the limit, and every held message goes back when it leaves."""

from __future__ import annotations

import time
import uuid

import pytest
from proton import Described, Message, Timeout, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection

from .relay_rabbit import Rabbit
from .relay_support import RelayFactory, accepted_ids

EVEN = Filter({symbol("f"): Described(symbol("amqp:sql-filter"), "even = TRUE")})




def test_at_the_limit_the_consumer_takes_no_more_and_loses_nothing(
    rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    queue = f"/queue/held-{uuid.uuid4().hex[:8]}"
    direct = BlockingConnection(rabbit.url, allowed_mechs="ANONYMOUS PLAIN", timeout=20)
    sender = direct.create_sender(queue)
    for i in range(7):  # 0..4 do not match, 5 and 6 do, and queue behind them
        sender.send(Message(id=i, body=i, properties={"even": i >= 5}))
    relay = relay_factory(rabbit.url, "--upstream-held", "3")
    downstream = BlockingConnection(relay.address, timeout=20)
    filtered = downstream.create_receiver(queue, name="filtered", options=EVEN, credit=10)
    deadline = time.monotonic() + 20
    while "(upstream_held)" not in relay.log():
        assert time.monotonic() < deadline, relay.log()
        time.sleep(0.05)  # polling the relay's log file
    # Three held (0, 1, 2), unsettled: the relay granted no more credit upstream, so the
    # matching 5 and 6 stay behind 3 and 4 in RabbitMQ, where another consumer finds them.
    with pytest.raises(Timeout):
        filtered.receive(timeout=1)
    other = direct.create_receiver(queue, name="other", credit=20)
    assert accepted_ids(other) == ["3", "4", "5", "6"]
    filtered.close()  # the held messages go back upstream ...
    downstream.close()
    assert sorted(accepted_ids(other)) == ["0", "1", "2"]  # ... and nothing was lost or duplicated
    direct.close()
