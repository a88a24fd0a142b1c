"""Property filters (spec §4): reference maps matched against one message section.

One class serves all six sections; what differs per section is data (the
:class:`SectionRules` table): which keys are allowed, the well-known fields and
their types for the composite header and properties sections, and the header's
defaults, which absent header fields take (§4.2.1).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from proton import ubyte, uint, ulong

from filtex_proton.amqp.types import (
    HEADER_DEFAULTS,
    HEADER_FIELDS,
    INTEGER_RANGES,
    PROPERTIES_FIELDS,
    Kind,
    amqp_type_name,
    kind_of,
)
from filtex_proton.amqp.view import MISSING, MessageView, Section
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import DecodeContext, EvaluationContext, FilterBase, LeafDecoder
from filtex_proton.filters.matching import (
    Matcher,
    Reference,
    check_entry_limit,
    read_reference,
    reference_matcher,
)
from filtex_proton.filters.wire import TEXT_KINDS, summarise

__all__ = ["SECTION_RULES", "PropertyFilter", "SectionRules", "property_decoder"]


def _integer_within(python_type: type, type_name: str) -> tuple[str, Callable[[Any], bool]]:
    """Any integer type whose value fits the field's type (§4.1.1's integer rule)."""
    low, high = INTEGER_RANGES[python_type]

    def check(value: Any) -> bool:
        return kind_of(value) is Kind.INTEGER and low <= int(value) <= high

    return f"an integer from {low} to {high} (AMQP {type_name})", check


def _kinds(description: str, *kinds: Kind) -> tuple[str, Callable[[Any], bool]]:
    allowed = frozenset(kinds)
    return description, lambda value: kind_of(value) in allowed


_ULONG_ID: Final = _integer_within(ulong, "ulong")[1]

#: What a reference value must be for each field type of HEADER_FIELDS/PROPERTIES_FIELDS.
_FIELD_TYPES: Final[Mapping[str, tuple[str, Callable[[Any], bool]]]] = {
    "boolean": _kinds("a boolean", Kind.BOOLEAN),
    "ubyte": _integer_within(ubyte, "ubyte"),
    "uint": _integer_within(uint, "uint"),
    "string": _kinds("a string or symbol", Kind.STRING, Kind.SYMBOL),
    "symbol": _kinds("a symbol or string", Kind.SYMBOL, Kind.STRING),
    "timestamp": _kinds("a timestamp", Kind.TIMESTAMP),
    "binary": _kinds("binary", Kind.BINARY),
    "*message-id": (
        "a message id (ulong, uuid, binary or string)",
        lambda value: kind_of(value) in (Kind.UUID, Kind.BINARY, Kind.STRING, Kind.SYMBOL)
        or _ULONG_ID(value),
    ),
}


def _text_key(value: Any) -> bool:
    return kind_of(value) in TEXT_KINDS


def _annotation_key(value: Any) -> bool:
    return kind_of(value) in TEXT_KINDS or isinstance(value, ulong)


@dataclass(frozen=True, slots=True)
class SectionRules:
    """What a property filter for one section accepts and how absent fields read."""

    section: Section
    keys: str
    """The allowed key types, for error messages."""
    key_ok: Callable[[Any], bool]
    fields: Mapping[str, str] | None = None
    """Well-known field name -> AMQP type, for the composite sections."""
    defaults: Mapping[str, Any] = field(default_factory=dict)


def _composite(section: Section, fields: tuple[tuple[str, str], ...],
               defaults: Mapping[str, Any]) -> SectionRules:
    return SectionRules(section, "field names (string or symbol)", _text_key,
                        MappingProxyType(dict(fields)), MappingProxyType(dict(defaults)))


def _annotations(section: Section) -> SectionRules:
    return SectionRules(section, "symbols or ulongs", _annotation_key)


SECTION_RULES: Final[Mapping[Section, SectionRules]] = MappingProxyType({
    Section.HEADER: _composite(Section.HEADER, HEADER_FIELDS, HEADER_DEFAULTS),
    Section.DELIVERY_ANNOTATIONS: _annotations(Section.DELIVERY_ANNOTATIONS),
    Section.MESSAGE_ANNOTATIONS: _annotations(Section.MESSAGE_ANNOTATIONS),
    Section.PROPERTIES: _composite(Section.PROPERTIES, PROPERTIES_FIELDS, {}),
    Section.APPLICATION_PROPERTIES: SectionRules(
        Section.APPLICATION_PROPERTIES, "strings", _text_key),
    Section.FOOTER: _annotations(Section.FOOTER),
})


class PropertyFilter(FilterBase):
    """TRUE when every reference entry matches the section's field (logical AND, §4)."""

    __slots__ = ("defaults", "entries", "references", "section")

    def __init__(self, descriptor: Any, value: Any, type_name: str, section: Section,
                 entries: tuple[tuple[Any, Matcher], ...], defaults: Mapping[str, Any],
                 references: tuple[tuple[Any, Reference], ...]) -> None:
        super().__init__(descriptor, value, type_name)
        self.section = section
        self.entries = entries
        self.defaults = defaults
        self.references = references
        """The non-null entries, typed once (keyed as the view names the field): what the
        node matcher, the pushdown and Spark read, in the order of ``entries``."""

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        for key, matcher in self.entries:
            value = view.field(self.section, key)
            if value is MISSING:
                # §4: absent means the field's default where it has one, else NULL.
                value = self.defaults.get(key, MISSING)
            if not matcher(value):
                return False
        return True


