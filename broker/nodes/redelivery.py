"""Redelivery bookkeeping in the message bytes: the header's delivery-count.

A message that comes back after a failed delivery attempt (``modified`` with
delivery-failed, or left unsettled when its consumer went away) must say so to
its next consumer (AMQP 1.0 §3.2.1: "the number of unsuccessful previous
delivery attempts"). Only the header section is re-encoded; every other byte,
the body included, is kept as it arrived, and fields that were absent stay
absent.
"""

from __future__ import annotations

from typing import Final

from proton import uint

from filtex_proton.amqp import Section, decode_value, encode_value, scan_sections

__all__ = ["bump_delivery_count"]

_HEADER_DESCRIPTOR: Final = b"\x00\x53\x70"
_FIELDS: Final = 5  # durable, priority, ttl, first-acquirer, delivery-count
_FIRST_ACQUIRER: Final = 3
_DELIVERY_COUNT: Final = 4


def bump_delivery_count(data: bytes) -> bytes:
    """The message with delivery-count one higher (and first-acquirer, if true, now false).

    A message without a header gains one holding only the delivery-count.
    Raises :class:`~filtex_proton.amqp.DecodeError` on bytes that are not
    a message (the broker never stores such bytes).
    """
    spans = scan_sections(data)
    if spans and spans[0].section is Section.HEADER:
        head = spans[0]
        value, _ = decode_value(data, head.value)
        fields = list(value) if value is not None else []
        prefix = data[head.start : head.value]
        rest = data[head.end :]
    else:
        fields = []
        prefix = _HEADER_DESCRIPTOR
        rest = data
    fields.extend([None] * (_FIELDS - len(fields)))  # longer (newer) headers keep their extras
    count = fields[_DELIVERY_COUNT]
    fields[_DELIVERY_COUNT] = uint(min(int(count or 0) + 1, 0xFFFFFFFF))
    if fields[_FIRST_ACQUIRER] is True:
        fields[_FIRST_ACQUIRER] = False
    return prefix + encode_value(fields) + rest
