"""A seeded corpus of messages and filters for the Spark differential tests.

Messages cover every AMQP type in every section a filter reads, absent and
null fields, NaN/INF, unicode, nested maps/lists/arrays and described values,
non-conforming fields and bytes that are not messages at all. Filters cover
every filter type, with SQL built from a small random grammar. Both draw from
the same vocabulary of names and values, so that filters meet both matches and
misses. Deterministic for a given seed.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final, cast

from proton import (
    UNDESCRIBED,
    Array,
    Data,
    Described,
    byte,
    char,
    decimal32,
    decimal64,
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

from filtex_proton.amqp import DecodeError
from filtex_proton.amqp.bid import encode_decimal32, encode_decimal64
from filtex_proton.amqp.message import RawMessageView, encode_message
from filtex_proton.amqp.view import Section
from filtex_proton.errors import FilterError
from filtex_proton.filters.registry import decode_filter

BASE_MS = 1_700_000_000_000
NAMES = ["a", "b", "n", "s", "x", "region", "price", "flag", "when", "é😀"]
ANNOTATION_KEYS = ["x-opt-a", "x-opt-b", "x-opt-jms-type", "k"]
SUBJECTS = ["order.created", "order.updated", "payment.received", "", "a.b.c", "é😀.x",
            "line\nbreak", "order", "order..created", "100%_done"]
STRINGS = ["x", "", "AMER", "EMEA", "order.created", "2023-11-14T22:13:20Z", "PT1H", "P1D",
           "é😀", "a\nb", "a_c", "abc", "100%", "x" * 40, "Ⅻ", "\U0010ffff", "1.5", "-"]
UUIDS = [uuid.UUID(int=0), uuid.UUID("9f0c8a4e-5f4b-4a57-8b7e-2d5c6f1d2e3a"),
         uuid.UUID(int=2**128 - 1)]
BINARIES = [b"", b"\x00", b"\xff\x00", b"bob", bytes(range(16))]


def _decimal_values(rng: random.Random) -> Any:
    choice = rng.randrange(9)
    if choice == 0:
        return decimal32(encode_decimal32(Decimal("1.5")))
    if choice == 1:
        return decimal64(encode_decimal64(Decimal("99.99")))
    if choice == 2:
        return Decimal("99.99")
    if choice == 3:
        return Decimal("-0")
    if choice == 4:
        return Decimal(rng.choice(["5", "4.0", "255", "1E+2", "-7.25"]))
    if choice == 5:
        return Decimal("1E-30")  # does not fit decimal(38,18): an irregular row
    if choice == 6:
        return Decimal(rng.choice(["NaN", "Infinity", "-Infinity"]))  # irregular too
    if choice == 7:
        return Decimal("18446744073709551615")
    return Decimal("0.000000000000000001")


#: Scalar value makers by AMQP type.
SCALARS: dict[str, Callable[[random.Random], Any]] = {
    "null": lambda r: None,
    "boolean": lambda r: r.random() < 0.5,
    "ubyte": lambda r: ubyte(r.choice([0, 4, 5, 255])),
    "ushort": lambda r: ushort(r.choice([0, 5, 65535])),
    "uint": lambda r: uint(r.choice([0, 1, 5, 2**32 - 1])),
    "ulong": lambda r: ulong(r.choice([0, 5, 2**63 - 1, 2**63, 2**64 - 1])),
    "byte": lambda r: byte(r.choice([-128, -1, 5, 127])),
    "short": lambda r: short(r.choice([-1, 5, 1000])),
    "int": lambda r: int32(r.choice([-(2**31), 5, 99, 100])),
    "long": lambda r: r.choice([-(2**63), -1, 0, 1, 4, 5, 99, 100, 2**53 + 1, 2**63 - 1]),
    "float": lambda r: float32(r.choice([0.0, -0.0, 0.1, 1.5, 5.0, 99.99, 3.4e38,
                                         float("nan"), float("inf"), float("-inf")])),
    "double": lambda r: r.choice([0.0, -0.0, 0.1, 1.5, 5.0, 99.99, 100.0, 2.0**53, 1e300,
                                  float(2**63), float("nan"), float("inf"), float("-inf"),
                                  3.4028235677973366e38]),
    "decimal": _decimal_values,
    "timestamp": lambda r: timestamp(r.choice([0, -1, 5, BASE_MS, BASE_MS + 3_600_000,
                                               2**62])),
    "char": lambda r: char(r.choice(["a", "x", "😀", "\n", "%"])),
    "uuid": lambda r: r.choice(UUIDS),
    "binary": lambda r: r.choice(BINARIES),
    "string": lambda r: r.choice(STRINGS),
    "symbol": lambda r: symbol(r.choice(["x", "AMER", "order.created", "", "sym"])),
}


def compound(rng: random.Random, depth: int = 0) -> Any:
    """A map, list, array or described value (nested to depth 2)."""
    choice = rng.randrange(4)
    if choice == 0 or depth >= 2:
        return {rng.choice(["k", "x", "region"]): value(rng, depth + 1)
                for _ in range(rng.randrange(3))}
    if choice == 1:
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if choice == 2:
        return Array(cast(Any, UNDESCRIBED), Data.INT,
                     *[int32(rng.randrange(-5, 6)) for _ in range(rng.randrange(4))])
    return Described(symbol("acme:thing"), value(rng, depth + 1))


def value(rng: random.Random, depth: int = 0) -> Any:
    """Any AMQP value: mostly scalars, sometimes compounds."""
    if rng.random() < 0.08:
        return compound(rng, depth)
    return SCALARS[rng.choice(list(SCALARS))](rng)


def _header(rng: random.Random) -> dict[str, Any] | None:
    if rng.random() < 0.3:
        return None
    header: dict[str, Any] = {}
    if rng.random() < 0.5:
        header["durable"] = rng.random() < 0.5
    if rng.random() < 0.6:
        header["priority"] = ubyte(rng.choice([0, 3, 4, 5, 9, 255]))
    if rng.random() < 0.3:
        header["ttl"] = uint(rng.choice([0, 1000, 2**32 - 1]))
    if rng.random() < 0.3:
        header["first-acquirer"] = rng.random() < 0.5
    if rng.random() < 0.3:
        header["delivery-count"] = uint(rng.choice([0, 1, 7]))
    if rng.random() < 0.05:  # not the declared type: an irregular row
        header["priority"] = rng.choice([uint(7), "high", 5])
    if rng.random() < 0.05:
        header[rng.choice(list(header) or ["ttl"])] = None  # a null-encoded field: absent
    return header


def _message_id(rng: random.Random) -> Any:
    return rng.choice([
        ulong(rng.choice([0, 42, 2**63 + 5])), rng.choice(UUIDS), rng.choice(BINARIES),
        rng.choice(STRINGS), symbol("id-sym"), rng.randrange(10),
    ])


_PROPERTY_FIELDS: Final[tuple[tuple[str, float, Callable[[random.Random], Any]], ...]] = (
    ("message-id", 0.6, _message_id),
    ("user-id", 0.2, lambda rng: rng.choice(BINARIES)),
    ("to", 0.3, lambda rng: rng.choice(["queue", "é😀", ""])),
    ("subject", 0.8, lambda rng: rng.choice(SUBJECTS)),
    ("reply-to", 0.2, lambda rng: "replies"),
    ("correlation-id", 0.3, _message_id),
    ("content-type", 0.3, lambda rng: symbol(rng.choice(["application/json", "text/plain"]))),
    ("content-encoding", 0.1, lambda rng: symbol("gzip")),
    ("absolute-expiry-time", 0.2,
     lambda rng: timestamp(BASE_MS + rng.randrange(-10, 10) * 1000)),
    ("creation-time", 0.7, lambda rng: timestamp(rng.choice([BASE_MS, BASE_MS - 3_600_001, 0,
                                                              BASE_MS + 86_400_000, 2**62]))),
    ("group-id", 0.2, lambda rng: rng.choice(["g1", "g2"])),
    ("group-sequence", 0.2, lambda rng: uint(rng.choice([0, 1, 2**32 - 1]))),
    ("reply-to-group-id", 0.1, lambda rng: "rg"),
)
"""Each properties field in list order: how often a message has it, and a value for it
(drawn in this order, so that a seed gives the corpus it always gave)."""


def _properties(rng: random.Random) -> dict[str, Any] | None:
    if rng.random() < 0.2:
        return None
    props: dict[str, Any] = {}
    for name, chance, make in _PROPERTY_FIELDS:
        if rng.random() < chance:
            props[name] = make(rng)
    if rng.random() < 0.04:  # declared string, sent as a symbol: irregular
        props["subject"] = symbol("order.created")
    return props


def _map(rng: random.Random, keys: list[str], key_type: Callable[[str], Any],
         odd_keys: bool) -> dict[Any, Any] | None:
    if rng.random() < 0.25:
        return None
    result: dict[Any, Any] = {}
    for name in rng.sample(keys, rng.randrange(len(keys) + 1)):
        result[key_type(name)] = value(rng)
    if odd_keys and rng.random() < 0.1:
        result[rng.choice([ulong(7), symbol("s"), "str-key", 5])] = value(rng)
    return result


def message(rng: random.Random) -> bytes:
    """One message's bytes (or, rarely, bytes that are not a message)."""
    roll = rng.random()
    if roll < 0.01:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 20)))
    data = encode_message(
        header=_header(rng),
        delivery_annotations=_map(rng, ANNOTATION_KEYS, symbol, True),
        message_annotations=_map(rng, ANNOTATION_KEYS, symbol, True),
        properties=_properties(rng),
        application_properties=_map(rng, NAMES, str, True),
        body=rng.choice([b"body", "text", None]),
        footer=_map(rng, ANNOTATION_KEYS, symbol, True) if rng.random() < 0.3 else None,
    )
    if roll < 0.02:  # a section that does not decode (invalid UTF-8 in a string)
        marker = data.find(b"\xa1\x01")
        if marker >= 0:
            data = data[:marker + 2] + b"\xff" + data[marker + 3:]
    return data


