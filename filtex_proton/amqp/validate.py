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

Three paths, each handing on what it does not take: the straight line of
:mod:`~filtex_proton.amqp.fast_door` (the common shapes), the loop over the sections' table
(:func:`validate_by_table`, the rules as they read) and the general path (the scan checking
each section, which also words every refusal). They accept the same messages, decode them
to the same values and refuse the rest with the same errors.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

from proton import Array, Described, symbol, timestamp, ubyte, uint, ulong

from filtex_proton.amqp.decode import (
    DECODERS,
    UNDESCRIBED,
    DecodeError,
    compound_frame,
    decode_at,
    decode_fields,
    value_end,
)
from filtex_proton.amqp.door_tables import (
    ANNOTATION_KEY_CODES,
    COMPOUND_CODES,
    HEADER_CODES,
    HEADER_KINDS,
    HEADER_NAMES,
    PROPERTIES_CODES,
    PROPERTIES_KINDS,
    PROPERTIES_NAMES,
    SMALLINT,
    SMALLUINT,
    SMALLULONG,
    STRING_CODES,
    UBYTE,
    UINT0,
    Reader,
    Span,
)
from filtex_proton.amqp.fast_door import Door, straight_line
from filtex_proton.amqp.formats import CODE, CODES_OF, TYPE_OF
from filtex_proton.amqp.message import (
    LAYOUT,
    SECTIONS,
    InvalidMessageError,
    RawMessageView,
    SectionKind,
)

__all__ = [
    "LAYOUT",
    "InvalidMessageError",
    "validate_by_table",
    "validate_message",
    "validate_view",
]

_TYPE_NAMES: Final[dict[type, str]] = {
    bool: "boolean", ubyte: "ubyte", uint: "uint", ulong: "ulong", timestamp: "timestamp",
    symbol: "symbol", str: "string", bytes: "binary", uuid.UUID: "uuid", list: "list",
    dict: "map", Array: "array", Described: "described value",
}
_ANNOTATION_KEYS: Final = frozenset({symbol, ulong})
_EMPTY: Final = CODES_OF["null"] | {CODE["list0"]}

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
                elif code in COMPOUND_CODES:
                    result[key], pos = _compound_value(buf, pos, key, simple)
                else:
                    result[key], pos = dec[code](buf, pos + 1, 1)
        except UnicodeDecodeError:
            raise DecodeError("invalid UTF-8 in string or non-ASCII symbol", pos) from None
        if pos != end:
            raise DecodeError("map elements do not fill its size", end)
        return result

    return check


_annotations = _map(ANNOTATION_KEY_CODES, "symbol or ulong", simple=False)

