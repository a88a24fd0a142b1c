"""Fixed inputs for the fuzz targets: seed texts from the spec, messages, filter sets.

Import it inside :func:`fuzz_common.instrumented`, after the library: it
imports the library itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

from proton import (
    Array,
    Data,
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

from filtex_proton.amqp import DecodeError, encode_value
from filtex_proton.amqp.message import RawMessageView, encode_message
from filtex_proton.amqp.view import DictMessageView, MessageView, Section
from filtex_proton.filters.wire import UNDESCRIBED_ANY

__all__ = [
    "DESCRIPTORS", "FILTER_SET_SEEDS", "SQL_SEEDS", "ByteReader", "broken_views", "build_filter",
    "build_filter_set", "build_value", "deep_group", "deep_list", "filter_set_bytes",
    "fixed_views", "message_seeds", "nested_list", "raw_application_properties",
    "rich_sections",
]

#: SQL texts: the spec's own examples (§6.1, §6.4), RabbitMQ's blog example, and one of
#: every construct of the grammar, in both dialects' spellings.
SQL_SEEDS: Final[tuple[str, ...]] = (
    "color = 'blue'",
    "application-properties.color = 'blue'",
    "a.color = 'blue'",
    "p.to = 'test'",
    "properties.to = 'test'",
    "p.to = 'test' AND p.content-type LIKE 'application/%'",
    "p.to = 'test' AND h.priority > 4 AND a.color = 'blue'",
    "expression LIKE 'ABC\\%' ESCAPE '\\'",
    "header.priority > 4",
    "p.subject='order.created' AND p.creation_time > UTC()-3600000 AND region IN ('EU','US') "
    "AND (h.priority>4 OR price>=99.99 OR premium_customer=TRUE)",
    "order_type IN ('premium', 'express') AND total_amount BETWEEN 100 AND 5000 AND "
    "(customer_region LIKE 'EU-%' OR customer_region = 'US-CA') AND "
    "properties.creation-time >= 1750772279000 AND NOT cancelled",
    "p.subject LIKE '%.cr_ated%' ESCAPE '!'",
    "price * quantity > 1000 AND currency = 'EUR'",
    "EXISTS(p.correlation-id) AND p.reply-to IS NOT NULL",
    "LOWER(customer) = 'acme' OR UPPER(region, 'tr') = 'EU'",
    "m.[x-opt-partition][0] = 3 AND NOT (cancelled = TRUE)",
    "JMSPriority > 4 AND JMSType = 'order' AND amount BETWEEN 100 AND 5000",
    "JMSCorrelationID = 'ID:1' OR JMSMessageID LIKE 'ID:%' OR JMSDeliveryMode = 'PERSISTENT'",
    "d.[x-opt-route] = 'x' OR f.sig IS NULL OR m.[x-opt-jms-type] <> 'y'",
    "SUBSTRING(name, 2, 3) = 'bcd' AND LEFT(name, 1) = 'a' AND RIGHT(name, 2) = 'ef'",
    "p.creation-time > DATE('2021-03-17T00:00:00Z') AND p.absolute-expiry-time < UTC()",
    "p.creation-time - 'PT1H' < ts",
    "data = 0xCAFEBABE OR id = 0x10",
    "x = NAN OR y = INF OR z = -INF OR w = 1.5E300 OR v = 1.5 OR u = 7. OR t = .5",
    "n % 2 = 0 AND -n < +n AND n / 0 <> n AND 18446744073709551615 > n",
    "[my field] = 'a' AND [with ]] bracket] = \"dq\"\"x\"",
    "list[1] = 2 AND map.key = 'v' AND nested.inner[0].deep = TRUE",
    "acme:hash(name) IS NULL",
    "name + 'x' = 'abcx' AND s + s <> s",
    "a IN (1, 2.5, 'three', TRUE, NULL) AND b NOT IN ('x') AND c NOT LIKE '_%_'",
    "NOT (a = 1 OR b = 2) AND (c <> 3 OR d != 4) AND e <= 5 AND f >= 6",
    "h.durable = TRUE AND h.first-acquirer = FALSE AND h.delivery-count = 0 AND h.ttl > 0",
    "p.user-id = 0x6775657374 AND p.group-id = 'g' AND p.group-sequence = 1",
    "p.reply-to-group-id = 'r' AND p.content-encoding = 'gzip' AND p.message-id = 'm'",
    "a.flag AND NOT a.other",
    "'%' LIKE '%' ESCAPE '%'",
)

_LONG = "x" * 5000


def rich_sections() -> dict[str, Mapping[Any, Any]]:
    """Sections holding one value of every AMQP type, and some awkward ones."""
    return {
        "header": {"durable": True, "priority": ubyte(7), "ttl": uint(1000),
                   "first-acquirer": False, "delivery-count": uint(2)},
        "delivery_annotations": {symbol("x-opt-route"): "x", symbol("n"): 1},
        "message_annotations": {symbol("x-opt-partition"): [3, 4],
                                symbol("x-opt-jms-type"): "order"},
        "properties": {
            "message-id": "ID:1", "user-id": b"guest", "to": "test", "subject": "order.created",
            "reply-to": "r", "correlation-id": uuid.UUID(int=7),
            "content-type": symbol("application/json"), "content-encoding": symbol("gzip"),
            "absolute-expiry-time": timestamp(2**40), "creation-time": timestamp(1_600_000_000_000),
            "group-id": "g", "group-sequence": uint(1), "reply-to-group-id": "r",
        },
        "application_properties": {
            "color": "blue", "region": "EU", "price": 99.99, "quantity": 20, "amount": 1500,
            "currency": "EUR", "customer": "ACME", "name": "abcdef", "premium_customer": True,
            "cancelled": False, "n": -7, "big": ulong(2**64 - 1), "small": byte(-5),
            "s16": short(-300), "u16": ushort(65535), "i32": int32(-70000), "f32": float32(0.1),
            "d32": decimal32(0x3280000A), "d64": decimal64(0x31C000000000000A),
            "d128": decimal128(b"\x30\x40" + b"\x00" * 13 + b"\x0a"), "dec": Decimal("1.5"),
            "ch": char("x"), "id": uuid.UUID(int=1), "ts": timestamp(1_700_000_000_000),
            "data": b"\xca\xfe\xba\xbe", "sym": symbol("s"), "nil": None, "nan": float("nan"),
            "inf": float("inf"), "list": [1, 2, [3]], "map": {"key": "v", 1: "int key"},
            "nested": {"inner": [{"deep": True}]},
            "arr": Array(UNDESCRIBED_ANY, Data.INT, 1, 2, 3),
            "described": Described(symbol("x:y"), "v"), "long": _LONG, "empty": "",
            "unicode": "Ünïcödé ☃ \U0001f600", "flag": True, "other": False, "s": "ab",
        },
        "footer": {symbol("sig"): b"\x00" * 8},
    }


def _encoded(sections: Mapping[str, Mapping[Any, Any]], body: Any = "body") -> bytes:
    return encode_message(body=body, **sections)  # type: ignore[arg-type]


def fixed_views() -> list[MessageView]:
    """The views every expression and filter set is evaluated against.

    A rich message (as decoded mappings and as raw bytes), an empty one, a
    message whose application properties cannot be decoded (the view raises
    when asked for them), and one with only a header.
    """
    sections = rich_sections()
    good = _encoded(sections)
    # application-properties whose one string is not UTF-8: the scan passes, the read fails
    bad_utf8 = raw_application_properties(b"\xa1\x01a", b"\xa1\x01\xff")
    return [
        DictMessageView(**sections),
        RawMessageView(good),
        DictMessageView(),
        RawMessageView(b""),
        RawMessageView(bad_utf8),
        DictMessageView(header={"priority": ubyte(9)}, application_properties={"a": None}),
    ]


def broken_views(views: list[MessageView]) -> list[MessageView]:
    """Those of ``views`` that raise when a section is read (an undecodable message)."""
    broken: list[MessageView] = []
    for view in views:
        try:
            for section in Section:
                view.section(section)
        except DecodeError:
            broken.append(view)
    return broken


def message_seeds() -> list[bytes]:
    """Encoded messages: every section, every body kind, symbolic descriptors, edge cases."""
    sections = rich_sections()
    seeds = [
        _encoded(sections),
        _encoded(sections, body=None),
        encode_message(application_properties={"color": "blue"}, body=b"x", body_kind="data"),
        encode_message(header={"priority": 4}, body=[[1, 2], ["a"]], body_kind="sequence"),
        encode_message(properties={"subject": "a.b.c"}),
        encode_message(footer={"f": 1}),
        encode_message(),
        b"",
        # symbolic section descriptors, as some clients send them
        b"\x00\xa3\x10amqp:header:list\x45"
        b"\x00\xa3\x1famqp:application-properties:map\xc1\x01\x00",
        raw_application_properties(b"\xa1\x01a", nested_list(50)),  # a list 50 deep
        raw_application_properties(b"\xa1\x01a", b"\xa1\x01\xff"),  # invalid UTF-8
        b"\x00\x53\x74\xc1\x03\x01\x40\x40",  # odd map count
        b"\x00\x53\x70\xc0\xff\x05\x40",  # size beyond the buffer
        b"\x00\x53\x99\x45",  # not a section descriptor
    ]
    return seeds


def nested_list(depth: int) -> bytes:
    """The encoding of a list holding a list ... ``depth`` levels deep (list32 each)."""
    inner = b"\x45"
    for _ in range(depth):
        inner = b"\xd0" + (len(inner) + 4).to_bytes(4, "big") + b"\x00\x00\x00\x01" + inner
    return inner


def raw_application_properties(key: bytes, value: bytes) -> bytes:
    """An application-properties section of one entry, from encoded key and value (map32)."""
    body = key + value
    return (b"\x00\x53\x74\xd1" + (len(body) + 4).to_bytes(4, "big")
            + b"\x00\x00\x00\x02" + body)


def _sql(text: str, name: str = "amqp:sql-filter") -> Described:
    return Described(symbol(name), text)


#: Filter sets (name -> described filter) covering every filter type and the groups.
FILTER_SET_SEEDS: Final[tuple[dict[Any, Any], ...]] = (
    {symbol("sql"): _sql("color = 'blue' AND h.priority > 4")},
    {symbol("jms"): _sql("JMSPriority > 4", "apache.org:selector-filter:string")},
    {symbol("num"): Described(ulong(0x120), "a = 1")},
    {symbol("hdr"): Described(symbol("amqp:header-filter"), {symbol("priority"): ubyte(7)})},
    {symbol("props"): Described(symbol("amqp:properties-filter"),
                                {symbol("subject"): "&p:order.", symbol("to"): "&s:st"})},
    {symbol("app"): Described(symbol("amqp:application-properties-filter"),
                              {"color": "blue", "list": [1, 2], "map": {"key": "v"}})},
    {symbol("ma"): Described(symbol("amqp:message-annotations-filter"),
                             {symbol("x-opt-jms-type"): "order"})},
    {symbol("da"): Described(symbol("amqp:delivery-annotations-filter"), {symbol("n"): 1})},
    {symbol("foot"): Described(symbol("amqp:footer-filter"), {symbol("sig"): None})},
    {symbol("t"): Described(symbol("amqp:true-filter"), True),
     symbol("f"): Described(ulong(0x111), False)},
    {symbol("all"): Described(symbol("amqp:all-filter"), [
        _sql("a = 1"), Described(symbol("amqp:any-filter"), [
            Described(symbol("amqp:not-filter"), [_sql("b = 2")]),
            Described(symbol("amqp:true-filter"), True)])])},
    {symbol("topic"): Described(symbol("apache.org:legacy-amqp-topic-binding:string"),
                                "order.#.created"),
     symbol("direct"): Described(ulong(0x468C00000000), "order.created")},
    {symbol("headers"): Described(symbol("apache.org:legacy-amqp-headers-binding:map"),
                                  {"x-match": symbol("any"), "color": "blue"})},
    {symbol("no-local"): Described(symbol("apache.org:no-local-filter:list"), [])},
    {symbol("or"): Described(symbol("apache.org:or-filter:list"), [
        Described(symbol("apache.org:not-filter:list"), [_sql("a = 1")]),
        Described(symbol("apache.org:and-filter:list"), [_sql("b = 1"), _sql("c = 1")])])},
    {},
)


def filter_set_bytes(value: Any) -> bytes:
    """A filter set as AMQP bytes (our encoder; proton's ``Data`` decodes them too)."""
    return encode_value(value)


# ----------------------------------------------------------------------------- structured inputs


class ByteReader:
    """Decisions taken from fuzz input bytes (zeros once they run out)."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        self.pos += 1
        return self.data[self.pos - 1]

    def below(self, n: int) -> int:
        return self.byte() % n if n > 0 else 0

    def pick(self, items: tuple[Any, ...] | list[Any]) -> Any:
        return items[self.below(len(items))]

    def exhausted(self) -> bool:
        return self.pos >= len(self.data)


#: Descriptors as clients send them: symbols, aliases, numbers, and some that name nothing.
DESCRIPTORS: Final[tuple[Any, ...]] = (
    symbol("amqp:sql-filter"), ulong(0x120), symbol("amqp:all-filter"), ulong(0x100),
    symbol("amqp:any-filter"), ulong(0x101), symbol("amqp:not-filter"), ulong(0x102),
    symbol("amqp:true-filter"), symbol("amqp:false-filter"), ulong(0x110),
    symbol("amqp:header-filter"), symbol("amqp:delivery-annotations-filter"),
    symbol("amqp:message-annotations-filter"), symbol("amqp:properties-filter"),
    symbol("amqp:application-properties-filter"), ulong(0x174), symbol("amqp:footer-filter"),
    symbol("apache.org:legacy-amqp-direct-binding:string"),
    symbol("apache.org:legacy-amqp-topic-binding:string"),
    symbol("apache.org:legacy-amqp-headers-binding:map"), ulong(0x468C00000002),
    symbol("apache.org:no-local-filter:list"), symbol("apache.org:jms-no-local-filter:list"),
    symbol("apache.org:selector-filter:string"), symbol("apache.org:jms-selector-filter:string"),
    ulong(0x468C00000004), symbol("apache.org:or-filter:list"),
    symbol("apache.org:and-filter:list"), symbol("apache.org:not-filter:list"),
    symbol("amqp:nonsense"), ulong(0x999), 7, "amqp:sql-filter", None, ulong(2**64 - 1),
)
_GROUPS: Final = frozenset({0x100, 0x101, 0x102, 0x468C00000005, 0x468C00000006, 0x468C00000007,
                            "amqp:all-filter", "amqp:any-filter", "amqp:not-filter",
                            "apache.org:or-filter:list", "apache.org:and-filter:list",
                            "apache.org:not-filter:list"})
_WORDS: Final[tuple[str, ...]] = (
    "", "a", "color", "blue", "priority", "subject", "durable", "ttl", "to", "x-match", "all",
    "any", "x-other", "&p:ord", "&s:ed", "&&lit", "&x:bad", "&", "order.#.created", "#", "*.a",
    "order.created", "NoLocalFilter{}", "user-id", "content-type", "message-id",
    "creation-time", "group-sequence", "delivery-count", "first-acquirer", "sig", "x-opt-route",
    "\u00fc\u2603", "a" * 300,
)
_SCALARS: Final[tuple[Any, ...]] = (
    None, True, False, 0, -1, 2**63 - 1, -(2**63), ubyte(255), ubyte(0), ushort(65535),
    uint(2**32 - 1), ulong(2**64 - 1), ulong(0), byte(-128), short(-32768), int32(-(2**31)),
    0.5, float("nan"), float("inf"), float32(0.1), Decimal("1.5"), Decimal("NaN"),
    decimal32(0x3280000A), decimal64(0x31C000000000000A), char("x"), timestamp(0),
    timestamp(-1), uuid.UUID(int=3), b"", b"\x00\xff", symbol("all"), symbol("any"),
)


def build_value(reader: ByteReader, depth: int = 0) -> Any:
    """An AMQP value: scalars, strings, composites, described filters and deep chains."""
    choice = reader.below(len(_VALUE_BUILDERS))
    if depth >= 5 or reader.exhausted():
        choice = choice % 4  # a leaf: the first four builders nest nothing
    return _VALUE_BUILDERS[choice](reader, depth)


def _list_value(reader: ByteReader, depth: int) -> list[Any]:
    return [build_value(reader, depth + 1) for _ in range(reader.below(5))]


def _map_value(reader: ByteReader, depth: int) -> dict[Any, Any]:
    entries: dict[Any, Any] = {}
    for _ in range(reader.below(6)):
        key = reader.pick((reader.pick(_WORDS), symbol(reader.pick(_WORDS)),
                           reader.pick(_SCALARS)))
        try:
            entries[key] = build_value(reader, depth + 1)
        except TypeError:  # an unhashable scalar: never, but stay total
            continue
    return entries


def _array_value(reader: ByteReader, depth: int) -> Array:
    element = reader.pick(((Data.INT, (1, 2, 3)), (Data.SYMBOL, (symbol("a"), symbol("b"))),
                           (Data.STRING, ("x",)), (Data.NULL, ()), (Data.BOOL, (True,))))
    return Array(UNDESCRIBED_ANY, element[0], *element[1])


def _filter_value(reader: ByteReader, depth: int) -> Described:
    return build_filter(reader, depth + 1)


_VALUE_BUILDERS: Final[tuple[Callable[[ByteReader, int], Any], ...]] = (
    lambda reader, depth: reader.pick(_SCALARS),
    lambda reader, depth: reader.pick(_WORDS),
    lambda reader, depth: symbol(reader.pick(_WORDS)),
    lambda reader, depth: reader.pick(SQL_SEEDS),
    _list_value, _list_value,
    _map_value, _map_value,
    _array_value,
    _filter_value, _filter_value, _filter_value, _filter_value,
    # a group chain deeper than any limit allows
    lambda reader, depth: deep_group(reader.below(64) + 1, reader.pick(DESCRIPTORS)),
    # a value nested deeper than the property-entry limit allows
    lambda reader, depth: deep_list(reader.below(400) + 1),
    lambda reader, depth: Described(reader.pick(_SCALARS), build_value(reader, depth + 1)),
)
"""What :func:`build_value` builds for each choice (its weight is how often it appears)."""


def build_filter(reader: ByteReader, depth: int = 0) -> Described:
    """A described filter, its value usually of the type its descriptor wants."""
    descriptor = reader.pick(DESCRIPTORS)
    name = descriptor if isinstance(descriptor, str) else int(descriptor or 0)
    if reader.below(4) == 0:
        value = build_value(reader, depth + 1)
    elif name in _GROUPS:
        value = [build_filter(reader, depth + 1) if depth < 5 else Described(
            symbol("amqp:true-filter"), True) for _ in range(reader.below(4))]
    elif "sql" in str(name) or "selector" in str(name) or name in (0x120, 0x468C00000004):
        value = reader.pick(SQL_SEEDS)
    elif "true" in str(name) or "false" in str(name) or name in (0x110, 0x111):
        value = reader.pick((True, False, None, "true"))
    else:
        value = {reader.pick(_WORDS): build_value(reader, depth + 1)
                 for _ in range(reader.below(4))}
    return Described(descriptor, value)


def build_filter_set(data: bytes) -> dict[Any, Any]:
    """A filter set (name -> described filter) decided by ``data``."""
    reader = ByteReader(data)
    result: dict[Any, Any] = {}
    for _ in range(reader.below(5)):
        key = reader.pick((symbol(reader.pick(_WORDS)), reader.pick(_WORDS),
                           reader.pick(_SCALARS)))
        try:
            result[key] = build_filter(reader) if reader.below(8) else build_value(reader)
        except TypeError:
            continue
    return result


def deep_group(depth: int, descriptor: Any = None) -> Described:
    """Groups nested ``depth`` deep, built without recursion."""
    group = descriptor if descriptor is not None else symbol("amqp:not-filter")
    value: Described = Described(symbol("amqp:true-filter"), True)
    for _ in range(depth):
        value = Described(group, [value])
    return value


def deep_list(depth: int) -> list[Any]:
    """A list holding a list ... ``depth`` levels deep, built without recursion."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value
