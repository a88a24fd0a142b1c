"""The AMQP 1.0 type codec: every format code, the encoder's choices, and malformed input."""

from __future__ import annotations

import pickle
import struct
import sys
import uuid
from decimal import Decimal
from typing import Any

import pytest
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

from filtex_proton.amqp.decode import (
    MAX_DEPTH,
    UNDESCRIBED,
    DecodeError,
    decode_fields,
    decode_value,
    skip_value,
)
from filtex_proton.amqp.encode import encode_value

from .filtex_amqp_strategies import proton_decode, proton_encode, same

U = uuid.UUID("0123abcd-4567-89ef-fedc-ba9876543210")

# (encoded hex, expected value): one or more per format code.
VECTORS: list[tuple[str, Any]] = [
    ("40", None),
    ("41", True),
    ("42", False),
    ("5601", True),
    ("5600", False),
    ("50ff", ubyte(255)),
    ("60ffff", ushort(65535)),
    ("70ffffffff", uint(2**32 - 1)),
    ("52ff", uint(255)),
    ("43", uint(0)),
    ("80ffffffffffffffff", ulong(2**64 - 1)),
    ("53ff", ulong(255)),
    ("44", ulong(0)),
    ("5180", byte(-128)),
    ("618000", short(-32768)),
    ("7180000000", int32(-(2**31))),
    ("54ff", int32(-1)),
    ("818000000000000000", -(2**63)),
    ("557f", 127),
    ("723fc00000", float32(1.5)),
    ("82c004000000000000", -2.5),
    ("7432800001", Decimal("1")),
    ("84b1c0000000000001", Decimal("-1")),
    ("9430400000000000000000000000000001", Decimal("1")),
    ("73000000e9", char("é")),
    ("730001f600", char("\U0001f600")),
    ("83fffffffffffffffe", timestamp(-2)),
    ("980123abcd456789effedcba9876543210", U),
    ("a000", b""),
    ("a003010203", b"\x01\x02\x03"),
    ("b00000000201ff", b"\x01\xff"),
    ("a103c3a978", "éx"),
    ("b100000000", ""),
    ("a30161", symbol("a")),
    ("b30000000162", symbol("b")),
    ("45", []),
    ("c00100", []),
    ("c003024041", [None, True]),
    ("d0000000070000000241a100", [True, ""]),
    ("c10100", {}),
    ("c10502a1016141", {"a": True}),
    ("d1000000080000000241a30162", {True: symbol("b")}),
    ("e0020140", Array(UNDESCRIBED, Data.NULL, None)),
    ("e00a027100000001 00000002", Array(UNDESCRIBED, Data.INT, int32(1), int32(2))),
    ("e00402560100", Array(UNDESCRIBED, Data.BOOL, True, False)),
    ("f0000000050000000080", Array(UNDESCRIBED, Data.ULONG)),
    ("e00b0100a30164b10000000178", Array(symbol("d"), Data.STRING, "x")),
    (
        "e00601e0 03015001",
        Array(UNDESCRIBED, Data.ARRAY, Array(UNDESCRIBED, Data.UBYTE, ubyte(1))),
    ),
    ("00530145", Described(ulong(1), [])),
    ("00a30178a10179", Described(symbol("x"), "y")),
    ("0000530140 41", Described(Described(ulong(1), None), True)),
]
VECTORS = [(h.replace(" ", ""), v) for h, v in VECTORS]


@pytest.mark.parametrize(("hexed", "expected"), VECTORS)
def test_decode_vector(hexed: str, expected: Any) -> None:
    raw = bytes.fromhex(hexed)
    value, end = decode_value(raw)
    assert end == len(raw)
    assert same(value, expected), (value, expected)
    assert skip_value(raw) == len(raw)


@pytest.mark.parametrize(("hexed", "expected"), VECTORS)
def test_decode_vector_at_an_offset_and_from_other_buffers(hexed: str, expected: Any) -> None:
    raw = b"\xee\xee" + bytes.fromhex(hexed) + b"\xee"
    for buf in (raw, bytearray(raw), memoryview(raw)):
        value, end = decode_value(buf, 2)
        assert end == len(raw) - 1
        assert same(value, expected)
        assert skip_value(buf, 2) == len(raw) - 1


