"""The door check: is a message well-formed in every section a broker stores and forwards?

:class:`~filtex_proton.amqp.message.RawMessageView` decodes lazily, so a message
whose application-properties map has an odd count, or whose strings are not
UTF-8, would be forwarded byte for byte, and every consumer's decoder (and every
filter reading it) would fail on it instead. :func:`validate_message` decodes
each section except the body once, on arrival, checks what AMQP 1.0 requires of
it, and leaves the decoded sections in the view's cache, so the filters that
read them later decode nothing twice.

What is checked, beyond the section layout the scan already checks:

* every section: sizes and counts inside the section, maps with an even count,
  strings UTF-8, symbols ASCII, chars valid code points, nesting bounded (the
  codec's rules, AMQP 1.0 part 1);
* header and properties (§3.2.1, §3.2.4): each field null or of its type;
* delivery and message annotations, footer (§3.2.2, §3.2.3, §3.2.10): keys
  symbol or ulong;
* application-properties (§3.2.5): keys strings, values of simple types only
  (no list, map, array or described value);
* descriptors of described values and arrays anywhere in those sections:
  symbol or ulong (§1.5).

The body is stepped over by its size fields, never decoded.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from proton import Array, Described, int32, symbol, timestamp, ubyte, uint, ulong

from filtex_proton.amqp.decode import (
    DECODERS,
    UNDESCRIBED,
    DecodeError,
    compound_frame,
    decode_at,
    decode_fields,
    value_end,
)
from filtex_proton.amqp.formats import CODE, CODES_OF, TYPE_OF
from filtex_proton.amqp.message import (
    LAYOUT,
    SECTIONS,
    InvalidMessageError,
    RawMessageView,
    SectionKind,
)
from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS

__all__ = ["LAYOUT", "InvalidMessageError", "validate_message", "validate_view"]

_TYPE_NAMES: Final[dict[type, str]] = {
    bool: "boolean", ubyte: "ubyte", uint: "uint", ulong: "ulong", timestamp: "timestamp",
    symbol: "symbol", str: "string", bytes: "binary", uuid.UUID: "uuid", list: "list",
    dict: "map", Array: "array", Described: "described value",
}
#: The format codes of each AMQP type (part 1 §1.6), and a field kind of several types.
_CODES: Final[dict[str, frozenset[int]]] = dict(CODES_OF)
_CODES["*message-id"] = _CODES["ulong"] | _CODES["uuid"] | _CODES["binary"] | _CODES["string"]
#: What a section's field may be encoded as: its type, or null (§3.2.1, §3.2.4, §3.2.11-15).
_HEADER_CODES: Final = tuple(_CODES[kind] | {0x40} for _, kind in HEADER_FIELDS)
_PROPERTIES_CODES: Final = tuple(_CODES[kind] | {0x40} for _, kind in PROPERTIES_FIELDS)
_HEADER_NAMES: Final = tuple(name for name, _ in HEADER_FIELDS)
_PROPERTIES_NAMES: Final = tuple(name for name, _ in PROPERTIES_FIELDS)
_HEADER_KINDS: Final = tuple(kind.lstrip("*") for _, kind in HEADER_FIELDS)
_PROPERTIES_KINDS: Final = tuple(kind.lstrip("*") for _, kind in PROPERTIES_FIELDS)
#: Never a simple type (§3.2.5): lists, maps, arrays, described values.
_COMPOUND_CODES: Final = (_CODES["list"] | _CODES["map"] | _CODES["array"]
                          | _CODES["described value"])
_ANNOTATION_KEY_CODES: Final = _CODES["symbol"] | _CODES["ulong"]
_STRING_CODES: Final = _CODES["string"]
_ANNOTATION_KEYS: Final = frozenset({symbol, ulong})
_EMPTY: Final = _CODES["null"] | {CODE["list0"]}

_decoders = DECODERS
_int_new = int.__new__
_str_new = str.__new__
_u32x2 = struct.Struct(">II").unpack_from


def _code_name(code: int) -> str:
    return TYPE_OF.get(code, f"format code 0x{code:02x}")


def _shown(key: Any) -> str:
    """A map key as a description shows it: a string or symbol quoted, a number as is."""
    return repr(str(key)) if isinstance(key, str) else str(key)


def _type_name(value: Any) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _descriptors(value: Any) -> str | None:
    """Why a compound value holds a described value whose descriptor is neither symbol
    nor ulong (§1.5), or None. Walked with a stack: the codec bounds the depth already."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is Described:
            if type(item.descriptor) not in _ANNOTATION_KEYS:
                return f"descriptor of type {_type_name(item.descriptor)}, not symbol or ulong"
            stack.append(item.value)
        elif kind is list:
            stack.extend(item)
        elif kind is dict:
            stack.extend(item.keys())
            stack.extend(item.values())
        elif kind is Array:
            descriptor = item.descriptor
            if descriptor is not UNDESCRIBED and type(descriptor) not in _ANNOTATION_KEYS:
                return f"array descriptor of type {_type_name(descriptor)}, not symbol or ulong"
            stack.extend(item.elements)
    return None


