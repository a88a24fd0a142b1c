"""The value matching rules of spec §4.1, compiled once per reference value.

A property filter holds *reference values*; a message holds *field values*.
:func:`compile_reference` turns a reference value into a :data:`Matcher`, a
function of one field value, at attach time, so that modifiers are parsed,
unknown modifiers refused and map entries sorted out before the first message.

A field value of :data:`~filtex_proton.amqp.view.MISSING` or ``None`` is NULL.
A matcher answers TRUE or FALSE only: values that cannot be compared simply do
not match (§4.1: a reference value matches *if* one of the rules holds).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from proton import Described, float32

from filtex_proton.amqp.bid import as_decimal
from filtex_proton.amqp.types import Kind, kind_of
from filtex_proton.amqp.view import MISSING
from filtex_proton.errors import FilterError
from filtex_proton.filters.wire import (
    TEXT_KINDS,
    UNDESCRIBED_ANY,
    integer_in_range,
    summarise,
)

__all__ = [
    "Matcher", "Reference", "TextPattern", "TypedReference", "as_float32", "check_entry_limit",
    "compile_reference", "count_entries", "read_reference", "reference_matcher", "same_key",
    "unwrap",
]

Matcher = Callable[[Any], bool]

_NUMBER: Final = frozenset({Kind.INTEGER, Kind.FLOAT})
_FLOAT32: Final = struct.Struct("<f")


def _always(field: Any) -> bool:
    return True


def unwrap(value: Any) -> Any:
    """The base value of a described value (§4.1.5), however deeply described."""
    while isinstance(value, Described):
        value = value.value
    return value


def _kind(value: Any) -> Kind | None:
    """The kind of a (base) field value, ``None`` for NULL or what is no AMQP value."""
    if value is None or value is MISSING:
        return None
    try:
        return kind_of(value)
    except TypeError:
        return None


def as_float32(x: float) -> float | None:
    """``x`` rounded to single precision, ``None`` when out of its range (§4.1.1's float
    rule; the Spark translation rounds its references with it too)."""
    try:
        result: float = _FLOAT32.unpack(_FLOAT32.pack(x))[0]
    except OverflowError:
        return None
    return result


def _float_equal(ref: Any, field: Any) -> bool:
    """§4.1.1 floating-point rule: compare as floating point, within both ranges.

    A single-precision operand makes the comparison happen in single precision,
    so that a double ``0.1`` matches the float ``0.1`` a Java client sends.
    """
    a, b = float(ref), float(field)
    if isinstance(ref, float32) or isinstance(field, float32):
        a32, b32 = as_float32(a), as_float32(b)
        if a32 is None or b32 is None:
            return False
        a, b = a32, b32
    return a == b


def _numeric_matcher(ref: Any, ref_kind: Kind) -> Matcher:
    """§4.1.1 bullets 2-5 for integers and floating-point numbers."""
    if ref_kind is Kind.INTEGER:
        exact = int(ref)

        def match_integer(field: Any) -> bool:
            field = unwrap(field)
            kind = _kind(field)
            if kind is Kind.INTEGER:
                return int(field) == exact and integer_in_range(field)
            if kind is Kind.FLOAT:
                return _float_equal(ref, field)
            return False

        return match_integer

    def match_float(field: Any) -> bool:
        field = unwrap(field)
        kind = _kind(field)
        if kind is Kind.FLOAT or (kind is Kind.INTEGER and integer_in_range(field)):
            return _float_equal(ref, field)
        return False

    return match_float


def _text_matcher(text: str, test: Callable[[str], bool] | None = None) -> Matcher:
    """String/symbol equivalence (§4.1.1 bullet 6), or a modifier's ``test``."""

    def match_text(field: Any) -> bool:
        field = unwrap(field)
        if _kind(field) not in TEXT_KINDS:
            return False
        value = str(field)
        return value == text if test is None else test(value)

    return match_text


@dataclass(frozen=True, slots=True)
class TextPattern:
    """A string or symbol reference with its §4.1.1 modifier read once, at decode: the
    field's text must equal (``&&`` escapes a leading '&'), start with (``&p:``) or end
    with (``&s:``) ``text``. Every reader (evaluation, the node matcher, the pushdown,
    Spark) takes this instead of looking at the '&' again."""

    how: Literal["exact", "prefix", "suffix"]
    text: str


@dataclass(frozen=True, slots=True)
class TypedReference:
    """Any other reference value, matched by its type's rules (§4.1.1-§4.1.5)."""

    value: Any


