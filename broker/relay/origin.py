"""No-local across the upstream: messages carry the relay connection they were published on.

A relay's producers and consumers meet only in the upstream broker, so the
connection a message arrived on (what no-local compares) would be lost on the
way. The relay therefore adds one message annotation on the way up,
``x-opt-filtex-relay-origin`` = ``"<relay instance>:<connection identity>"``,
and reads it back on the way down. Message annotations are the section meant
for intermediaries (AMQP 1.0 §3.2.3); the other sections and every existing
annotation are kept byte for byte (the map is extended, never re-encoded).
The instance part is random per relay process: a connection number from
another relay, or from an earlier run of this one, names nobody here.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final

from proton import symbol

from filtex_proton.amqp import (
    MESSAGE_ANNOTATIONS,
    DecodeError,
    RawMessageView,
    Section,
    decode_value,
    encode_value,
    skip_value,
)

__all__ = ["ORIGIN_KEY", "OriginStamp"]

ORIGIN_KEY: Final = symbol("x-opt-filtex-relay-origin")
_KEY_BYTES: Final = encode_value(ORIGIN_KEY)
_MAP8: Final = 0xC1
_MAP32: Final = 0xD1
_NULL: Final = 0x40
_SECTION_HEAD: Final = bytes((0x00, 0x53, MESSAGE_ANNOTATIONS))
_ENTRIES_KEPT: Final = 4096
"""Encoded origin entries kept (one per relay connection that published lately)."""


class OriginStamp:
    """Stamps (on the way up) and reads (on the way down) this relay's origin annotation."""

    __slots__ = ("_entries", "instance")

    def __init__(self, instance: str | None = None) -> None:
        self.instance = instance or uuid.uuid4().hex[:16]
        self._entries: dict[int, bytes] = {}
        """Origin -> its encoded map entry: built once per connection, not per message."""

    def stamp(self, view: RawMessageView, origin: int) -> bytes:
        """The message's bytes with the origin annotation set (replacing any earlier one)."""
        data = view.data
        entry = self._entries.get(origin)
        if entry is None:
            if len(self._entries) >= _ENTRIES_KEPT:
                self._entries.clear()
            entry = self._entries[origin] = _KEY_BYTES + encode_value(
                f"{self.instance}:{origin}")
        spans = view.spans
        for span in spans:
            if span.code == MESSAGE_ANNOTATIONS:
                entries, count = _entries_without_origin(data, span.value, span.end)
                section = _SECTION_HEAD + _map32(entries + entry, count + 2)
                return data[:span.start] + section + data[span.end:]
        # No annotations yet: the section goes after header and delivery-annotations.
        at = 0
        for span in spans:
            if span.code < MESSAGE_ANNOTATIONS:
                at = span.end
        return data[:at] + _SECTION_HEAD + _map32(entry, 2) + data[at:]

    def origin(self, view: RawMessageView) -> int | None:
        """The relay connection that published the message, if it was one of ours."""
        try:
            value = view.field(Section.MESSAGE_ANNOTATIONS, ORIGIN_KEY)
        except DecodeError:
            return None
        if not isinstance(value, str):
            return None
        instance, _, number = value.rpartition(":")
        if instance != self.instance or not number.isdigit():
            return None
        return int(number)


def _map32(entries: bytes, count: int) -> bytes:
    return struct.pack(">BII", _MAP32, len(entries) + 4, count) + entries


def _entries_without_origin(data: bytes, start: int, end: int) -> tuple[bytes, int]:
    """The encoded key/value pairs of the annotations map at ``start``, minus our own key;
    and how many items (keys and values) they are."""
    code = data[start]
    if code == _NULL:
        return b"", 0
    if code == _MAP8:
        pos, count = start + 3, data[start + 2]
    elif code == _MAP32:
        pos, count = start + 9, struct.unpack_from(">I", data, start + 5)[0]
    else:
        raise DecodeError(f"message-annotations is not a map (0x{code:02x})", start)
    kept: list[bytes] = []
    items = 0
    for _ in range(count // 2):
        value_at = skip_value(data, pos)
        after = skip_value(data, value_at)
        if after > end:
            raise DecodeError("message-annotations overruns its section", pos)
        key, _ = decode_value(data, pos)
        if key != ORIGIN_KEY:
            kept.append(data[pos:after])
            items += 2
        pos = after
    return b"".join(kept), items
