"""What a peer's source or target asks of the broker, read once at attach.

Proton presents a terminus as setters/getters plus ``proton.Data`` fields; the
broker needs a handful of facts (address, dynamic, topic capability, durable
subscription, browse) to pick a node, so they are gathered here into one
plain value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from proton import Array, Terminus

__all__ = ["TerminusRequest", "capabilities_of", "read_terminus"]

TOPIC: Final = "topic"
"""The Qpid JMS node capability for a topic (publish/subscribe) node."""
QUEUE: Final = "queue"
TEMPORARY_TOPIC: Final = "temporary-topic"


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
