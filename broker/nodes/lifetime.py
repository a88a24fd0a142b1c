"""When a message expires, when it may first be delivered, and its priority, read once at the door.

AMQP 1.0 part 3 gives a message two ways to expire: ``header.ttl`` (§3.2.1, milliseconds from
when this broker took it) and ``properties.absolute-expiry-time`` (§3.2.4, a timestamp); the
earlier wins. ``header.priority`` (§3.2.1, default 4) orders delivery among the messages a
consumer may take, clamped to 0..9 as Artemis and ActiveMQ do. Artemis's message annotations
``x-opt-delivery-time`` (a timestamp or ms since the epoch) and ``x-opt-delivery-delay`` (ms from
arrival; the two together: the later) hold a message invisible until then, as Qpid JMS's
``setDeliveryDelay`` sends them.

Choices, recorded in docs/SEMANTICS.md: a ttl of 0 and an absolute-expiry-time of 0 mean no
expiry (JMS's ``setTimeToLive(0)``, Artemis); a field of the wrong type (a string ttl, a
described delay) is ignored rather than refused, since the door check has accepted the message
and a broker does not drop a message for a hint it cannot read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from filtex_proton.amqp import Section
from filtex_proton.amqp.view import MessageView

__all__ = ["COMMON", "DEFAULT_PRIORITY", "Lifetime", "lifetime_of"]

DEFAULT_PRIORITY: Final = 4
_MAX_PRIORITY: Final = 9
_SCHEDULE_HINT: Final = b"x-opt-delivery-"
"""Both schedule annotations' keys start so: a message without these bytes has neither."""
_DELIVERY_TIME: Final = "x-opt-delivery-time"
_DELIVERY_DELAY: Final = "x-opt-delivery-delay"


@dataclass(frozen=True, slots=True)
class Lifetime:
    """A message's expiry, visibility and priority, in ms since the epoch."""

    expires_ms: int | None = None
    """After this it is never delivered (None: never expires)."""
    visible_ms: int | None = None
    """Before this it is not delivered (None: at once)."""
    priority: int = DEFAULT_PRIORITY


COMMON: Final = Lifetime()
"""The lifetime of a message that sets none of the fields: no expiry, no schedule, the default
priority. :func:`lifetime_of` returns this very object for such a message, so a node tests
``lifetime is COMMON`` and keeps no object per message."""


def _millis(value: Any) -> int | None:
    """An int number of ms (timestamps and AMQP integers are ints); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return int(value)


def _expiry(ttl: Any, absolute: Any, arrival_ms: int) -> int | None:
    ttl, absolute = _millis(ttl), _millis(absolute)
    found = [when for when in (arrival_ms + ttl if ttl is not None and ttl > 0 else None,
                               absolute if absolute is not None and absolute > 0 else None)
             if when is not None]
    return min(found) if found else None


def _visible(view: MessageView, arrival_ms: int) -> int | None:
    at = _millis(view.field(Section.MESSAGE_ANNOTATIONS, _DELIVERY_TIME))
    delay = _millis(view.field(Section.MESSAGE_ANNOTATIONS, _DELIVERY_DELAY))
    found = [when for when in (at, arrival_ms + delay if delay is not None and delay > 0
                               else None)
             if when is not None and when > arrival_ms]
    return max(found) if found else None


def _priority(raw: Any) -> int:
    if raw is None or isinstance(raw, bool) or not isinstance(raw, int):
        return DEFAULT_PRIORITY
    return min(int(raw), _MAX_PRIORITY)


_NONE: Final[Mapping[str, Any]] = {}


def lifetime_of(view: MessageView, data: bytes, arrival_ms: int) -> Lifetime:
    """The lifetime of the message ``data`` (``view`` reads it) taken at ``arrival_ms``.
    Raises what the view raises for a section it cannot decode (the door check has decoded
    the ones read here). Two dict lookups and a byte search for the common message."""
    header = view.section(Section.HEADER) or _NONE
    properties = view.section(Section.PROPERTIES) or _NONE
    ttl, priority = header.get("ttl"), header.get("priority")
    absolute = properties.get("absolute-expiry-time")
    scheduled = _SCHEDULE_HINT in data
    if ttl is None and absolute is None and not scheduled and (
            priority is None or priority == DEFAULT_PRIORITY):
        return COMMON
    lifetime = Lifetime(_expiry(ttl, absolute, arrival_ms),
                        _visible(view, arrival_ms) if scheduled else None, _priority(priority))
    return COMMON if lifetime == COMMON else lifetime
