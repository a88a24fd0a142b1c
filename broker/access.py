"""Authorization: may this connection's user attach this link, or relay this message?

Checked once per attach, before any node is created (an unauthorised
attach must not create a queue as a side effect), and per message only on
anonymous-relay links of restricted users. The rules:

* a link the broker sends on (the client receives) needs ``receive`` on the
  source address, or ``browse`` if it asks for distribution-mode ``copy``;
  a durable subscription attached by link name alone is checked against its
  topic's address;
* a link the broker receives on needs ``send`` on the target address; an
  anonymous relay (no address) is allowed, each message is checked against
  its ``properties.to`` and rejected with ``amqp:unauthorized-access``;
* dynamic nodes (request/reply) are allowed to any authenticated user: the
  broker names them, and they live only as long as the link.

Connections accepted without security (no users file, no TLS) carry no
principal and are never checked.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from proton import Link, Sender

from broker.engine import REJECTED
from broker.permissions import Action, Principal
from broker.producer import Producer
from broker.registry import Registry
from broker.terminus import read_terminus
from filtex_proton.amqp.codec import DecodeError
from filtex_proton.amqp.view import Section

__all__ = ["UNAUTHORIZED", "GuardedRelayProducer", "principal_of", "refusal"]

log = logging.getLogger("filtex.broker.auth")

UNAUTHORIZED: Final = "amqp:unauthorized-access"


def principal_of(link: Link) -> Principal | None:
    """The connection's principal (None: an unsecured listener, nothing to check)."""
    return getattr(link.connection, "broker_principal", None)


def refusal(link: Link, principal: Principal, registry: Registry, container: str, *,
            relay: bool) -> str | None:
    """Why ``principal`` may not attach ``link`` (None: it may)."""
    if isinstance(link, Sender):
        request = read_terminus(link.remote_source)
        action = Action.BROWSE if request.copy else Action.RECEIVE
        address = request.address
        if address is None and not request.dynamic:
            subscription = registry.durable.get((container, link.name))
            address = subscription.topic.name if subscription is not None else None
    else:
        request = read_terminus(link.remote_target)
        action = Action.SEND
        address = request.address
        if address is None and not request.dynamic and relay and principal.grants is not None:
            return (f"user {principal.name!r}: anonymous relay links are not available to "
                    "users with address permissions in relay mode")
    if request.dynamic or address is None:
        return None
    if principal.allows(action, address):
        return None
    return f"user {principal.name!r} has no {action.value} permission for {address!r}"


def _recipient(producer: Producer, data: bytes) -> str | None:
    try:
        to = producer.make_message(data, producer.origin).view.field(Section.PROPERTIES, "to")
    except DecodeError:
        return None  # the producer rejects it as malformed
    return to if isinstance(to, str) else None


class GuardedRelayProducer(Producer):
    """An anonymous-relay producer of a restricted user: each message's ``to`` is checked."""

    __slots__ = ("principal",)

    def __init__(self, *args: Any, principal: Principal, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.principal = principal

    def _store(self, delivery: Any, data: bytes) -> None:
        to = _recipient(self, data)
        if to is not None and not self.principal.allows(Action.SEND, to):
            log.warning("event=refusal reason=%s user=%r link=%r address=%r", UNAUTHORIZED,
                        self.principal.name, self.name, to)
            self._settle(delivery, REJECTED, UNAUTHORIZED,
                         f"user {self.principal.name!r} has no send permission for {to!r}")
            return
        super()._store(delivery, data)