@pytest.mark.parametrize(("hexed", "expected"), VECTORS)
def test_re_encoding_a_vector_decodes_to_the_same(hexed: str, expected: Any) -> None:
    encoded = encode_value(expected)
    value, end = decode_value(encoded)
    assert end == len(encoded)
    assert same(value, expected)


@pytest.mark.parametrize(("hexed", "expected"), VECTORS)
def test_every_truncation_of_a_vector_is_refused(hexed: str, expected: Any) -> None:
    raw = bytes.fromhex(hexed)
    for cut in range(len(raw)):
        with pytest.raises(DecodeError):
            decode_value(raw[:cut])
        with pytest.raises(DecodeError):
            skip_value(raw[:cut])


def test_decoded_types_are_exact() -> None:
    raw = bytes.fromhex("c0 11 08 50 01 52 02 53 03 54 04 55 05 51 06 61 0007 41".replace(" ", ""))
    value, _ = decode_value(raw)
    assert [type(v) for v in value] == [ubyte, uint, ulong, int32, int, byte, short, bool]


@pytest.mark.parametrize(
    ("value", "hexed"),
    [
        (None, "40"),
        (True, "41"),
        (False, "42"),
        (uint(0), "43"),
        (uint(255), "52ff"),
        (uint(256), "7000000100"),
        (ulong(0), "44"),
        (ulong(1), "5301"),
        (ulong(256), "800000000000000100"),
        (int32(-128), "5480"),
        (int32(128), "7100000080"),
        (-128, "5580"),
        (128, "810000000000000080"),
        (2.0, "824000000000000000"),
        (float32(2.0), "7240000000"),
        (Decimal("1"), "9430400000000000000000000000000001"),
        (decimal32(0x32800001), "7432800001"),
        (decimal64(0x31C0000000000001), "8431c0000000000001"),
        (
            decimal128(bytes.fromhex("30400000000000000000000000000001")),
            "9430400000000000000000000000000001",
        ),
        ("", "a100"),
        ("x" * 255, "a1ff" + "78" * 255),
        ("x" * 256, "b100000100" + "78" * 256),
        (b"\x00", "a00100"),
        (bytearray(b"\x01"), "a00101"),
        (memoryview(b"\x02"), "a00102"),
        (symbol("s"), "a30173"),
        ([], "45"),
        ((), "45"),
        ([None], "c0020140"),
        ({}, "c10100"),
        (Array(UNDESCRIBED, Data.UINT, uint(1)), "e006017000000001"),
        (Described(symbol("d"), None), "00a3016440"),
    ],
)
def test_encoder_picks_the_smallest_encoding(value: Any, hexed: str) -> None:
    assert encode_value(value).hex() == hexed


def test_large_compounds_use_the_32_bit_forms() -> None:
    big_list = list(range(300))
    assert encode_value(big_list)[0] == 0xD0
    assert encode_value({i: i for i in range(200)})[0] == 0xD1
    assert encode_value(Array(UNDESCRIBED, Data.LONG, *range(40)))[0] == 0xF0
    long_text = ["x" * 253]  # 1 element, but the body does not fit a one-byte size
    assert encode_value(long_text)[0] == 0xD0
    for value in (big_list, {i: i for i in range(200)}, long_text):
        assert same(decode_value(encode_value(value))[0], value)


def test_subclasses_encode_as_their_amqp_base() -> None:
    class MyStr(str):
        __slots__ = ()

    class MyDict(dict[Any, Any]):
        pass

    assert encode_value(MyStr("a")) == encode_value("a")
    assert encode_value(MyDict(a=1)) == encode_value({"a": 1})


@pytest.mark.parametrize(
    "value",
    [
        ubyte(256),
        ushort(2**16),
        uint(2**32),
        ulong(2**64),
        byte(128),
        short(-(2**15) - 1),
        int32(2**31),
        2**63,
        -(2**63) - 1,
        timestamp(2**63),
        float32(1e39),
        char("ab"),
        char("\ud800"),
        "\ud800",
        symbol("é"),
        Decimal("1E+7000"),
        decimal128(b"\x00" * 15),
        Array(UNDESCRIBED, Data.INT, 2**40),
        Array(UNDESCRIBED, Data.NULL, 1),
        Array(UNDESCRIBED, 99),
    ],
)
def test_encoder_refuses_out_of_range_values(value: Any) -> None:
    with pytest.raises(ValueError):
        encode_value(value)


