"""One archive row per message, built from the raw bytes the broker saw.

Never raises for bad bytes: what does not decode is archived with ``decode_error`` set, so
an archive keeps everything that passed through a node.
"""

from __future__ import annotations

import decimal
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import pyarrow as pa

from filtex_proton.amqp.bid import as_decimal
from filtex_proton.amqp.decode import DecodeError, decode_at, skip_value
from filtex_proton.amqp.message import RawMessageView
from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS, Kind, amqp_type_name, kind_of
from filtex_proton.amqp.view import Section
from filtex_proton.archive.layout import address_partition, arrival_date
from filtex_proton.archive.schema import (
    ARCHIVE_SCHEMA,
    DECIMAL_PRECISION,
    DECIMAL_SCALE,
    FIELD_COLUMNS,
    KEY_TYPES,
    LONG_MAX,
    LONG_MIN,
    MAP_COLUMNS,
    with_partitions,
)
from filtex_proton.sql import iso8601

__all__ = [
    "describe_typed",
    "message_row",
    "rows_to_table",
    "typed_key",
    "typed_value",
]

_DECIMAL_QUANTUM: Final = decimal.Decimal(1).scaleb(-DECIMAL_SCALE)
_DECIMAL_LIMIT: Final = decimal.Decimal(10) ** (DECIMAL_PRECISION - DECIMAL_SCALE)
_WIDE: Final = decimal.Context(prec=200, Emax=999_999, Emin=-999_999)

# Format codes that start a compound value (its bytes are archived, not its contents).
_COMPOUND_NAMES: Final[dict[int, str]] = {
    0x00: "described", 0x45: "list", 0xC0: "list", 0xD0: "list", 0xC1: "map", 0xD1: "map",
    0xE0: "array", 0xF0: "array",
}
_DECIMAL_NAMES: Final[dict[int, str]] = {0x74: "decimal32", 0x84: "decimal64", 0x94: "decimal128"}
_u32x2 = struct.Struct(">II").unpack_from
_MISSING: Final[Any] = object()
#: Kinds whose archived form needs the value's own encoding, not just the decoded value.
_NEEDS_ENCODING: Final = frozenset({Kind.DECIMAL, Kind.MAP, Kind.LIST, Kind.ARRAY,
                                    Kind.DESCRIBED})




def _exact_decimal(value: decimal.Decimal) -> decimal.Decimal | None:
    """The value in the decimal slot, or ``None`` when it does not fit exactly."""
    if not value.is_finite() or abs(value) >= _DECIMAL_LIMIT:
        return None
    scaled = value.quantize(_DECIMAL_QUANTUM, context=_WIDE)
    return scaled if scaled == value else None


def _empty(type_name: str) -> dict[str, Any]:
    return {"type": type_name, "boolean": None, "long": None, "decimal": None, "double": None,
            "string": None, "binary": None}


def typed_value(value: Any, encoded: bytes | None = None) -> tuple[dict[str, Any], bool]:
    """One value as a TYPED_VALUE row, and whether it is *complete*.

    ``encoded`` is the value's own AMQP encoding when the caller has it: its
    first byte tells decimal32/64/128 apart, and a compound value is archived
    as those bytes. A complete value is one a Spark Column expression can
    reason about exactly (not described; a decimal that fits the decimal slot).
    """
    code = encoded[0] if encoded else None
    if code is not None and code in _COMPOUND_NAMES:
        row = _empty(_COMPOUND_NAMES[code])
        row["binary"] = encoded
        return row, code != 0x00
    kind = kind_of(value)
    name = amqp_type_name(value)
    if kind is Kind.DECIMAL and code is not None:
        name = _DECIMAL_NAMES.get(code, name)
    row = _empty(name)
    return row, _FILL_SLOTS[kind](row, value)


# Each kind's slots of a TYPED_VALUE row: a filler sets them in ``row`` and says whether the
# value is complete (see typed_value).

def _fill_nothing(row: dict[str, Any], value: Any) -> bool:
    return True


def _fill_boolean(row: dict[str, Any], value: Any) -> bool:
    row["boolean"] = value
    return True


def _fill_integer(row: dict[str, Any], value: Any) -> bool:
    """Integers and timestamps: a long, or past it (a ulong above 2^63-1) decimal and double."""
    number = int(value)
    if LONG_MIN <= number <= LONG_MAX:
        row["long"] = number
    else:
        row["decimal"] = decimal.Decimal(number)
        row["double"] = float(number)
    return True


