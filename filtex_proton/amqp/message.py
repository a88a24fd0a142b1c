"""The section scanner and the lazy message view over a message's raw bytes (AMQP 1.0 §3.2).

A broker that filters at tens of thousands of messages per second cannot afford
a ``proton.Message`` per message: it decodes everything, the body included, and
its defaults hide which header fields are really there. Here one pass over the
size fields finds the sections; a section is decoded only when a filter first
asks for it; the body is never decoded, so the original bytes can be forwarded
untouched.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple

from proton import symbol, timestamp, ubyte, uint, ulong

from filtex_proton.amqp.decode import DecodeError, decode_at, decode_fields, skip_value
from filtex_proton.amqp.encode import encode_value
from filtex_proton.amqp.formats import CODE, CODES_OF, WIDTHS
from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS
from filtex_proton.amqp.view import MISSING, Section

__all__ = [
    "LAYOUT",
    "NO_BODY",
    "SECTIONS",
    "InvalidMessageError",
    "RawMessageView",
    "SectionKind",
    "SectionSpan",
    "encode_message",
    "scan_sections",
]

# Section descriptor codes (AMQP 1.0 §3.2), numeric and symbolic.
HEADER: Final = 0x70
DELIVERY_ANNOTATIONS: Final = 0x71
MESSAGE_ANNOTATIONS: Final = 0x72
PROPERTIES: Final = 0x73
APPLICATION_PROPERTIES: Final = 0x74
DATA: Final = 0x75
AMQP_SEQUENCE: Final = 0x76
AMQP_VALUE: Final = 0x77
FOOTER: Final = 0x78

@dataclass(frozen=True, slots=True)
class SectionKind:
    """One kind of message section (§3.2): its descriptor, its place, what its value may be."""

    code: int
    """The numeric descriptor (0x70 ... 0x78)."""
    symbolic: bytes
    """The symbolic descriptor."""
    rank: int
    """Its place in §3.2's order; the body sections share one, and only they may repeat."""
    section: Section | None
    """The view's section; None for a body section."""
    holds: frozenset[int] | None
    """The format codes its value may start with (None: any); null stands for empty."""

    @property
    def key(self) -> str | None:
        """The view's key of the section (``Section._value_``); None for a body section."""
        return None if self.section is None else self.section._value_


_LISTS: Final = CODES_OF["list"]
_MAPS_OR_NULL: Final = CODES_OF["map"] | CODES_OF["null"]
_EMPTY: Final = frozenset({CODE["list0"], CODE["null"]})

#: The message sections, in the order §3.2 gives them.
SECTIONS: Final[tuple[SectionKind, ...]] = (
    SectionKind(HEADER, b"amqp:header:list", 0, Section.HEADER, _LISTS | CODES_OF["null"]),
    SectionKind(DELIVERY_ANNOTATIONS, b"amqp:delivery-annotations:map", 1,
                Section.DELIVERY_ANNOTATIONS, _MAPS_OR_NULL),
    SectionKind(MESSAGE_ANNOTATIONS, b"amqp:message-annotations:map", 2,
                Section.MESSAGE_ANNOTATIONS, _MAPS_OR_NULL),
    SectionKind(PROPERTIES, b"amqp:properties:list", 3, Section.PROPERTIES,
                _LISTS | CODES_OF["null"]),
    SectionKind(APPLICATION_PROPERTIES, b"amqp:application-properties:map", 4,
                Section.APPLICATION_PROPERTIES, _MAPS_OR_NULL),
    SectionKind(DATA, b"amqp:data:binary", 5, None, CODES_OF["binary"]),
    SectionKind(AMQP_SEQUENCE, b"amqp:amqp-sequence:list", 5, None, _LISTS),
    SectionKind(AMQP_VALUE, b"amqp:amqp-value:*", 5, None, None),
    SectionKind(FOOTER, b"amqp:footer:map", 6, Section.FOOTER, _MAPS_OR_NULL),
)
_BODY_RANK: Final = 5
_SYMBOLIC: Final[dict[bytes, int]] = {kind.symbolic: kind.code for kind in SECTIONS}
#: The scan's view of :data:`SECTIONS`, per code: rank, Section, key, what its value may be.
_SPEC: Final[dict[int, tuple[int, Section | None, str | None, frozenset[int] | None]]] = {
    kind.code: (kind.rank, kind.section, kind.key, kind.holds) for kind in SECTIONS
}