def _fields(names: tuple[str, ...], allowed: tuple[frozenset[int], ...],
            kinds: tuple[str, ...]) -> Callable[[bytes, int], dict[str, Any]]:
    """The checker of a composite section (header, properties): each field null or of its
    type, decoded exactly as :func:`~filtex_proton.amqp.decode.decode_fields` does."""
    known = len(names)

    def check(buf: bytes, offset: int) -> dict[str, Any]:
        if buf[offset] in _EMPTY:  # no fields (the scan let no other code through)
            return {}
        pos, end, count = compound_frame(buf, offset)
        if end > len(buf) or end < pos or count > end - pos:
            return decode_fields(buf, offset, names)  # raises, saying what is wrong
        dec = _decoders
        result: dict[str, Any] = {}
        value: Any
        try:
            for i in range(count):
                code = buf[pos]
                if code == 0x40:
                    pos += 1
                    continue
                if i < known and code not in allowed[i]:
                    raise DecodeError(
                        f"field {names[i]} is {_code_name(code)}, not {kinds[i]}", pos)
                if code == 0xA1:
                    start = pos + 2
                    pos = start + buf[pos + 1]
                    value = buf[start:pos].decode()
                elif code == 0x53:
                    value = _int_new(ulong, buf[pos + 1])
                    pos += 2
                elif code == 0xA3:
                    start = pos + 2
                    pos = start + buf[pos + 1]
                    value = _str_new(symbol, buf[start:pos].decode("ascii"))
                else:
                    value, pos = dec[code](buf, pos + 1, 1)
                if i < known:
                    result[names[i]] = value
        except UnicodeDecodeError:
            raise DecodeError("invalid UTF-8 in string or non-ASCII symbol", pos) from None
        if pos != end:
            raise DecodeError("list elements do not fill its size", end)
        return result

    return check


def _compound_value(buf: bytes, pos: int, key: Any, simple: bool) -> tuple[Any, int]:
    """The compound value of ``key`` at ``pos`` in a map section, refused where only simple
    values may be (``simple``) or where a descriptor in it is not a symbol or ulong."""
    if simple:
        raise DecodeError(f"value of {_shown(key)} is a {_code_name(buf[pos])}, "
                          "not a simple type", pos)
    value, pos = _decoders[buf[pos]](buf, pos + 1, 1)
    why = _descriptors(value)
    if why is not None:
        raise DecodeError(f"value of {_shown(key)}: {why}", pos)
    return value, pos


