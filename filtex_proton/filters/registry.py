"""The one table of filter types, and the decoder that walks described values.

Every type is one :class:`FilterType` row in :data:`FILTER_TYPES`: its canonical
symbolic descriptor, its numeric (ulong) descriptor, any alias symbols, the
capabilities that announce it, and either a leaf decoder or a group rule.
Adding a filter type is adding a row.

:func:`decode_filter` decodes nested groups with an explicit stack and checks
the depth limit before going deeper, so a group nested 10,000 levels deep is
refused by the limit, not by a ``RecursionError``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from proton import Described, symbol, ulong

from filtex_proton.amqp.types import amqp_type_name
from filtex_proton.amqp.view import Section
from filtex_proton.errors import FilterError
from filtex_proton.filters.apache import (
    decode_direct,
    decode_headers,
    decode_no_local,
    decode_topic,
)
from filtex_proton.filters.base import DecodeContext, Filter, LeafDecoder, describe_descriptor
from filtex_proton.filters.constant import constant_decoder
from filtex_proton.filters.group import GroupOp, GroupRule
from filtex_proton.filters.options import NO_OPTIONS, StreamOptions
from filtex_proton.filters.property import property_decoder
from filtex_proton.filters.sql import sql_decoder
from filtex_proton.filters.stream import decode_stream_filter
from filtex_proton.filters.wire import check_value, max_nesting
from filtex_proton.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "ALL_CAPABILITIES", "FILTER_TYPES", "FilterType", "decode_filter", "display_descriptor",
    "lookup",
]

# Capabilities (spec §2.2; apache-filters §1-§3; the field's spellings: docs/SEMANTICS.md, Sources).
SQL: Final = "AMQP_FILTEX_SQL_V1_0"
PROP: Final = "AMQP_FILTEX_PROP_V1_0"
GROUP: Final = "AMQP_FILTEX_GROUP_V1_0"
FILTEX_ALL: Final = "AMQP_FILTEX_ALL_V1_0"  # an earlier draft's "all three groups"
JMS: Final = "APACHE.ORG:JMS_FILTERS"
SELECTOR: Final = "APACHE.ORG:SELECTOR"
NO_LOCAL: Final = "APACHE.ORG:NO_LOCAL"
LOGIC: Final = "APACHE.ORG:LOGIC_FILTERS"
LEGACY: Final = "APACHE.ORG:LEGACY_AMQP_EXCHANGE_FILTERS"

_APACHE: Final = 0x0000468C00000000


@dataclass(frozen=True, slots=True)
class FilterType:
    """One filter type: how it is named on the wire and how it is decoded."""

    name: str
    """The canonical symbolic descriptor."""
    code: int | None
    """The numeric descriptor, a ulong (domain-id << 32 | descriptor-id); None for a type
    named by symbol only."""
    decode: LeafDecoder | None = None
    group: GroupRule | None = None
    aliases: tuple[str, ...] = ()
    """Further symbols naming the same type (the Apache registry's jms- spellings)."""
    capabilities: tuple[str, ...] = field(default=())


def _group(name: str, code: int, op: GroupOp, capability: str, *,
           single: bool = False) -> FilterType:
    return FilterType(name, code, group=GroupRule(op, single), capabilities=(capability,))


def _property(name: str, code: int, section: Section) -> FilterType:
    return FilterType(name, code, property_decoder(section), capabilities=(PROP,))


FILTER_TYPES: Final[tuple[FilterType, ...]] = (
    # spec §3: group filters
    _group("amqp:all-filter", 0x100, GroupOp.ALL, GROUP),
    _group("amqp:any-filter", 0x101, GroupOp.ANY, GROUP),
    _group("amqp:not-filter", 0x102, GroupOp.NONE, GROUP),
    # spec §5: constant filters (no capability of their own: always on offer)
    FilterType("amqp:true-filter", 0x110, constant_decoder(True)),
    FilterType("amqp:false-filter", 0x111, constant_decoder(False)),
    # spec §6: SQL
    FilterType("amqp:sql-filter", 0x120, sql_decoder("amqp"), capabilities=(SQL,)),
    # spec §4: property filters
    _property("amqp:header-filter", 0x170, Section.HEADER),
    _property("amqp:delivery-annotations-filter", 0x171, Section.DELIVERY_ANNOTATIONS),
    _property("amqp:message-annotations-filter", 0x172, Section.MESSAGE_ANNOTATIONS),
    _property("amqp:properties-filter", 0x173, Section.PROPERTIES),
    _property("amqp:application-properties-filter", 0x174, Section.APPLICATION_PROPERTIES),
    _property("amqp:footer-filter", 0x178, Section.FOOTER),
    # apache-filters §1: legacy exchange bindings
    FilterType("apache.org:legacy-amqp-direct-binding:string", _APACHE | 0, decode_direct,
               capabilities=(LEGACY,)),
    FilterType("apache.org:legacy-amqp-topic-binding:string", _APACHE | 1, decode_topic,
               capabilities=(LEGACY,)),
    FilterType("apache.org:legacy-amqp-headers-binding:map", _APACHE | 2, decode_headers,
               capabilities=(LEGACY,)),
    # apache-filters §2: JMS
    FilterType("apache.org:no-local-filter:list", _APACHE | 3, decode_no_local,
               aliases=("apache.org:jms-no-local-filter:list",), capabilities=(JMS, NO_LOCAL)),
    FilterType("apache.org:selector-filter:string", _APACHE | 4, sql_decoder("jms"),
               aliases=("apache.org:jms-selector-filter:string",), capabilities=(JMS, SELECTOR)),
    # apache-filters §3: logical operators
    _group("apache.org:or-filter:list", _APACHE | 5, GroupOp.ANY, LOGIC),
    _group("apache.org:and-filter:list", _APACHE | 6, GroupOp.ALL, LOGIC),
    _group("apache.org:not-filter:list", _APACHE | 7, GroupOp.NONE, LOGIC, single=True),
    # RabbitMQ streams: symbolic only (RabbitMQ documents no numeric descriptor); no
    # capability, as RabbitMQ offers none
    FilterType("rabbitmq:stream-filter", None, decode_stream_filter),
)

_BY_NAME: Final[Mapping[str, FilterType]] = MappingProxyType(
    {name: t for t in FILTER_TYPES for name in (t.name, *t.aliases)}
)
_BY_CODE: Final[Mapping[int, FilterType]] = MappingProxyType(
    {t.code: t for t in FILTER_TYPES if t.code is not None})

#: Every capability to offer on the open and on filtering sources, in a stable order.
ALL_CAPABILITIES: Final[tuple[str, ...]] = tuple(
    dict.fromkeys([c for t in FILTER_TYPES for c in t.capabilities] + [FILTEX_ALL])
)


def lookup(descriptor: Any) -> FilterType | None:
    """The type a descriptor names: a symbol (or str), or a ulong (or any int).

    Lenient on purpose, for callers naming a type; a filter on the wire with a
    string descriptor is refused before it gets here (:func:`decode_filter`)."""
    if isinstance(descriptor, str):
        return _BY_NAME.get(str(descriptor))
    if isinstance(descriptor, int) and not isinstance(descriptor, bool):
        return _BY_CODE.get(int(descriptor))
    return None


def display_descriptor(descriptor: Any) -> str:
    """A descriptor for people: numeric ones also get the type's symbolic name."""
    text = describe_descriptor(descriptor)
    known = lookup(descriptor)
    if known is not None and not isinstance(descriptor, str):
        text += f" ({known.name})"
    return text


@dataclass(slots=True)
class _Pending:
    """A group whose members are being decoded."""

    rule: GroupRule
    value: Any
    ctx: DecodeContext
    member_values: Sequence[Any]
    members: list[Filter] = field(default_factory=list)


def _at(stack: Sequence[_Pending], error: FilterError) -> FilterError:
    """The error with where it happened inside nested groups prefixed to its reason.

    The stack holds every enclosing group, and each is decoding its member
    number ``len(members) + 1``; the path is built only when it is needed.
    """
    if not stack:
        return error
    path = " > ".join(f"{p.ctx.type_name} member {len(p.members) + 1}" for p in stack)
    return FilterError(f"{path}: {error.reason}", position=error.position, source=error.source,
                       key=error.key, descriptor=error.descriptor, limit=error.limit)


def _reserved_descriptor(descriptor: Any) -> FilterError:
    """AMQP 1.0 part 1 §1.5: a descriptor is a symbol or a ulong; every other type is reserved,
    so a string is not read as the symbol it spells nor a long or uint as the code it holds."""
    kind = amqp_type_name(descriptor)
    hint = ""
    if isinstance(descriptor, str):
        spelled = repr(describe_descriptor(descriptor))
    elif isinstance(descriptor, int) and not isinstance(descriptor, bool):
        spelled = f"0x{int(descriptor):016x}"
        hint = f" (send ulong(0x{int(descriptor):016X}); a plain Python int encodes as a long)"
    else:
        spelled = f"of type {kind}"
    return FilterError(
        f"the descriptor {spelled} is a {kind}; AMQP 1.0 part 1 §1.5 reserves every descriptor "
        f"type but symbol and ulong{hint}")


def _start(value: Any, limits: Limits, stack: list[_Pending],
           options: StreamOptions) -> Filter | None:
    """Decode a leaf, or push a group whose members come next (then ``None``)."""
    try:
        if not isinstance(value, Described):
            raise FilterError(f"expected a described filter, not a {amqp_type_name(value)}")
        if not isinstance(value.descriptor, (symbol, ulong)):
            raise _reserved_descriptor(value.descriptor)
        filter_type = lookup(value.descriptor)
        if filter_type is None:
            raise FilterError(f"unknown filter type {describe_descriptor(value.descriptor)}")
        ctx = DecodeContext(value.descriptor, filter_type.name, limits, options)
        if filter_type.group is None:
            assert filter_type.decode is not None
            return filter_type.decode(value.value, ctx)
        if len(stack) >= limits.max_group_depth:
            raise FilterError(
                f"groups nested more than {limits.max_group_depth} deep (limit max_group_depth)",
                limit=True,
            )
        members = filter_type.group.members(value.value, ctx)
    except FilterError as exc:
        raise _at(stack, exc) from None
    stack.append(_Pending(filter_type.group, value.value, ctx, members))
    return None


def decode_filter(value: Any, limits: Limits = DEFAULT_LIMITS,
                  options: StreamOptions = NO_OPTIONS) -> Filter:
    """Build the filter a described value denotes, nested groups included.

    ``options`` are the set's option entries, already read (a stream filter needs
    ``match_unfiltered``).

    Raises :class:`FilterError` for anything wrong with it: an unknown
    descriptor, a value of the wrong type, a limit exceeded (``limit=True``).
    """
    check_value(value, max_nesting(limits))
    stack: list[_Pending] = []
    built = _start(value, limits, stack, options)
    while stack:
        pending = stack[-1]
        if built is not None:
            pending.members.append(built)
        index = len(pending.members)
        if index < len(pending.member_values):
            built = _start(pending.member_values[index], limits, stack, options)
        else:
            stack.pop()
            built = pending.rule.build(pending.value, pending.members, pending.ctx)
    assert built is not None
    return built