_u32 = struct.Struct(">I").unpack_from
_u64 = struct.Struct(">Q").unpack_from


class SectionSpan(NamedTuple):
    """Where one section lies in the message bytes."""

    section: Section | None
    """The section, or ``None`` for a body section (data, amqp-sequence, amqp-value)."""
    code: int
    """The numeric descriptor code, 0x70 (header) to 0x78 (footer), even if sent symbolically."""
    start: int
    """Offset of the section's described-type constructor (0x00)."""
    value: int
    """Offset of the section's value (the list, map, binary ...)."""
    end: int
    """Offset just after the section."""


def _descriptor(buf: bytes, pos: int) -> tuple[int, int]:
    """The section code of the descriptor at ``pos`` and the offset of the value after it."""
    c = buf[pos]
    if c == 0x53:
        return buf[pos + 1], pos + 2
    if c == 0x80:
        return _u64(buf, pos + 1)[0], pos + 9
    if c == 0xA3:
        end = pos + 2 + buf[pos + 1]
        start = pos + 2
    elif c == 0xB3:
        end = pos + 5 + _u32(buf, pos + 1)[0]
        start = pos + 5
    elif c == 0x44:
        return 0, pos + 1
    else:
        raise DecodeError(f"section descriptor of format code 0x{c:02x}", pos)
    code = _SYMBOLIC.get(buf[start:end])
    if code is None or end > len(buf):
        raise DecodeError(f"unknown section descriptor {buf[start:end]!r}", pos)
    return code, end


#: The ``section`` of an :class:`InvalidMessageError` whose sections cannot even be told apart.
LAYOUT: Final = "message layout"


class InvalidMessageError(DecodeError):
    """A message refused at the door: which section (``section``), what is wrong, where.

    A :class:`DecodeError`, so code that catches those keeps working; its text
    reads ``"application-properties section: map with an odd number of
    elements (3) (at byte 57)"``. See :mod:`filtex_proton.amqp.validate`.
    """

    def __init__(self, section: str, reason: str, offset: int) -> None:
        self.section = section
        self.problem = reason
        label = section if section == LAYOUT else f"{section} section"
        super().__init__(f"{label}: {reason}", offset)

    def __reduce__(self) -> tuple[Any, ...]:
        return (InvalidMessageError, (self.section, self.problem, self.offset))


_Raw = tuple[int, int, int, int]
#: Per view key: decode the section at an offset, check it, return its entries.
_Checks = Mapping[str, Callable[[bytes, int], Mapping[Any, Any]]]


def _check(checks: _Checks, key: str, buf: bytes, value: int, end: int) -> Mapping[Any, Any]:
    """The entries of the section ``key`` at ``value`` as ``checks`` decode and check them;
    raises :class:`InvalidMessageError` naming the section."""
    if buf[value] in _EMPTY:  # list0 or null: an empty section, nothing to check
        return {}
    try:
        return checks[key](buf, value)
    except DecodeError as exc:
        raise InvalidMessageError(key, exc.reason, exc.offset) from None
    except (struct.error, IndexError):
        raise InvalidMessageError(key, "truncated data", end) from None


