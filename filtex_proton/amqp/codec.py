"""A pure-Python decoder and encoder of AMQP 1.0 type encodings (AMQP 1.0 part 1, §1.2-§1.7).

Why our own: the broker must read a few fields of every message without
building a ``proton.Message`` (which hides absent fields behind defaults and
decodes everything), and must skip the body by its size fields alone.

Values are represented exactly as :mod:`filtex_proton.amqp.types` documents
(proton's marker classes, :class:`decimal.Decimal` for the decimal types).

Hostile input is expected: anything malformed raises :class:`DecodeError` and
nothing else. Every size and count is checked against the buffer before it is
trusted, nesting is bounded by :data:`MAX_DEPTH` (one Python frame per level,
so the interpreter's recursion limit is never approached), and no loop runs
more often than the buffer has bytes (zero-width array elements aside, which
are bounded by the buffer length too).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final, NoReturn

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
from proton._data import UNDESCRIBED

from filtex_proton.amqp.bid import (
    decode_decimal32,
    decode_decimal64,
    decode_decimal128,
    encode_decimal32,
    encode_decimal64,
    encode_decimal128,
)

__all__ = [
    "MAX_DEPTH",
    "UNDESCRIBED",
    "DecodeError",
    "decode_fields",
    "decode_value",
    "encode_value",
    "skip_value",
]

#: Compound values (lists, maps, arrays, described values) nested more than this are refused.
MAX_DEPTH: Final = 100


class DecodeError(ValueError):
    """Malformed AMQP encoded data: what is wrong (``reason``) and where (``offset``)."""

    def __init__(self, reason: str, offset: int) -> None:
        self.reason = reason
        self.offset = offset
        super().__init__(f"{reason} (at byte {offset})")

    def __reduce__(self) -> tuple[type[DecodeError], tuple[str, int]]:
        return (DecodeError, (self.reason, self.offset))


_Decoder = Callable[[bytes, int, int], tuple[Any, int]]

_i8 = struct.Struct(">b").unpack_from
_u16 = struct.Struct(">H").unpack_from
_i16 = struct.Struct(">h").unpack_from
_u32 = struct.Struct(">I").unpack_from
_i32 = struct.Struct(">i").unpack_from
_u64 = struct.Struct(">Q").unpack_from
_i64 = struct.Struct(">q").unpack_from
_f32 = struct.Struct(">f").unpack_from
_f64 = struct.Struct(">d").unpack_from
_u32x2 = struct.Struct(">II").unpack_from

# Proton's unsigned classes run a Python-level __init__ (a sign check); decoded
# values are in range by construction, so build them without it.
_int_new = int.__new__
_str_new = str.__new__
_float_new = float.__new__


# ----------------------------------------------------------------------------- decoding


def _bad_code(buf: bytes, pos: int, depth: int) -> NoReturn:
    raise DecodeError(f"unknown format code 0x{buf[pos - 1]:02x}", pos - 1)


def _null(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return None, pos


def _true(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return True, pos


def _false(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return False, pos


def _boolean(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    b = buf[pos]
    if b > 1:
        raise DecodeError(f"boolean octet must be 0x00 or 0x01, not 0x{b:02x}", pos)
    return b == 1, pos + 1


def _ubyte(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _int_new(ubyte, buf[pos]), pos + 1


def _ushort(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _int_new(ushort, _u16(buf, pos)[0]), pos + 2


def _uint(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _int_new(uint, _u32(buf, pos)[0]), pos + 4


def _smalluint(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _int_new(uint, buf[pos]), pos + 1


_UINT0: Final = _int_new(uint, 0)
_ULONG0: Final = _int_new(ulong, 0)


def _uint0(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _UINT0, pos


def _ulong(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _int_new(ulong, _u64(buf, pos)[0]), pos + 8


def _smallulong(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _int_new(ulong, buf[pos]), pos + 1


def _ulong0(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _ULONG0, pos


def _byte(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _int_new(byte, _i8(buf, pos)[0]), pos + 1


def _short(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _int_new(short, _i16(buf, pos)[0]), pos + 2


def _int(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _int_new(int32, _i32(buf, pos)[0]), pos + 4


def _smallint(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _int_new(int32, _i8(buf, pos)[0]), pos + 1


def _long(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _i64(buf, pos)[0], pos + 8


def _smalllong(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _i8(buf, pos)[0], pos + 1


def _float(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _float_new(float32, _f32(buf, pos)[0]), pos + 4


def _double(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _f64(buf, pos)[0], pos + 8


def _decimal32(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return decode_decimal32(_u32(buf, pos)[0]), pos + 4


def _decimal64(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return decode_decimal64(_u64(buf, pos)[0]), pos + 8


def _decimal128(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    end = pos + 16
    if end > len(buf):
        raise DecodeError("truncated decimal128", pos)
    return decode_decimal128(buf[pos:end]), end


def _char(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    cp = _u32(buf, pos)[0]
    if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
        raise DecodeError(f"invalid char code point U+{cp:X}", pos)
    return _str_new(char, chr(cp)), pos + 4


def _timestamp(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    return _int_new(timestamp, _i64(buf, pos)[0]), pos + 8


def _make_uuid_fast(raw: bytes) -> uuid.UUID:
    # UUID(bytes=...) validates its arguments at length; this sets the two slots
    # it would set (checked against it at import, below), in half the time.
    u = _object_new(uuid.UUID)
    _object_setattr(u, "int", _from_bytes(raw))
    _object_setattr(u, "is_safe", _UUID_UNKNOWN)
    return u


def _make_uuid_slow(raw: bytes) -> uuid.UUID:
    return uuid.UUID(bytes=raw)


_object_new = object.__new__
_object_setattr = object.__setattr__
_from_bytes = int.from_bytes
_UUID_UNKNOWN = uuid.SafeUUID.unknown


def _uuid_fast_path_works() -> bool:
    sample = uuid.UUID("0123abcd-4567-89ef-fedc-ba9876543210")
    try:
        made = _make_uuid_fast(sample.bytes)
    except (AttributeError, TypeError):  # pragma: no cover - a future uuid module
        return False
    return made == sample and hash(made) == hash(sample) and str(made) == str(sample)


_make_uuid = _make_uuid_fast if _uuid_fast_path_works() else _make_uuid_slow


def _uuid(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    end = pos + 16
    if end > len(buf):
        raise DecodeError("truncated uuid", pos)
    return _make_uuid(buf[pos:end]), end


def _vbin8(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    end = pos + 1 + buf[pos]
    if end > len(buf):
        raise DecodeError("binary size beyond the buffer", pos)
    return buf[pos + 1 : end], end


def _vbin32(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    end = pos + 4 + _u32(buf, pos)[0]
    if end > len(buf):
        raise DecodeError("binary size beyond the buffer", pos)
    return buf[pos + 4 : end], end


def _str8(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    start = pos + 1
    end = start + buf[pos]
    if end > len(buf):
        raise DecodeError("string size beyond the buffer", pos)
    try:
        return buf[start:end].decode(), end
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in string ({exc.reason})", start + exc.start) from None


def _str32(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    start = pos + 4
    end = start + _u32(buf, pos)[0]
    if end > len(buf):
        raise DecodeError("string size beyond the buffer", pos)
    try:
        return buf[start:end].decode(), end
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8 in string ({exc.reason})", start + exc.start) from None


def _sym8(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    start = pos + 1
    end = start + buf[pos]
    if end > len(buf):
        raise DecodeError("symbol size beyond the buffer", pos)
    try:
        return _str_new(symbol, buf[start:end].decode("ascii")), end
    except UnicodeDecodeError as exc:
        raise DecodeError("non-ASCII byte in symbol", start + exc.start) from None


def _sym32(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    start = pos + 4
    end = start + _u32(buf, pos)[0]
    if end > len(buf):
        raise DecodeError("symbol size beyond the buffer", pos)
    try:
        return _str_new(symbol, buf[start:end].decode("ascii")), end
    except UnicodeDecodeError as exc:
        raise DecodeError("non-ASCII byte in symbol", start + exc.start) from None


def _refuse_compound(buf: bytes, pos: int, end: int, count: int, depth: int) -> NoReturn:
    """Say why a compound whose size, count or depth cannot be right is refused.

    ``pos`` is where its elements start; errors are reported there.
    """
    if end > len(buf):
        raise DecodeError("compound size beyond the buffer", pos)
    if end < pos:
        raise DecodeError("compound size smaller than its count field", pos)
    if count > end - pos:
        raise DecodeError(f"count {count} cannot fit in {end - pos} bytes", pos)
    raise DecodeError(f"nesting deeper than {MAX_DEPTH}", pos)


# The element loops below decode the commonest encodings inline (null, str8,
# sym8): this is the hot path of every message, and a call per element is
# most of its cost. Anything else goes through the dispatch table. A string
# slice that overruns the compound is caught by the final size check; one that
# overruns the buffer cannot happen, since the compound's end is inside it.


def _list_items(buf: bytes, pos: int, end: int, count: int, depth: int) -> tuple[Any, int]:
    if end > len(buf) or end < pos or count > end - pos or depth >= MAX_DEPTH:
        _refuse_compound(buf, pos, end, count, depth)
    dec = DECODERS
    depth += 1
    items: list[Any] = []
    append = items.append
    value: Any
    try:
        for _ in range(count):
            code = buf[pos]
            if code == 0x40:
                append(None)
                pos += 1
            elif code == 0xA1:
                start = pos + 2
                pos = start + buf[pos + 1]
                append(buf[start:pos].decode())
            elif code == 0xA3:
                start = pos + 2
                pos = start + buf[pos + 1]
                append(_str_new(symbol, buf[start:pos].decode("ascii")))
            else:
                value, pos = dec[code](buf, pos + 1, depth)
                append(value)
    except UnicodeDecodeError:
        raise DecodeError("invalid UTF-8 in string or non-ASCII symbol", pos) from None
    if pos != end:
        raise DecodeError("list elements do not fill its size", end)
    return items, pos


def _list0(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    if depth >= MAX_DEPTH:  # empty, but still one level too many
        raise DecodeError(f"nesting deeper than {MAX_DEPTH}", pos - 1)
    return [], pos


def _list8(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    size = buf[pos]
    count = buf[pos + 1] if size else 0
    return _list_items(buf, pos + 2, pos + 1 + size, count, depth)


def _list32(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    size, count = _u32x2(buf, pos)
    return _list_items(buf, pos + 8, pos + 4 + size, count, depth)


def _map_items(buf: bytes, pos: int, end: int, count: int, depth: int) -> tuple[Any, int]:
    if count & 1:
        raise DecodeError(f"map with an odd number of elements ({count})", pos)
    if end > len(buf) or end < pos or count > end - pos or depth >= MAX_DEPTH:
        _refuse_compound(buf, pos, end, count, depth)
    dec = DECODERS
    depth += 1
    result: dict[Any, Any] = {}
    key: Any
    try:
        for _ in range(count >> 1):
            code = buf[pos]
            if code == 0xA3:
                start = pos + 2
                pos = start + buf[pos + 1]
                key = _str_new(symbol, buf[start:pos].decode("ascii"))
            elif code == 0xA1:
                start = pos + 2
                pos = start + buf[pos + 1]
                key = buf[start:pos].decode()
            else:
                key, pos = dec[code](buf, pos + 1, depth)
            code = buf[pos]
            if code == 0xA1:
                start = pos + 2
                pos = start + buf[pos + 1]
                result[key] = buf[start:pos].decode()
            elif code == 0x40:
                result[key] = None
                pos += 1
            else:
                result[key], pos = dec[code](buf, pos + 1, depth)
    except UnicodeDecodeError:
        raise DecodeError("invalid UTF-8 in string or non-ASCII symbol", pos) from None
    except TypeError:
        raise DecodeError("map key of a type Python cannot hash", pos) from None
    if pos != end:
        raise DecodeError("map elements do not fill its size", end)
    return result, pos


def _map8(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    size = buf[pos]
    count = buf[pos + 1] if size else 0
    return _map_items(buf, pos + 2, pos + 1 + size, count, depth)


def _map32(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    size, count = _u32x2(buf, pos)
    return _map_items(buf, pos + 8, pos + 4 + size, count, depth)


#: Array element format codes and proton's type constants for them (``Array.type``).
_ARRAY_TYPES: Final[dict[int, int]] = {
    0x40: Data.NULL,
    0x41: Data.BOOL,
    0x42: Data.BOOL,
    0x56: Data.BOOL,
    0x50: Data.UBYTE,
    0x60: Data.USHORT,
    0x70: Data.UINT,
    0x52: Data.UINT,
    0x43: Data.UINT,
    0x80: Data.ULONG,
    0x53: Data.ULONG,
    0x44: Data.ULONG,
    0x51: Data.BYTE,
    0x61: Data.SHORT,
    0x71: Data.INT,
    0x54: Data.INT,
    0x81: Data.LONG,
    0x55: Data.LONG,
    0x72: Data.FLOAT,
    0x82: Data.DOUBLE,
    0x74: Data.DECIMAL32,
    0x84: Data.DECIMAL64,
    0x94: Data.DECIMAL128,
    0x73: Data.CHAR,
    0x83: Data.TIMESTAMP,
    0x98: Data.UUID,
    0xA0: Data.BINARY,
    0xB0: Data.BINARY,
    0xA1: Data.STRING,
    0xB1: Data.STRING,
    0xA3: Data.SYMBOL,
    0xB3: Data.SYMBOL,
    0x45: Data.LIST,
    0xC0: Data.LIST,
    0xD0: Data.LIST,
    0xC1: Data.MAP,
    0xD1: Data.MAP,
    0xE0: Data.ARRAY,
    0xF0: Data.ARRAY,
}
_ZERO_WIDTH: Final = frozenset({0x40, 0x41, 0x42, 0x43, 0x44, 0x45})
_ZERO_WIDTH_FEW: Final = 16
"""Zero-width array elements always allowed, however short the buffer."""


def _array_items(buf: bytes, pos: int, end: int, count: int, depth: int) -> tuple[Any, int]:
    if end > len(buf):
        raise DecodeError("array size beyond the buffer", pos)
    if depth >= MAX_DEPTH:
        raise DecodeError(f"nesting deeper than {MAX_DEPTH}", pos)
    depth += 1
    if pos >= end:
        raise DecodeError("array without an element constructor", pos)
    code = buf[pos]
    pos += 1
    descriptor: Any = UNDESCRIBED
    if code == 0x00:
        descriptor, pos = DECODERS[buf[pos]](buf, pos + 1, depth)
        code = buf[pos]
        pos += 1
    element_type = _ARRAY_TYPES.get(code)
    if element_type is None:
        raise DecodeError(f"format code 0x{code:02x} cannot construct array elements", pos - 1)
    # Each element takes at least one byte, except the zero-width ones: those are
    # bounded by the buffer length (or a few, for a tiny buffer holding just the
    # array: five nulls encode in four bytes) so that a lying count cannot exhaust memory.
    room = max(len(buf), _ZERO_WIDTH_FEW) if code in _ZERO_WIDTH else end - pos
    if count > room:
        raise DecodeError(f"array count {count} cannot fit in {end - pos} bytes", pos)
    dec = DECODERS[code]
    elements: list[Any] = []
    append = elements.append
    for _ in range(count):
        value, pos = dec(buf, pos, depth)
        append(value)
    if pos != end:
        raise DecodeError("array elements do not fill its size", end)
    return Array(descriptor, element_type, *elements), pos


def _array8(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    size = buf[pos]
    if size < 1:
        raise DecodeError("array size smaller than its count field", pos - 1)
    return _array_items(buf, pos + 2, pos + 1 + size, buf[pos + 1], depth)


def _array32(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    size, count = _u32x2(buf, pos)
    if size < 4:
        raise DecodeError("array size smaller than its count field", pos - 1)
    return _array_items(buf, pos + 8, pos + 4 + size, count, depth)


def _described(buf: bytes, pos: int, depth: int) -> tuple[Any, int]:
    if depth >= MAX_DEPTH:
        raise DecodeError(f"nesting deeper than {MAX_DEPTH}", pos - 1)
    depth += 1
    dec = DECODERS
    descriptor, pos = dec[buf[pos]](buf, pos + 1, depth)
    value, pos = dec[buf[pos]](buf, pos + 1, depth)
    return Described(descriptor, value), pos


#: The decoder of each format code (the door check in validate.py decodes with it too).
DECODERS: Final[list[_Decoder]] = [_bad_code] * 256
for _code, _fn in {
    0x00: _described,
    0x40: _null,
    0x41: _true,
    0x42: _false,
    0x56: _boolean,
    0x50: _ubyte,
    0x60: _ushort,
    0x70: _uint,
    0x52: _smalluint,
    0x43: _uint0,
    0x80: _ulong,
    0x53: _smallulong,
    0x44: _ulong0,
    0x51: _byte,
    0x61: _short,
    0x71: _int,
    0x54: _smallint,
    0x81: _long,
    0x55: _smalllong,
    0x72: _float,
    0x82: _double,
    0x74: _decimal32,
    0x84: _decimal64,
    0x94: _decimal128,
    0x73: _char,
    0x83: _timestamp,
    0x98: _uuid,
    0xA0: _vbin8,
    0xB0: _vbin32,
    0xA1: _str8,
    0xB1: _str32,
    0xA3: _sym8,
    0xB3: _sym32,
    0x45: _list0,
    0xC0: _list8,
    0xD0: _list32,
    0xC1: _map8,
    0xD1: _map32,
    0xE0: _array8,
    0xF0: _array32,
}.items():
    DECODERS[_code] = _fn
del _code, _fn

#: Bytes after the format code of fixed-width encodings; -1: a one-byte size
#: follows, -4: a four-byte size follows, -2: described, -3: unknown code.
WIDTHS: Final[list[int]] = [-3] * 256
for _code, _width in {
    0x40: 0,
    0x41: 0,
    0x42: 0,
    0x43: 0,
    0x44: 0,
    0x45: 0,
    0x50: 1,
    0x51: 1,
    0x52: 1,
    0x53: 1,
    0x54: 1,
    0x55: 1,
    0x56: 1,
    0x60: 2,
    0x61: 2,
    0x70: 4,
    0x71: 4,
    0x72: 4,
    0x73: 4,
    0x74: 4,
    0x80: 8,
    0x81: 8,
    0x82: 8,
    0x83: 8,
    0x84: 8,
    0x94: 16,
    0x98: 16,
    0xA0: -1,
    0xA1: -1,
    0xA3: -1,
    0xC0: -1,
    0xC1: -1,
    0xE0: -1,
    0xB0: -4,
    0xB1: -4,
    0xB3: -4,
    0xD0: -4,
    0xD1: -4,
    0xF0: -4,
    0x00: -2,
}.items():
    WIDTHS[_code] = _width
del _code, _width


def _as_bytes(buf: bytes | bytearray | memoryview) -> bytes:
    return buf if type(buf) is bytes else bytes(buf)


def decode_at(buf: bytes, offset: int) -> tuple[Any, int]:
    """:func:`decode_value` without the argument normalisation, for callers holding ``bytes``."""
    try:
        return DECODERS[buf[offset]](buf, offset + 1, 0)
    except (struct.error, IndexError):
        raise DecodeError("truncated data", len(buf)) from None
    except RecursionError:  # pragma: no cover - only when called near the recursion limit
        raise DecodeError("nesting too deep for the interpreter stack", offset) from None


def decode_fields(buf: bytes, offset: int, names: tuple[str, ...]) -> dict[str, Any]:
    """The list at ``offset`` (a composite type's fields) as ``{name: value}``.

    Only non-null fields are kept: AMQP encodes "no value" as null, and omits
    trailing fields. Fields beyond ``names`` (a later version of the type) are
    decoded, to validate them, and dropped. A null instead of the list is
    taken as no fields. This is the header/properties hot path, so the list
    goes straight into the dict.
    """
    try:
        code = buf[offset]
        if code == 0xC0:
            size = buf[offset + 1]
            count = buf[offset + 2] if size else 0
            pos = offset + 3
            end = offset + 2 + size
        elif code == 0xD0:
            size, count = _u32x2(buf, offset + 1)
            pos = offset + 9
            end = offset + 5 + size
        elif code in (0x45, 0x40):
            return {}
        else:
            raise DecodeError(f"expected a list, found format code 0x{code:02x}", offset)
        if end > len(buf) or end < pos or count > end - pos:
            _refuse_compound(buf, pos, end, count, 0)
        dec = DECODERS
        result: dict[str, Any] = {}
        known = len(names)
        value: Any
        for i in range(count):
            code = buf[pos]
            if code == 0x40:
                pos += 1
                continue
            if code == 0xA1:
                start = pos + 2
                pos = start + buf[pos + 1]
                value = buf[start:pos].decode()
            elif code == 0xA3:
                start = pos + 2
                pos = start + buf[pos + 1]
                value = _str_new(symbol, buf[start:pos].decode("ascii"))
            elif code == 0x41:
                value = True
                pos += 1
            else:
                value, pos = dec[code](buf, pos + 1, 1)
            if i < known:
                result[names[i]] = value
        if pos != end:
            raise DecodeError("list elements do not fill its size", end)
        return result
    except (struct.error, IndexError):
        raise DecodeError("truncated data", len(buf)) from None
    except UnicodeDecodeError:
        raise DecodeError("invalid UTF-8 in string or non-ASCII symbol", offset) from None
    except RecursionError:  # pragma: no cover - only when called near the recursion limit
        raise DecodeError("nesting too deep for the interpreter stack", offset) from None


def decode_value(buf: bytes | bytearray | memoryview, offset: int = 0) -> tuple[Any, int]:
    """Decode the one value at ``offset``: the value and the offset just after it.

    Raises :class:`DecodeError` for anything malformed (and only that).
    """
    if offset < 0:
        raise DecodeError("negative offset", offset)
    return decode_at(_as_bytes(buf), offset)


def skip_value(buf: bytes | bytearray | memoryview, offset: int = 0) -> int:
    """The offset just after the value at ``offset``, read from size fields only.

    Nothing inside a compound or a string is looked at: this is how a body is
    stepped over. Iterative, so a chain of descriptors cannot exhaust the stack.
    """
    if offset < 0:
        raise DecodeError("negative offset", offset)
    n = len(buf)
    pos = offset
    widths = WIDTHS
    pending = 1
    try:
        while pending:
            code = buf[pos]
            pos += 1
            width = widths[code]
            if width >= 0:
                pos += width
            elif width == -1:
                pos += 1 + buf[pos]
            elif width == -4:
                pos += 4 + _u32(buf, pos)[0]
            elif width == -2:
                pending += 1  # a descriptor, then the value it describes
                continue
            else:
                raise DecodeError(f"unknown format code 0x{code:02x}", pos - 1)
            pending -= 1
    except (struct.error, IndexError):
        raise DecodeError("truncated data", n) from None
    if pos > n:
        raise DecodeError("size beyond the buffer", n)
    return pos


# ----------------------------------------------------------------------------- encoding

_Encoder = Callable[[Any, int], bytes]

_p_u8 = struct.Struct(">BB").pack
_p_i8 = struct.Struct(">Bb").pack
_p_u16 = struct.Struct(">BH").pack
_p_i16 = struct.Struct(">Bh").pack
_p_u32 = struct.Struct(">BI").pack
_p_i32 = struct.Struct(">Bi").pack
_p_u64 = struct.Struct(">BQ").pack
_p_i64 = struct.Struct(">Bq").pack
_p_f32 = struct.Struct(">Bf").pack
_p_f64 = struct.Struct(">Bd").pack
_pack_u32 = struct.Struct(">I").pack
_pack_u64 = struct.Struct(">Q").pack
_p_size8x2 = struct.Struct(">BBB").pack


def _checked(pack: Callable[..., bytes], code: int, value: Any, name: str) -> bytes:
    try:
        return pack(code, value)
    except (struct.error, OverflowError):
        raise ValueError(f"{value!r} is out of range for AMQP {name}") from None


def _enc_null(value: Any, depth: int) -> bytes:
    return b"\x40"


def _enc_bool(value: Any, depth: int) -> bytes:
    return b"\x41" if value else b"\x42"


def _enc_ubyte(value: Any, depth: int) -> bytes:
    return _checked(_p_u8, 0x50, value, "ubyte")


def _enc_ushort(value: Any, depth: int) -> bytes:
    return _checked(_p_u16, 0x60, value, "ushort")


def _enc_uint(value: Any, depth: int) -> bytes:
    if value == 0:
        return b"\x43"
    if 0 < value < 256:
        return _p_u8(0x52, value)
    return _checked(_p_u32, 0x70, value, "uint")


def _enc_ulong(value: Any, depth: int) -> bytes:
    if value == 0:
        return b"\x44"
    if 0 < value < 256:
        return _p_u8(0x53, value)
    return _checked(_p_u64, 0x80, value, "ulong")


def _enc_byte(value: Any, depth: int) -> bytes:
    return _checked(_p_i8, 0x51, value, "byte")


def _enc_short(value: Any, depth: int) -> bytes:
    return _checked(_p_i16, 0x61, value, "short")


def _enc_int(value: Any, depth: int) -> bytes:
    if -128 <= value <= 127:
        return _p_i8(0x54, value)
    return _checked(_p_i32, 0x71, value, "int")


def _enc_long(value: Any, depth: int) -> bytes:
    if -128 <= value <= 127:
        return _p_i8(0x55, value)
    return _checked(_p_i64, 0x81, value, "long")


def _enc_float(value: Any, depth: int) -> bytes:
    return _checked(_p_f32, 0x72, value, "float")


def _enc_double(value: Any, depth: int) -> bytes:
    return _p_f64(0x82, value)


def _enc_decimal(value: Any, depth: int) -> bytes:
    return b"\x94" + encode_decimal128(value)


def _enc_decimal32(value: Any, depth: int) -> bytes:
    return _checked(_p_u32, 0x74, value, "decimal32")


def _enc_decimal64(value: Any, depth: int) -> bytes:
    return _checked(_p_u64, 0x84, value, "decimal64")


def _enc_decimal128(value: Any, depth: int) -> bytes:
    if len(value) != 16:
        raise ValueError(f"decimal128 needs 16 bytes, got {len(value)}")
    return b"\x94" + bytes(value)


def _char_point(value: Any) -> int:
    if len(value) != 1:
        raise ValueError(f"an AMQP char is one character, not {len(value)}")
    cp = ord(value)
    if 0xD800 <= cp <= 0xDFFF:
        raise ValueError(f"a surrogate (U+{cp:X}) is not an AMQP char")
    return cp


def _enc_char(value: Any, depth: int) -> bytes:
    return _p_u32(0x73, _char_point(value))


def _enc_timestamp(value: Any, depth: int) -> bytes:
    return _checked(_p_i64, 0x83, value, "timestamp")


def _enc_uuid(value: Any, depth: int) -> bytes:
    return b"\x98" + bytes(value.bytes)


def _sized(small: int, large: int, data: bytes) -> bytes:
    n = len(data)
    if n < 256:
        return bytes((small, n)) + data
    if n >= 2**32:
        raise ValueError("value longer than 2**32 - 1 bytes")
    return bytes((large,)) + _pack_u32(n) + data


def _enc_binary(value: Any, depth: int) -> bytes:
    return _sized(0xA0, 0xB0, bytes(value))


def _utf8_bytes(value: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("string with an unpaired surrogate cannot be UTF-8") from None


def _enc_string(value: Any, depth: int) -> bytes:
    return _sized(0xA1, 0xB1, _utf8_bytes(value))


def _ascii_bytes(value: str) -> bytes:
    try:
        return value.encode("ascii")
    except UnicodeEncodeError:
        raise ValueError(f"symbol {value!r} is not ASCII") from None


def _enc_symbol(value: Any, depth: int) -> bytes:
    return _sized(0xA3, 0xB3, _ascii_bytes(value))


def _frame(small: int, large: int, count: int, body: bytes) -> bytes:
    """A list, map or array: the short form when size and count fit in a byte."""
    if count < 256 and len(body) < 255:
        return _p_size8x2(small, len(body) + 1, count) + body
    return bytes((large,)) + _frame32(count, body)


def _frame32(count: int, body: bytes) -> bytes:
    """The size and count fields of the 32-bit form, then the body (no format code)."""
    if len(body) + 4 >= 2**32:
        raise ValueError("compound value longer than 2**32 - 1 bytes")
    return _pack_u32(len(body) + 4) + _pack_u32(count) + body


def _enter(depth: int) -> int:
    if depth >= MAX_DEPTH:
        raise ValueError(f"value nested deeper than {MAX_DEPTH}")
    return depth + 1


def _list_body(value: Any, depth: int) -> bytes:
    depth = _enter(depth)
    return b"".join([_encode(item, depth) for item in value])


def _map_body(value: Any, depth: int) -> bytes:
    depth = _enter(depth)
    return b"".join([_encode(k, depth) + _encode(v, depth) for k, v in value.items()])


def _enc_list(value: Any, depth: int) -> bytes:
    if not value:
        return b"\x45"
    return _frame(0xC0, 0xD0, len(value), _list_body(value, depth))


def _enc_map(value: Any, depth: int) -> bytes:
    return _frame(0xC1, 0xD1, 2 * len(value), _map_body(value, depth))


def _enc_described(value: Any, depth: int) -> bytes:
    depth = _enter(depth)
    return b"\x00" + _encode(value.descriptor, depth) + _encode(value.value, depth)


# Array elements all share one constructor, so each element type has one format
# code (the widest form, as proton writes them) and an encoder of the bytes
# that follow it in each element.
_ElementEncoder = Callable[[Any, int], bytes]


def _packed(pack: Callable[[Any], bytes], name: str) -> _ElementEncoder:
    def encode(value: Any, depth: int) -> bytes:
        try:
            return pack(value)
        except (struct.error, OverflowError):
            raise ValueError(f"{value!r} is out of range for AMQP {name}") from None

    return encode


def _sized32(to_bytes: Callable[[Any], bytes]) -> _ElementEncoder:
    def encode(value: Any, depth: int) -> bytes:
        data = to_bytes(value)
        if len(data) >= 2**32:
            raise ValueError("value longer than 2**32 - 1 bytes")
        return _pack_u32(len(data)) + data

    return encode


def _typed(kind: type | tuple[type, ...], what: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if not isinstance(value, kind):
            raise TypeError(f"an array of {what} cannot hold {type(value).__name__}")

    return check


_check_str = _typed(str, "strings or symbols")
_check_bin = _typed((bytes, bytearray, memoryview), "binaries")
_check_list = _typed((list, tuple), "lists")
_check_map = _typed(dict, "maps")
_check_array = _typed(Array, "arrays")
_check_uuid = _typed(uuid.UUID, "uuids")


def _null_elem(value: Any, depth: int) -> bytes:
    if value is not None:
        raise ValueError(f"an array of nulls cannot hold {value!r}")
    return b""


def _bool_elem(value: Any, depth: int) -> bytes:
    return b"\x01" if value else b"\x00"


def _char_elem(value: Any, depth: int) -> bytes:
    return _pack_u32(_char_point(value))


def _uuid_elem(value: Any, depth: int) -> bytes:
    _check_uuid(value)
    return bytes(value.bytes)


def _bin_elem(value: Any) -> bytes:
    _check_bin(value)
    return bytes(value)


def _str_elem(value: Any) -> bytes:
    _check_str(value)
    return _utf8_bytes(value)


def _sym_elem(value: Any) -> bytes:
    _check_str(value)
    return _ascii_bytes(value)


def _list_elem(value: Any, depth: int) -> bytes:
    _check_list(value)
    return _frame32(len(value), _list_body(value, depth))


def _map_elem(value: Any, depth: int) -> bytes:
    _check_map(value)
    return _frame32(2 * len(value), _map_body(value, depth))


def _array_elem(value: Any, depth: int) -> bytes:
    _check_array(value)
    count, body = _array_body(value, depth)
    return _frame32(count, body)


def _decimal_bits(value: Any, raw: type, encode: Callable[[Decimal], Any]) -> Any:
    if isinstance(value, raw):
        return value
    if isinstance(value, Decimal):
        return encode(value)
    raise TypeError(f"not a decimal: {type(value).__name__}")


def _decimal32_elem(value: Any, depth: int) -> bytes:
    return _packed(_pack_u32, "decimal32")(_decimal_bits(value, decimal32, encode_decimal32), 0)


def _decimal64_elem(value: Any, depth: int) -> bytes:
    return _packed(_pack_u64, "decimal64")(_decimal_bits(value, decimal64, encode_decimal64), 0)


def _decimal128_elem(value: Any, depth: int) -> bytes:
    raw = _decimal_bits(value, decimal128, encode_decimal128)
    if len(raw) != 16:
        raise ValueError(f"decimal128 needs 16 bytes, got {len(raw)}")
    return bytes(raw)


_ARRAY_ELEMENTS: Final[dict[int, tuple[int, _ElementEncoder]]] = {
    Data.NULL: (0x40, _null_elem),
    Data.BOOL: (0x56, _bool_elem),
    Data.UBYTE: (0x50, _packed(struct.Struct(">B").pack, "ubyte")),
    Data.USHORT: (0x60, _packed(struct.Struct(">H").pack, "ushort")),
    Data.UINT: (0x70, _packed(_pack_u32, "uint")),
    Data.ULONG: (0x80, _packed(_pack_u64, "ulong")),
    Data.BYTE: (0x51, _packed(struct.Struct(">b").pack, "byte")),
    Data.SHORT: (0x61, _packed(struct.Struct(">h").pack, "short")),
    Data.INT: (0x71, _packed(struct.Struct(">i").pack, "int")),
    Data.LONG: (0x81, _packed(struct.Struct(">q").pack, "long")),
    Data.FLOAT: (0x72, _packed(struct.Struct(">f").pack, "float")),
    Data.DOUBLE: (0x82, _packed(struct.Struct(">d").pack, "double")),
    Data.DECIMAL32: (0x74, _decimal32_elem),
    Data.DECIMAL64: (0x84, _decimal64_elem),
    Data.DECIMAL128: (0x94, _decimal128_elem),
    Data.CHAR: (0x73, _char_elem),
    Data.TIMESTAMP: (0x83, _packed(struct.Struct(">q").pack, "timestamp")),
    Data.UUID: (0x98, _uuid_elem),
    Data.BINARY: (0xB0, _sized32(_bin_elem)),
    Data.STRING: (0xB1, _sized32(_str_elem)),
    Data.SYMBOL: (0xB3, _sized32(_sym_elem)),
    Data.LIST: (0xD0, _list_elem),
    Data.MAP: (0xD1, _map_elem),
    Data.ARRAY: (0xF0, _array_elem),
}


def _array_body(value: Any, depth: int) -> tuple[int, bytes]:
    """The element count and the bytes after the count field: constructor, then elements."""
    depth = _enter(depth)
    spec = _ARRAY_ELEMENTS.get(value.type)
    if spec is None:
        raise ValueError(f"unsupported array element type {value.type!r}")
    code, element = spec
    constructor = bytes((code,))
    if value.descriptor is not UNDESCRIBED:
        constructor = b"\x00" + _encode(value.descriptor, depth) + constructor
    elements = tuple(value.elements)
    return len(elements), constructor + b"".join([element(item, depth) for item in elements])


def _enc_array(value: Any, depth: int) -> bytes:
    count, body = _array_body(value, depth)
    return _frame(0xE0, 0xF0, count, body)


_ENCODERS: Final[dict[type, _Encoder]] = {
    type(None): _enc_null,
    bool: _enc_bool,
    ubyte: _enc_ubyte,
    ushort: _enc_ushort,
    uint: _enc_uint,
    ulong: _enc_ulong,
    byte: _enc_byte,
    short: _enc_short,
    int32: _enc_int,
    int: _enc_long,
    float32: _enc_float,
    float: _enc_double,
    Decimal: _enc_decimal,
    decimal32: _enc_decimal32,
    decimal64: _enc_decimal64,
    decimal128: _enc_decimal128,
    char: _enc_char,
    timestamp: _enc_timestamp,
    uuid.UUID: _enc_uuid,
    bytes: _enc_binary,
    bytearray: _enc_binary,
    memoryview: _enc_binary,
    str: _enc_string,
    symbol: _enc_symbol,
    list: _enc_list,
    tuple: _enc_list,
    dict: _enc_map,
    Array: _enc_array,
    Described: _enc_described,
}

# For subclasses (proton's AnnotationDict, a user's str subclass ...): the
# first base found, narrow types before the builtins they derive from.
_FALLBACK: Final[tuple[type, ...]] = (
    bool,
    timestamp,
    decimal32,
    decimal64,
    decimal128,
    ulong,
    uint,
    ushort,
    ubyte,
    byte,
    short,
    int32,
    int,
    float32,
    float,
    Decimal,
    char,
    symbol,
    str,
    bytes,
    bytearray,
    memoryview,
    uuid.UUID,
    dict,
    list,
    tuple,
    Array,
    Described,
)


def _encode(value: Any, depth: int) -> bytes:
    encoder = _ENCODERS.get(type(value))
    if encoder is None:
        for base in _FALLBACK:
            if isinstance(value, base):
                encoder = _ENCODERS[base]
                break
        else:
            raise TypeError(f"cannot encode {type(value).__name__} as an AMQP value")
    return encoder(value, depth)


def encode_value(value: Any) -> bytes:
    """The AMQP encoding of a value represented as :mod:`~filtex_proton.amqp.types` describes.

    The smallest encoding is chosen for each value; a plain ``int`` is a long,
    a ``float`` a double, a :class:`~decimal.Decimal` a decimal128. Raises
    ``TypeError`` for objects with no AMQP type and ``ValueError`` for values
    out of their type's range (or nested deeper than :data:`MAX_DEPTH`).
    """
    return _encode(value, 0)
