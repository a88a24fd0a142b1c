"""Access control in relay mode: a restricted user's anonymous-relay messages, checked one by one.

The upstream is our own broker (in this process, unsecured); the relay is a
``filtex-broker --upstream … --users FILE`` process; the client authenticates
with PLAIN over loopback. Each message on the anonymous-relay link is checked
against its ``properties.to``: the unauthorised one is rejected with
``amqp:unauthorized-access`` and never reaches the upstream, the others go
through on the same link.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest
from proton import Delivery, Message
from proton.utils import BlockingConnection, BlockingSender, LinkDetached

from filtex_broker.security.users import hash_password
from filtex_broker.server import Broker

from .relay_support import RelayFactory

UNAUTHORIZED = "amqp:unauthorized-access"
TIMEOUT = 20.0
_tags = itertools.count()


@pytest.fixture
def users(tmp_path: Path) -> Path:
    path = tmp_path / "users.toml"
    path.write_text(f'[users.orders]\npassword = "{hash_password("orders-pw")}"\n'
                    'send = ["orders.#"]\n')
    return path


def _relay_url(upstream: Broker) -> str:
    host, port = upstream.addresses[0]
    return f"amqp://{host}:{port}"


def _send(conn: BlockingConnection, sender: BlockingSender, to: str) -> Delivery:
    """Send one message to ``to`` and wait for the relay's outcome."""
    link = sender.link
    conn.wait(lambda: link.credit > 0, timeout=TIMEOUT, msg="waiting for credit")
    delivery = link.delivery(f"m{next(_tags)}")
    link.stream(Message(address=to, body=f"for {to}").encode())
    link.advance()
    conn.wait(lambda: delivery.settled, timeout=TIMEOUT,
              msg="waiting for the outcome")
    return delivery


def test_anonymous_relay_messages_are_checked_against_their_to(
    upstream: Broker, users: Path, relay_factory: RelayFactory
) -> None:
    relay = relay_factory(_relay_url(upstream), "--users", str(users))
    conn = BlockingConnection(relay.address, timeout=TIMEOUT, user="orders",
                              password="orders-pw", allowed_mechs="PLAIN")
    try:
        sender = conn.create_sender(None)  # anonymous relay: attaches for a restricted user
        allowed = _send(conn, sender, "orders.eu")
        refused = _send(conn, sender, "billing.secret")
        after = _send(conn, sender, "orders.us")  # the link goes on after a refusal
        assert allowed.remote_state == Delivery.ACCEPTED
        assert refused.remote_state == Delivery.REJECTED
        condition = refused.remote.condition
        assert condition is not None and condition.name == UNAUTHORIZED
        assert "no send permission for 'billing.secret'" in str(condition.description)
        assert after.remote_state == Delivery.ACCEPTED

        with pytest.raises(LinkDetached, match=UNAUTHORIZED):  # a named link: checked at attach
            conn.create_sender("billing.secret")
    finally:
        conn.close()
    nodes = upstream.registry.nodes
    deadline = time.monotonic() + TIMEOUT
    while not {"orders.eu", "orders.us"} <= set(nodes):  # accepted means forwarded and accepted
        assert time.monotonic() < deadline, sorted(nodes)
        time.sleep(0.05)
    assert nodes["orders.eu"].depth() == 1 and nodes["orders.us"].depth() == 1
    assert "billing.secret" not in nodes, "the refused message reached the upstream"
