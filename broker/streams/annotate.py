"""A stream delivery's copy of a message: ``x-stream-offset`` added to its message annotations.

Only the message-annotations section is re-encoded (or inserted, after the header and the
delivery annotations); every other byte, the body included, is kept as it arrived.
"""

from __future__ import annotations

from typing import Final

from proton import symbol

from filtex_broker.nodes.rewrites import with_annotations

__all__ = ["OFFSET_ANNOTATION", "with_offset"]

OFFSET_ANNOTATION: Final = symbol("x-stream-offset")


def with_offset(data: bytes, offset: int) -> bytes:
    """The message with ``x-stream-offset`` (a long) in its message annotations (replacing one
    the producer set). Raises ``DecodeError`` on bytes that are not a message (a stream holds
    only messages that passed the door check)."""
    return with_annotations(data, {OFFSET_ANNOTATION: offset})
