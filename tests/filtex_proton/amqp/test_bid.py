"""BID decimal32/64/128: known vectors, every special case, round trips, and proton's bytes."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from proton import Data, decimal32, decimal64, decimal128

from filtex_proton.amqp import decode_value, encode_value
from filtex_proton.amqp.bid import (
    as_decimal,
    decode_decimal32,
    decode_decimal64,
    decode_decimal128,
    encode_decimal32,
    encode_decimal64,
    encode_decimal128,
)

# (bits, precision, exponent bits, bias, min exponent, max exponent) per width
FORMATS = {
    32: (7, 8, 101, -101, 90),
    64: (16, 10, 398, -398, 369),
    128: (34, 14, 6176, -6176, 6111),
}


def oracle_bits(k: int, sign: int, coefficient: int, exponent: int) -> int:
    """An independent, bit-string restatement of IEEE 754-2008 §3.5.2 (BID), for checking."""
    _, w, bias, _, _ = FORMATS[k]
    t = k - 1 - w
    e = format(exponent + bias, f"0{w}b")
    if coefficient < 2**t:
        text = str(sign) + e + format(coefficient, f"0{t}b")
    else:
        c = format(coefficient, f"0{t + 1}b")
        assert c.startswith("100")
        text = str(sign) + "11" + e + c[3:]
    assert len(text) == k
    return int(text, 2)


def decode(k: int, bits: int) -> Decimal:
    if k == 32:
        return decode_decimal32(bits)
    if k == 64:
        return decode_decimal64(bits)
    return decode_decimal128(bits.to_bytes(16, "big"))


def encode(k: int, value: Decimal) -> int:
    if k == 32:
        return encode_decimal32(value)
    if k == 64:
        return encode_decimal64(value)
    return int.from_bytes(encode_decimal128(value), "big")


def same(a: Decimal, b: Decimal) -> bool:
    """Identical Decimals: sign, digits and exponent (so 1.0 != 1.00, -0 != 0), NaN-aware."""
    return a.as_tuple() == b.as_tuple() and a.is_snan() == b.is_snan()


KNOWN = [
    # decimal32
    (32, 0x32800001, "1"),
    (32, 0xB2800001, "-1"),
    (32, 0x32800000, "0"),
    (32, 0xB2800000, "-0"),
    (32, 0x32000001, "0.1"),
    (32, 0x3200000F, "1.5"),
    (32, 0x00000001, "1E-101"),
    (32, 0x77F8967F, "9.999999E+96"),  # largest, form 2
    (32, 0x6CB8967F, "9999999"),  # form 2, exponent 0
    (32, 0x32FFFFFF, "8388607"),  # largest form-1 coefficient (2**23 - 1)
    (32, 0x6CA00000, "8388608"),  # smallest form-2 coefficient (2**23)
    # decimal64
    (64, 0x31C0000000000001, "1"),
    (64, 0xB1C0000000000001, "-1"),
    (64, 0x31C0000000000000, "0"),
    (64, 0x0000000000000001, "1E-398"),
    (64, 0x77FB86F26FC0FFFF, "9.999999999999999E+384"),
    (64, 0x31A0000000000005, "0.5"),
    # decimal128
    (128, 0x30400000000000000000000000000001, "1"),
    (128, 0xB0400000000000000000000000000001, "-1"),
    (128, 0x30400000000000000000000000000000, "0"),
    (128, 0x00000000000000000000000000000001, "1E-6176"),
    (128, 0x5FFFED09BEAD87C0378D8E63FFFFFFFF, "9.999999999999999999999999999999999E+6144"),
    (128, 0x303E0000000000000000000000000019, "2.5"),
]


@pytest.mark.parametrize(("k", "bits", "text"), KNOWN)
def test_known_vectors_decode(k: int, bits: int, text: str) -> None:
    assert same(decode(k, bits), Decimal(text))


@pytest.mark.parametrize(("k", "bits", "text"), KNOWN)
def test_known_vectors_encode(k: int, bits: int, text: str) -> None:
    assert encode(k, Decimal(text)) == bits


@pytest.mark.parametrize(("k", "bits", "text"), KNOWN)
def test_known_vectors_agree_with_the_oracle(k: int, bits: int, text: str) -> None:
    sign, digits, exponent = Decimal(text).as_tuple()
    assert isinstance(exponent, int)
    coefficient = int("".join(map(str, digits)))
    assert oracle_bits(k, sign, coefficient, exponent) == bits


@pytest.mark.parametrize("k", [32, 64, 128])
def test_specials(k: int) -> None:
    top = k - 6
    inf = 0b11110 << top
    nan = 0b11111 << top
    snan = 0b111111 << (k - 7)
    sign = 1 << (k - 1)
    assert decode(k, inf) == Decimal("Infinity")
    assert decode(k, inf | sign) == Decimal("-Infinity")
    # Quiet and signaling NaN both decode to a quiet NaN, keeping the sign.
    for bits, negative in ((nan, False), (snan, False), (nan | sign, True), (snan | sign, True)):
        value = decode(k, bits)
        assert value.is_qnan()
        assert value.is_signed() == negative
    # Bits below the special marker (payload, trailing significand) are ignored.
    assert decode(k, inf | 0x1234) == Decimal("Infinity")
    assert decode(k, nan | 0x1234).is_qnan()
    assert encode(k, Decimal("Infinity")) == inf
    assert encode(k, Decimal("-Infinity")) == inf | sign
    assert encode(k, Decimal("NaN")) == nan & ~(1 << (k - 7))
    assert encode(k, Decimal("-sNaN")) == snan | sign


@pytest.mark.parametrize("k", [32, 64, 128])
def test_negative_zero_keeps_sign_and_exponent(k: int) -> None:
    value = decode(k, encode(k, Decimal("-0E-5")))
    assert same(value, Decimal("-0E-5"))
    assert value.is_signed()


@pytest.mark.parametrize("k", [32, 64])
def test_non_canonical_coefficient_is_zero(k: int) -> None:
    precision, w, bias, _, _ = FORMATS[k]
    t = k - 1 - w
    # Form 2, biased exponent = bias (exponent 0), all trailing bits set: 100111...1 > 10**p - 1.
    bits = (0b11 << (k - 3)) | (bias << (t - 2)) | ((1 << (t - 2)) - 1)
    assert (0b100 << (t - 2)) | ((1 << (t - 2)) - 1) > 10**precision - 1
    assert same(decode(k, bits), Decimal("0"))
    assert same(decode(k, bits | (1 << (k - 1))), Decimal("-0"))


def test_non_canonical_decimal128() -> None:
    # Every form-2 decimal128 is non-canonical (2**113 > 10**34 - 1) ...
    bits = (0b11 << 125) | (6176 << 111) | 12345
    assert same(decode(128, bits), Decimal("0"))
    # ... and so is a form-1 coefficient above 10**34 - 1.
    bits = (6176 << 113) | 10**34
    assert same(decode(128, bits), Decimal("0"))
    bits = (6176 << 113) | (10**34 - 1)
    assert decode(128, bits) == 10**34 - 1


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("1E+96", 0x5F8F_4240),  # exponent above 90: coefficient padded to 1000000E+90
        ("10E-102", 0x00000001),  # exponent below -101: trailing zero dropped
        ("12345670", 0x3312_D687),  # 8 digits, but the last is 0: 1234567E+1
        ("0E+1000", 0x5F80_0000),  # zero: exponent clamped
        ("-0E-1000", 0x8000_0000),
    ],
)
def test_encode_normalises_when_exact(text: str, bits: int) -> None:
    encoded = encode_decimal32(Decimal(text))
    assert encoded == bits
    assert decode_decimal32(encoded) == Decimal(text)


@pytest.mark.parametrize("text", ["1E+97", "12345678", "1E-102", "1.2345678", "123456789E+90"])
def test_encode_refuses_inexact(text: str) -> None:
    with pytest.raises(ValueError, match="not exactly representable"):
        encode_decimal32(Decimal(text))


def test_encode_refuses_long_nan_payload_and_non_decimals() -> None:
    with pytest.raises(ValueError, match="payload"):
        encode_decimal32(Decimal("NaN12345678"))
    with pytest.raises(TypeError):
        encode_decimal64(1.5)  # type: ignore[arg-type]


def test_decode_refuses_out_of_range_input() -> None:
    with pytest.raises(ValueError, match="32-bit"):
        decode_decimal32(1 << 32)
    with pytest.raises(ValueError, match="16 bytes"):
        decode_decimal128(b"\x00" * 15)


def test_as_decimal() -> None:
    d = Decimal("1.25")
    assert as_decimal(d) is d
    assert same(as_decimal(decimal32(0x32800001)), Decimal("1"))
    assert same(as_decimal(decimal64(0x31C0000000000001)), Decimal("1"))
    raw = bytes.fromhex("30400000000000000000000000000001")
    assert same(as_decimal(decimal128(raw)), Decimal("1"))
    with pytest.raises(TypeError):
        as_decimal(1.5)  # type: ignore[arg-type]


def finite(k: int) -> st.SearchStrategy[Decimal]:
    precision, _, _, emin, emax = FORMATS[k]
    return st.builds(
        lambda s, c, e: Decimal((s, tuple(map(int, str(c))), e)),
        st.integers(0, 1),
        st.integers(0, 10**precision - 1),
        st.integers(emin, emax),
    )


@pytest.mark.parametrize("k", [32, 64, 128])
@given(data=st.data())
def test_round_trip_decimal(k: int, data: st.DataObject) -> None:
    value = data.draw(finite(k))
    bits = encode(k, value)
    assert 0 <= bits < 2**k
    assert same(decode(k, bits), value)
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    assert bits == oracle_bits(k, sign, int("".join(map(str, digits))), exponent)


@pytest.mark.parametrize("k", [32, 64, 128])
@given(data=st.data())
def test_any_bits_decode_to_something_that_re_encodes(k: int, data: st.DataObject) -> None:
    bits = data.draw(st.integers(0, 2**k - 1))
    value = decode(k, bits)
    again = decode(k, encode(k, value))
    assert same(again, value)


# --- cross-check with python-qpid-proton: its bytes, our interpretation


def proton_bytes(value: object) -> bytes:
    d = Data()
    d.put_object(value)
    return bytes(d.encode())


@pytest.mark.parametrize(("k", "bits", "text"), KNOWN)
def test_proton_encoded_decimals_decode_exactly(k: int, bits: int, text: str) -> None:
    if k == 32:
        raw: object = decimal32(bits)
        code = 0x74
    elif k == 64:
        raw = decimal64(bits)
        code = 0x84
    else:
        raw = decimal128(bits.to_bytes(16, "big"))
        code = 0x94
    encoded = proton_bytes(raw)
    # Network byte order on the wire, for all three (decimal128 too: proton's
    # decimal128 holds the 16 wire bytes as they are).
    assert encoded == bytes([code]) + bits.to_bytes(k // 8, "big")
    value, end = decode_value(encoded)
    assert end == len(encoded)
    assert same(value, Decimal(text))


@given(value=finite(128))
def test_our_decimal128_reads_back_in_proton(value: Decimal) -> None:
    d = Data()
    d.decode(encode_value(value))
    d.rewind()
    assert d.next() == Data.DECIMAL128
    raw = d.get_decimal128()
    assert bytes(raw) == encode_decimal128(value)
    assert same(as_decimal(raw), value)