@pytest.mark.parametrize(
    "value",
    [
        object(),
        {1, 2},
        Array(UNDESCRIBED, Data.STRING, 1),
        Array(UNDESCRIBED, Data.LIST, 1),
        Array(UNDESCRIBED, Data.UUID, "x"),
        Array(UNDESCRIBED, Data.DECIMAL32, 1.5),
    ],
)
def test_encoder_refuses_non_amqp_objects(value: Any) -> None:
    with pytest.raises(TypeError):
        encode_value(value)


def test_encoder_refuses_too_deep_and_cyclic_values() -> None:
    value: list[Any] = []
    for _ in range(MAX_DEPTH + 1):
        value = [value]
    with pytest.raises(ValueError, match="nested deeper"):
        encode_value(value)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="nested deeper"):
        encode_value(cyclic)


# --------------------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    ("hexed", "reason"),
    [
        ("", "truncated"),
        ("01", "unknown format code 0x01"),
        ("57", "unknown format code 0x57"),
        ("ff", "unknown format code 0xff"),
        ("c003024099", "unknown format code 0x99"),
        ("5602", "boolean octet"),
        ("7300110000", "invalid char"),
        ("730000d800", "invalid char"),
        ("a102c328", "invalid UTF-8"),
        ("a103eda080", "invalid UTF-8"),  # an encoded surrogate
        ("a302c3a9", "non-ASCII"),
        ("b3000000018a", "non-ASCII"),
        ("c00401a101ff", "UTF-8"),  # a str8 inside a list: the inline path
        ("c10502a101ff40", "UTF-8"),  # a str8 map key: the inline path
        ("c0030240", "beyond the buffer"),
        ("c0ff0140", "beyond the buffer"),
        ("c00005", "smaller than its count"),
        ("c100", "smaller than its count"),
        ("c003034040", "cannot fit"),  # count 3 in 2 bytes
        ("c00401404040", "do not fill"),  # size bigger than the elements
        ("d0ffffffff0000000140", "beyond the buffer"),
        ("c103014040", "odd number"),
        ("c10403404141", "odd number"),
        ("c1050240414040", "do not fill"),
        ("c1040240a1054141414141", "do not fill"),  # a string overrunning its map
        ("a0ff00", "beyond the buffer"),
        ("b0ffffffff00", "beyond the buffer"),
        ("b1ffffffff00", "beyond the buffer"),
        ("e00001", "smaller than its count"),
        ("e00101", "without an element constructor"),
        ("e0020200", "truncated"),
        ("e003010099", "unknown format code 0x99"),
        ("e003010053", "truncated"),
        ("e005010053010040", "cannot construct array elements"),  # nested described constructor
        ("e003025001", "cannot fit"),
        ("e0050250010203", "do not fill"),
        ("f0000000ff0000000140", "beyond the buffer"),
        ("f000000005ffffffff40", "cannot fit"),  # zero-width elements, count > buffer
        ("e0020199", "cannot construct"),
        ("00", "truncated"),
        ("0053", "truncated"),
        ("005301", "truncated"),
        ("c103024541", "cannot hash"),  # a list as a map key
        ("c106020053014041", "cannot hash"),  # a described value as a map key
    ],
)
def test_malformed_input_raises_decode_error(hexed: str, reason: str) -> None:
    raw = bytes.fromhex(hexed.replace(" ", ""))
    with pytest.raises(DecodeError, match=reason):
        decode_value(raw)


def test_lying_sizes_are_caught_by_skip_value() -> None:
    for hexed in ("a0ff00", "b0ffffffff", "c0ff", "d000000100", "f0ffffff00", "01", "00"):
        with pytest.raises(DecodeError):
            skip_value(bytes.fromhex(hexed))


def test_skip_value_reads_sizes_only() -> None:
    # Garbage inside a compound is not looked at: that is what makes skipping cheap.
    raw = bytes.fromhex("c00401ffffff")
    assert skip_value(raw) == len(raw)
    with pytest.raises(DecodeError):
        decode_value(raw)