def _map(key_codes: frozenset[int], key_text: str, simple: bool
         ) -> Callable[[bytes, int], dict[Any, Any]]:
    """The checker of a map section: keys of ``key_codes``; values simple only (``simple``)
    or anything whose descriptors are symbols or ulongs. Decoded as the codec does."""

    def check(buf: bytes, offset: int) -> dict[Any, Any]:
        if buf[offset] in _EMPTY:  # an empty section (the scan let no other code through)
            return {}
        pos, end, count = compound_frame(buf, offset)
        if count & 1 or end > len(buf) or end < pos or count > end - pos:
            decode_at(buf, offset)  # raises, saying what is wrong
            raise DecodeError("malformed map", offset)  # pragma: no cover - decode_at raised
        dec = _decoders
        result: dict[Any, Any] = {}
        key: Any
        try:
            for _ in range(count >> 1):
                code = buf[pos]
                if code not in key_codes:
                    raise DecodeError(f"key of type {_code_name(code)}, not {key_text}", pos)
                if code == 0xA1:
                    start = pos + 2
                    pos = start + buf[pos + 1]
                    key = buf[start:pos].decode()
                elif code == 0xA3:
                    start = pos + 2
                    pos = start + buf[pos + 1]
                    key = _str_new(symbol, buf[start:pos].decode("ascii"))
                else:
                    key, pos = dec[code](buf, pos + 1, 1)
                code = buf[pos]
                if code == 0xA1:
                    start = pos + 2
                    pos = start + buf[pos + 1]
                    result[key] = buf[start:pos].decode()
                elif code in _COMPOUND_CODES:
                    result[key], pos = _compound_value(buf, pos, key, simple)
                else:
                    result[key], pos = dec[code](buf, pos + 1, 1)
        except UnicodeDecodeError:
            raise DecodeError("invalid UTF-8 in string or non-ASCII symbol", pos) from None
        if pos != end:
            raise DecodeError("map elements do not fill its size", end)
        return result

    return check


_annotations = _map(_ANNOTATION_KEY_CODES, "symbol or ulong", simple=False)

#: Per section key of the view (``Section._value_``): decode it, check it, return the entries.
_CHECKS: Final[dict[str, Callable[[bytes, int], Mapping[Any, Any]]]] = {
    "header": _fields(_HEADER_NAMES, _HEADER_CODES, _HEADER_KINDS),
    "delivery-annotations": _annotations,
    "message-annotations": _annotations,
    "properties": _fields(_PROPERTIES_NAMES, _PROPERTIES_CODES, _PROPERTIES_KINDS),
    "application-properties": _map(_STRING_CODES, "string", simple=True),
    "footer": _annotations,
}


def validate_view(view: RawMessageView) -> RawMessageView:
    """Check every section of a scanned message but the body; raises :class:`InvalidMessageError`.

    The decoded sections stay in the view's cache (what ``view.section`` returns
    afterwards), so validating costs the filters nothing later.
    """
    buf = view.data
    decoded = view._decoded
    checks = _CHECKS
    key = ""
    offsets = view._offsets
    if offsets is None:  # made by the door check's fast path: checked already
        return view
    try:
        for key, offset in offsets.items():
            decoded[key] = checks[key](buf, offset)
    except DecodeError as exc:
        raise InvalidMessageError(key, exc.reason, exc.offset) from None
    except (struct.error, IndexError):
        raise InvalidMessageError(key, "truncated data", len(buf)) from None
    except RecursionError:  # pragma: no cover - only when called near the recursion limit
        raise InvalidMessageError(key, "nesting too deep for the interpreter stack", 0) from None
    return view



# ----------------------------------------------------------------------------- the fast path
#
# Almost every message a broker sees is encoded the same few ways: numeric section
# descriptors, list8 and map8/map32 sections, str8 and sym8 strings, small ints. For
# those, one pass below scans, decodes and checks every section at once, where the
# general path above (the scan, then a check per section) spends most of its time on
# per-section dispatch. The fast path accepts only what the general path accepts,
# decodes it to the same values, and gives up (None) on anything else, valid or not:
# the general path (``_general``) then runs from the start and says exactly what is
# wrong.

#: The decoded values of the one-byte ints, made once (like ``ulong0`` in the decoder):
#: building an int subclass costs more than the rest of decoding it.
_SMALLINT: Final = tuple(_int_new(int32, b - 256 if b > 127 else b) for b in range(256))
_SMALLULONG: Final = tuple(_int_new(ulong, b) for b in range(256))
_SMALLUINT: Final = tuple(_int_new(uint, b) for b in range(256))
_UBYTE: Final = tuple(_int_new(ubyte, b) for b in range(256))
_UINT0: Final = _SMALLUINT[0]

#: A fast reader of one section: the bytes, the offset of its value, the message length,
#: the sections decoded so far (where it puts its entries); where the section ends, or -1
#: to leave the message to the general path.
_Reader = Callable[[bytes, int, int, dict[str, Mapping[Any, Any] | None]], int]


