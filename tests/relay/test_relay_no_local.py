"""No-local across the upstream (RabbitMQ): a consumer skips what its own connection published
through the relay, and nobody else loses anything."""

from __future__ import annotations

import time
import uuid

from proton import Described, Message, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection

from .relay_rabbit import Rabbit
from .relay_support import RelayFactory, RelayProcess, accepted_ids

NO_LOCAL = Filter({symbol("no-local"): Described(symbol("apache.org:no-local-filter:list"), [])})




def _wait_upstream_links(relay: RelayProcess, count: int) -> None:
    deadline = time.monotonic() + 20
    while relay.log().count("upstream link") < count:
        assert time.monotonic() < deadline, "the relay did not attach upstream"
        time.sleep(0.05)  # polling the relay's log file


def test_no_local_subscriber_skips_its_own_connection_on_a_topic(
    rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    topic = f"/topic/nolocal-{uuid.uuid4().hex[:8]}"
    relay = relay_factory(rabbit.url)
    alice = BlockingConnection(relay.address, timeout=20)
    bob = BlockingConnection(relay.address, timeout=20)
    alice_sub = alice.create_receiver(topic, name="alice", options=NO_LOCAL, credit=50)
    bob_sub = bob.create_receiver(topic, name="bob", credit=50)
    _wait_upstream_links(relay, 2)  # RabbitMQ drops what is published before the bindings
    for conn, who in ((alice, "a"), (bob, "b")):
        sender = conn.create_sender(topic)
        for i in range(5):
            sender.send(Message(id=f"{who}{i}", body=i, annotations={symbol("x-keep"): who}))
    assert accepted_ids(alice_sub) == [f"b{i}" for i in range(5)]
    got = []
    for _ in range(10):
        message = bob_sub.receive(timeout=10)
        got.append(str(message.id))
        # the publisher's own annotations arrive intact next to the relay's mark
        assert message.annotations[symbol("x-keep")] == got[-1][0]
        bob_sub.accept()
    assert sorted(got) == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)])
    alice.close()
    bob.close()


def test_no_local_queue_consumer_leaves_its_own_messages_for_others(
    rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    queue = f"/queue/nolocal-{uuid.uuid4().hex[:8]}"
    relay = relay_factory(rabbit.url)
    alice = BlockingConnection(relay.address, timeout=20)
    bob = BlockingConnection(relay.address, timeout=20)
    for conn, who in ((alice, "a"), (bob, "b")):
        sender = conn.create_sender(queue)
        for i in range(4):
            sender.send(Message(id=f"{who}{i}", body=i))
    mine = alice.create_receiver(queue, name="alice", options=NO_LOCAL, credit=20)
    assert sorted(accepted_ids(mine)) == [f"b{i}" for i in range(4)]
    mine.close()  # the relay held alice's own messages unsettled; now they go back
    alice.close()
    # Another connection (through the relay too) finds every one of alice's messages.
    rest = bob.create_receiver(queue, name="bob", credit=20)
    assert sorted(accepted_ids(rest)) == [f"a{i}" for i in range(4)]
    bob.close()
