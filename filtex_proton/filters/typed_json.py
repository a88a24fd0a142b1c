"""Typed JSON: AMQP values, messages and filter sets written by hand.

JSON has no ulong, symbol or timestamp, so a value that needs an AMQP type
says so with a one-key object, ``{"ulong": 5}``; plain JSON means string,
long, double, boolean, null, list and (string-keyed) map. The full format is
documented in docs/TYPED_JSON.md; :func:`to_json` writes what
:func:`from_json` reads, so printed filters can be pasted back.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import functools
import math
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from proton import (
    Array,
    Data,
    Described,
    byte,
    char,
    decimal32,
    decimal64,
    decimal128,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

from filtex_proton.amqp import bid
from filtex_proton.amqp.types import (
    HEADER_FIELDS,
    INTEGER_RANGES,
    PROPERTIES_FIELDS,
    Kind,
    amqp_type_name,
    kind_of,
)
from filtex_proton.amqp.view import DictMessageView, Section
from filtex_proton.filters.wire import UNDESCRIBED_ANY

__all__ = ["TypedJsonError", "filter_set_from_json", "from_json", "message_from_json", "to_json"]


class TypedJsonError(ValueError):
    """A JSON document that does not describe an AMQP value, message or filter set."""


_INTEGERS: Final[dict[str, type]] = {
    "ubyte": ubyte, "ushort": ushort, "uint": uint, "ulong": ulong,
    "byte": byte, "short": short, "int": int32, "long": int,
}
_DECIMALS: Final[dict[str, tuple[type, Callable[[decimal.Decimal], Any]]]] = {
    "decimal32": (decimal32, bid.encode_decimal32),
    "decimal64": (decimal64, bid.encode_decimal64),
    "decimal128": (decimal128, bid.encode_decimal128),
}
#: Array element type names -> proton's type codes.
_ARRAY_TYPES: Final[dict[str, int]] = {
    "null": Data.NULL, "boolean": Data.BOOL, "ubyte": Data.UBYTE, "ushort": Data.USHORT,
    "uint": Data.UINT, "ulong": Data.ULONG, "byte": Data.BYTE, "short": Data.SHORT,
    "int": Data.INT, "long": Data.LONG, "float": Data.FLOAT, "double": Data.DOUBLE,
    "decimal32": Data.DECIMAL32, "decimal64": Data.DECIMAL64, "decimal128": Data.DECIMAL128,
    "timestamp": Data.TIMESTAMP, "char": Data.CHAR, "uuid": Data.UUID, "binary": Data.BINARY,
    "string": Data.STRING, "symbol": Data.SYMBOL, "list": Data.LIST, "map": Data.MAP,
    "array": Data.ARRAY,
}
_ARRAY_TYPE_NAMES: Final[dict[int, str]] = {code: name for name, code in _ARRAY_TYPES.items()}


def _fail(what: str, raw: Any) -> TypedJsonError:
    text = repr(raw)
    return TypedJsonError(f"{what}: {text if len(text) <= 80 else text[:77] + '...'}")


def _integer(name: str, raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            raw = int(raw, 0)  # "0x468C00000004" is easier to read for descriptors
        except ValueError:
            raise _fail(f"not an integer for {name}", raw) from None
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise _fail(f"{name} needs an integer", raw)
    python_type = _INTEGERS[name]
    low, high = INTEGER_RANGES[python_type]
    if not low <= raw <= high:
        raise _fail(f"out of the range of {name} ({low}..{high})", raw)
    return python_type(raw)


def _floating(name: str, raw: Any) -> Any:
    if isinstance(raw, str) and raw in ("NaN", "Infinity", "-Infinity"):
        raw = float(raw.replace("Infinity", "inf"))
    if not isinstance(raw, int | float) or isinstance(raw, bool):
        raise _fail(f"{name} needs a number (or \"NaN\", \"Infinity\", \"-Infinity\")", raw)
    return float32(raw) if name == "float" else float(raw)


def _decimal(name: str, raw: Any) -> Any:
    if not isinstance(raw, str | int) or isinstance(raw, bool):
        raise _fail(f"{name} needs a decimal number written as a string", raw)
    try:
        value = decimal.Decimal(raw)
    except decimal.InvalidOperation:
        raise _fail(f"not a decimal number for {name}", raw) from None
    python_type, encode = _DECIMALS[name]
    try:
        return python_type(encode(value))
    except ValueError as exc:
        raise TypedJsonError(str(exc)) from None


def _timestamp(raw: Any) -> timestamp:
    if isinstance(raw, str):
        try:
            moment = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise _fail("timestamp needs milliseconds since 1970 or ISO 8601", raw) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        return timestamp((moment - epoch) // dt.timedelta(milliseconds=1))
    return timestamp(_integer("long", raw))


def _text(name: str, raw: Any) -> str:
    if not isinstance(raw, str):
        raise _fail(f"{name} needs a JSON string", raw)
    return raw


def _symbol(raw: Any) -> symbol:
    text = _text("symbol", raw)
    if not text.isascii():
        raise _fail("a symbol is ASCII only", raw)
    return symbol(text)


def _char(raw: Any) -> char:
    text = _text("char", raw)
    if len(text) != 1:
        raise _fail("char needs exactly one character", raw)
    return char(text)


def _uuid(raw: Any) -> uuid.UUID:
    try:
        return uuid.UUID(_text("uuid", raw))
    except ValueError:
        raise _fail("not a UUID", raw) from None


def _binary(raw: Any) -> bytes:
    try:
        return base64.b64decode(_text("binary", raw), validate=True)
    except binascii.Error:
        raise _fail("binary needs base64 text", raw) from None


def _map(raw: Any) -> dict[Any, Any]:
    if isinstance(raw, dict):
        return {key: from_json(value) for key, value in raw.items()}
    if isinstance(raw, list) and all(isinstance(p, list) and len(p) == 2 for p in raw):
        result: dict[Any, Any] = {}
        for key, value in raw:
            converted = from_json(key)
            try:
                result[converted] = from_json(value)
            except TypeError:
                raise _fail("this map key cannot be used", key) from None
        return result
    raise _fail("map needs an object or a list of [key, value] pairs", raw)


def _list(raw: Any) -> list[Any]:
    if not isinstance(raw, list):
        raise _fail("list needs a JSON array", raw)
    return [from_json(item) for item in raw]


def _array(raw: Any) -> Array:
    if not isinstance(raw, dict) or not {"type", "values"} <= raw.keys() <= {
        "type", "values", "descriptor"}:
        raise _fail('array needs {"type": ..., "values": [...]} (and maybe "descriptor")', raw)
    type_name, values = raw["type"], raw["values"]
    if type_name not in _ARRAY_TYPES or not isinstance(values, list):
        raise _fail("array type must be one of " + ", ".join(_ARRAY_TYPES), type_name)
    descriptor = _descriptor(raw["descriptor"]) if "descriptor" in raw else UNDESCRIBED_ANY
    elements = [_typed(type_name, v) if not isinstance(v, dict) else from_json(v) for v in values]
    return Array(descriptor, _ARRAY_TYPES[type_name], *elements)


def _null(raw: Any) -> None:
    if raw is not None:
        raise _fail("null needs null", raw)


def _boolean(raw: Any) -> bool:
    if not isinstance(raw, bool):
        raise _fail("boolean needs true or false", raw)
    return raw


_TYPED: Final[dict[str, Callable[[Any], Any]]] = {
    "null": _null,
    "boolean": _boolean,
    **{name: functools.partial(_integer, name) for name in _INTEGERS},
    "float": functools.partial(_floating, "float"),
    "double": functools.partial(_floating, "double"),
    **{name: functools.partial(_decimal, name) for name in _DECIMALS},
    "timestamp": _timestamp,
    "char": _char,
    "uuid": _uuid,
    "binary": _binary,
    "string": functools.partial(_text, "string"),
    "symbol": _symbol,
    "list": _list,
    "map": _map,
    "array": _array,
}


def _typed(type_name: str, raw: Any) -> Any:
    return _TYPED[type_name](raw)


def _descriptor(raw: Any) -> Any:
    """A descriptor: a JSON string is a symbol, a JSON integer a ulong."""
    if isinstance(raw, str):
        return _symbol(raw)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return _integer("ulong", raw)
    return from_json(raw)


def from_json(raw: Any) -> Any:
    """The AMQP value a parsed typed-JSON document denotes (see docs/TYPED_JSON.md)."""
    if raw is None or isinstance(raw, bool | str):
        return raw
    if isinstance(raw, int):
        return _integer("long", raw)
    if isinstance(raw, float):
        return raw
    if isinstance(raw, list):
        return [from_json(item) for item in raw]
    if isinstance(raw, dict):
        if len(raw) == 1:
            (name, inner), = raw.items()
            if name in _TYPED:
                return _typed(name, inner)
        if raw.keys() == {"descriptor", "value"}:
            return Described(_descriptor(raw["descriptor"]), from_json(raw["value"]))
        return _map(raw)
    raise _fail("not JSON", raw)


# ---- writing ---------------------------------------------------------------

def _plain_keys_ok(value: Mapping[Any, Any]) -> bool:
    """Whether a map can be written as a plain JSON object and read back the same."""
    if not all(type(key) is str for key in value):
        return False
    if len(value) == 1 and next(iter(value)) in _TYPED:
        return False
    return set(value) != {"descriptor", "value"}


def to_json(value: Any) -> Any:
    """Typed JSON for an AMQP value; ``from_json(to_json(v))`` gives ``v`` back."""
    return _WRITERS[kind_of(value)](value, amqp_type_name(value))


# One writer per kind, called with the value and its AMQP type name: within a kind only the
# type name changes what is written (a long and a double are plain JSON, their kin are not).

def _as_is(value: Any, name: str) -> Any:
    """null, boolean and string: JSON has them."""
    return value


def _integer_json(value: Any, name: str) -> Any:
    return int(value) if name == "long" else {name: int(value)}


def _float_json(value: Any, name: str) -> Any:
    if name == "double":
        return float(value) if math.isfinite(value) else {"double": _special(value)}
    return {"float": float(value) if math.isfinite(value) else _special(value)}


def _decimal_json(value: Any, name: str) -> Any:
    width = name if name in _DECIMALS else "decimal128"
    return {width: str(bid.as_decimal(value))}


def _text_json(value: Any, name: str) -> Any:
    """char and symbol: their type name says what the text is."""
    return {name: str(value)}


def _map_json(value: Any, name: str) -> Any:
    if _plain_keys_ok(value):
        return {key: to_json(item) for key, item in value.items()}
    return {"map": [[to_json(k), to_json(v)] for k, v in value.items()]}


def _array_json(value: Any, name: str) -> Any:
    body: dict[str, Any] = {
        "type": _ARRAY_TYPE_NAMES.get(value.type, str(value.type)),
        "values": [to_json(item) for item in value.elements],
    }
    if value.descriptor is not UNDESCRIBED_ANY:
        body["descriptor"] = to_json(value.descriptor)
    return {"array": body}


def _described_json(value: Any, name: str) -> Any:
    descriptor = value.descriptor
    written = str(descriptor) if kind_of(descriptor) is Kind.SYMBOL else to_json(descriptor)
    if isinstance(descriptor, ulong):
        written = int(descriptor)
    return {"descriptor": written, "value": to_json(value.value)}


_WRITERS: Final[dict[Kind, Callable[[Any, str], Any]]] = {
    Kind.NULL: _as_is,
    Kind.BOOLEAN: _as_is,
    Kind.STRING: _as_is,
    Kind.INTEGER: _integer_json,
    Kind.FLOAT: _float_json,
    Kind.DECIMAL: _decimal_json,
    Kind.TIMESTAMP: lambda value, name: {"timestamp": int(value)},
    Kind.CHAR: _text_json,
    Kind.SYMBOL: _text_json,
    Kind.UUID: lambda value, name: {"uuid": str(value)},
    Kind.BINARY: lambda value, name: {"binary": base64.b64encode(bytes(value)).decode("ascii")},
    Kind.LIST: lambda value, name: [to_json(item) for item in value],
    Kind.MAP: _map_json,
    Kind.ARRAY: _array_json,
    Kind.DESCRIBED: _described_json,
}
"""The writer of each kind; every Kind has one (the round-trip tests write a value of each)."""


def _special(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


# ---- messages and filter sets ----------------------------------------------

_FIELD_TYPES: Final[dict[Section, dict[str, str]]] = {
    Section.HEADER: dict(HEADER_FIELDS),
    Section.PROPERTIES: dict(PROPERTIES_FIELDS),
}
_ANNOTATIONS: Final = frozenset(
    {Section.DELIVERY_ANNOTATIONS, Section.MESSAGE_ANNOTATIONS, Section.FOOTER}
)


def _field_value(section: Section, name: str, raw: Any) -> Any:
    """A header/properties field: plain JSON takes the field's own type."""
    type_name = _FIELD_TYPES[section].get(name)
    if type_name is None:
        known = ", ".join(_FIELD_TYPES[section])
        raise TypedJsonError(f"{section.value} has no field {name!r}; its fields are: {known}")
    if isinstance(raw, dict) or raw is None:
        return from_json(raw)
    if type_name == "*message-id":
        return _integer("ulong", raw) if isinstance(raw, int) else from_json(raw)
    return _typed(type_name, raw)