def _fast_fields(key: str, names: tuple[str, ...], allowed: tuple[frozenset[int], ...]
                 ) -> _Reader:
    """The fast reader of the header or properties section ``key`` (list0, list8 or null),
    decoded as ``_fields`` decodes it."""
    known = len(names)

    # Inline decoding: the fast path's cost is its calls (one per section measured +16-22%
    # on a small message, bench/bench_amqp.py), so none per field.
    def read(buf: bytes, value: int, n: int,  # noqa: PLR0912
             decoded: dict[str, Mapping[Any, Any] | None]) -> int:
        c = buf[value]
        if c in {0x45, 0x40}:
            decoded[key] = {}
            return value + 1
        size = buf[value + 1]
        end = value + 2 + size
        if c != 0xC0 or not size or end > n:
            return -1
        count = buf[value + 2]
        pos = value + 3
        if count > known or count > end - pos:
            return -1
        result: dict[str, Any] = {}
        for i in range(count):
            code = buf[pos]
            if code == 0x40:
                pos += 1
                continue
            if code not in allowed[i]:
                return -1
            if code == 0xA1:
                start = pos + 2
                pos = start + buf[pos + 1]
                result[names[i]] = buf[start:pos].decode()
            elif code == 0x53:
                result[names[i]] = _SMALLULONG[buf[pos + 1]]
                pos += 2
            elif code == 0xA3:
                start = pos + 2
                pos = start + buf[pos + 1]
                result[names[i]] = _str_new(symbol, buf[start:pos].decode("ascii"))
            elif code in {0x41, 0x42}:
                result[names[i]] = code == 0x41
                pos += 1
            elif code == 0x50:
                result[names[i]] = _UBYTE[buf[pos + 1]]
                pos += 2
            elif code == 0x52:
                result[names[i]] = _SMALLUINT[buf[pos + 1]]
                pos += 2
            elif code == 0x43:
                result[names[i]] = _UINT0
                pos += 1
            else:
                result[names[i]], pos = _decoders[code](buf, pos + 1, 1)
        if pos != end:
            return -1
        decoded[key] = result
        return end

    return read


def _fast_map(name: str, keys: frozenset[int]) -> _Reader:
    """The fast reader of the map section ``name`` (map8, map32 or null) whose keys are of
    ``keys`` and whose values are not compound, decoded as ``_map`` decodes it."""
    strings = 0xA1 in keys  # str8 keys, decoded inline when allowed, as sym8 keys are
    symbols = 0xA3 in keys

    # Inline decoding: the fast path's cost is its calls (one per section measured +16-22%
    # on a small message, bench/bench_amqp.py), so none per field.
    def read(buf: bytes, value: int, n: int,  # noqa: PLR0912
             decoded: dict[str, Mapping[Any, Any] | None]) -> int:
        code = buf[value]
        if code == 0xC1:
            count = buf[value + 2]
            pos = value + 3
            end = value + 2 + buf[value + 1]
        elif code == 0xD1:
            size, count = _u32x2(buf, value + 1)
            pos = value + 9
            end = value + 5 + size
        elif code == 0x40:
            decoded[name] = {}
            return value + 1
        else:
            return -1
        if count & 1 or end > n or end < pos or count > end - pos:
            return -1
        result: dict[Any, Any] = {}
        key: Any
        for _ in range(count >> 1):
            code = buf[pos]
            if code == 0xA1 and strings:
                start = pos + 2
                pos = start + buf[pos + 1]
                key = buf[start:pos].decode()
            elif code == 0xA3 and symbols:
                start = pos + 2
                pos = start + buf[pos + 1]
                key = _str_new(symbol, buf[start:pos].decode("ascii"))
            elif code in keys:
                key, pos = _decoders[code](buf, pos + 1, 1)
            else:
                return -1
            code = buf[pos]
            if code == 0xA1:
                start = pos + 2
                pos = start + buf[pos + 1]
                result[key] = buf[start:pos].decode()
            elif code == 0x54:
                result[key] = _SMALLINT[buf[pos + 1]]
                pos += 2
            elif code == 0x40:
                result[key] = None
                pos += 1
            elif code in _COMPOUND_CODES:
                return -1
            else:
                result[key], pos = _decoders[code](buf, pos + 1, 1)
        if pos != end:
            return -1
        decoded[name] = result
        return end

    return read


