"""The AMQP 1.0 decoder and skipper (part 1, §1.2-§1.7): bytes to values, and where a value ends.

The scalar decoders are in :mod:`filtex_proton.amqp.scalars`; the compounds, the table
by format code and the entry points here.

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
from typing import Any, Final, NoReturn

from proton import Array, Described, symbol
from proton._data import UNDESCRIBED

from filtex_proton.amqp.formats import (
    FORMATS,
    MAX_DEPTH,
    PROTON_TYPE,
    WIDTHS,
    Category,
    check_literals,
)
from filtex_proton.amqp.scalars import SCALARS, DecodeError, Decoder, bad_code

__all__ = [
    "DECODERS",
    "MAX_DEPTH",
    "UNDESCRIBED",
    "DecodeError",
    "compound_frame",
    "decode_at",
    "decode_fields",
    "decode_value",
    "skip_value",
    "value_end",
]

_u32 = struct.Struct(">I").unpack_from
_u32x2 = struct.Struct(">II").unpack_from
_str_new = str.__new__

# The element loops decode the commonest encodings inline, comparing the code with a
# literal (a constant compares faster than a global name): these, checked against the table.
check_literals({"described": 0x00, "null": 0x40, "true": 0x41, "str8": 0xA1, "sym8": 0xA3,
                "list0": 0x45, "list8": 0xC0, "list32": 0xD0})


# ----------------------------------------------------------------------------- compounds


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
    f.code: PROTON_TYPE[f.type] for f in FORMATS if f.type in PROTON_TYPE
}
_ZERO_WIDTH: Final = frozenset(
    f.code for f in FORMATS if f.category is Category.FIXED and f.width == 0
)
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


#: The decoder of each encoding, by its name in the format table.
_BY_NAME: Final[dict[str, Decoder]] = {
    **SCALARS,
    "list0": _list0,
    "list8": _list8,
    "list32": _list32,
    "map8": _map8,
    "map32": _map32,
    "array8": _array8,
    "array32": _array32,
    "described": _described,
}
if _BY_NAME.keys() != {f.name for f in FORMATS}:
    raise AssertionError("the decoders and the format table name different encodings")

#: Per format code, its decoder (unknown codes: one that says so).
DECODERS: Final[list[Decoder]] = [bad_code] * 256
for _f in FORMATS:
    DECODERS[_f.code] = _BY_NAME[_f.name]
del _f



# ----------------------------------------------------------------------------- entry points


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


# Inline decoding of the commonest encodings, like the element loops: split into calls, the
# door check's loop measured +16-22% on a small message (one call per section, bench/bench_amqp.py).
def decode_fields(buf: bytes, offset: int, names: tuple[str, ...]) -> dict[str, Any]:  # noqa: PLR0912
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


def compound_frame(buf: bytes, offset: int) -> tuple[int, int, int]:
    """Of the list8, list32, map8 or map32 at ``offset``: where its elements start, where
    they end (by its size field, not checked) and how many there are."""
    if WIDTHS[buf[offset]] == -1:
        size = buf[offset + 1]
        return offset + 3, offset + 2 + size, buf[offset + 2] if size else 0
    size, count = _u32x2(buf, offset + 1)
    return offset + 9, offset + 5 + size, count


def value_end(buf: bytes, pos: int) -> int:
    """Where the value at ``pos`` ends, from its format code and size field: a message
    section's end for the scans. Not checked against the buffer (the caller does)."""
    width = WIDTHS[buf[pos]]
    if width == -1:
        return pos + 2 + buf[pos + 1]
    if width == -4:
        end: int = pos + 5 + _u32(buf, pos + 1)[0]
        return end
    if width >= 0:
        return pos + 1 + width
    return skip_value(buf, pos)