#: Per section key of the view (``Section._value_``): decode it, check it, return the entries.
_CHECKS: Final[dict[str, Callable[[bytes, int], Mapping[Any, Any]]]] = {
    "header": _fields(HEADER_NAMES, HEADER_CODES, HEADER_KINDS),
    "delivery-annotations": _annotations,
    "message-annotations": _annotations,
    "properties": _fields(PROPERTIES_NAMES, PROPERTIES_CODES, PROPERTIES_KINDS),
    "application-properties": _map(STRING_CODES, "string", simple=True),
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


# ----------------------------------------------------------------------------- the table loop
#
# Almost every message a broker sees is encoded the same few ways: numeric section
# descriptors, list8 and map8/map32 sections, str8 and sym8 strings, small ints. For
# those, one pass below (a loop over the sections' table, a reader per kind of section)
# scans, decodes and checks every section at once, where the general path above (the
# scan, then a check per section) spends most of its time on per-section dispatch. The
# loop accepts only what the general path accepts, decodes it to the same values, and
# gives up on anything else, valid or not: the general path (``_general``) then runs from
# the start and says exactly what is wrong. In front of the loop, ``validate_message``
# runs a straight-line copy of it for the commonest shapes (``fast_door``), which hands
# anything else on to the loop where it stopped (``_table_loop``).

def _fast_fields(key: str, names: tuple[str, ...], allowed: tuple[frozenset[int], ...]
                 ) -> Reader:
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
                result[names[i]] = SMALLULONG[buf[pos + 1]]
                pos += 2
            elif code == 0xA3:
                start = pos + 2
                pos = start + buf[pos + 1]
                result[names[i]] = _str_new(symbol, buf[start:pos].decode("ascii"))
            elif code in {0x41, 0x42}:
                result[names[i]] = code == 0x41
                pos += 1
            elif code == 0x50:
                result[names[i]] = UBYTE[buf[pos + 1]]
                pos += 2
            elif code == 0x52:
                result[names[i]] = SMALLUINT[buf[pos + 1]]
                pos += 2
            elif code == 0x43:
                result[names[i]] = UINT0
                pos += 1
            else:
                result[names[i]], pos = _decoders[code](buf, pos + 1, 1)
        if pos != end:
            return -1
        decoded[key] = result
        return end

    return read


def _fast_map(name: str, keys: frozenset[int]) -> Reader:
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
                result[key] = SMALLINT[buf[pos + 1]]
                pos += 2
            elif code == 0x40:
                result[key] = None
                pos += 1
            elif code in COMPOUND_CODES:
                return -1
            else:
                result[key], pos = _decoders[code](buf, pos + 1, 1)
        if pos != end:
            return -1
        decoded[name] = result
        return end

    return read


#: How each section but the body is read on the fast path, by view key.
_FAST_READERS: Final[dict[str, Callable[[str], Reader]]] = {
    "header": lambda key: _fast_fields(key, HEADER_NAMES, HEADER_CODES),
    "delivery-annotations": lambda key: _fast_map(key, ANNOTATION_KEY_CODES),
    "message-annotations": lambda key: _fast_map(key, ANNOTATION_KEY_CODES),
    "properties": lambda key: _fast_fields(key, PROPERTIES_NAMES, PROPERTIES_CODES),
    "application-properties": lambda key: _fast_map(key, STRING_CODES),
    "footer": lambda key: _fast_map(key, ANNOTATION_KEY_CODES),
}
#: The table's reader of each section but the body, by section code; a KeyError here, at
#: import: a section without a reader.
_READERS: Final[dict[int, Reader]] = {
    kind.code: _FAST_READERS[kind.key](kind.key) for kind in SECTIONS if kind.key is not None
}
_ANY: Final = frozenset(range(256))
#: A step of the fast path, per section code: the section's rank in §3.2's order; what the
#: last rank seen becomes after it (its rank, or one less for a body section, which may
#: repeat); its reader (None for a body section: stepped over by its size); the format
#: codes its value may start with.
_Step = tuple[int, int, Reader | None, frozenset[int]]


def _step(kind: SectionKind) -> _Step:
    if kind.key is None:
        return (kind.rank, kind.rank - 1, None, kind.holds or _ANY)
    return (kind.rank, kind.rank, _READERS[kind.code], _ANY)


#: Per byte after a section's 0x00 0x53, its step; rank -1 (never after anything) for a
#: byte that is no section's code. A list, not a dict: indexing is the cheaper.
_FAST: Final[list[_Step]] = [(-1, -1, None, _ANY)] * 256
for _kind in SECTIONS:
    _FAST[_kind.code] = _step(_kind)
del _kind


# Bound once, called with every argument: CPython 3.11 specialises neither a classmethod
# looked up per call nor a call that leaves a default (about 30 ns a message).
_view = RawMessageView.from_sections


def validate_by_table(data: bytes | bytearray | memoryview) -> RawMessageView:
    """The door check as its rules read: what :func:`validate_message` does, without its
    straight-line fast path in front. Raises :class:`InvalidMessageError`.

    One pass over the common encodings, scanning and checking at once; anything else,
    and anything wrong, is left to ``_general``, which also says what is wrong.
    """
    return _table_loop(data if type(data) is bytes else bytes(data), [], {})


def _after(spans: list[Span]) -> tuple[int, int, int, int]:
    """Where the table loop is once it has read ``spans``: its position, the rank its order
    rule keeps, where the body starts and ends (-1: no body yet)."""
    body_offset = body_end = -1
    for code, start, _, end in spans:
        if _FAST[code][2] is None:  # a body section
            if body_offset < 0:
                body_offset = start
            body_end = end
    code, _, _, end = spans[-1]
    return end, _FAST[code][1], body_offset, body_end


def _table_loop(buf: bytes, spans: list[Span], decoded: dict[str, Mapping[Any, Any] | None]
                ) -> RawMessageView:
    """The table loop from where ``spans`` end: the sections read already, each one's
    (code, start, value, end), and ``decoded`` their entries, as this loop reads them (none:
    from the start). The straight line hands a message on so, without it being read twice."""
    n = len(buf)
    append = spans.append
    fast = _FAST
    pos, last, body_offset, body_end = _after(spans) if spans else (0, -1, -1, -1)
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


#: ``validate_message(data)``: the view of a message that passed the door check; raises
#: :class:`InvalidMessageError`. The straight line of :mod:`fast_door` for the common
#: shapes, the table loop (:func:`validate_by_table`) for the rest: the same views and the
#: same refusals.
validate_message: Final[Door] = straight_line(_READERS, _table_loop)
