"""Hypothesis strategies for AMQP values and messages, exact (type-aware, NaN-aware)
comparison, and conversion to and from the forms python-qpid-proton takes and gives
(raw-bit decimals)."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, Literal

from hypothesis import strategies as st
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

from filtex_proton.amqp.bid import (
    as_decimal,
    encode_decimal32,
    encode_decimal64,
    encode_decimal128,
)
from filtex_proton.amqp.decode import UNDESCRIBED
from filtex_proton.amqp.message import NO_BODY, encode_message

# --------------------------------------------------------------------------- strategies


def decimals(precision: int, emin: int, emax: int) -> st.SearchStrategy[Decimal]:
    """Finite decimals whose coefficient and exponent fit the format exactly."""
    return st.builds(
        lambda s, c, e: Decimal((s, tuple(map(int, str(c))), e)),
        st.integers(0, 1),
        st.integers(0, 10**precision - 1),
        st.integers(emin, emax),
    )


DECIMAL32 = decimals(7, -101, 90)
DECIMAL64 = decimals(16, -398, 369)
DECIMAL128 = decimals(34, -6176, 6111)
DECIMAL_SPECIALS = st.sampled_from(
    [Decimal("NaN"), Decimal("-NaN"), Decimal("Infinity"), Decimal("-Infinity")]
)

SYMBOLS = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=40).map(symbol)
CHARS = st.characters(exclude_categories=["Cs"]).map(char)
TEXT = st.one_of(st.text(max_size=20), st.text(max_size=300))
BINARY = st.one_of(st.binary(max_size=20), st.binary(max_size=300))

#: Element strategies by proton array type; also the scalar AMQP types.
SCALARS_BY_TYPE: dict[int, st.SearchStrategy[Any]] = {
    Data.NULL: st.none(),
    Data.BOOL: st.booleans(),
    Data.UBYTE: st.integers(0, 2**8 - 1).map(ubyte),
    Data.USHORT: st.integers(0, 2**16 - 1).map(ushort),
    Data.UINT: st.integers(0, 2**32 - 1).map(uint),
    Data.ULONG: st.integers(0, 2**64 - 1).map(ulong),
    Data.BYTE: st.integers(-(2**7), 2**7 - 1).map(byte),
    Data.SHORT: st.integers(-(2**15), 2**15 - 1).map(short),
    Data.INT: st.integers(-(2**31), 2**31 - 1).map(int32),
    Data.LONG: st.integers(-(2**63), 2**63 - 1),
    Data.FLOAT: st.floats(width=32).map(float32),
    Data.DOUBLE: st.floats(),
    Data.DECIMAL32: DECIMAL32,
    Data.DECIMAL64: DECIMAL64,
    Data.DECIMAL128: st.one_of(DECIMAL128, DECIMAL_SPECIALS),
    Data.CHAR: CHARS,
    Data.TIMESTAMP: st.integers(-(2**63), 2**63 - 1).map(timestamp),
    Data.UUID: st.uuids(),
    Data.BINARY: BINARY,
    Data.STRING: TEXT,
    Data.SYMBOL: SYMBOLS,
}

SCALARS: st.SearchStrategy[Any] = st.one_of(
    *(s for t, s in SCALARS_BY_TYPE.items() if t not in (Data.DECIMAL32, Data.DECIMAL64))
)

#: Map keys: hashable, and no NaN (a NaN key cannot be found again).
KEYS: st.SearchStrategy[Any] = st.one_of(
    *(
        s
        for t, s in SCALARS_BY_TYPE.items()
        if t not in (Data.FLOAT, Data.DOUBLE, Data.DECIMAL32, Data.DECIMAL64, Data.DECIMAL128)
    )
)

DESCRIPTORS: st.SearchStrategy[Any] = st.one_of(
    st.just(UNDESCRIBED), SYMBOLS, SCALARS_BY_TYPE[Data.ULONG]
)


def scalar_arrays() -> st.SearchStrategy[Array]:
    return st.sampled_from(sorted(SCALARS_BY_TYPE)).flatmap(
        lambda t: st.builds(
            lambda d, els: Array(d, t, *els),
            DESCRIPTORS,
            st.lists(SCALARS_BY_TYPE[t], max_size=6),
        )
    )


def _compound(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    lists = st.lists(children, max_size=5)
    maps = st.dictionaries(KEYS, children, max_size=5)
    return st.one_of(
        lists,
        maps,
        st.builds(Described, st.one_of(SYMBOLS, SCALARS_BY_TYPE[Data.ULONG]), children),
        st.builds(
            lambda d, els: Array(d, Data.LIST, *els), DESCRIPTORS, st.lists(lists, max_size=3)
        ),
        st.builds(lambda d, els: Array(d, Data.MAP, *els), DESCRIPTORS, st.lists(maps, max_size=3)),
        st.builds(
            lambda d, els: Array(d, Data.ARRAY, *els),
            DESCRIPTORS,
            st.lists(scalar_arrays(), max_size=3),
        ),
    )


VALUES: st.SearchStrategy[Any] = st.recursive(
    st.one_of(SCALARS, scalar_arrays()), _compound, max_leaves=25
)

# --------------------------------------------------------------------------- messages

HEADER_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "durable": st.booleans(),
    "priority": SCALARS_BY_TYPE[Data.UBYTE],
    "ttl": SCALARS_BY_TYPE[Data.UINT],
    "first-acquirer": st.booleans(),
    "delivery-count": SCALARS_BY_TYPE[Data.UINT],
}
MESSAGE_IDS = st.one_of(
    SCALARS_BY_TYPE[Data.ULONG], st.uuids(), st.binary(max_size=40), st.text(max_size=40)
)
PROPERTY_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "message-id": MESSAGE_IDS,
    "user-id": st.binary(max_size=20),
    "to": st.text(max_size=30),
    "subject": st.text(max_size=30),
    "reply-to": st.text(max_size=30),
    "correlation-id": MESSAGE_IDS,
    "content-type": SYMBOLS,
    "content-encoding": SYMBOLS,
    "absolute-expiry-time": SCALARS_BY_TYPE[Data.TIMESTAMP],
    "creation-time": SCALARS_BY_TYPE[Data.TIMESTAMP],
    "group-id": st.text(max_size=30),
    "group-sequence": SCALARS_BY_TYPE[Data.UINT],
    "reply-to-group-id": st.text(max_size=30),
}


@st.composite
def composite_fields(draw: st.DrawFn, spec: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    """A random subset of the fields, some given explicitly as None (encoded as null)."""
    fields: dict[str, Any] = {}
    for name, values in spec.items():
        choice = draw(st.sampled_from(["absent", "null", "value"]))
        if choice == "null":
            fields[name] = None
        elif choice == "value":
            fields[name] = draw(values)
    return fields


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The strategy's values, or None (a section left out)."""
    return st.one_of(st.none(), strategy)