def test_decode_error_carries_reason_and_offset_and_pickles() -> None:
    with pytest.raises(DecodeError) as info:
        decode_value(bytes.fromhex("c004034041ff"), 0)
    error = info.value
    assert isinstance(error, ValueError)
    assert "unknown format code 0xff" in error.reason
    assert error.offset == 5
    assert "at byte 5" in str(error)
    again = pickle.loads(pickle.dumps(error))
    assert (again.reason, again.offset) == (error.reason, error.offset)


def test_negative_offset_is_refused() -> None:
    with pytest.raises(DecodeError, match="negative"):
        decode_value(b"\x40", -1)
    with pytest.raises(DecodeError, match="negative"):
        skip_value(b"\x40", -1)


# --------------------------------------------------------------------------- depth


def nested_lists(depth: int) -> bytes:
    """``depth`` lists, one inside the other (the innermost empty), in the 32-bit form."""
    raw = b"\x45"
    for _ in range(depth - 1):
        raw = b"\xd0" + struct.pack(">II", len(raw) + 4, 1) + raw
    return raw


def test_nesting_up_to_the_maximum_is_accepted() -> None:
    value, end = decode_value(nested_lists(MAX_DEPTH))
    assert end == len(nested_lists(MAX_DEPTH))
    for _ in range(MAX_DEPTH - 1):
        assert isinstance(value, list)
        assert len(value) == 1
        value = value[0]
    assert value == []


def test_nesting_beyond_the_maximum_is_refused() -> None:
    with pytest.raises(DecodeError, match="nesting deeper than 100"):
        decode_value(nested_lists(MAX_DEPTH + 1))


def wrap_list(inner: bytes) -> bytes:
    return b"\xd0" + struct.pack(">II", len(inner) + 4, 1) + inner


def wrap_map(inner: bytes) -> bytes:
    return b"\xd1" + struct.pack(">II", len(inner) + 5, 2) + b"\x40" + inner


def wrap_described_value(inner: bytes) -> bytes:
    return b"\x00\x53\x01" + inner


def wrap_descriptor(inner: bytes) -> bytes:
    return b"\x00" + inner + b"\x40"


def wrap_array(inner: bytes) -> bytes:
    """An array of one array (``inner`` is an array32, whose code becomes the constructor)."""
    assert inner[0] == 0xF0
    return b"\xf0" + struct.pack(">II", len(inner) + 4, 1) + inner


@pytest.mark.parametrize(
    ("wrap", "innermost"),
    [
        (wrap_list, b"\x45"),
        (wrap_map, b"\x45"),
        (wrap_described_value, b"\x45"),
        (wrap_descriptor, b"\x45"),
        (wrap_array, bytes.fromhex("f0000000050000000040")),
    ],
)
def test_very_deep_input_never_reaches_the_recursion_limit(wrap: Any, innermost: bytes) -> None:
    raw = innermost
    for _ in range(3 * sys.getrecursionlimit()):
        raw = wrap(raw)
    with pytest.raises(DecodeError, match="nesting"):
        decode_value(raw)
    assert skip_value(raw) == len(raw)


@pytest.mark.parametrize("wrap", [wrap_list, wrap_map, wrap_described_value, wrap_descriptor])
def test_depth_limit_is_exact_for_every_compound(wrap: Any) -> None:
    raw = b"\x45"  # with MAX_DEPTH - 1 wrappers: MAX_DEPTH nested compounds
    for _ in range(MAX_DEPTH - 1):
        raw = wrap(raw)
    decode_value(raw)
    with pytest.raises(DecodeError, match="nesting"):
        decode_value(wrap(raw))


def test_a_long_descriptor_chain_is_skipped_iteratively() -> None:
    raw = b"\x00" * 100_000 + b"\x40" * 100_001
    assert skip_value(raw) == len(raw)
    with pytest.raises(DecodeError, match="nesting"):
        decode_value(raw)


def test_zero_width_arrays_are_bounded_by_the_buffer() -> None:
    ok = bytes.fromhex("f0000000050000000340")
    value, _ = decode_value(ok)
    assert value == Array(UNDESCRIBED, Data.NULL, None, None, None)
    with pytest.raises(DecodeError, match="cannot fit"):
        decode_value(bytes.fromhex("f00000000500100000 40".replace(" ", "")))


# --------------------------------------------------------------------------- decode_fields


