"""What the door check's two paths read: the codes each field or key may have, and the
one-byte ints decoded once.

The door check (:mod:`filtex_proton.amqp.validate`) is defined by a loop over the message
sections' table; :mod:`filtex_proton.amqp.fast_door` is a straight-line copy of it for the
common message shapes. Both decide with the sets below, so a rule changes in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from proton import int32, ubyte, uint, ulong

from filtex_proton.amqp.formats import CODES_OF
from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS

__all__ = [
    "ANNOTATION_KEY_CODES",
    "COMPOUND_CODES",
    "HEADER_CODES",
    "HEADER_KINDS",
    "HEADER_NAMES",
    "PROPERTIES_CODES",
    "PROPERTIES_KINDS",
    "PROPERTIES_NAMES",
    "SMALLINT",
    "SMALLUINT",
    "SMALLULONG",
    "STRING_CODES",
    "UBYTE",
    "UINT0",
    "Reader",
    "Span",
]

#: The format codes of each AMQP type (part 1 §1.6), and a field kind of several types.
_CODES: Final[dict[str, frozenset[int]]] = dict(CODES_OF)
_CODES["*message-id"] = _CODES["ulong"] | _CODES["uuid"] | _CODES["binary"] | _CODES["string"]

#: What each field of a composite section may be encoded as: its type, or null (§3.2.1,
#: §3.2.4, §3.2.11-15); its name; the type its refusal names.
HEADER_CODES: Final = tuple(_CODES[kind] | {0x40} for _, kind in HEADER_FIELDS)
PROPERTIES_CODES: Final = tuple(_CODES[kind] | {0x40} for _, kind in PROPERTIES_FIELDS)
HEADER_NAMES: Final = tuple(name for name, _ in HEADER_FIELDS)
PROPERTIES_NAMES: Final = tuple(name for name, _ in PROPERTIES_FIELDS)
HEADER_KINDS: Final = tuple(kind.lstrip("*") for _, kind in HEADER_FIELDS)
PROPERTIES_KINDS: Final = tuple(kind.lstrip("*") for _, kind in PROPERTIES_FIELDS)
#: Never a simple type (§3.2.5): lists, maps, arrays, described values.
COMPOUND_CODES: Final = (_CODES["list"] | _CODES["map"] | _CODES["array"]
                         | _CODES["described value"])
#: The keys of annotations and footer (§3.2.2, §3.2.3, §3.2.10) and of
#: application-properties (§3.2.5).
ANNOTATION_KEY_CODES: Final = _CODES["symbol"] | _CODES["ulong"]
STRING_CODES: Final = _CODES["string"]

#: The decoded values of the one-byte ints, made once (like ``ulong0`` in the decoder):
#: building an int subclass costs more than the rest of decoding it.
_int_new = int.__new__
SMALLINT: Final = tuple(_int_new(int32, b - 256 if b > 127 else b) for b in range(256))
SMALLULONG: Final = tuple(_int_new(ulong, b) for b in range(256))
SMALLUINT: Final = tuple(_int_new(uint, b) for b in range(256))
UBYTE: Final = tuple(_int_new(ubyte, b) for b in range(256))
UINT0: Final = SMALLUINT[0]

#: Where a section lies: its code, where it starts, where its value starts, where it ends.
Span = tuple[int, int, int, int]
#: The table loop's reader of one section: the bytes, the offset of its value, the message
#: length, the sections decoded so far (where it puts its entries); where the section ends,
#: or -1 to leave the message to the general path.
Reader = Callable[[bytes, int, int, dict[str, Mapping[Any, Any] | None]], int]