# One function for speed: value_end called per section costs the scan-only view 10-25%
# (bench/bench_amqp.py --before a tree with the inline code).
def _scan(buf: bytes, checks: _Checks | None = None,  # noqa: PLR0912, PLR0915
          decoded: dict[str, Mapping[Any, Any] | None] | None = None,
          ) -> tuple[list[_Raw], dict[str, int], int, int]:
    """Each section's (code, start, value, end); the view's key -> value offset;
    where the body starts and ends. See :func:`scan_sections`.

    With ``checks`` (the door check), each section but the body is also decoded
    and checked as soon as it is found, into ``decoded``; a section that fails
    raises :class:`InvalidMessageError` naming it. Written for speed: it runs
    once for every message the broker sees.
    """
    n = len(buf)
    pos = 0
    last = -1
    spans: list[_Raw] = []
    offsets: dict[str, int] = {}
    body_offset = body_end = -1
    spec_of = _SPEC
    widths = WIDTHS
    try:
        while pos < n:
            if buf[pos] != 0x00:
                raise DecodeError("expected a described message section", pos)
            if buf[pos + 1] == 0x53:
                code = buf[pos + 2]
                value = pos + 3
            else:
                code, value = _descriptor(buf, pos + 1)
            spec = spec_of.get(code)
            if spec is None:
                raise DecodeError(f"descriptor 0x{code:x} is not a message section", pos + 1)
            rank, _, key, allowed = spec
            if rank <= last and (rank < last or rank != _BODY_RANK):
                raise DecodeError(f"section 0x{code:x} out of order or repeated", pos)
            last = rank
            c = buf[value]
            if allowed is not None and c not in allowed:
                raise DecodeError(f"section 0x{code:x} cannot hold format code 0x{c:02x}", value)
            # value_end, inlined: a call per section costs the scan-only view 10-25% (bench_amqp.py)
            width = widths[c]
            if width == -1:
                end = value + 2 + buf[value + 1]
            elif width == -4:
                end = value + 5 + _u32(buf, value + 1)[0]
            elif width >= 0:
                end = value + 1 + width
            else:
                end = skip_value(buf, value)
            if end > n:
                raise DecodeError(f"section 0x{code:x} runs past the end of the message", value)
            spans.append((code, pos, value, end))
            if key is not None:
                offsets[key] = value
                if checks is not None:
                    decoded[key] = _check(checks, key, buf, value, end)  # type: ignore[index]
            else:
                if body_offset < 0:
                    body_offset = pos
                body_end = end
            pos = end
    except (struct.error, IndexError):
        raise DecodeError("truncated section", n) from None
    if body_offset < 0:
        # No body: an empty span where it would be, before any footer.
        body_offset = body_end = spans[-1][1] if "footer" in offsets else n
    return spans, offsets, body_offset, body_end


def scan_sections(data: bytes | bytearray | memoryview) -> list[SectionSpan]:
    """The sections of an encoded (annotated) message, found from size fields only.

    Raises :class:`DecodeError` unless the bytes are a sequence of described
    message sections: known descriptors (numeric or symbolic), values of the
    right kind, in the order of §3.2 (header ... application-properties, body,
    footer), no section but a body section twice. Section contents are not
    looked at.
    """
    buf = data if type(data) is bytes else bytes(data)
    return [SectionSpan(_SPEC[c][1], c, s, v, e) for c, s, v, e in _scan(buf)[0]]


_HEADER_NAMES: Final = tuple(name for name, _ in HEADER_FIELDS)
_PROPERTIES_NAMES: Final = tuple(name for name, _ in PROPERTIES_FIELDS)
_FIELD_NAMES: Final[dict[str, tuple[str, ...]]] = {
    "header": _HEADER_NAMES,
    "properties": _PROPERTIES_NAMES,
}
_new_object = object.__new__
#: Marks a section not decoded yet (compared by identity; any Mapping would do).
_UNLOADED: Final[Mapping[Any, Any]] = MappingProxyType({})