def _section(section: Section, raw: Any) -> dict[Any, Any] | None:
    if raw is None:
        return None
    if section in _FIELD_TYPES:
        if not isinstance(raw, dict):
            raise _fail(f"{section.value} needs an object of field names", raw)
        return {name: _field_value(section, name, value) for name, value in raw.items()}
    if isinstance(raw, dict) and raw.keys() == {"map"}:
        return _map(raw["map"])
    if not isinstance(raw, dict):
        raise _fail(f"{section.value} needs an object (or {{\"map\": [[key, value], ...]}})", raw)
    key_type: Callable[[str], Any] = symbol if section in _ANNOTATIONS else str
    return {key_type(key): from_json(value) for key, value in raw.items()}


def message_from_json(raw: Any) -> DictMessageView:
    """A message view from ``{"header": {...}, "application-properties": {...}, ...}``.

    Keys of the annotation sections and the footer become symbols; header and
    properties fields take their AMQP types from plain JSON values.
    """
    if not isinstance(raw, dict):
        raise _fail("a message is a JSON object of sections", raw)
    names = {s.value: s for s in Section}
    unknown = set(raw) - set(names)
    if unknown:
        raise TypedJsonError(
            f"unknown section(s) {', '.join(sorted(unknown))}; sections are: {', '.join(names)}"
        )
    sections = {names[key]: _section(names[key], value) for key, value in raw.items()}
    return DictMessageView(
        header=sections.get(Section.HEADER),
        delivery_annotations=sections.get(Section.DELIVERY_ANNOTATIONS),
        message_annotations=sections.get(Section.MESSAGE_ANNOTATIONS),
        properties=sections.get(Section.PROPERTIES),
        application_properties=sections.get(Section.APPLICATION_PROPERTIES),
        footer=sections.get(Section.FOOTER),
    )


def filter_set_from_json(raw: Any) -> dict[str, Any]:
    """A filter set ``{"name": {"descriptor": ..., "value": ...}, ...}`` as Python values.

    Only the JSON is checked here; whether the filters are valid is for
    :func:`~filtex_proton.filterset.decode_filter_set` to say.
    """
    if not isinstance(raw, dict):
        raise _fail("a filter set is a JSON object of filter names", raw)
    return {name: from_json(value) for name, value in raw.items()}
