"""A copy of a message with entries added to its message annotations (AMQP 1.0 part 3 §3.2.3).

Only the message-annotations section is re-encoded (or inserted, after the header and the
delivery annotations); every other byte, the body included, is kept as it arrived. Streams
add ``x-stream-offset`` so; dead letters, why they were dead-lettered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from filtex_proton.amqp import Section, decode_value, encode_value, scan_sections

__all__ = ["with_annotations"]

_DESCRIPTOR: Final = b"\x00\x53\x72"
_BEFORE: Final = frozenset({Section.HEADER, Section.DELIVERY_ANNOTATIONS})


def with_annotations(data: bytes, added: Mapping[Any, Any]) -> bytes:
    """The message with ``added`` in its message annotations (replacing the producer's values
    under the same keys). Raises ``DecodeError`` on bytes that are not a message (a node holds
    only messages that passed the door check)."""
    spans = scan_sections(data)
    for span in spans:
        if span.section is Section.MESSAGE_ANNOTATIONS:
            value, _ = decode_value(data, span.value)
            annotations = dict(value or {})
            annotations.update(added)
            return data[: span.value] + encode_value(annotations) + data[span.end :]
    at = 0
    for span in spans:
        if span.section in _BEFORE:
            at = span.end
    return data[:at] + _DESCRIPTOR + encode_value(dict(added)) + data[at:]
