"""The AMQP type system as the filter engine sees it.

Values are plain Python objects, using python-qpid-proton's marker classes where
Python has no type of its own (``ulong``, ``symbol``, ``timestamp`` ...), so the
values proton decodes and the values our own decoder produces are the same thing.

=============================  ==========================================
AMQP type                      Python representation
=============================  ==========================================
null                           ``None``
boolean                        ``bool``
ubyte/ushort/uint/ulong        ``proton.ubyte`` ... ``proton.ulong``
byte/short/int/long            ``proton.byte``/``short``/``int32``/``int``
float/double                   ``proton.float32`` / ``float``
decimal32/64/128               ``decimal.Decimal`` (proton's raw-bit classes
                               are accepted too and decoded on use)
timestamp                      ``proton.timestamp`` (ms since the epoch)
char                           ``proton.char``
uuid                           ``uuid.UUID``
binary                         ``bytes``
string / symbol                ``str`` / ``proton.symbol``
map / list / array             ``dict`` / ``list`` / ``proton.Array``
described                      ``proton.Described``
=============================  ==========================================
"""

from __future__ import annotations

import decimal
import enum
import uuid
from typing import Any, Final

from proton import (
    Array,
    Described,
    byte,
    char,
    decimal32,
    decimal64,
    decimal128,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

__all__ = [
    "HEADER_DEFAULTS",
    "HEADER_FIELDS",
    "INTEGER_RANGES",
    "PROPERTIES_FIELDS",
    "Kind",
    "amqp_type_name",
    "kind_of",
]


class Kind(enum.IntEnum):
    """What an AMQP value *is*, for the purpose of comparing and computing with it."""

    NULL = 0
    BOOLEAN = 1
    INTEGER = 2  # every signed and unsigned integer type; Python ints are exact
    FLOAT = 3  # float and double; evaluated as double
    DECIMAL = 4  # decimal32/64/128; evaluated exactly as decimal.Decimal
    TIMESTAMP = 5
    CHAR = 6
    UUID = 7
    BINARY = 8
    STRING = 9
    SYMBOL = 10
    MAP = 11
    LIST = 12
    ARRAY = 13
    DESCRIBED = 14


_KIND_BY_TYPE: Final[dict[type, Kind]] = {
    type(None): Kind.NULL,
    bool: Kind.BOOLEAN,
    int: Kind.INTEGER,
    ubyte: Kind.INTEGER,
    ushort: Kind.INTEGER,
    uint: Kind.INTEGER,
    ulong: Kind.INTEGER,
    byte: Kind.INTEGER,
    short: Kind.INTEGER,
    int32: Kind.INTEGER,
    float: Kind.FLOAT,
    float32: Kind.FLOAT,
    decimal.Decimal: Kind.DECIMAL,
    decimal32: Kind.DECIMAL,
    decimal64: Kind.DECIMAL,
    decimal128: Kind.DECIMAL,
    timestamp: Kind.TIMESTAMP,
    char: Kind.CHAR,
    uuid.UUID: Kind.UUID,
    bytes: Kind.BINARY,
    str: Kind.STRING,
    symbol: Kind.SYMBOL,
    dict: Kind.MAP,
    list: Kind.LIST,
    Array: Kind.ARRAY,
    Described: Kind.DESCRIBED,
}

# Subclasses we do not know (a user's own str subclass, say) fall back to the
# first base class found here, in this order: the narrow types before int/str.
_FALLBACK_ORDER: Final[tuple[type, ...]] = (
    bool, timestamp, decimal32, decimal64, decimal128, ulong, uint, ushort, ubyte,
    byte, short, int32, int, float32, float, decimal.Decimal, char, symbol, str,
    bytes, uuid.UUID, dict, list, Array, Described,
)


def kind_of(value: Any) -> Kind:
    """The :class:`Kind` of a value; raises ``TypeError`` for non-AMQP objects."""
    kind = _KIND_BY_TYPE.get(type(value))
    if kind is not None:
        return kind
    for base in _FALLBACK_ORDER:
        if isinstance(value, base):
            return _KIND_BY_TYPE[base]
    raise TypeError(f"not an AMQP value: {type(value).__name__}")


_TYPE_NAMES: Final[dict[type, str]] = {
    type(None): "null", bool: "boolean", int: "long", ubyte: "ubyte", ushort: "ushort",
    uint: "uint", ulong: "ulong", byte: "byte", short: "short", int32: "int",
    float: "double", float32: "float", decimal.Decimal: "decimal", decimal32: "decimal32",
    decimal64: "decimal64", decimal128: "decimal128", timestamp: "timestamp", char: "char",
    uuid.UUID: "uuid", bytes: "binary", str: "string", symbol: "symbol", dict: "map",
    list: "list", Array: "array", Described: "described",
}


def amqp_type_name(value: Any) -> str:
    """The AMQP name of a value's type, for error messages ("ulong", "symbol")."""
    name = _TYPE_NAMES.get(type(value))
    if name is not None:
        return name
    try:
        return kind_of(value).name.lower()
    except TypeError:
        return type(value).__name__


#: Value ranges of the AMQP integer types (AMQP 1.0 §1.6), inclusive.
INTEGER_RANGES: Final[dict[type, tuple[int, int]]] = {
    ubyte: (0, 2**8 - 1),
    ushort: (0, 2**16 - 1),
    uint: (0, 2**32 - 1),
    ulong: (0, 2**64 - 1),
    byte: (-(2**7), 2**7 - 1),
    short: (-(2**15), 2**15 - 1),
    int32: (-(2**31), 2**31 - 1),
    int: (-(2**63), 2**63 - 1),
}

#: AMQP 1.0 §3.2.1 header fields, in list order, with the AMQP type of each.
HEADER_FIELDS: Final[tuple[tuple[str, str], ...]] = (
    ("durable", "boolean"),
    ("priority", "ubyte"),
    ("ttl", "uint"),
    ("first-acquirer", "boolean"),
    ("delivery-count", "uint"),
)

#: Defaults of header fields that have one (AMQP 1.0 §3.2.1); an absent field has this value.
HEADER_DEFAULTS: Final[dict[str, Any]] = {
    "durable": False,
    "priority": ubyte(4),
    "first-acquirer": False,
    "delivery-count": uint(0),
}

#: AMQP 1.0 §3.2.4 properties fields, in list order, with the AMQP type of each.
#: "*message-id" is any of ulong, uuid, binary, string (AMQP 1.0 §3.2.11-3.2.15).
PROPERTIES_FIELDS: Final[tuple[tuple[str, str], ...]] = (
    ("message-id", "*message-id"),
    ("user-id", "binary"),
    ("to", "string"),
    ("subject", "string"),
    ("reply-to", "string"),
    ("correlation-id", "*message-id"),
    ("content-type", "symbol"),
    ("content-encoding", "symbol"),
    ("absolute-expiry-time", "timestamp"),
    ("creation-time", "timestamp"),
    ("group-id", "string"),
    ("group-sequence", "uint"),
    ("reply-to-group-id", "string"),
)
