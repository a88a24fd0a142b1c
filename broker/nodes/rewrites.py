"""What the broker rewrites in a message's bytes, and why (AMQP 1.0 part 3).

- **delivery-count** (header, §3.2.1): "the number of unsuccessful previous delivery attempts",
  so a message that comes back after one (``modified`` with delivery-failed, or left unsettled
  when its consumer went away) says so to its next consumer.
- **the ttl left** (header, §3.2.1): an intermediary that forwards a message received with a
  ttl SHOULD send "the reduced ttl", so that a message cannot live for ever in a loop of
  brokers, and a client that computes an expiry from the ttl computes the broker's.
- **message annotations** (§3.2.3): a stream's ``x-stream-offset``; a dead letter's reason.
- **no expiry on a dead letter**: a dead letter never expires again (RabbitMQ drops a
  dead-lettered message's expiration, Artemis an expired one's), and a client that checks
  expiry itself (Qpid JMS does, by default) would otherwise drop every dead letter of an
  expired message on receipt, since its absolute-expiry-time has passed.

Only the section changed is re-encoded (or inserted); every other byte, the body included,
is kept as it arrived, and fields that were absent stay absent. Each function raises
:class:`~filtex_proton.amqp.DecodeError` on bytes that are not a message (a node holds only
messages that passed the door check).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any, Final

from proton import uint

from filtex_proton.amqp import Section, decode_value, encode_value, scan_sections

__all__ = ["bump_delivery_count", "with_annotations", "with_ttl_left", "without_expiry"]

_HEADER: Final = b"\x00\x53\x70"
_ANNOTATIONS: Final = b"\x00\x53\x72"
_BEFORE_ANNOTATIONS: Final = frozenset({Section.HEADER, Section.DELIVERY_ANNOTATIONS})
_HEADER_FIELDS: Final = 5  # durable, priority, ttl, first-acquirer, delivery-count
_TTL: Final = 2
_FIRST_ACQUIRER: Final = 3
_DELIVERY_COUNT: Final = 4
_ABSOLUTE_EXPIRY_TIME: Final = 8  # of the properties' 13 fields
_UINT_MAX: Final = 0xFFFFFFFF
_U32: Final = struct.Struct(">I")

_Change = Callable[[list[Any]], bool]
"""Changes a section's fields in place; says whether it changed any."""


def _rewritten(data: bytes, section: Section, change: _Change, *, header_if_none: bool = False,
               ) -> bytes:
    """``data`` with the fields of its ``section`` (a list: header, properties) as ``change``
    leaves them; ``data`` itself if it changed nothing. A message without the section is
    returned as it is, unless ``header_if_none``: then ``change`` sees a header of nulls, and
    the header it makes goes first."""
    for span in scan_sections(data):
        if span.section is section:
            value, _ = decode_value(data, span.value)
            fields = list(value) if value is not None else []
            prefix, rest = data[span.start : span.value], data[span.end :]
            before = data[: span.start]
            break
    else:
        if not header_if_none:
            return data
        fields, before, prefix, rest = [], b"", _HEADER, data
    if section is Section.HEADER:  # longer (newer) headers keep their extras
        fields.extend([None] * (_HEADER_FIELDS - len(fields)))
    if not change(fields):
        return data
    while fields and fields[-1] is None:  # absent stays absent
        fields.pop()
    return before + prefix + encode_value(fields) + rest


def _one_more_attempt(fields: list[Any]) -> bool:
    count = fields[_DELIVERY_COUNT]
    fields[_DELIVERY_COUNT] = uint(min(int(count or 0) + 1, _UINT_MAX))
    if fields[_FIRST_ACQUIRER] is True:
        fields[_FIRST_ACQUIRER] = False
    return True


def bump_delivery_count(data: bytes) -> bytes:
    """The message with delivery-count one higher (and first-acquirer, if true, now false).
    A message without a header gains one holding only the delivery-count."""
    return _rewritten(data, Section.HEADER, _one_more_attempt, header_if_none=True)


