"""What a link requires of a message, as index atoms, and how a field's value is tested.

A filter set is turned (:mod:`filtex_proton.matcher.decompose`) into a *condition*: a
disjunction of conjunctions of atoms, each atom a requirement on one message field
(equality with some keys, a prefix, a numeric range, null or not). The index
(:mod:`filtex_proton.matcher.index`) files each conjunction under one of its atoms and
tests the others with :func:`holds`. Values are compared by *keys*: values the filter's
rules call equal get the same key, so one dict lookup finds every link that wants a value.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from proton import Described, symbol

from filtex_proton.amqp.types import HEADER_DEFAULTS, Kind, kind_of
from filtex_proton.amqp.view import MISSING, Section

__all__ = [
    "ALWAYS", "ANCHOR_RANK", "NEVER", "NUMBER_KINDS", "TEXT_KINDS", "Atom", "Condition",
    "FieldEquals", "FieldExists", "FieldNotNull", "FieldNull", "FieldPrefix", "FieldRange",
    "FieldRef", "double_value", "holds", "number_value", "text_value", "value_key", "with_default",
]

_FLOAT32: Final = struct.Struct("<f")
TEXT_KINDS: Final = frozenset({Kind.STRING, Kind.SYMBOL})
NUMBER_KINDS: Final = frozenset({Kind.INTEGER, Kind.FLOAT, Kind.DECIMAL, Kind.TIMESTAMP})


@dataclass(frozen=True, slots=True)
class FieldRef:
    """A message field as a filter reads it.

    ``rules`` says whose value rules apply: ``"sql"`` (SQL and JMS: described
    values compare with nothing) or ``"property"`` (property filters and the
    headers binding: described values are unwrapped, §4.1.5, and numbers
    compare in single precision when either side is a float).
    """

    section: Section
    key: Any
    rules: Literal["sql", "property"] = "sql"


@dataclass(frozen=True, slots=True)
class FieldEquals:
    """The field's value has one of ``keys`` (see :func:`value_key`)."""

    field: FieldRef
    keys: frozenset[Hashable]


@dataclass(frozen=True, slots=True)
class FieldPrefix:
    """The field's value is a string or symbol starting with ``prefix``."""

    field: FieldRef
    prefix: str


@dataclass(frozen=True, slots=True)
class FieldRange:
    """The field's value is a number (or timestamp) whose double lies in [low, high].

    Bounds are inclusive even for ``<`` and ``>``: the double of a value can
    equal the double of a bound the exact value lies beyond.
    """

    field: FieldRef
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True, slots=True)
class FieldNull:
    """The field is absent or null (after the header's defaults)."""

    field: FieldRef


@dataclass(frozen=True, slots=True)
class FieldNotNull:
    """The field has a non-null value (after the header's defaults)."""

    field: FieldRef


@dataclass(frozen=True, slots=True)
class FieldExists:
    """The field is in the message (a map entry holding null counts)."""

    field: FieldRef


Atom: TypeAlias = FieldEquals | FieldPrefix | FieldRange | FieldNull | FieldNotNull | FieldExists
Condition: TypeAlias = tuple[tuple[Atom, ...], ...]
"""Alternatives, each a conjunction of atoms: ``()`` is never, ``((),)`` is always."""

ALWAYS: Final[Condition] = ((),)
NEVER: Final[Condition] = ()

# Which kind of atom is the broader (lowest first): the order of an entry's other atoms, and
# the anchor among atoms whose buckets cost the same (NodeMatcher._cost).
ANCHOR_RANK: Final[dict[type, int]] = {
    FieldEquals: 0, FieldPrefix: 1, FieldRange: 2, FieldNull: 3, FieldExists: 4, FieldNotNull: 5,
}


# ------------------------------------------------------------------------------ value keys


def _round32(x: float) -> float:
    """``x`` in single precision, or ``x`` itself when it is beyond single's range."""
    try:
        result: float = _FLOAT32.unpack(_FLOAT32.pack(x))[0]
    except OverflowError:
        return x
    return result


def double_value(value: Any, kind: Kind) -> float:
    """The double nearest a number's exact value (monotone: the order is kept)."""
    if kind is Kind.FLOAT:
        return float(value)
    if kind is Kind.DECIMAL:
        from filtex_proton.amqp.bid import as_decimal

        exact = as_decimal(value)
        return math.nan if exact.is_nan() else float(exact)
    return float(int(value))


def value_key(value: Any, rules: Literal["sql", "property"]) -> Hashable | None:
    """The key a value is found under; ``None`` when it equals nothing indexable.

    Values the rules call equal get the same key (string = symbol; every
    numeric type by its double under SQL, its single-precision rounding under
    the property rules); the converse need not hold, the evaluation decides.
    """
    if value is None:
        return None
    if rules == "property":
        while isinstance(value, Described):
            value = value.value
    elif isinstance(value, Described):
        return None
    kind = kind_of(value)
    if kind in TEXT_KINDS:
        return ("s", str(value))
    if kind is Kind.BOOLEAN:
        return ("b", bool(value))
    if rules == "sql":
        if kind in NUMBER_KINDS:
            number = double_value(value, kind)
            return None if math.isnan(number) else ("n", number)
        return None
    if kind is Kind.INTEGER or kind is Kind.FLOAT:
        number = float(value)
        return None if math.isnan(number) else ("f", _round32(number))
    return None


def text_value(value: Any, rules: Literal["sql", "property"]) -> str | None:
    if value is None:
        return None
    if rules == "property":
        while isinstance(value, Described):
            value = value.value
    tp = type(value)
    if tp is str or tp is symbol or (isinstance(value, str) and kind_of(value) in TEXT_KINDS):
        return str(value)
    return None


def number_value(value: Any) -> float | None:
    """The double of a SQL numeric value (timestamps included); None for others and NaN."""
    if value is None or isinstance(value, Described | bool):
        return None
    kind = kind_of(value)
    if kind not in NUMBER_KINDS:
        return None
    number = double_value(value, kind)
    return None if math.isnan(number) else number


def with_default(ref: FieldRef, raw: Any) -> Any:
    """The value filters see: an absent header field reads as its default, others as null."""
    if raw is not MISSING:
        return raw
    return HEADER_DEFAULTS.get(ref.key) if ref.section is Section.HEADER else None


def holds(atom: Atom, raw: Any) -> bool:
    """Whether the atom holds for a field whose message value is ``raw`` (MISSING if absent)."""
    ref = atom.field
    value = with_default(ref, raw)
    if type(atom) is FieldEquals:
        return value_key(value, ref.rules) in atom.keys
    if type(atom) is FieldPrefix:
        text = text_value(value, ref.rules)
        return text is not None and text.startswith(atom.prefix)
    if type(atom) is FieldRange:
        number = number_value(value)
        return number is not None and (atom.low is None or number >= atom.low) and (
            atom.high is None or number <= atom.high)
    if type(atom) is FieldNull:
        return value is None
    if type(atom) is FieldNotNull:
        return value is not None
    return raw is not MISSING