def messages(seed: int, count: int) -> list[bytes]:
    rng = random.Random(seed)
    return [message(rng) for _ in range(count)]


# ----------------------------------------------------------------------------- filters

_SQL_FIELDS = [
    "h.priority", "h.durable", "h.ttl", "h.first_acquirer", "h.delivery_count", "p.subject",
    "p.message_id", "p.correlation_id", "p.creation_time", "p.absolute_expiry_time",
    "p.content_type", "p.user_id", "p.group_sequence", "p.to", "p.reply_to", "p.group_id",
    "a", "b", "n", "s", "x", "region", "price", "flag", "[when]", "[é😀]", "a.missing",
    "m.[x-opt-a]", "m.[x-opt-b]", "d.[x-opt-a]", "f.k", "m.k", "p.content_encoding",
]
_SQL_LITERALS = [
    "0", "4", "5", "-1", "99", "100", "255", "9223372036854775807", "9223372036854775808",
    "18446744073709551615", "1.5", "99.99", "0.0", "-7.25", "0.000000000000000001",
    "0.0000000000000000000001", "1.5E0", "0.1E0", "5E0", "NAN", "INF", "-INF", "'x'", "''",
    "'AMER'", "'order.created'", "'2023-11-14T22:13:20Z'", "'PT1H'", "'é😀'", "'a\nb'", "0x00",
    "0xFF00", "0x626F62", "TRUE", "FALSE", "NULL", "UTC()", "UTC() - 3600000",
    "DATE('2023-11-14')", "1700000000000", "'1.5'",
]
_LIKE_PATTERNS = [
    "'%'", "'order.%'", "'%created'", "'%.%'", "'a_c'", "'_'", "'%\\_%' ESCAPE '\\'",
    "'100!%%' ESCAPE '!'", "'a%b%c'", "'%é😀%'", "'a\n%'", "'_\nb'", "'x%x'", "''",
    "'%a%c%'", "'!_%' ESCAPE '!'",
]
_OPS = ["=", "<>", "!=", ">", ">=", "<", "<="]
#: The JMS selector's names: JMS headers and unqualified application properties.
_JMS_FIELDS = [
    "JMSPriority", "JMSDeliveryMode", "JMSTimestamp", "JMSExpiration", "JMSRedelivered",
    "JMSDestination", "JMSReplyTo", "JMSXGroupID", "JMSXGroupSeq", "JMSXDeliveryCount",
    "JMSType", "JMSMessageID", "JMSCorrelationID", "JMSXUserID", "a", "n", "s", "x", "region",
    "price", "flag", "p.subject", "h.priority", "m.[x-opt-a]",
]
_JMS_LITERALS = [
    "0", "4", "5", "-1", "99", "100", "1700000000000", "9223372036854775807", "1.5", "99.99",
    "0.1", "5.0", "1E300", "'x'", "''", "'AMER'", "'PERSISTENT'", "'NON_PERSISTENT'",
    "'order.created'", "'queue'", "'g1'", "'ID:AMQP_ULONG:42'", "TRUE", "FALSE", "NULL", "0x1F",
]