_FIXED_WIDTH: Final = {0x40: 1, 0x41: 1, 0x42: 1, 0x56: 2, 0x50: 2}
"""Bytes taken by a header's durable or priority as clients encode them: null, true, false,
a boolean or a ubyte."""
_TTL_WIDTH: Final = {0x70: 4, 0x52: 1, 0x40: 0, 0x43: 0}
"""The bytes of a ttl's value after its constructor: uint, smalluint; 0 for none to reduce
(null, uint0)."""
_NO_TTL_HERE: Final = (0, 0)
"""What :func:`_ttl_in_place` says of a message with no ttl to reduce."""
_SMALL_DESCRIPTOR: Final = b"\x00\x53"


def _ttl_in_place(data: bytes) -> tuple[int, int] | None:
    """Where the header's ttl value lies (offset, width; width 0: there is no ttl to reduce,
    no header included), when the message starts as clients encode it (a numeric descriptor;
    a list8 or list32 header whose durable and priority are null, booleans or ubytes); else
    ``None``, for the general path."""
    if not data.startswith(_HEADER):
        return _NO_TTL_HERE if data.startswith(_SMALL_DESCRIPTOR) else None
    try:
        shape = data[3]
        if shape == 0xC0:
            count, at = data[5], 6
        elif shape == 0xD0:
            count, at = _U32.unpack_from(data, 8)[0], 12
        elif shape == 0x45:  # list0: an empty header
            return _NO_TTL_HERE
        else:
            return None
        if count < 3:
            return _NO_TTL_HERE
        fixed = _FIXED_WIDTH.get
        if (width := fixed(data[at])) is None or (second := fixed(data[at + width])) is None:
            return None
        at += width + second
        width = _TTL_WIDTH.get(data[at], -1)
    except (IndexError, struct.error):
        return None
    if width == 0:
        return _NO_TTL_HERE
    return (at + 1, width) if width > 0 and at + 1 + width <= len(data) else None


def with_ttl_left(data: bytes, expires_ms: int, now_ms: int) -> bytes:
    """The message as forwarded at ``now_ms``: a header ttl reduced to what is left until
    ``expires_ms`` (its expiry here, ttl or absolute-expiry-time, whichever came first), at
    least 1 ms (a ttl of 0 would mean "never"); ``data`` itself when it has no ttl (or an
    unreadable one) or nothing is to reduce. The common encodings are patched in place (a
    smaller number in the same bytes), the others re-encoded."""
    left = max(1, min(expires_ms - now_ms, _UINT_MAX))
    place = _ttl_in_place(data)
    if place is not None:
        at, width = place
        if not width:
            return data
        ttl = _U32.unpack_from(data, at)[0] if width == 4 else data[at]
        if not 0 < left < ttl:
            return data
        value = _U32.pack(left) if width == 4 else bytes((left,))
        return data[:at] + value + data[at + width :]

    def reduce(fields: list[Any]) -> bool:
        ttl = fields[_TTL]
        if isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 < left < ttl:
            return False
        fields[_TTL] = uint(left)
        return True

    return _rewritten(data, Section.HEADER, reduce)


def _clear(index: int) -> _Change:
    def clear(fields: list[Any]) -> bool:
        if index >= len(fields) or fields[index] is None:
            return False
        fields[index] = None
        return True

    return clear


_NO_TTL: Final = _clear(_TTL)
_NO_ABSOLUTE_EXPIRY: Final = _clear(_ABSOLUTE_EXPIRY_TIME)


def without_expiry(data: bytes) -> bytes:
    """The message without a header ttl or an absolute-expiry-time (``data`` itself if it had
    neither)."""
    return _rewritten(_rewritten(data, Section.HEADER, _NO_TTL), Section.PROPERTIES,
                      _NO_ABSOLUTE_EXPIRY)


def with_annotations(data: bytes, added: Mapping[Any, Any]) -> bytes:
    """The message with ``added`` in its message annotations (replacing the producer's values
    under the same keys), the section inserted after the header and delivery annotations if
    there was none."""
    spans = scan_sections(data)
    for span in spans:
        if span.section is Section.MESSAGE_ANNOTATIONS:
            value, _ = decode_value(data, span.value)
            annotations = dict(value or {})
            annotations.update(added)
            return data[: span.value] + encode_value(annotations) + data[span.end :]
    at = 0
    for span in spans:
        if span.section in _BEFORE_ANNOTATIONS:
            at = span.end
    return data[:at] + _ANNOTATIONS + encode_value(dict(added)) + data[at:]