Reference: TypeAlias = TextPattern | TypedReference


def read_reference(ref: Any, *, modifiers: bool = True) -> Reference:
    """A non-null reference value, typed. ``modifiers=False`` reads a string starting with
    '&' literally (the legacy headers binding has no modifiers); a symbol is always
    literal. Raises :class:`FilterError` for an unknown modifier."""
    kind = kind_of(ref)
    if kind not in TEXT_KINDS:
        return TypedReference(ref)
    text = str(ref)
    if kind is not Kind.STRING or not modifiers or not text.startswith("&"):
        return TextPattern("exact", text)
    if text.startswith("&&"):
        return TextPattern("exact", text[1:])
    if text.startswith("&p:"):
        return TextPattern("prefix", text[3:])
    if text.startswith("&s:"):
        return TextPattern("suffix", text[3:])
    raise FilterError(
        f"unknown modifier in {summarise(text)}: a string starting with '&' must be "
        "'&p:prefix', '&s:suffix' or '&&' followed by the literal text"
    )


def _pattern_matcher(pattern: TextPattern) -> Matcher:
    text = pattern.text
    if pattern.how == "prefix":
        return _text_matcher(text, lambda value: value.startswith(text))
    if pattern.how == "suffix":
        return _text_matcher(text, lambda value: value.endswith(text))
    return _text_matcher(text)


def _same_kind_matcher(ref: Any, ref_kind: Kind) -> Matcher:
    """§4.1.1 bullet 2: same type and value (booleans, timestamps, chars, uuids, binary)."""

    def match_same(field: Any) -> bool:
        field = unwrap(field)
        return _kind(field) is ref_kind and bool(field == ref)

    return match_same


def _decimal_matcher(ref: Any) -> Matcher:
    """Decimals match decimals of any width by exact value; NaN matches nothing."""
    expected = as_decimal(ref)

    def match_decimal(field: Any) -> bool:
        field = unwrap(field)
        if _kind(field) is not Kind.DECIMAL:
            return False
        value = as_decimal(field)
        return not value.is_nan() and not expected.is_nan() and value == expected

    return match_decimal


def key_class(key: Any) -> Kind:
    """Keys of these kinds name the same map entry (§4.1.1's equivalences for keys)."""
    kind = kind_of(key)
    return Kind.STRING if kind is Kind.SYMBOL else kind


def same_key(ref_key: Any, ref_class: Kind, field_key: Any) -> bool:
    """Whether a message map key is the reference key: string = symbol, any integer type."""
    try:
        field_class = key_class(field_key)
    except TypeError:
        return False
    return field_class is ref_class and bool(field_key == ref_key)


def _lookup(entries: Mapping[Any, Any], ref_key: Any, ref_class: Kind) -> Any:
    """The entry for ``ref_key``, type-aware (Python's ``1 == True == 1.0`` is not AMQP's)."""
    for field_key, field_value in entries.items():
        if same_key(ref_key, ref_class, field_key):
            return field_value
    return MISSING


def _typed_index(entries: Mapping[Any, Any]) -> dict[tuple[Kind, Any], Any]:
    """The entries keyed by (key class, key): one pass, then one lookup per reference key."""
    index: dict[tuple[Kind, Any], Any] = {}
    for field_key, field_value in entries.items():
        try:
            index.setdefault((key_class(field_key), field_key), field_value)
        except TypeError:  # not an AMQP value: no reference key names it
            continue
    return index


#: Above this many (reference keys x message entries), a map is indexed instead of scanned.
_SCAN_LIMIT: Final = 64


def _map_matcher(entries: list[tuple[Any, Kind, Matcher]]) -> Matcher:
    """§4.1.2: every non-NULL reference entry present by key and matching.

    Keys are compared type-aware, so a lookup is a scan of the message map; for
    many reference keys and a big map (a hostile message) the map is indexed
    once instead, so that the time stays linear in the message's size.
    """

    def match_map(field: Any) -> bool:
        field = unwrap(field)
        if not isinstance(field, Mapping):
            return False
        if len(entries) > 1 and len(entries) * len(field) > _SCAN_LIMIT:
            index = _typed_index(field)
            for key, cls, matcher in entries:
                value = index.get((cls, key), MISSING)
                if value is MISSING or not matcher(value):
                    return False
            return True
        for key, cls, matcher in entries:
            value = _lookup(field, key, cls)
            if value is MISSING or not matcher(value):
                return False
        return True

    return match_map