ANNOTATIONS = st.dictionaries(st.one_of(SYMBOLS, SCALARS_BY_TYPE[Data.ULONG]), SCALARS, max_size=6)
APPLICATION = st.dictionaries(st.text(max_size=20), SCALARS, max_size=8)
#: Annotations whose values may be anything, lists, maps, arrays and described values too.
ANY_ANNOTATIONS = st.dictionaries(
    st.one_of(SYMBOLS, SCALARS_BY_TYPE[Data.ULONG]), VALUES, max_size=4)
#: Application properties with keys short and long (str8, str32) and, now and then, a
#: value that is not of a simple type (refused by the door check).
ANY_APPLICATION = st.dictionaries(
    st.one_of(st.text(max_size=20), st.text(min_size=250, max_size=300)),
    st.one_of(SCALARS, SCALARS, SCALARS, VALUES), max_size=8)
BodyKind = Literal["value", "data", "sequence"]
_VALUE: st.SearchStrategy[BodyKind] = st.just("value")
_DATA: st.SearchStrategy[BodyKind] = st.just("data")
_SEQUENCE: st.SearchStrategy[BodyKind] = st.just("sequence")
BODIES: st.SearchStrategy[tuple[Any, BodyKind]] = st.one_of(
    st.tuples(st.just(NO_BODY), _VALUE),
    st.tuples(VALUES, _VALUE),
    st.tuples(st.lists(BINARY, min_size=1, max_size=3), _DATA),
    st.tuples(st.lists(st.lists(SCALARS, max_size=4), min_size=1, max_size=2),
              _SEQUENCE),
)


@st.composite
def messages(draw: st.DrawFn) -> bytes:
    """An encoded message: any subset of the sections, each with fields or entries of any
    kind the codec writes (annotation values compound or not, long keys, null fields),
    and one of the body kinds or none."""
    body, kind = draw(BODIES)
    return encode_message(
        header=draw(optional(composite_fields(HEADER_VALUES))),
        delivery_annotations=draw(optional(ANY_ANNOTATIONS)),
        message_annotations=draw(optional(st.one_of(ANNOTATIONS, ANY_ANNOTATIONS))),
        properties=draw(optional(composite_fields(PROPERTY_VALUES))),
        application_properties=draw(optional(st.one_of(APPLICATION, ANY_APPLICATION))),
        body=body,
        body_kind=kind,
        footer=draw(optional(ANNOTATIONS)),
    )