def test_decode_fields_keeps_non_null_named_fields() -> None:
    names = ("a", "b", "c")
    raw = encode_value([True, None, "x", "extra"])
    assert decode_fields(raw, 0, names) == {"a": True, "c": "x"}
    assert decode_fields(encode_value([]), 0, names) == {}
    assert decode_fields(b"\x40", 0, names) == {}
    assert decode_fields(encode_value([None] * 300), 0, names) == {}


@pytest.mark.parametrize(
    "hexed", ["c10100", "41", "c003024099", "c0ff", "c00302a105", "c00301a101ff", "c0034040"]
)
def test_decode_fields_refuses_malformed_lists(hexed: str) -> None:
    with pytest.raises(DecodeError):
        decode_fields(bytes.fromhex(hexed.replace(" ", "")), 0, ("a", "b"))


# --------------------------------------------------------------------------- proton interop


INTEROP: list[Any] = [
    None,
    True,
    False,
    ubyte(7),
    ushort(7000),
    uint(0),
    uint(9),
    uint(70000),
    ulong(0),
    ulong(200),
    ulong(2**64 - 1),
    byte(-7),
    short(-7000),
    int32(-7),
    int32(-70000),
    -7,
    -(2**40),
    float32(0.25),
    -0.0,
    float("inf"),
    Decimal("-12.345"),
    Decimal("NaN"),
    char("z"),
    char("\U0010ffff"),
    timestamp(1_700_000_000_000),
    U,
    b"",
    b"\x00" * 300,
    "",
    "ü" * 200,
    symbol(""),
    symbol("x" * 300),
    [],
    [1, "a", None],
    {},
    {symbol("k"): [{}]},
    Array(UNDESCRIBED, Data.INT),
    Array(UNDESCRIBED, Data.STRING, "a", "b" * 300),
    Array(symbol("desc"), Data.ULONG, ulong(1), ulong(2**64 - 1)),
    Array(UNDESCRIBED, Data.BOOL, True, False),
    Array(UNDESCRIBED, Data.NULL, None),
    Array(UNDESCRIBED, Data.DECIMAL32, Decimal("1.5")),
    Array(UNDESCRIBED, Data.DECIMAL64, Decimal("-1E+300")),
    Array(UNDESCRIBED, Data.DECIMAL128, Decimal("1E-6000")),
    Array(UNDESCRIBED, Data.CHAR, char("a")),
    Array(UNDESCRIBED, Data.UUID, U),
    Array(UNDESCRIBED, Data.TIMESTAMP, timestamp(-1)),
    Array(UNDESCRIBED, Data.FLOAT, float32(2)),
    Array(UNDESCRIBED, Data.LIST, [], [1]),
    Array(UNDESCRIBED, Data.MAP, {"a": 1}),
    Array(UNDESCRIBED, Data.ARRAY, Array(UNDESCRIBED, Data.SHORT, short(1))),
    Array(UNDESCRIBED, Data.SYMBOL, symbol("s")),
    Array(UNDESCRIBED, Data.BINARY, b"b"),
    Described(symbol("amqp:x"), {"a": [1]}),
    Described(ulong(0x70), []),
]


@pytest.mark.parametrize("value", INTEROP, ids=[repr(v)[:40] for v in INTEROP])
def test_we_decode_what_proton_encodes(value: Any) -> None:
    encoded = proton_encode(value)
    decoded, end = decode_value(encoded)
    assert end == len(encoded) == skip_value(encoded)
    assert same(decoded, value)


@pytest.mark.parametrize("value", INTEROP, ids=[repr(v)[:40] for v in INTEROP])
def test_proton_decodes_what_we_encode(value: Any) -> None:
    assert same(proton_decode(encode_value(value)), value)


def test_an_array_of_nulls_alone_in_its_buffer_decodes() -> None:
    """Five nulls encode in four bytes (found by hypothesis): the bound on zero-width elements
    that keeps a lying count from exhausting memory still lets a few through."""
    from proton import UNDESCRIBED, Array, Data

    encoded = encode_value(Array(UNDESCRIBED, Data.NULL, None, None, None, None, None))
    assert len(encoded) == 4
    decoded, end = decode_value(encoded)
    assert end == 4 and list(decoded.elements) == [None] * 5
    with pytest.raises(DecodeError):
        decode_value(b"\xe0\x02\xff\x40")  # 255 nulls claimed in four bytes: refused
