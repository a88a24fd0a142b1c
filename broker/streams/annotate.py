"""A stream delivery's copy of a message: ``x-stream-offset`` added to its message annotations.

Only the message-annotations section is re-encoded (or inserted, after the header and the
delivery annotations); every other byte, the body included, is kept as it arrived.
"""

from __future__ import annotations

from typing import Final

from proton import symbol

from filtex_proton.amqp import Section, decode_value, encode_value, scan_sections

__all__ = ["OFFSET_ANNOTATION", "with_offset"]

OFFSET_ANNOTATION: Final = symbol("x-stream-offset")
_DESCRIPTOR: Final = b"\x00\x53\x72"
_BEFORE: Final = frozenset({Section.HEADER, Section.DELIVERY_ANNOTATIONS})


def with_offset(data: bytes, offset: int) -> bytes:
    """The message with ``x-stream-offset`` (a long) in its message annotations (replacing one
    the producer set). Raises ``DecodeError`` on bytes that are not a message (a stream holds
    only messages that passed the door check)."""
    spans = scan_sections(data)
    for span in spans:
        if span.section is Section.MESSAGE_ANNOTATIONS:
            value, _ = decode_value(data, span.value)
            annotations = dict(value or {})
            annotations[OFFSET_ANNOTATION] = offset
            return (data[: span.value] + encode_value(annotations) + data[span.end :])
    at = 0
    for span in spans:
        if span.section in _BEFORE:
            at = span.end
    return data[:at] + _DESCRIPTOR + encode_value({OFFSET_ANNOTATION: offset}) + data[at:]