def _sql_atom(rng: random.Random, fields: list[str] = _SQL_FIELDS,
              literals: list[str] = _SQL_LITERALS) -> str:
    field = rng.choice(fields)
    choice = rng.randrange(14)
    if choice <= 3:
        return f"{field} {rng.choice(_OPS)} {rng.choice(literals)}"
    if choice == 4:
        return f"{rng.choice(literals)} {rng.choice(_OPS)} {field}"
    if choice == 5:
        return f"{field} {rng.choice(_OPS)} {rng.choice(fields)}"
    if choice == 6:
        items = ", ".join(rng.choice(literals) for _ in range(rng.randrange(1, 4)))
        return f"{field} {rng.choice(['', 'NOT '])}IN ({items})"
    if choice == 7:
        items = ", ".join(rng.choice(["'x'", "'AMER'", "'EMEA'", "'order.created'", "''",
                                      "'2023-11-14T22:13:20Z'", "'PT1H'"])
                          for _ in range(rng.randrange(1, 4)))
        return f"{field} {rng.choice(['', 'NOT '])}IN ({items})"
    if choice == 8:
        low, high = rng.choice(literals), rng.choice(literals)
        return f"{field} {rng.choice(['', 'NOT '])}BETWEEN {low} AND {high}"
    if choice == 9:
        return f"{field} {rng.choice(['', 'NOT '])}LIKE {rng.choice(_LIKE_PATTERNS)}"
    if choice == 10:
        return f"{field} IS {rng.choice(['', 'NOT '])}NULL"
    if choice == 11:
        return f"EXISTS({field})"
    if choice == 12:
        return rng.choice([field, f"{field} = {field}", "a + 1 > 2", "LOWER(p.subject) = 'x'",
                           "a.k = 1", "m.[x-opt-a][0] = 1", "-n < 0", "n % 2 = 1"])
    return rng.choice(["TRUE", "FALSE", "NULL", "1 = 1", "NAN = NAN", "UTC() > 0"])


