"""Source filter entries that are options for the node, not predicates on a message.

RabbitMQ's stream consumers send two such entries with their filters:
``rabbitmq:stream-offset-spec`` (where in the stream to start reading) and
``rabbitmq:stream-match-unfiltered`` (whether ``rabbitmq:stream-filter`` also
takes messages without a filter value). They are decoded here, once, into a
:class:`StreamOptions` that the filter set carries (``FilterSet.options``) and the
container reads; they are never evaluated per message.

RabbitMQ names them by symbol only (no numeric descriptor is documented); their
values are what RabbitMQ's AMQP 1.0 documentation lists (docs/SEMANTICS.md,
"Streams").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

from proton import Described, symbol, timestamp, ulong

from filtex_proton.amqp.types import Kind, amqp_type_name, kind_of
from filtex_proton.errors import FilterError

__all__ = [
    "MATCH_UNFILTERED", "NO_OPTIONS", "OFFSET_SPEC", "OPTION_TYPES", "OffsetKind", "OffsetSpec",
    "StreamOptions", "decode_option", "is_option", "parse_interval",
]

OFFSET_SPEC: Final = "rabbitmq:stream-offset-spec"
MATCH_UNFILTERED: Final = "rabbitmq:stream-match-unfiltered"

OffsetKind: TypeAlias = Literal["first", "last", "next", "offset", "timestamp", "interval"]


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a stream consumer starts.

    ``kind`` is ``first``, ``last`` or ``next`` (``value`` None); ``offset`` (``value`` the
    offset, 0 or more); ``timestamp`` (``value`` milliseconds since the epoch, as an AMQP
    timestamp); ``interval`` (``value`` seconds back from the moment of attach).
    """

    kind: OffsetKind
    value: int | None = None


@dataclass(frozen=True, slots=True)
class StreamOptions:
    """What a filter set asks of a stream node besides its predicates."""

    offset: OffsetSpec | None = None
    """None: the set named no offset (a stream starts at ``next``, RabbitMQ's default)."""
    match_unfiltered: bool = False
    """``rabbitmq:stream-filter`` also matches messages without ``x-stream-filter-value``."""


NO_OPTIONS: Final = StreamOptions()

#: RabbitMQ's units for ages (``x-max-age``): years, months, days, hours, minutes, seconds.
_UNITS: Final[Mapping[str, int]] = MappingProxyType({
    "Y": 365 * 86400, "M": 30 * 86400, "D": 86400, "h": 3600, "m": 60, "s": 1,
})
_INTERVAL: Final = re.compile(r"([0-9]{1,12})([YMDhms])")


def parse_interval(text: str) -> int | None:
    """Seconds in an interval such as ``1h`` or ``7D`` (RabbitMQ's units: Y M D h m s, case
    as written); None if ``text`` is not one."""
    match = _INTERVAL.fullmatch(text)
    if match is None:
        return None
    return int(match.group(1)) * _UNITS[match.group(2)]


_NAMED: Final[frozenset[str]] = frozenset({"first", "last", "next"})
_NEEDS: Final = ("'first', 'last' or 'next', an interval such as '1h' or '7D' (units Y M D h m "
                 "s), an offset (ulong or long, 0 or more) or a timestamp")


def _offset_spec(value: Any, options: StreamOptions) -> StreamOptions:
    if isinstance(value, timestamp):
        spec = OffsetSpec("timestamp", int(value))
    elif isinstance(value, ulong) or type(value) is int:  # ulong or long, as RabbitMQ reads it
        if int(value) < 0:
            raise FilterError(f"an offset is 0 or more, not {int(value)}")
        spec = OffsetSpec("offset", int(value))
    elif value is not None and kind_of(value) in (Kind.STRING, Kind.SYMBOL):
        text = str(value)
        if text in _NAMED:
            spec = OffsetSpec(text)  # type: ignore[arg-type]
        else:
            seconds = parse_interval(text)
            if seconds is None:
                raise FilterError(f"{text[:40]!r} is not {_NEEDS}")
            spec = OffsetSpec("interval", seconds)
    else:
        raise FilterError(f"an offset spec is {_NEEDS}, not a {amqp_type_name(value)}")
    return replace(options, offset=spec)


def _match_unfiltered(value: Any, options: StreamOptions) -> StreamOptions:
    if not isinstance(value, bool):
        raise FilterError(f"match-unfiltered is a boolean, not a {amqp_type_name(value)}")
    return replace(options, match_unfiltered=value)


OPTION_TYPES: Final[Mapping[str, Callable[[Any, StreamOptions], StreamOptions]]] = (
    MappingProxyType({OFFSET_SPEC: _offset_spec, MATCH_UNFILTERED: _match_unfiltered}))
"""Descriptor -> how its value updates the options (one row per option entry)."""


def is_option(value: Any) -> bool:
    """Whether a filter-set entry is an option (a described value with an option's symbol)."""
    return (isinstance(value, Described) and isinstance(value.descriptor, symbol)
            and str(value.descriptor) in OPTION_TYPES)


def decode_option(value: Described, options: StreamOptions) -> StreamOptions:
    """``options`` with one option entry applied; raises :class:`FilterError`."""
    return OPTION_TYPES[str(value.descriptor)](value.value, options)