@st.composite
def damaged(draw: st.DrawFn, message: bytes) -> bytes:
    """``message`` with one to three bytes flipped, set, inserted or deleted, or cut short."""
    raw = bytearray(message)
    for _ in range(draw(st.integers(1, 3))):
        if not raw:
            break
        at = draw(st.integers(0, len(raw) - 1))
        how = draw(st.sampled_from(["flip", "set", "insert", "delete", "truncate"]))
        if how == "flip":
            raw[at] ^= 1 << draw(st.integers(0, 7))
        elif how == "set":
            raw[at] = draw(st.integers(0, 255))
        elif how == "insert":
            raw.insert(at, draw(st.integers(0, 255)))
        elif how == "delete":
            del raw[at]
        else:
            del raw[at:]
    return bytes(raw)


# --------------------------------------------------------------------------- comparison


def same(a: Any, b: Any) -> bool:
    """Identical AMQP values: same Python types all the way down, NaN equal to NaN,
    -0.0 distinct from 0.0, Decimals equal digit for digit."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, Decimal):
        return a.as_tuple() == b.as_tuple() and a.is_snan() == b.is_snan()
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if isinstance(a, Array):
        return (
            same(a.descriptor, b.descriptor)
            and a.type == b.type
            and len(a.elements) == len(b.elements)
            and all(same(x, y) for x, y in zip(a.elements, b.elements, strict=True))
        )
    if isinstance(a, Described):
        return same(a.descriptor, b.descriptor) and same(a.value, b.value)
    return bool(a == b)


# --------------------------------------------------------------------------- proton forms

_RAW_DECIMAL = {
    Data.DECIMAL32: lambda d: decimal32(encode_decimal32(d)),
    Data.DECIMAL64: lambda d: decimal64(encode_decimal64(d)),
    Data.DECIMAL128: lambda d: decimal128(encode_decimal128(d)),
}


def to_proton(value: Any) -> Any:
    """The value as proton's Data.put_object takes it: decimals as proton's raw-bit classes."""
    if isinstance(value, Decimal):
        return decimal128(encode_decimal128(value))
    if isinstance(value, list):
        return [to_proton(v) for v in value]
    if isinstance(value, dict):
        return {to_proton(k): to_proton(v) for k, v in value.items()}
    if isinstance(value, Described):
        return Described(to_proton(value.descriptor), to_proton(value.value))
    if isinstance(value, Array):
        convert = _RAW_DECIMAL.get(value.type, to_proton)
        return Array(to_proton(value.descriptor), value.type, *map(convert, value.elements))
    return value


def from_proton(value: Any) -> Any:
    """A value proton's Data.get_object gave, in our representation (Decimal for decimals)."""
    if isinstance(value, decimal32 | decimal64 | decimal128):
        return as_decimal(value)
    if isinstance(value, list):
        return [from_proton(v) for v in value]
    if isinstance(value, dict):
        return {from_proton(k): from_proton(v) for k, v in value.items()}
    if isinstance(value, Described):
        return Described(from_proton(value.descriptor), from_proton(value.value))
    if isinstance(value, Array):
        return Array(from_proton(value.descriptor), value.type, *map(from_proton, value.elements))
    if type(value) is memoryview:
        return bytes(value)
    return value


def proton_encode(value: Any) -> bytes:
    data = Data()
    data.put_object(to_proton(value))
    return bytes(data.encode())


def proton_decode(encoded: bytes) -> Any:
    data = Data()
    data.decode(encoded)
    data.rewind()
    assert data.next() is not None
    return from_proton(data.get_object())


def proton_can_decode(value: Any) -> bool:
    """False for values proton 0.40 cannot decode (bugs in proton, not in the encoding;
    proton fails on its own encoding of them too):

    * a binary map key: Data.get_binary returns a writable memoryview, which
      Python cannot hash;
    * a described value that describes a described value: proton then loses the
      value that follows it in a list (or the element type of an enclosing array);
      a described descriptor makes Data.decode fail outright.
    """
    if isinstance(value, dict):
        return all(
            not isinstance(k, bytes) and proton_can_decode(k) and proton_can_decode(v)
            for k, v in value.items()
        )
    if isinstance(value, list):
        return all(map(proton_can_decode, value))
    if isinstance(value, Array):
        return proton_can_decode(value.descriptor) and all(map(proton_can_decode, value.elements))
    if isinstance(value, Described):
        if isinstance(value.value, Described) or isinstance(value.descriptor, Described):
            return False
        return proton_can_decode(value.descriptor) and proton_can_decode(value.value)
    return True