def sql(rng: random.Random, depth: int = 0, *, jms: bool = False) -> str:
    """A random SQL filter (or JMS selector) over the corpus vocabulary (may be invalid;
    callers check)."""
    if depth >= 2 or rng.random() < 0.45:
        if jms:
            return _sql_atom(rng, _JMS_FIELDS, _JMS_LITERALS)
        return _sql_atom(rng)
    left, right = sql(rng, depth + 1, jms=jms), sql(rng, depth + 1, jms=jms)
    choice = rng.randrange(3)
    if choice == 0:
        return f"({left}) AND ({right})"
    if choice == 1:
        return f"({left}) OR ({right})"
    return f"NOT ({left})"


def _d(name: str, val: Any) -> Described:
    return Described(symbol(name), val)


_SECTIONS = {
    "amqp:header-filter": ["durable", "priority", "ttl", "first-acquirer", "delivery-count"],
    "amqp:properties-filter": ["message-id", "subject", "creation-time", "content-type",
                               "user-id", "group-sequence", "to", "correlation-id"],
    "amqp:application-properties-filter": NAMES,
    "amqp:message-annotations-filter": ANNOTATION_KEYS,
    "amqp:delivery-annotations-filter": ANNOTATION_KEYS,
    "amqp:footer-filter": ANNOTATION_KEYS,
}


