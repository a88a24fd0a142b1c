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
  its ``properties.to`` and rejected with ``amqp:unauthorized-access`` - on
  our own nodes and in relay mode alike (:func:`guard_relay` sets the
  producer's per-message ``guard``);
* dynamic nodes (request/reply) are allowed to any authenticated user: the
  broker names them, and they live only as long as the link.

Connections accepted without security (no users file, no TLS) carry no
identity and are never checked. The grants are looked up at each attach, so
a users file reloaded on SIGHUP applies to the next attach; a link keeps the
grants it was attached with.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Final

from proton import Condition, Link, Sender

from filtex_broker.nodes.producer import Producer
from filtex_broker.nodes.registry import Registry
from filtex_broker.security.permissions import Action, Principal
from filtex_broker.terminus import TerminusRequest, lookup_key
from filtex_proton.amqp import MISSING, DecodeError, Section
from filtex_proton.plugin import FilterMessage

if TYPE_CHECKING:
    from filtex_broker.security.auth import Identity

__all__ = ["UNAUTHORIZED", "guard_relay", "principal_of", "refusal", "relay_refusal"]

log = logging.getLogger("filtex.broker.auth")

UNAUTHORIZED: Final = "amqp:unauthorized-access"
DECODE_ERROR: Final = "amqp:decode-error"


def principal_of(link: Link) -> Principal | None:
    """The connection's user with its current grants (None: an unsecured listener)."""
    identity: Identity | None = getattr(link.connection, "broker_identity", None)
    return identity.principal() if identity is not None else None


def refusal(link: Link, request: TerminusRequest, principal: Principal, registry: Registry,
            container: str) -> str | None:
    """Why ``principal`` may not attach ``link``, whose remote terminus is ``request`` (None:
    it may)."""
    if isinstance(link, Sender):
        action = Action.BROWSE if request.copy else Action.RECEIVE
        address = request.address
        if address is None and not request.dynamic:
            subscription = registry.durable.get(lookup_key(container, link.name))
            address = subscription.topic.name if subscription is not None else None
    else:
        action = Action.SEND
        address = request.address
    if request.dynamic or address is None:
        return None
    if principal.allows(action, address):
        return None
    return f"user {principal.name!r} has no {action.value} permission for {address!r}"


def relay_refusal(principal: Principal, link_name: str,
                  message: FilterMessage) -> Condition | None:
    """Why a message on an anonymous relay may not go to its ``to`` (None: it may)."""
    try:
        to = message.view.field(Section.PROPERTIES, "to")
    except DecodeError as exc:
        return Condition(DECODE_ERROR, f"not an AMQP message: {exc}")
    if to is None or to is MISSING:
        return None  # no destination: refused downstream as unroutable, nothing to authorise
    if not isinstance(to, str):
        return Condition(DECODE_ERROR, f"properties.to is not a string: {type(to).__name__}")
    if principal.allows(Action.SEND, to):
        return None
    log.warning("event=refusal reason=%s user=%r link=%r address=%r", UNAUTHORIZED,
                principal.name, link_name, to)
    return Condition(UNAUTHORIZED, f"user {principal.name!r} has no send permission for {to!r}")


def guard_relay(producer: Producer, request: TerminusRequest, principal: Principal | None) -> None:
    """Check each message of a restricted user's anonymous-relay link (our nodes or relay);
    ``request`` is the producer link's remote target."""
    if request.address is None and not request.dynamic and principal is not None and \
            principal.grants is not None:
        producer.guard = functools.partial(relay_refusal, principal, producer.name)