class RawMessageView:
    """A :class:`~filtex_proton.amqp.view.MessageView` over a message's encoded bytes.

    The bytes are scanned once, here (:class:`DecodeError` if they are not a
    message); each section is decoded on first request and cached. Header and
    properties are presented as mappings from field name to value holding only
    the fields that are present and not null; the map sections as decoded.
    Decoding errors surface as :class:`DecodeError` from :meth:`section`,
    :meth:`field` and :meth:`has_field`. The mappings returned are the cache:
    do not modify them.

    ``data`` is the original bytes, ``spans`` the sections found, and
    ``body_offset``/``body_end`` delimit the body sections (equal when there
    is no body), for a broker that forwards or rewrites around them.
    """

    __slots__ = ("_decoded", "_offsets", "_raw", "body_end", "body_offset", "data")

    _raw: list[_Raw]
    """Each section's (code, start, value, end)."""
    _offsets: dict[str, int] | None
    """Each section's value offset, by view key; None when every section there is has been
    decoded (the door check's fast path), so a section not in ``_decoded`` is absent."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        buf = data if type(data) is bytes else bytes(data)
        self.data: bytes = buf
        self._raw, self._offsets, self.body_offset, self.body_end = _scan(buf)
        self._decoded: dict[str, Mapping[Any, Any] | None] = {}

    @classmethod
    def from_sections(cls, data: bytes, spans: list[_Raw], body_offset: int, body_end: int,
                      decoded: dict[str, Mapping[Any, Any] | None],
                      offsets: dict[str, int] | None = None) -> RawMessageView:
        """A view of sections found already, without scanning again.

        ``spans``: each section's (code, start, value, end), as :attr:`spans` has them;
        ``decoded``: the sections decoded so far, by view key (``Section._value_``), kept
        as the cache; ``offsets``: each section's value offset by view key, or None when
        ``decoded`` holds every section there is (a section not in it is absent). For a
        scan done elsewhere, such as the door check's; nothing here checks the bytes.
        """
        self = _new_object(cls)  # __init__ would scan the bytes again
        self.data = data
        self._raw = spans
        self._offsets = offsets
        self.body_offset = body_offset
        self.body_end = body_end
        self._decoded = decoded
        return self

    @classmethod
    def _checked(cls, buf: bytes, checks: _Checks) -> RawMessageView:
        """A view whose sections were decoded and checked by ``checks`` during the scan
        (one pass: :func:`filtex_proton.amqp.validate.validate_message`)."""
        decoded: dict[str, Mapping[Any, Any] | None] = {}
        spans, offsets, body_offset, body_end = _scan(buf, checks, decoded)
        return cls.from_sections(buf, spans, body_offset, body_end, decoded, offsets)

    # Sections are looked up by their value string (``Section._value_``, a
    # documented enum attribute): Enum.__hash__ is Python code, a str's hash is
    # cached, and this is the per-message hot path.

    @property
    def spans(self) -> list[SectionSpan]:
        """The sections of the message, in order, as :func:`scan_sections` reports them."""
        return [SectionSpan(_SPEC[c][1], c, s, v, e) for c, s, v, e in self._raw]

    def _load(self, key: str) -> Mapping[Any, Any] | None:
        offsets = self._offsets
        # None: the door check decoded every section there is, so one not decoded is absent
        offset = None if offsets is None else offsets.get(key)
        entries: Mapping[Any, Any] | None
        if offset is None:
            entries = None
        else:
            names = _FIELD_NAMES.get(key)
            if names is not None:
                entries = decode_fields(self.data, offset, names)
            else:
                value, _ = decode_at(self.data, offset)
                entries = value if value is not None else {}
        self._decoded[key] = entries
        return entries

    def section(self, section: Section) -> Mapping[Any, Any] | None:
        key = section._value_
        entries = self._decoded.get(key, _UNLOADED)
        if entries is _UNLOADED:
            return self._load(key)
        return entries

    def field(self, section: Section, key: Any) -> Any:
        name = section._value_
        entries = self._decoded.get(name, _UNLOADED)
        if entries is _UNLOADED:
            entries = self._load(name)
        if entries is None:
            return MISSING
        return entries.get(key, MISSING)

    def has_field(self, section: Section, key: Any) -> bool:
        name = section._value_
        entries = self._decoded.get(name, _UNLOADED)
        if entries is _UNLOADED:
            entries = self._load(name)
        return entries is not None and key in entries

    def __repr__(self) -> str:
        kinds = ", ".join(
            s.section.value if s.section else f"body(0x{s.code:x})" for s in self.spans
        )
        return f"RawMessageView({len(self.data)} bytes: {kinds})"


# ----------------------------------------------------------------------------- encoding


class _NoBody:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_BODY"


#: ``encode_message(body=NO_BODY)``: a message without body sections.
NO_BODY: Final = _NoBody()

# Plain Python ints and strs given for a field are converted to the field's AMQP
# type, as proton.Message does; values of any other type are encoded as given.
_INT_TYPES: Final[dict[str, type]] = {
    "ubyte": ubyte,
    "uint": uint,
    "timestamp": timestamp,
    "*message-id": ulong,
}


def _coerce(kind: str, value: Any) -> Any:
    if type(value) is int:
        to = _INT_TYPES.get(kind)
        return to(value) if to is not None else value
    if type(value) is str and kind == "symbol":
        return symbol(value)
    return value


def _composite(
    fields: Mapping[str, Any], spec: tuple[tuple[str, str], ...], what: str
) -> list[Any]:
    known = {name for name, _ in spec}
    unknown = set(fields) - known
    if unknown:
        raise ValueError(f"unknown {what} field(s): {', '.join(sorted(unknown))}")
    values: list[Any] = []
    for name, kind in spec:
        values.append(_coerce(kind, fields[name]) if name in fields else None)
    # Trailing fields without a value are omitted from the list (AMQP 1.0 §1.4),
    # but a field given explicitly as None stays, encoded as null.
    last = max((i for i, (name, _) in enumerate(spec) if name in fields), default=-1)
    return values[: last + 1]


def _symbol_keys(entries: Mapping[Any, Any]) -> dict[Any, Any]:
    return {symbol(k) if type(k) is str else k: v for k, v in entries.items()}


def _section(code: int, value: Any) -> bytes:
    return bytes((0x00, 0x53, code)) + encode_value(value)


def _body_sections(body: Any, kind: str) -> list[bytes]:
    """The body sections of ``encode_message``: one amqp-value, data sections or
    amqp-sequence sections."""
    if kind == "value":
        return [_section(AMQP_VALUE, body)]
    if kind == "data":
        chunks: Sequence[Any] = (
            [body] if isinstance(body, bytes | bytearray | memoryview) else list(body))
        for chunk in chunks:
            if not isinstance(chunk, bytes | bytearray | memoryview):
                raise TypeError(f"a data section holds binary, not {type(chunk).__name__}")
        return [_section(DATA, bytes(chunk)) for chunk in chunks]
    if kind == "sequence":
        sequences = list(body)
        for items in sequences:
            if not isinstance(items, list | tuple):
                raise TypeError(f"an amqp-sequence holds a list, not {type(items).__name__}")
        return [_section(AMQP_SEQUENCE, list(items)) for items in sequences]
    raise ValueError(f"unknown body kind {kind!r}")


def encode_message(
    *,
    header: Mapping[str, Any] | None = None,
    delivery_annotations: Mapping[Any, Any] | None = None,
    message_annotations: Mapping[Any, Any] | None = None,
    properties: Mapping[str, Any] | None = None,
    application_properties: Mapping[str, Any] | None = None,
    body: Any = NO_BODY,
    body_kind: Literal["value", "data", "sequence"] = "value",
    footer: Mapping[Any, Any] | None = None,
) -> bytes:
    """The encoded bytes of a message, with exact control over which fields are present.

    Header and properties are given by hyphenated field name; a field not given
    is absent (trailing ones omitted from the list, inner ones null), a field
    given as ``None`` is encoded as null. Plain ``int``/``str`` field values
    take the field's type (priority → ubyte, content-type → symbol ...);
    annotation and footer keys given as plain ``str`` become symbols. A section
    given as ``None`` is left out.

    ``body`` is one amqp-value by default; with ``body_kind="data"`` it is a
    binary or a sequence of binaries (one data section each); with
    ``body_kind="sequence"`` a sequence of lists (one amqp-sequence each).
    """
    parts: list[bytes] = []
    if header is not None:
        parts.append(_section(HEADER, _composite(header, HEADER_FIELDS, "header")))
    if delivery_annotations is not None:
        parts.append(_section(DELIVERY_ANNOTATIONS, _symbol_keys(delivery_annotations)))
    if message_annotations is not None:
        parts.append(_section(MESSAGE_ANNOTATIONS, _symbol_keys(message_annotations)))
    if properties is not None:
        parts.append(_section(PROPERTIES, _composite(properties, PROPERTIES_FIELDS, "properties")))
    if application_properties is not None:
        parts.append(_section(APPLICATION_PROPERTIES, dict(application_properties)))
    if body is not NO_BODY:
        parts.extend(_body_sections(body, body_kind))
    if footer is not None:
        parts.append(_section(FOOTER, _symbol_keys(footer)))
    return b"".join(parts)
