"""What a peer's source or target asks of the broker, read once at attach.

Proton presents a terminus as setters/getters plus ``proton.Data`` fields; the
broker needs a handful of facts (address, dynamic, topic capability, durable
subscription, browse) to pick a node, so they are gathered here into one
plain value. The answer to an attach the broker will not serve (a null
terminus, then a detach with the condition) is here too, for the broker's
own nodes and relay mode alike.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Final

from proton import Array, Condition, Link, Terminus

__all__ = ["TerminusRequest", "capabilities_of", "lookup_key", "read_terminus", "refuse",
           "subscription_key"]

log = logging.getLogger("filtex.broker")

TOPIC: Final = "topic"
"""The Qpid JMS node capability for a topic (publish/subscribe) node."""
QUEUE: Final = "queue"
TEMPORARY_TOPIC: Final = "temporary-topic"
SHARED: Final = "shared"
"""Qpid JMS: a shared subscription (JMS 2.0), named without the container-id if also ``global``."""
GLOBAL: Final = "global"
_SHARED_LINK: Final = re.compile(r"(.*)\|(global|volatile|global-volatile)?(\d*)")
"""Qpid JMS's link names for the Nth consumer of a shared subscription SUB on one connection:
``SUB``, ``SUB|N`` (with a client-id), ``SUB|global``, ``SUB|globalN`` (without), and
``|volatile``, ``|global-volatile`` for the non-durable ones."""


def capabilities_of(terminus: Terminus) -> frozenset[str]:
    """The terminus's capabilities as plain strings (a single symbol or an array)."""
    data = terminus.capabilities
    data.rewind()
    if data.next() is None:
        return frozenset()
    value: Any = data.get_object()
    if value is None:
        return frozenset()
    if isinstance(value, Array):
        value = value.elements
    if isinstance(value, str):
        return frozenset({str(value)})
    return frozenset(str(v) for v in value if isinstance(v, str))


@dataclass(frozen=True, slots=True)
class TerminusRequest:
    """The facts of one remote source or target that decide where a link goes."""

    address: str | None
    dynamic: bool
    capabilities: frozenset[str]
    durable: bool
    """Terminus durability is not none and the expiry policy is never (Qpid JMS durable subs)."""
    copy: bool
    """Distribution mode ``copy``: browse a queue instead of consuming from it."""
    coordinator: bool
    """A transaction coordinator target (not supported)."""

    @property
    def topic(self) -> bool:
        return TOPIC in self.capabilities or TEMPORARY_TOPIC in self.capabilities

    @property
    def shared(self) -> bool:
        return SHARED in self.capabilities


def subscription_key(container: str, link_name: str,
                     request: TerminusRequest) -> tuple[str, str]:
    """The name of the durable or shared subscription a link attaches to: (container-id, link
    name), where a shared one drops Qpid JMS's consumer count from the link name and a global
    one (no client-id) has no container-id."""
    if not request.shared:
        return container, link_name
    named = _SHARED_LINK.fullmatch(link_name)
    if named is not None and (named[2] or named[3]):
        link_name = named[1] + (f"|{named[2]}" if named[2] else "")
    return ("" if GLOBAL in request.capabilities else container), link_name


def lookup_key(container: str, link_name: str) -> tuple[str, str]:
    """The subscription a source-less attach names (Qpid JMS's unsubscribe): by its link name,
    ``SUB|global`` for a global shared one (the hint Qpid JMS also sends, as desired
    capabilities of the link, python-qpid-proton cannot read)."""
    return ("" if link_name.endswith("|global") else container), link_name


def read_terminus(terminus: Terminus) -> TerminusRequest:
    """Gather the facts of a remote terminus (``link.remote_source`` or ``remote_target``)."""
    return TerminusRequest(
        address=terminus.address,
        dynamic=bool(terminus.dynamic),
        capabilities=capabilities_of(terminus),
        durable=terminus.durability != Terminus.NONDURABLE
        and terminus.expiry_policy == Terminus.EXPIRE_NEVER,
        copy=terminus.distribution_mode == Terminus.DIST_MODE_COPY,
        coordinator=terminus.type == Terminus.COORDINATOR,
    )


def refuse(link: Link, condition: str, description: str) -> None:
    """Refuse an attach: reply with a null terminus on our side, then detach closed."""
    if link.is_sender:
        link.source.type = Terminus.UNSPECIFIED
        link.target.copy(link.remote_target)
    else:
        link.target.type = Terminus.UNSPECIFIED
        link.source.copy(link.remote_source)
    link.open()
    link.condition = Condition(condition, description)
    link.close()
    log.warning("refused link %r: event=refusal reason=%s link=%r connection=%s detail=%r",
                link.name, condition, link.name, getattr(link.connection, "_filtex_identity", "?"),
                description)
