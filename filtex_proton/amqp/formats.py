"""The AMQP 1.0 format codes (part 1, §1.6): one table that every reader of encoded values reads.

The decoder, the encoder, the skipper ("where does this value end") and the door check
each need a different view of the same facts: which type a code encodes, how many bytes
follow it, whether a size field follows. They build their own structures from
:data:`FORMATS` at import time (a list indexed by code, a set of codes per type), so a
code is spelled out once, here, and a hot loop still does one index or one set lookup.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from proton import Data

__all__ = [
    "CODE",
    "CODES_OF",
    "FORMATS",
    "MAX_DEPTH",
    "PROTON_TYPE",
    "TYPE_OF",
    "WIDTHS",
    "Category",
    "Format",
    "check_literals",
    "widest",
]

#: Compound values (lists, maps, arrays, described values) nested more than this are refused.
MAX_DEPTH: Final = 100


class Category(enum.Enum):
    """How the bytes after a format code are laid out (§1.2, the code's subcategory)."""

    FIXED = "fixed"
    """``width`` bytes of value (0x4-0x9)."""
    VARIABLE = "variable"
    """A ``width``-byte size, then that many bytes (0xA, 0xB)."""
    COMPOUND = "compound"
    """A ``width``-byte size, then a count and that many values (0xC, 0xD)."""
    ARRAY = "array"
    """A ``width``-byte size, then a count, one element constructor and the elements (0xE, 0xF)."""
    DESCRIBED = "described"
    """A descriptor value, then the value it describes (0x00)."""


@dataclass(frozen=True, slots=True)
class Format:
    """One format code: the encoding it names, the type it encodes, what follows it."""

    code: int
    name: str
    """The encoding's name: the spec's (shortened) where a type has several, else the type's."""
    type: str
    """The AMQP type encoded, as the spec names it (``"described value"`` for 0x00)."""
    category: Category
    width: int
    """Fixed: bytes of value; variable, compound, array: bytes of the size field; described: 0."""


_F, _V, _C, _A = Category.FIXED, Category.VARIABLE, Category.COMPOUND, Category.ARRAY

FORMATS: Final[tuple[Format, ...]] = (
    Format(0x40, "null", "null", _F, 0),
    Format(0x56, "boolean", "boolean", _F, 1),
    Format(0x41, "true", "boolean", _F, 0),
    Format(0x42, "false", "boolean", _F, 0),
    Format(0x50, "ubyte", "ubyte", _F, 1),
    Format(0x60, "ushort", "ushort", _F, 2),
    Format(0x70, "uint", "uint", _F, 4),
    Format(0x52, "smalluint", "uint", _F, 1),
    Format(0x43, "uint0", "uint", _F, 0),
    Format(0x80, "ulong", "ulong", _F, 8),
    Format(0x53, "smallulong", "ulong", _F, 1),
    Format(0x44, "ulong0", "ulong", _F, 0),
    Format(0x51, "byte", "byte", _F, 1),
    Format(0x61, "short", "short", _F, 2),
    Format(0x71, "int", "int", _F, 4),
    Format(0x54, "smallint", "int", _F, 1),
    Format(0x81, "long", "long", _F, 8),
    Format(0x55, "smalllong", "long", _F, 1),
    Format(0x72, "float", "float", _F, 4),
    Format(0x82, "double", "double", _F, 8),
    Format(0x74, "decimal32", "decimal32", _F, 4),
    Format(0x84, "decimal64", "decimal64", _F, 8),
    Format(0x94, "decimal128", "decimal128", _F, 16),
    Format(0x73, "char", "char", _F, 4),
    Format(0x83, "timestamp", "timestamp", _F, 8),
    Format(0x98, "uuid", "uuid", _F, 16),
    Format(0xA0, "vbin8", "binary", _V, 1),
    Format(0xB0, "vbin32", "binary", _V, 4),
    Format(0xA1, "str8", "string", _V, 1),
    Format(0xB1, "str32", "string", _V, 4),
    Format(0xA3, "sym8", "symbol", _V, 1),
    Format(0xB3, "sym32", "symbol", _V, 4),
    Format(0x45, "list0", "list", _F, 0),
    Format(0xC0, "list8", "list", _C, 1),
    Format(0xD0, "list32", "list", _C, 4),
    Format(0xC1, "map8", "map", _C, 1),
    Format(0xD1, "map32", "map", _C, 4),
    Format(0xE0, "array8", "array", _A, 1),
    Format(0xF0, "array32", "array", _A, 4),
    Format(0x00, "described", "described value", Category.DESCRIBED, 0),
)

#: Proton's type constant of each type an array can hold (``Array.type``).
PROTON_TYPE: Final[Mapping[str, int]] = {
    "null": Data.NULL, "boolean": Data.BOOL, "ubyte": Data.UBYTE, "ushort": Data.USHORT,
    "uint": Data.UINT, "ulong": Data.ULONG, "byte": Data.BYTE, "short": Data.SHORT,
    "int": Data.INT, "long": Data.LONG, "float": Data.FLOAT, "double": Data.DOUBLE,
    "decimal32": Data.DECIMAL32, "decimal64": Data.DECIMAL64, "decimal128": Data.DECIMAL128,
    "char": Data.CHAR, "timestamp": Data.TIMESTAMP, "uuid": Data.UUID, "binary": Data.BINARY,
    "string": Data.STRING, "symbol": Data.SYMBOL, "list": Data.LIST, "map": Data.MAP,
    "array": Data.ARRAY,
}

#: The code of each encoding, by name.
CODE: Final[Mapping[str, int]] = {f.name: f.code for f in FORMATS}
#: The name of the type each code encodes.
TYPE_OF: Final[Mapping[int, str]] = {f.code: f.type for f in FORMATS}
#: The codes of each type.
CODES_OF: Final[Mapping[str, frozenset[int]]] = {
    t: frozenset(f.code for f in FORMATS if f.type == t) for t in dict.fromkeys(TYPE_OF.values())
}


def _skip_width(f: Format) -> int:
    if f.category is Category.FIXED:
        return f.width
    if f.category is Category.DESCRIBED:
        return -2
    return -f.width  # a size field of 1 or 4 bytes


#: For the skipper, per code: bytes after a fixed-width code; -1: a one-byte size follows,
#: -4: a four-byte size follows; -2: described; -3: not a format code.
WIDTHS: Final[list[int]] = [-3] * 256
for _f in FORMATS:
    WIDTHS[_f.code] = _skip_width(_f)
del _f


def widest(type_name: str) -> int:
    """The type's widest encoding, the one array elements use (as proton writes them)."""
    return max((f for f in FORMATS if f.type == type_name), key=lambda f: f.width).code


def check_literals(literals: Mapping[str, int]) -> None:
    """Fail at import unless each encoding a hot loop compares by literal has that code.

    A literal compares faster than a global name, so the hot loops keep a few; this ties
    them to the table.
    """
    wrong = {name: code for name, code in literals.items() if CODE.get(name) != code}
    if wrong:
        raise AssertionError(f"literal format codes disagree with the table: {wrong}")
