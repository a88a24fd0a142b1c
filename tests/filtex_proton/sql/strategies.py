"""Hypothesis strategies for AMQP values and messages, as the SQL and pushdown property tests
draw them (every AMQP type, its edges, NaN and infinities, nested values)."""

from __future__ import annotations

import math
import unicodedata
import uuid
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st
from proton import (
    UNDESCRIBED,
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

from filtex_proton.amqp.view import DictMessageView

from .support import bid32, bid64, bid128

# ==================================================================================== values

LONG_EDGES = [0, 1, -1, 2**31 - 1, -(2**31), 2**32, 2**63 - 1, -(2**63)]
ULONG_EDGES = [0, 1, 2**63 - 1, 2**63, 2**64 - 1]

integers = st.one_of(
    st.integers(0, 2**8 - 1).map(ubyte),
    st.integers(0, 2**16 - 1).map(ushort),
    st.integers(0, 2**32 - 1).map(uint),
    st.one_of(st.integers(0, 2**64 - 1), st.sampled_from(ULONG_EDGES)).map(ulong),
    st.integers(-(2**7), 2**7 - 1).map(byte),
    st.integers(-(2**15), 2**15 - 1).map(short),
    st.integers(-(2**31), 2**31 - 1).map(int32),
    st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from(LONG_EDGES)),
    st.integers(-3, 6),  # small values collide with constants and list positions
)
floats = st.one_of(
    st.floats(),  # includes NaN, +-INF, -0.0, subnormals
    st.floats(width=32).map(float32),
    st.sampled_from([0.5, 1.0, 2.5, 1e308, -1e308, math.nan, math.inf, -math.inf]),
)
decimals = st.one_of(
    st.builds(lambda sign, digits, exponent: Decimal((sign, tuple(map(int, str(digits))),
                                                       exponent)),
              st.integers(0, 1), st.integers(0, 10**34 - 1), st.integers(-6000, 6000)),
    st.sampled_from([Decimal("NaN"), Decimal("Infinity"), Decimal("-Infinity"),
                     Decimal("1.5"), Decimal("-0.0"), Decimal("9.99E6144")]),
    st.builds(bid32, st.integers(0, 2**23 - 1), st.integers(-101, 90), negative=st.booleans()),
    st.builds(bid64, st.integers(0, 2**53 - 1), st.integers(-398, 369),
              negative=st.booleans()),
    st.builds(bid128, st.integers(0, 10**34 - 1), st.integers(-6176, 6111),
              negative=st.booleans()),
    st.sampled_from([decimal32(0x7C000000), decimal64(0x7800000000000000),
                     decimal128(bytes.fromhex("7c" + "00" * 15))]),
)
ISO_STRINGS = ["2020-01-01", "2020-01-01T00:00:00Z", "1970-01-01T00:00:01+01:00", "PT1S",
               "P1D", "PT0.5S", "-PT1H", "2020-02-30", "20200101T000000Z", "P1M", "T"]
LIKE_ALPHABET = "ab%_!\\\n\U0001d538"
unicode_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)
texts = st.one_of(
    st.text(alphabet=LIKE_ALPHABET, max_size=6), unicode_text, st.sampled_from(ISO_STRINGS))
scalars = st.one_of(
    st.none(), st.booleans(), integers, floats, decimals,
    st.integers(-(2**45), 2**45).map(timestamp),
    st.characters(exclude_categories=["Cs"]).map(char),
    st.uuids(), st.sampled_from([uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)]),
    st.binary(max_size=6), texts, texts.map(symbol),
)
values = st.recursive(
    st.one_of(integers, floats, decimals, texts, scalars),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["k", "a", "x y", "0"]), inner, max_size=3),
        st.lists(st.integers(-(2**31), 2**31 - 1).map(int32), max_size=3).map(
            lambda xs: Array(UNDESCRIBED, Data.INT, *xs)),
        st.lists(inner, max_size=3).map(lambda xs: Described(symbol("d"), xs)),
    ),
    max_leaves=6,
)

APP_NAMES = ["a", "b", "c", "l", "m", "JMSPriority"]
ANNOTATION_KEYS = ["x-opt-jms-type", "k", "x-opt-a"]
message_ids = st.one_of(texts, st.integers(0, 2**64 - 1).map(ulong), st.uuids(),
                        st.binary(max_size=4))


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


headers = st.fixed_dictionaries({}, optional={
    "durable": _maybe(st.booleans()), "priority": _maybe(st.integers(0, 255).map(ubyte)),
    "ttl": _maybe(st.integers(0, 2**32 - 1).map(uint)), "first-acquirer": st.booleans(),
    "delivery-count": _maybe(st.integers(0, 2**32 - 1).map(uint)),
})
properties = st.fixed_dictionaries({}, optional={
    "message-id": _maybe(message_ids), "user-id": _maybe(st.binary(max_size=4)),
    "to": texts, "subject": texts, "reply-to": texts, "correlation-id": message_ids,
    "content-type": texts.map(symbol), "content-encoding": texts.map(symbol),
    "absolute-expiry-time": st.integers(-(2**45), 2**45).map(timestamp),
    "creation-time": st.integers(-(2**45), 2**45).map(timestamp), "group-id": texts,
    "group-sequence": st.integers(0, 2**32 - 1).map(uint), "reply-to-group-id": texts,
})
annotations = st.dictionaries(st.sampled_from(ANNOTATION_KEYS).map(symbol), values, max_size=3)
messages = st.builds(
    DictMessageView,
    header=_maybe(headers),
    properties=_maybe(properties),
    application_properties=_maybe(st.dictionaries(st.sampled_from(APP_NAMES), values,
                                                   max_size=5)),
    message_annotations=_maybe(annotations),
    delivery_annotations=_maybe(annotations),
    footer=_maybe(annotations),
)


def printable(text: str) -> str:
    """The text without control characters, which §6.4.4.2.5 keeps out of strings."""
    return "".join(c for c in text if unicodedata.category(c) != "Cc")