def _fill_float(row: dict[str, Any], value: Any) -> bool:
    row["double"] = float(value)
    return True


def _fill_decimal(row: dict[str, Any], value: Any) -> bool:
    """The exact text always; complete only when the decimal slot holds it exactly."""
    exact = as_decimal(value)
    row["string"] = str(exact)
    row["decimal"] = _exact_decimal(exact)
    if exact.is_finite():
        row["double"] = float(exact)
    return row["decimal"] is not None


def _fill_char(row: dict[str, Any], value: Any) -> bool:
    row["string"] = str(value)
    row["long"] = ord(value)
    return True


def _fill_uuid(row: dict[str, Any], value: Any) -> bool:
    row["binary"] = value.bytes
    row["string"] = str(value)
    return True


def _fill_binary(row: dict[str, Any], value: Any) -> bool:
    row["binary"] = bytes(value)
    return True


def _fill_text(row: dict[str, Any], value: Any) -> bool:
    """Strings and symbols: the text, and in ``long`` what it means compared with a
    timestamp (§6.3.2), read by the engine's own ISO 8601 code, so Spark never has to
    parse dates. A reading the engine fails on, or beyond a long: not complete."""
    row["string"] = text = str(value)
    try:
        millis = iso8601.to_millis(text)
    except Exception:  # the engine would fail the same way: leave it to the engine
        return False
    if millis is not None:
        if not LONG_MIN <= millis <= LONG_MAX:
            return False
        row["long"] = millis
    return True


def _fill_compound(row: dict[str, Any], value: Any) -> bool:
    """A map, list or array given without its encoding: encoded here."""
    from filtex_proton.amqp import encode_value

    row["binary"] = encode_value(value)
    return True


def _fill_described(row: dict[str, Any], value: Any) -> bool:
    """As a compound, but never complete: Spark cannot see what a descriptor means."""
    _fill_compound(row, value)
    return False


_FILL_SLOTS: Final[dict[Kind, Callable[[dict[str, Any], Any], bool]]] = {
    Kind.NULL: _fill_nothing, Kind.BOOLEAN: _fill_boolean, Kind.INTEGER: _fill_integer,
    Kind.TIMESTAMP: _fill_integer, Kind.FLOAT: _fill_float, Kind.DECIMAL: _fill_decimal,
    Kind.CHAR: _fill_char, Kind.UUID: _fill_uuid, Kind.BINARY: _fill_binary,
    Kind.STRING: _fill_text, Kind.SYMBOL: _fill_text, Kind.MAP: _fill_compound,
    Kind.LIST: _fill_compound, Kind.ARRAY: _fill_compound, Kind.DESCRIBED: _fill_described,
}


def typed_key(key: Any, encoded: bytes | None = None) -> str:
    """The typed-key string of a map key: ``"<AMQP type>:<text>"`` (docs/ARCHIVE.md)."""
    code = encoded[0] if encoded else None
    if code is not None and code in _COMPOUND_NAMES:
        return f"{_COMPOUND_NAMES[code]}:{encoded.hex()}"  # type: ignore[union-attr]
    kind = kind_of(key)
    name = amqp_type_name(key)
    if kind is Kind.DECIMAL and code is not None:
        name = _DECIMAL_NAMES.get(code, name)
    return f"{name}:{_KEY_TEXT[kind](key)}"


def _encoded_hex(key: Any) -> str:
    """A compound key given without its encoding: encoded here."""
    from filtex_proton.amqp import encode_value

    return encode_value(key).hex()


_KEY_TEXT: Final[dict[Kind, Callable[[Any], str]]] = {
    Kind.STRING: str, Kind.SYMBOL: str, Kind.CHAR: str, Kind.UUID: str,
    Kind.BOOLEAN: lambda key: "true" if key else "false",
    Kind.INTEGER: lambda key: str(int(key)), Kind.TIMESTAMP: lambda key: str(int(key)),
    Kind.FLOAT: lambda key: repr(float(key)),
    Kind.DECIMAL: lambda key: str(as_decimal(key)),
    Kind.BINARY: lambda key: bytes(key).hex(),
    Kind.NULL: lambda key: "",
    Kind.MAP: _encoded_hex, Kind.LIST: _encoded_hex, Kind.ARRAY: _encoded_hex,
    Kind.DESCRIBED: _encoded_hex,
}
"""The text of a typed key, by its kind."""


