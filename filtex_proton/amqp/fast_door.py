"""The door check's straight line: the table loop unrolled for the message shapes nearly
every client sends.

:func:`filtex_proton.amqp.validate.validate_by_table` defines the door check as a loop over
the message sections' table, a reader per kind of section. That loop pays, per section, a
lookup, the order rule and a call. :func:`straight_line` makes the same check without
them for the commonest shapes: header (list0, null, or list8 through the table's reader),
delivery- and message-annotations (the table's reader), properties (list8, read inline),
application-properties (map8 or map32 with str8 keys, read inline), any number of data,
amqp-sequence or amqp-value sections (stepped over by their size) and a footer (the
table's reader); numeric descriptors only, in §3.2's order. It accepts only what the loop
accepts, and reads each section it takes as the loop reads it, into the same values; it
builds the same view through the same public constructor. Anything else, valid or not, it
hands on to the loop at the section it stopped at, with the sections before it (read as
the loop would have, so not read twice); the loop then accepts the message or says what
is wrong. ``tests/filtex_proton/amqp/test_door_paths.py`` holds the door check to the loop
alone (:func:`~filtex_proton.amqp.validate.validate_by_table`): same views, same refusals.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any, Final

from proton import symbol

from filtex_proton.amqp.decode import DECODERS, value_end
from filtex_proton.amqp.door_tables import (
    COMPOUND_CODES,
    PROPERTIES_CODES,
    PROPERTIES_NAMES,
    SMALLINT,
    SMALLULONG,
    Reader,
    Span,
)
from filtex_proton.amqp.formats import WIDTHS, check_literals
from filtex_proton.amqp.message import SECTIONS, InvalidMessageError, RawMessageView

__all__ = ["Door", "Fallback", "straight_line"]

#: A door check: the bytes of a message, its checked view; raises InvalidMessageError.
Door = Callable[[bytes | bytearray | memoryview], RawMessageView]
#: The table loop, from after the sections read already (their spans, their entries by
#: view key): what the straight line hands a message on to.
Fallback = Callable[[bytes, list[Span], dict[str, Mapping[Any, Any] | None]], RawMessageView]

# The straight line compares format codes and section codes with literals (a constant
# compares faster than a global name): these, checked against the tables at import.
check_literals({"null": 0x40, "list0": 0x45, "list8": 0xC0, "map8": 0xC1, "map32": 0xD1,
                "str8": 0xA1, "sym8": 0xA3, "smallint": 0x54, "smallulong": 0x53})
#: Each section's (code, rank in §3.2's order, view key), as the straight line is written.
_WRITTEN_FOR: Final = [
    (0x70, 0, "header"), (0x71, 1, "delivery-annotations"), (0x72, 2, "message-annotations"),
    (0x73, 3, "properties"), (0x74, 4, "application-properties"), (0x75, 5, None),
    (0x76, 5, None), (0x77, 5, None), (0x78, 6, "footer"),
]
if [(kind.code, kind.rank, kind.key) for kind in SECTIONS] != _WRITTEN_FOR:
    raise AssertionError("message.SECTIONS changed: the door's straight line needs the same")

#: What a body section's value may start with, by its code less 0x75 (data, amqp-sequence,
#: amqp-value), from the sections' table.
_BODY_HOLDS: Final = tuple(kind.holds or frozenset(range(256)) for kind in SECTIONS[5:8])
_PROPERTIES_KNOWN: Final = len(PROPERTIES_NAMES)
_decoders = DECODERS
_widths = WIDTHS
_str_new = str.__new__
_u32x2 = struct.Struct(">II").unpack_from
# Bound once, called with every argument: CPython 3.11 specialises neither a classmethod
# looked up per call nor a call that leaves a default (about 30 ns a message).
_view = RawMessageView.from_sections


# The statements counted here are door's, waived below.
def straight_line(readers: Mapping[int, Reader], fallback: Fallback) -> Door:  # noqa: PLR0915
    """The door check as one straight-line function for the common message shapes.

    ``readers``: the table loop's reader of each section but the body, by section code
    (the straight line calls those of header list8, the annotations and the footer);
    ``fallback``: the table loop, which gets any message the straight line does not take,
    with the sections read so far (their spans and entries), and whose view or refusal is
    then the answer.
    """
    header = readers[0x70]
    annotations = (readers[0x71], readers[0x72])  # by section code less 0x71
    footer = readers[0x78]

    # One function, each section inline or one call away, for speed: the table loop, which
    # pays a lookup, the order rule and a call per section, takes 8% and 18% more time than
    # this on bench_amqp's typical and small messages (`python bench/bench_amqp.py --before
    # DIR`, DIR a tree with the loop alone; 2026-11-28, 2 cores, medians of 5 runs).
    def door(data: bytes | bytearray | memoryview  # noqa: PLR0912, PLR0915
             ) -> RawMessageView:
        """The view of a message that passed the door check; raises InvalidMessageError."""
        buf = data if type(data) is bytes else bytes(data)
        n = len(buf)
        spans: list[Span] = []
        decoded: dict[str, Mapping[Any, Any] | None] = {}
        if n < 4 or buf[0] or buf[1] != 0x53:  # no section, or a descriptor not a smallulong
            return fallback(buf, spans, decoded)
        code = buf[2]
        pos = 0
        last = 0x70  # the last annotations section read (none yet): they come in order
        # After each section, ``code`` is the next one's, or -1 where there is none or its
        # descriptor is not a smallulong (then nothing below matches, and the end check
        # hands the message to the loop). The codes are tested in §3.2's order, so a section
        # out of order or repeated is left unread, and the message to the loop; only the
        # annotations (two kinds, one reader) and the body sections (which may repeat) are
        # read in loops.
        try:
            if code == 0x70:  # header: list0 or null (no fields), or the table's reader
                if buf[3] in {0x45, 0x40}:
                    decoded["header"] = {}
                    end = 4
                else:
                    end = header(buf, 3, n, decoded)
                    if end < 0:
                        return fallback(buf, spans, decoded)
                spans.append((0x70, 0, 3, end))
                pos = end
                code = buf[pos + 2] if pos < n and not buf[pos] and buf[pos + 1] == 0x53 else -1
            while last < code < 0x73:  # delivery-, message-annotations: the table's reader
                end = annotations[code - 0x71](buf, pos + 3, n, decoded)
                if end < 0:
                    return fallback(buf, spans, decoded)
                spans.append((code, pos, pos + 3, end))
                pos = end
                last = code
                code = buf[pos + 2] if pos < n and not buf[pos] and buf[pos + 1] == 0x53 else -1
            # Properties and application-properties, the sections filters read, are read
            # inline as the table's readers read them: through the readers, the small message
            # takes about 2.6% more instructions for each (valgrind --tool=callgrind, per call).
            if code == 0x73:  # properties: list0 or null (no fields) or list8
                value = pos + 3
                c = buf[value]
                if c == 0xC0:
                    size = buf[value + 1]
                    end = value + 2 + size
                    count = buf[value + 2]
                    p = value + 3
                    if not size or end > n or count > _PROPERTIES_KNOWN or count > end - p:
                        return fallback(buf, spans, decoded)
                    fields: dict[str, Any] = {}
                    for i in range(count):
                        c = buf[p]
                        if c == 0x40:
                            p += 1
                            continue
                        if c not in PROPERTIES_CODES[i]:
                            return fallback(buf, spans, decoded)
                        if c == 0xA1:
                            start = p + 2
                            p = start + buf[p + 1]
                            fields[PROPERTIES_NAMES[i]] = buf[start:p].decode()
                        elif c == 0x53:
                            fields[PROPERTIES_NAMES[i]] = SMALLULONG[buf[p + 1]]
                            p += 2
                        elif c == 0xA3:
                            start = p + 2
                            p = start + buf[p + 1]
                            fields[PROPERTIES_NAMES[i]] = _str_new(
                                symbol, buf[start:p].decode("ascii"))
                        else:
                            fields[PROPERTIES_NAMES[i]], p = _decoders[c](buf, p + 1, 1)
                    if p != end:
                        return fallback(buf, spans, decoded)
                    decoded["properties"] = fields
                elif c in {0x45, 0x40}:
                    decoded["properties"] = {}
                    end = value + 1
                else:
                    return fallback(buf, spans, decoded)
                spans.append((0x73, pos, value, end))
                pos = end
                code = buf[pos + 2] if pos < n and not buf[pos] and buf[pos + 1] == 0x53 else -1
            if code == 0x74:  # application-properties: map32, map8 or null
                value = pos + 3
                c = buf[value]
                if c == 0xD1:
                    size, count = _u32x2(buf, value + 1)
                    p = value + 9
                    end = value + 5 + size
                elif c == 0xC1:
                    count = buf[value + 2]
                    p = value + 3
                    end = value + 2 + buf[value + 1]
                elif c == 0x40:
                    count = 0
                    p = end = value + 1
                else:
                    return fallback(buf, spans, decoded)
                if count & 1 or end > n or end < p or count > end - p:
                    return fallback(buf, spans, decoded)
                entries: dict[str, Any] = {}
                for _ in range(count >> 1):
                    if buf[p] != 0xA1:  # a str8 key; str32 keys are the loop's
                        return fallback(buf, spans, decoded)
                    start = p + 2
                    p = start + buf[p + 1]
                    key = buf[start:p].decode()
                    c = buf[p]
                    if c == 0xA1:
                        start = p + 2
                        p = start + buf[p + 1]
                        entries[key] = buf[start:p].decode()
                    elif c == 0x54:
                        entries[key] = SMALLINT[buf[p + 1]]
                        p += 2
                    elif c == 0x40:
                        entries[key] = None
                        p += 1
                    elif c in COMPOUND_CODES:
                        return fallback(buf, spans, decoded)
                    else:
                        entries[key], p = _decoders[c](buf, p + 1, 1)
                if p != end:
                    return fallback(buf, spans, decoded)
                decoded["application-properties"] = entries
                spans.append((0x74, pos, value, end))
                pos = end
                code = buf[pos + 2] if pos < n and not buf[pos] and buf[pos + 1] == 0x53 else -1
            body_offset = body_end = pos  # no body: an empty span before any footer
            while 0x75 <= code <= 0x77:  # data, amqp-sequence, amqp-value: stepped over
                value = pos + 3
                c = buf[value]
                # a one-byte size (vbin8, str8, list8 ...) read here, any other by value_end
                end = value + 2 + buf[value + 1] if _widths[c] == -1 else value_end(buf, value)
                if end > n or c not in _BODY_HOLDS[code - 0x75]:
                    return fallback(buf, spans, decoded)
                spans.append((code, pos, value, end))
                pos = body_end = end
                code = buf[pos + 2] if pos < n and not buf[pos] and buf[pos + 1] == 0x53 else -1
            if code == 0x78:
                end = footer(buf, pos + 3, n, decoded)
                if end < 0:
                    return fallback(buf, spans, decoded)
                spans.append((0x78, pos, pos + 3, end))
                pos = end
        except InvalidMessageError:
            raise  # from the loop, called above
        except (ValueError, IndexError, struct.error):  # DecodeError, UnicodeDecodeError too
            return fallback(buf, spans, decoded)
        if pos < n:  # a section out of order, repeated, unknown, or not read here
            return fallback(buf, spans, decoded)
        return _view(buf, spans, body_offset, body_end, decoded, None)

    return door