def _check_entry(rules: SectionRules, key: Any, value: Any) -> None:
    if not rules.key_ok(key):
        raise FilterError(
            f"key {summarise(key)} is a {amqp_type_name(key)}; "
            f"{rules.section.value} keys are {rules.keys}"
        )
    if rules.fields is None:
        return
    type_name = rules.fields.get(str(key))
    if type_name is None:
        hint = difflib.get_close_matches(str(key).replace("_", "-"), rules.fields, n=1)
        suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
        known = ", ".join(rules.fields)
        raise FilterError(
            f"unknown {rules.section.value} field {str(key)!r}{suggestion}; known fields: {known}"
        )
    description, ok = _FIELD_TYPES[type_name]
    if value is not None and not ok(value):
        raise FilterError(
            f"{rules.section.value} field {str(key)!r} must be {description}, "
            f"not a {amqp_type_name(value)} {summarise(value)}"
        )


def _decode(rules: SectionRules, value: Any, ctx: DecodeContext) -> PropertyFilter:
    if not isinstance(value, dict):
        raise ctx.type_error(value, "a map")
    check_entry_limit(value, ctx.limits.max_property_entries, ctx.type_name)
    entries: list[tuple[Any, Matcher]] = []
    references: list[tuple[Any, Reference]] = []
    for key, reference in value.items():
        _check_entry(rules, key, reference)
        if reference is None:
            continue  # a NULL reference matches anything (§4.1.1): nothing to evaluate
        try:
            typed = read_reference(reference)
            matcher = reference_matcher(typed)
        except FilterError as exc:
            raise FilterError(f"entry {summarise(key)}: {exc.reason}") from None
        # Composite sections are keyed by canonical (plain str) names in the view.
        view_key = str(key) if rules.fields is not None else key
        entries.append((view_key, matcher))
        references.append((view_key, typed))
    return PropertyFilter(ctx.descriptor, value, ctx.type_name, rules.section, tuple(entries),
                          rules.defaults, tuple(references))


def property_decoder(section: Section) -> LeafDecoder:
    """The registry's decoder for the property filter of ``section``."""
    rules = SECTION_RULES[section]

    def decode(value: Any, ctx: DecodeContext) -> PropertyFilter:
        return _decode(rules, value, ctx)

    return decode