def _reference(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.15:
        return rng.choice(["&p:order.", "&s:created", "&&x", "&p:", "&s:", "&p:é"])
    if roll < 0.2:
        return rng.choice([None, {"k": 1}, [1], Described(symbol("acme:thing"), 5)])
    return SCALARS[rng.choice(list(SCALARS))](rng)


_SECTION_OF_FILTER = {
    "amqp:header-filter": Section.HEADER, "amqp:properties-filter": Section.PROPERTIES,
    "amqp:application-properties-filter": Section.APPLICATION_PROPERTIES,
    "amqp:message-annotations-filter": Section.MESSAGE_ANNOTATIONS,
    "amqp:delivery-annotations-filter": Section.DELIVERY_ANNOTATIONS,
    "amqp:footer-filter": Section.FOOTER,
}
#: (filter type, key, value) seen in the corpus's messages: references that do match.
Pool = list[tuple[str, Any, Any]]


def harvest(data: list[bytes]) -> Pool:
    """Values the messages hold, by property-filter type and key."""
    pool: Pool = []
    for message in data:
        try:
            view = RawMessageView(message)
            for name, section in _SECTION_OF_FILTER.items():
                for key, found in (view.section(section) or {}).items():
                    pool.append((name, key, found))
        except (DecodeError, TypeError):
            continue
    return pool


def _retyped(value: Any, rng: random.Random) -> Any:
    """The same number as another AMQP type, sometimes (§4.1.1 compares across types)."""
    if isinstance(value, float) and rng.random() < 0.5:
        return float32(value) if not isinstance(value, float32) else float(value)
    if isinstance(value, int) and not isinstance(value, bool | timestamp) and rng.random() < 0.5:
        return rng.choice([int, float, ulong])(abs(int(value))) if abs(int(value)) < 2**63 \
            else value
    return value


def property_filter(rng: random.Random, pool: Pool | None = None) -> Described:
    if pool and rng.random() < 0.6:
        name, key, found = rng.choice(pool)
        return _d(name, {key: _retyped(found, rng)})
    name = rng.choice(list(_SECTIONS))
    keys = rng.sample(_SECTIONS[name], rng.randrange(1, 3))
    entries: dict[Any, Any] = {}
    for key in keys:
        entry_key: Any = symbol(key) if "annotations" in name or "footer" in name else key
        entries[entry_key] = _reference(rng)
    if name == "amqp:message-annotations-filter" and rng.random() < 0.2:
        entries[ulong(7)] = rng.choice(["seven", 5, None])
    return _d(name, entries)


def leaf_filter(rng: random.Random, pool: Pool | None = None) -> Described:
    roll = rng.randrange(13)
    if roll == 12:
        return _d("apache.org:selector-filter:string", sql(rng, jms=True))
    if roll <= 4:
        return _d("amqp:sql-filter", sql(rng))
    if roll <= 7:
        return property_filter(rng, pool)
    if roll == 8:
        return _d(rng.choice(["amqp:true-filter", "amqp:false-filter"]), rng.random() < 0.5)
    if roll == 9:
        return rng.choice([
            _d("apache.org:legacy-amqp-direct-binding:string", rng.choice(SUBJECTS)),
            _d("apache.org:legacy-amqp-topic-binding:string",
               rng.choice(["order.*", "#", "order.#", "*.created", "*", "#.x", "a.#.c", "",
                           "#.#", "*.*", "order..created", "é😀.*", "100%_done", "#.b.#",
                           "*.#.*", "line\nbreak"])),
        ])
    if roll == 10:
        entries: dict[Any, Any] = {"x-match": symbol(rng.choice(["all", "any"]))}
        for key in rng.sample(NAMES, rng.randrange(1, 3)):
            entries[key] = rng.choice([None, "x", "&p:x", 5, uint(5), True, 1.5, "AMER"])
        return _d("apache.org:legacy-amqp-headers-binding:map", entries)
    return _d("apache.org:no-local-filter:list", [])


def any_filter(rng: random.Random, depth: int = 0, pool: Pool | None = None) -> Described:
    if depth < 2 and rng.random() < 0.25:
        name = rng.choice(["amqp:all-filter", "amqp:any-filter", "amqp:not-filter",
                           "apache.org:or-filter:list", "apache.org:and-filter:list",
                           "apache.org:not-filter:list"])
        count = 1 if name == "apache.org:not-filter:list" else rng.randrange(1, 4)
        return _d(name, [any_filter(rng, depth + 1, pool) for _ in range(count)])
    return leaf_filter(rng, pool)


def filter_sets(seed: int, count: int, data: list[bytes] | None = None
                ) -> list[dict[str, Described]]:
    """Valid filter sets (mostly one filter; some of several), deterministic for a seed;
    property filters often take their references from the messages ``data``."""
    rng = random.Random(seed)
    pool = harvest(data) if data else None
    result: list[dict[str, Described]] = []
    while len(result) < count:
        size = 1 if rng.random() < 0.8 else rng.randrange(2, 4)
        candidate = {f"f{i}": any_filter(rng, pool=pool) for i in range(size)}
        try:
            for described in candidate.values():
                decode_filter(described)
        except FilterError:
            continue
        result.append(candidate)
    return result