def _list_matcher(items: list[Matcher]) -> Matcher:
    """§4.1.3: every reference element present at its position and matching."""

    def match_list(field: Any) -> bool:
        field = unwrap(field)
        if not isinstance(field, list) or len(field) < len(items):
            return False
        return all(m(v) for m, v in zip(items, field, strict=False))

    return match_list


def _array_matcher(descriptor: Any, items: list[Matcher]) -> Matcher:
    """§4.1.4: same size, element by element; a described array's descriptor must agree."""

    def match_array(field: Any) -> bool:
        field = unwrap(field)
        if _kind(field) is not Kind.ARRAY or len(field.elements) != len(items):
            return False
        if (
            descriptor is not UNDESCRIBED_ANY
            and field.descriptor is not UNDESCRIBED_ANY
            and not same_descriptor(descriptor, field.descriptor)
        ):
            return False
        return all(m(v) for m, v in zip(items, field.elements, strict=True))

    return match_array


def same_descriptor(a: Any, b: Any) -> bool:
    """Descriptors are equal when both are the same symbol or the same number."""
    try:
        return key_class(a) is key_class(b) and bool(a == b)
    except TypeError:
        return False


def _described_matcher(descriptor: Any, inner: Matcher) -> Matcher:
    """§4.1.5: the base type's rules; when both sides are described the descriptors
    must also agree (the descriptor is the type's identity)."""

    def match_described(field: Any) -> bool:
        if isinstance(field, Described):
            if not same_descriptor(descriptor, field.descriptor):
                return False
            field = field.value  # one level: the reference may itself wrap a described value
        return inner(field)

    return match_described


def compile_reference(ref: Any, *, modifiers: bool = True) -> Matcher:
    """The matcher for one reference value (§4.1.1-§4.1.5).

    ``modifiers=False`` reads strings starting with '&' literally (the legacy
    headers binding has no modifiers). Raises :class:`FilterError` for an
    unknown modifier. Recursion follows the value's nesting, which the caller
    has bounded with :func:`count_entries` and the property-entry limit.
    """
    if ref is None:
        return _always  # §4.1.1 bullet 1: a NULL reference matches anything
    return reference_matcher(read_reference(ref, modifiers=modifiers), modifiers=modifiers)


def reference_matcher(reference: Reference, *, modifiers: bool = True) -> Matcher:
    """The matcher for a reference already read (:func:`read_reference`); ``modifiers``
    applies to the strings nested in it."""
    if isinstance(reference, TextPattern):
        return _pattern_matcher(reference)
    ref = reference.value
    kind = kind_of(ref)
    if kind in _NUMBER:
        return _numeric_matcher(ref, kind)
    if kind is Kind.DECIMAL:
        return _decimal_matcher(ref)
    if kind is Kind.MAP:
        entries = [
            (key, key_class(key), compile_reference(value, modifiers=modifiers))
            for key, value in ref.items()
            if value is not None  # §4.1.2: NULL-valued reference entries are not looked up
        ]
        return _map_matcher(entries)
    if kind is Kind.LIST:
        return _list_matcher([compile_reference(v, modifiers=modifiers) for v in ref])
    if kind is Kind.ARRAY:
        items = [compile_reference(v, modifiers=modifiers) for v in ref.elements]
        return _array_matcher(ref.descriptor, items)
    if kind is Kind.DESCRIBED:
        return _described_matcher(ref.descriptor, compile_reference(ref.value, modifiers=modifiers))
    return _same_kind_matcher(ref, kind)


def count_entries(value: Any) -> int:
    """Entries in a reference value, counted through maps, lists, arrays and
    described values; a scalar counts as one. Iterative: it runs before anything
    recurses over the value, so that the property-entry limit can refuse it."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        total += 1
        kind = _kind(item)
        if kind is Kind.MAP:
            stack.extend(item.values())
        elif kind is Kind.LIST:
            stack.extend(item)
        elif kind is Kind.ARRAY:
            stack.extend(item.elements)
        elif kind is Kind.DESCRIBED:
            total -= 1  # a described value is one entry, not two
            stack.append(item.value)
    return total


def check_entry_limit(reference: Mapping[Any, Any], limit: int, what: str) -> None:
    """Refuse a reference map holding more than ``limit`` entries, nested ones included
    (spec §7.1; limit ``max_property_entries``). Stops counting at the limit."""
    total = 0
    for value in reference.values():
        total += count_entries(value)
        if total > limit:
            raise FilterError(
                f"{what} has more than {limit} entries (limit max_property_entries)", limit=True
            )
