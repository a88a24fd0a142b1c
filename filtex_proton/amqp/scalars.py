"""Decoders of the AMQP 1.0 fixed- and variable-width encodings (part 1, §1.6), and DecodeError.

Each takes the buffer, the offset just after the format code and the nesting depth, and
returns the value and the offset after it; :mod:`filtex_proton.amqp.decode` puts them in
its table by format code, with the compound decoders.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any, Final, NoReturn

from proton import byte, char, float32, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort

from filtex_proton.amqp.bid import decode_decimal32, decode_decimal64, decode_decimal128

__all__ = ["SCALARS", "DecodeError", "Decoder", "bad_code"]


class DecodeError(ValueError):
    """Malformed AMQP encoded data: what is wrong (``reason``) and where (``offset``)."""

    def __init__(self, reason: str, offset: int) -> None:
        self.reason = reason
        self.offset = offset
        super().__init__(f"{reason} (at byte {offset})")

    def __reduce__(self) -> tuple[type[DecodeError], tuple[str, int]]:
        return (DecodeError, (self.reason, self.offset))




#: A decoder: the buffer, the offset just after the format code, the nesting depth;
#: returns the value and the offset just after it.
Decoder = Callable[[bytes, int, int], tuple[Any, int]]

_i8 = struct.Struct(">b").unpack_from
_u16 = struct.Struct(">H").unpack_from
_i16 = struct.Struct(">h").unpack_from
_u32 = struct.Struct(">I").unpack_from
_i32 = struct.Struct(">i").unpack_from
_u64 = struct.Struct(">Q").unpack_from
_i64 = struct.Struct(">q").unpack_from
_f32 = struct.Struct(">f").unpack_from
_f64 = struct.Struct(">d").unpack_from

# Proton's unsigned classes run a Python-level __init__ (a sign check); decoded
# values are in range by construction, so build them without it.
_int_new = int.__new__
_str_new = str.__new__
_float_new = float.__new__


# ----------------------------------------------------------------------------- scalars
#
# One function per encoding, each spelled out: a closure made per encoding (tried) costs
# 5-40% more per value, and these run for every value the inline loops do not decode.


def bad_code(buf: bytes, pos: int, depth: int) -> NoReturn:
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
    # it would set (checked against it at import, below), in half the time
    # (object.__new__: UUID.__init__, the cost avoided, is not run).
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


#: The decoder of each fixed- and variable-width encoding, by its name in the format table.
SCALARS: Final[dict[str, Decoder]] = {
    "null": _null,
    "boolean": _boolean,
    "true": _true,
    "false": _false,
    "ubyte": _ubyte,
    "ushort": _ushort,
    "uint": _uint,
    "smalluint": _smalluint,
    "uint0": _uint0,
    "ulong": _ulong,
    "smallulong": _smallulong,
    "ulong0": _ulong0,
    "byte": _byte,
    "short": _short,
    "int": _int,
    "smallint": _smallint,
    "long": _long,
    "smalllong": _smalllong,
    "float": _float,
    "double": _double,
    "decimal32": _decimal32,
    "decimal64": _decimal64,
    "decimal128": _decimal128,
    "char": _char,
    "timestamp": _timestamp,
    "uuid": _uuid,
    "vbin8": _vbin8,
    "vbin32": _vbin32,
    "str8": _str8,
    "str32": _str32,
    "sym8": _sym8,
    "sym32": _sym32,
}