#: How each section but the body is read on the fast path, by view key.
_FAST_READERS: Final[dict[str, Callable[[str], _Reader]]] = {
    "header": lambda key: _fast_fields(key, _HEADER_NAMES, _HEADER_CODES),
    "delivery-annotations": lambda key: _fast_map(key, _ANNOTATION_KEY_CODES),
    "message-annotations": lambda key: _fast_map(key, _ANNOTATION_KEY_CODES),
    "properties": lambda key: _fast_fields(key, _PROPERTIES_NAMES, _PROPERTIES_CODES),
    "application-properties": lambda key: _fast_map(key, _STRING_CODES),
    "footer": lambda key: _fast_map(key, _ANNOTATION_KEY_CODES),
}
_ANY: Final = frozenset(range(256))
#: A step of the fast path, per section code: the section's rank in §3.2's order; what the
#: last rank seen becomes after it (its rank, or one less for a body section, which may
#: repeat); its reader (None for a body section: stepped over by its size); the format
#: codes its value may start with.
_Step = tuple[int, int, _Reader | None, frozenset[int]]


def _step(kind: SectionKind) -> _Step:
    if kind.key is None:
        return (kind.rank, kind.rank - 1, None, kind.holds or _ANY)
    # a KeyError here, at import: a section without a reader
    return (kind.rank, kind.rank, _FAST_READERS[kind.key](kind.key), _ANY)


#: Per byte after a section's 0x00 0x53, its step; rank -1 (never after anything) for a
#: byte that is no section's code. A list, not a dict: indexing is the cheaper.
_FAST: Final[list[_Step]] = [(-1, -1, None, _ANY)] * 256
for _kind in SECTIONS:
    _FAST[_kind.code] = _step(_kind)
del _kind


# Bound once, called with every argument: CPython 3.11 specialises neither a classmethod
# looked up per call nor a call that leaves a default (about 30 ns a message).
_view = RawMessageView.from_sections


def validate_message(data: bytes | bytearray | memoryview) -> RawMessageView:
    """The view of a message that passed the door check; raises :class:`InvalidMessageError`.

    One pass over the common encodings, scanning and checking at once; anything else,
    and anything wrong, is left to ``_general``, which also says what is wrong.
    """
    buf = data if type(data) is bytes else bytes(data)
    n = len(buf)
    spans: list[tuple[int, int, int, int]] = []
    append = spans.append
    decoded: dict[str, Mapping[Any, Any] | None] = {}
    fast = _FAST
    pos = 0
    last = -1
    body_offset = body_end = -1
    try:
        while pos < n:
            if buf[pos] or buf[pos + 1] != 0x53:
                return _general(buf)  # not a section, or a descriptor other than smallulong
            code = buf[pos + 2]
            rank, after, read, holds = fast[code]
            if rank <= last:
                return _general(buf)  # not a section's code, out of order or repeated
            last = after
            value = pos + 3
            if read is None:  # a body section
                end = value_end(buf, value)
                if buf[value] not in holds or end > n:
                    return _general(buf)
                if body_offset < 0:
                    body_offset = pos
                body_end = end
            else:
                end = read(buf, value, n, decoded)
                if end < 0:
                    return _general(buf)
            append((code, pos, value, end))
            pos = end
    except InvalidMessageError:
        raise  # from _general, called above
    except (ValueError, IndexError, struct.error):  # DecodeError, UnicodeDecodeError too
        return _general(buf)
    if not spans:
        return _general(buf)  # no sections at all
    if body_offset < 0:  # no body: an empty span where it would be, before any footer
        body_offset = body_end = spans[-1][1] if "footer" in decoded else n
    return _view(buf, spans, body_offset, body_end, decoded, None)


def _general(buf: bytes) -> RawMessageView:
    """The door check of a message outside the common encodings (or a bad one): the scan
    (layout: descriptors, order, section sizes) checking each section but the body as it
    finds it, and saying what is wrong."""
    if not buf:
        raise InvalidMessageError(LAYOUT, "no sections at all", 0)
    try:
        return RawMessageView._checked(buf, _CHECKS)
    except InvalidMessageError:
        raise
    except DecodeError as exc:
        raise InvalidMessageError(LAYOUT, exc.reason, exc.offset) from None
