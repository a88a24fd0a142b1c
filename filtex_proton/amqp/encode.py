"""The AMQP 1.0 encoder (part 1, §1.2-§1.7): values to their smallest encoding.

Values are represented exactly as :mod:`filtex_proton.amqp.types` documents
(proton's marker classes, :class:`decimal.Decimal` for the decimal types); the
decoder (:mod:`filtex_proton.amqp.decode`) gives back what was encoded.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

from proton import (
    Array,
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

from filtex_proton.amqp.bid import encode_decimal32, encode_decimal64, encode_decimal128
from filtex_proton.amqp.formats import MAX_DEPTH, PROTON_TYPE, check_literals, widest

__all__ = ["encode_value"]

# The encoders write each code as a literal (the encoder is a table of small functions,
# one per Python type): these are the codes they write, checked against the table.
check_literals({
    "null": 0x40, "true": 0x41, "false": 0x42, "ubyte": 0x50, "ushort": 0x60, "uint0": 0x43,
    "smalluint": 0x52, "uint": 0x70, "ulong0": 0x44, "smallulong": 0x53, "ulong": 0x80,
    "byte": 0x51, "short": 0x61, "smallint": 0x54, "int": 0x71, "smalllong": 0x55,
    "long": 0x81, "float": 0x72, "double": 0x82, "decimal32": 0x74, "decimal64": 0x84,
    "decimal128": 0x94, "char": 0x73, "timestamp": 0x83, "uuid": 0x98, "vbin8": 0xA0,
    "vbin32": 0xB0, "str8": 0xA1, "str32": 0xB1, "sym8": 0xA3, "sym32": 0xB3, "list0": 0x45,
    "list8": 0xC0, "list32": 0xD0, "map8": 0xC1, "map32": 0xD1, "array8": 0xE0,
    "array32": 0xF0, "described": 0x00,
})
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


#: The encoder of each element type, by type name (its code: the type's widest encoding).
_ELEMENTS: Final[dict[str, _ElementEncoder]] = {
    "null": _null_elem,
    "boolean": _bool_elem,
    "ubyte": _packed(struct.Struct(">B").pack, "ubyte"),
    "ushort": _packed(struct.Struct(">H").pack, "ushort"),
    "uint": _packed(_pack_u32, "uint"),
    "ulong": _packed(_pack_u64, "ulong"),
    "byte": _packed(struct.Struct(">b").pack, "byte"),
    "short": _packed(struct.Struct(">h").pack, "short"),
    "int": _packed(struct.Struct(">i").pack, "int"),
    "long": _packed(struct.Struct(">q").pack, "long"),
    "float": _packed(struct.Struct(">f").pack, "float"),
    "double": _packed(struct.Struct(">d").pack, "double"),
    "decimal32": _decimal32_elem,
    "decimal64": _decimal64_elem,
    "decimal128": _decimal128_elem,
    "char": _char_elem,
    "timestamp": _packed(struct.Struct(">q").pack, "timestamp"),
    "uuid": _uuid_elem,
    "binary": _sized32(_bin_elem),
    "string": _sized32(_str_elem),
    "symbol": _sized32(_sym_elem),
    "list": _list_elem,
    "map": _map_elem,
    "array": _array_elem,
}
if _ELEMENTS.keys() != PROTON_TYPE.keys():
    raise AssertionError("the array element encoders and the format table differ")
#: Per proton element type (``Array.type``): the elements' format code and their encoder.
_ARRAY_ELEMENTS: Final[dict[int, tuple[int, _ElementEncoder]]] = {
    PROTON_TYPE[name]: (widest(name), encoder) for name, encoder in _ELEMENTS.items()
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
