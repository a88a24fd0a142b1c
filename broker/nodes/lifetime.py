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

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from filtex_proton.amqp import DecodeError, RawMessageView, Section
from filtex_proton.plugin import FilterMessage

__all__ = ["COMMON", "DEAD_LETTER_REASON", "DEFAULT_PRIORITY", "Lifetime", "dead_letter_lifetime",
           "lifetime_of", "now_ms", "recovered_lifetime", "scheduled_ms"]

DEFAULT_PRIORITY: Final = 4
_MAX_PRIORITY: Final = 9
_DELIVERY_TIME: Final = "x-opt-delivery-time"
_DELIVERY_DELAY: Final = "x-opt-delivery-delay"
DEAD_LETTER_REASON: Final = "x-opt-dead-letter-reason"
"""The message annotation a dead letter carries: why it was dead-lettered (``expired``,
``rejected``); see ``filtex_broker.nodes.registry``."""


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


LATEST_MS: Final = 2**62
"""The latest expiry or delivery time kept (146 million years from 1970): a later one, a ulong
past a long's range or a delay added to the arrival, is taken as this, so that every time fits
the durable store's signed 64-bit fields."""

_BY_PRIORITY: Final = tuple(COMMON if p == DEFAULT_PRIORITY else Lifetime(priority=p)
                            for p in range(_MAX_PRIORITY + 1))
"""One shared lifetime per priority for the messages that set nothing else."""


def _millis(value: Any) -> int | None:
    """An int number of ms (timestamps and AMQP integers are ints), at most :data:`LATEST_MS`;
    None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return min(int(value), LATEST_MS)


def _positive(value: Any) -> int | None:
    """A positive int number of ms; None for 0 (no expiry), a negative, or not an int."""
    if isinstance(value, int) and value > 0 and not isinstance(value, bool):
        return int(value)
    return None


def _expiry(ttl: Any, absolute: Any, arrival_ms: int) -> int | None:
    """The earlier of arrival + ttl and absolute-expiry-time, at most :data:`LATEST_MS`
    (straight-line: every message with a ttl passes here)."""
    after, at = _positive(ttl), _positive(absolute)
    if after is None:
        return None if at is None else min(at, LATEST_MS)
    when = arrival_ms + after
    if at is not None and at < when:
        when = at
    return min(when, LATEST_MS)


def _visible(annotations: Mapping[Any, Any], arrival_ms: int) -> int | None:
    at = _millis(annotations.get(_DELIVERY_TIME))
    delay = _millis(annotations.get(_DELIVERY_DELAY))
    found = [when for when in (at, arrival_ms + delay if delay is not None and delay > 0
                               else None)
             if when is not None and when > arrival_ms]
    return min(max(found), LATEST_MS) if found else None


def _priority(raw: Any) -> int:
    if raw is None or isinstance(raw, bool) or not isinstance(raw, int):
        return DEFAULT_PRIORITY
    return max(0, min(int(raw), _MAX_PRIORITY))


_NONE: Final[Mapping[str, Any]] = {}
_HEADER: Final = Section.HEADER  # an enum member read through its class costs ~60 ns a time
_PROPERTIES: Final = Section.PROPERTIES
_ANNOTATIONS: Final = Section.MESSAGE_ANNOTATIONS


def now_ms() -> int:
    """The wall clock in ms since the epoch: absolute-expiry-time and x-opt-delivery-time are
    wall-clock timestamps, so expiry and visibility are kept on that clock."""
    return int(time.time() * 1000)


def lifetime_of(message: FilterMessage, arrival_ms: int | None = None) -> Lifetime:
    """The lifetime of ``message``, taken at ``arrival_ms`` (now if None).

    Three section lookups for the common message (the door check decoded the sections);
    bytes that are not a message have the common lifetime.
    A dead letter (:data:`DEAD_LETTER_REASON` in its annotations) has outlived its lifetime: it
    keeps its priority but never expires or waits again, as RabbitMQ drops a dead-lettered
    message's expiration; without that a message whose absolute-expiry-time has passed would
    expire again in the dead-letter queue, for ever.
    """
    try:
        view = message.view
        header = view.section(_HEADER) or _NONE
        properties = view.section(_PROPERTIES) or _NONE
        annotations = view.section(_ANNOTATIONS) or _NONE
    except DecodeError:  # not a message (the door check keeps those out): nothing to honour
        return COMMON
    ttl, priority = header.get("ttl"), header.get("priority")
    absolute = properties.get("absolute-expiry-time")
    scheduled = bool(annotations) and (
        _DELIVERY_TIME in annotations or _DELIVERY_DELAY in annotations)
    if ttl is None and absolute is None and not scheduled and (
            priority is None or priority == DEFAULT_PRIORITY):
        return COMMON
    if annotations and DEAD_LETTER_REASON in annotations:
        return _BY_PRIORITY[_priority(priority)]
    at = now_ms() if arrival_ms is None else arrival_ms
    expires = _expiry(ttl, absolute, at)
    visible = _visible(annotations, at) if scheduled else None
    if expires is None and visible is None:
        return _BY_PRIORITY[_priority(priority)]
    return Lifetime(expires, visible, _priority(priority))


def scheduled_ms(message: FilterMessage, arrival_ms: int | None = None) -> int | None:
    """When ``message`` asks to be delivered first, if later than ``arrival_ms`` (now if None;
    the result None: at once), read from its annotations alone: for a node that does not
    schedule (a stream), which has to say so rather than deliver early. A dead letter asks for
    nothing (as in :func:`lifetime_of`)."""
    try:
        annotations = message.view.section(_ANNOTATIONS)
    except DecodeError:
        return None
    if not annotations or DEAD_LETTER_REASON in annotations or not (
            _DELIVERY_TIME in annotations or _DELIVERY_DELAY in annotations):
        return None
    return _visible(annotations, now_ms() if arrival_ms is None else arrival_ms)


def dead_letter_lifetime(lifetime: Lifetime) -> Lifetime:
    """The lifetime of a message's dead letter: its priority, never expiring or waiting (as
    :func:`lifetime_of` reads the dead letter's bytes, without reading them)."""
    return _BY_PRIORITY[lifetime.priority]


def recovered_lifetime(data: bytes, times: tuple[int | None, int | None] | None) -> Lifetime:
    """The lifetime of a message read back from the durable store: the expiry and visibility
    written when it arrived (``times``; None if it had neither), its priority read again."""
    if times is None:  # neither: a priority at most (a ttl would have been written)
        return lifetime_of(FilterMessage(data))
    header = RawMessageView(data).section(Section.HEADER) or _NONE
    return _shared(Lifetime(times[0], times[1], _priority(header.get("priority"))))


def _shared(lifetime: Lifetime) -> Lifetime:
    """The shared object for a lifetime that only sets a priority (or nothing): no object per
    message for those."""
    shared = _BY_PRIORITY[lifetime.priority]
    return shared if lifetime == shared else lifetime