def _compound_items(buf: bytes, offset: int) -> tuple[int, int]:
    """Where the elements of the list or map at ``offset`` start, and how many there are."""
    code = buf[offset]
    if code in (0x40, 0x45):
        return offset + 1, 0
    if code in (0xC0, 0xC1):
        return offset + 3, buf[offset + 2] if buf[offset + 1] else 0
    if code in (0xD0, 0xD1):
        return offset + 9, _u32x2(buf, offset + 1)[1]
    raise DecodeError(f"expected a list or map, found format code 0x{code:02x}", offset)


def _map_entries(buf: bytes, offset: int,
                 decoded: Mapping[Any, Any]) -> dict[Any, tuple[bytes, Any, bytes]]:
    """A map section's entries with each key's and value's own encoding.

    Built the way the decoder builds its dict (``d[key] = value`` in order), so
    that duplicate keys collapse exactly as they do in the view the filters see:
    the first key object stays, the last value wins. Values are taken from the
    view's own ``decoded`` map (the very objects the filters see), keys decoded
    again only to find them.
    """
    pos, count = _compound_items(buf, offset)
    entries: dict[Any, tuple[bytes, Any, bytes]] = {}
    for _ in range(count // 2):
        key_start = pos
        key, pos = decode_at(buf, pos)
        value_start = pos
        pos = skip_value(buf, pos)
        previous = entries.get(key)
        key_bytes = buf[key_start:value_start] if previous is None else previous[0]
        value = decoded.get(key, _MISSING)
        if value is _MISSING:  # a key not equal to itself (NaN): decode the value here
            value = None if buf[value_start] in _COMPOUND_NAMES else decode_at(buf, value_start)[0]
        entries[key] = (key_bytes, value, buf[value_start:pos])
    return entries


def _field_encodings(buf: bytes, offset: int, names: tuple[str, ...]) -> dict[str, bytes]:
    """The encoding of each non-null field of the composite (list) section at ``offset``."""
    pos, count = _compound_items(buf, offset)
    found: dict[str, bytes] = {}
    for index in range(count):
        start = pos
        pos = skip_value(buf, pos)
        if index < len(names) and buf[start] != 0x40:
            found[names[index]] = buf[start:pos]
    return found


_HEADER_NAMES: Final = tuple(name for name, _ in HEADER_FIELDS)
_PROPERTIES_NAMES: Final = tuple(name for name, _ in PROPERTIES_FIELDS)


def _plain(value: Any, declared: str) -> Any:
    """A conforming header/properties value as its column holds it."""
    if declared == "binary":
        return bytes(value)
    if declared in ("string", "symbol"):
        return str(value)
    if declared == "boolean":
        return bool(value)
    return int(value)  # ubyte, uint, timestamp


_BLANK_ROW: Final[dict[str, Any]] = {
    "arrival_ms": 0, "sequence": 0, "regular": False, "decode_error": None,
    **{column: None for column, _, _ in FIELD_COLUMNS.values()},
    **{column: None for column in MAP_COLUMNS.values()},
    "nonconforming": None,
}
"""Every column NULL, in schema order; a row starts as a copy (cheaper than building it)."""

_SECTIONS: Final = tuple(Section)
"""Iterating an enum costs more than a tuple; this is once per archived message."""


def _blank_row(data: bytes, address: str, arrival_ms: int, sequence: int) -> dict[str, Any]:
    row = _BLANK_ROW.copy()
    row["arrival_ms"] = arrival_ms
    row["sequence"] = sequence
    row["raw"] = data
    row["long_address"] = None if address_partition(address) == address else address
    row["address"] = address
    row["date"] = arrival_date(arrival_ms)
    return row


def message_row(data: bytes, *, address: str, arrival_ms: int, sequence: int = 0) -> dict[str, Any]:
    """The archive row of one message: ARCHIVE_SCHEMA's columns plus the partition columns
    ``address``, ``date`` and ``regular``.

    Never raises for bad bytes: a message that does not decode gets a row with
    ``decode_error`` set, ``regular`` false and only ``raw`` and the arrival
    columns filled, so archives keep everything that passed through a node.
    ``sequence`` orders messages that arrived in the same millisecond.
    """
    buf = bytes(data)
    row = _blank_row(buf, address, arrival_ms, sequence)
    try:
        view = RawMessageView(buf)
        sections = {s: view.section(s) for s in _SECTIONS}  # decodes and validates them all
        offsets = {span.section: span.value for span in view.spans if span.section is not None}
    except DecodeError as exc:
        row["decode_error"] = str(exc)
        return row
    nonconforming: list[tuple[str, dict[str, Any]]] = []
    regular = _field_columns(row, buf, sections, offsets, nonconforming)
    regular &= _map_columns(row, buf, sections, offsets)
    row["nonconforming"] = nonconforming or None
    row["regular"] = regular
    return row


_COMPOSITES: Final = ((Section.HEADER, _HEADER_NAMES), (Section.PROPERTIES, _PROPERTIES_NAMES))


def _field_columns(row: dict[str, Any], buf: bytes, sections: Mapping[Section, Any],
                   offsets: Mapping[Section, int],
                   nonconforming: list[tuple[str, dict[str, Any]]]) -> bool:
    """The header's and properties' fields into their columns; a field not of its declared
    type goes to ``nonconforming`` instead. Whether the fields leave the row regular."""
    regular = True
    for section, names in _COMPOSITES:
        fields = sections[section]
        if not fields:
            continue
        encodings: dict[str, bytes] | None = None
        for name, value in fields.items():
            column, _, declared = FIELD_COLUMNS[name]
            if declared is not None and amqp_type_name(value) == declared:
                row[column] = _plain(value, declared)
                continue
            encoded = None
            if kind_of(value) in _NEEDS_ENCODING:  # the decimal's width, the compound's bytes
                if encodings is None:
                    encodings = _field_encodings(buf, offsets[section], names)
                encoded = encodings.get(name)
            if declared is None:  # message-id, correlation-id: any type, typed
                row[column], complete = typed_value(value, encoded)
                regular &= complete
            else:
                nonconforming.append((name, typed_value(value, encoded)[0]))
                regular = False
    return regular


def _map_columns(row: dict[str, Any], buf: bytes, sections: Mapping[Section, Any],
                 offsets: Mapping[Section, int]) -> bool:
    """The map sections into their columns as (typed key, typed value) entries. Whether
    they leave the row regular: every value complete, every key of a type its section
    allows, no two keys that print alike."""
    regular = True
    for section, column in MAP_COLUMNS.items():
        if sections[section] is None:
            continue
        allowed = KEY_TYPES[section]
        entries: list[tuple[str, dict[str, Any]]] = []
        seen: set[str] = set()
        found = _map_entries(buf, offsets[section], sections[section] or {})
        for key, (key_bytes, value, value_bytes) in found.items():
            text = typed_key(key, key_bytes)
            if text in seen:  # two keys that differ yet print alike (two NaNs)
                text = f"{text}#{len(entries)}"
                regular = False
            seen.add(text)
            typed, complete = typed_value(value, value_bytes)
            regular &= complete and text.partition(":")[0] in allowed
            entries.append((text, typed))
        row[column] = entries
    return regular


def rows_to_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows from :func:`message_row` as one table (partition columns included)."""
    return pa.Table.from_pylist(list(rows), schema=with_partitions(ARCHIVE_SCHEMA))


# Used by tests and tools that must know what a value is without Spark.
def describe_typed(row: Mapping[str, Any] | None) -> Any:
    """A TYPED_VALUE row back as a Python value of the right AMQP type, where possible."""
    if row is None:
        return None
    from proton import (
        byte,
        char,
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

    name = row["type"]
    makers: dict[str, Callable[[Any], Any]] = {
        "ubyte": ubyte, "ushort": ushort, "uint": uint, "ulong": ulong, "byte": byte,
        "short": short, "int": int32, "long": int, "timestamp": timestamp,
    }
    if name == "null":
        return None
    if name == "boolean":
        return row["boolean"]
    if name in makers:
        number = row["long"] if row["long"] is not None else int(row["decimal"])
        return makers[name](number)
    if name == "float":
        return float32(row["double"])
    if name == "double":
        return row["double"]
    if name.startswith("decimal"):
        return decimal.Decimal(row["string"])
    if name == "char":
        return char(row["string"])
    if name == "uuid":
        return uuid.UUID(bytes=row["binary"])
    if name == "binary":
        return row["binary"]
    if name == "string":
        return row["string"]
    if name == "symbol":
        return symbol(row["string"])
    return decode_at(row["binary"], 0)[0]  # map, list, array, described: their encoding
