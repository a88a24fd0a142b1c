"""IEEE 754-2008 decimal32/64/128 in the BID encoding, as AMQP 1.0 (§1.6.15-17) carries them.

Proton treats the decimal types as opaque bits (``decimal32``/``decimal64`` are
ints, ``decimal128`` is the 16 wire bytes, big-endian); the filter engine needs
their *values*, exactly, so this module converts between the bits and
:class:`decimal.Decimal` without ever going through a binary float.

BID layout (k = 32, 64, 128 bits; w = exponent bits 8, 10, 14; t = k - 1 - w)::

    s | e (w bits)        | c (t bits)             coefficient c           (form 1)
    s | 11 | e (w bits)   | c' (t - 2 bits)        coefficient 100b·c'     (form 2)
    s | 11110 ...                                  ±Infinity
    s | 11111 q ...                                NaN (q = 1: signaling)

A coefficient above 10^p - 1 is non-canonical and means zero (IEEE 754-2008 §3.5.2).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from proton import decimal32, decimal64, decimal128

__all__ = [
    "as_decimal",
    "decode_decimal32",
    "decode_decimal64",
    "decode_decimal128",
    "encode_decimal32",
    "encode_decimal64",
    "encode_decimal128",
]


@dataclass(frozen=True, slots=True)
class _Format:
    """The constants of one interchange format, derived once from its width and precision."""

    bits: int  # k
    exponent_bits: int  # w
    precision: int  # p, in decimal digits
    bias: int

    @property
    def trailing(self) -> int:
        """Coefficient bits of form 1 (t); form 2 stores t - 2 of them."""
        return self.bits - 1 - self.exponent_bits

    @property
    def max_coefficient(self) -> int:
        result: int = 10**self.precision - 1
        return result

    @property
    def max_biased_exponent(self) -> int:
        """The largest biased exponent: its two top bits are never 11 (that means form 2)."""
        result: int = 3 * 2 ** (self.exponent_bits - 2) - 1
        return result


_D32: Final = _Format(bits=32, exponent_bits=8, precision=7, bias=101)
_D64: Final = _Format(bits=64, exponent_bits=10, precision=16, bias=398)
_D128: Final = _Format(bits=128, exponent_bits=14, precision=34, bias=6176)

_NAN: Final = (Decimal("NaN"), Decimal("-NaN"))
_INF: Final = (Decimal("Infinity"), Decimal("-Infinity"))


def _decode(bits: int, fmt: _Format) -> Decimal:
    k = fmt.bits
    if bits < 0 or bits >> k:
        raise ValueError(f"not a {k}-bit decimal: {bits:#x}")
    sign = bits >> (k - 1)
    t = fmt.trailing
    if (bits >> (k - 3)) & 0b11 == 0b11:
        top5 = (bits >> (k - 6)) & 0b11111
        if top5 == 0b11111:
            # Quiet and signaling NaN alike: payload and the signaling bit are dropped.
            return _NAN[sign]
        if top5 == 0b11110:
            return _INF[sign]
        exponent = (bits >> (t - 2)) & ((1 << fmt.exponent_bits) - 1)
        coefficient = (0b100 << (t - 2)) | (bits & ((1 << (t - 2)) - 1))
    else:
        exponent = (bits >> t) & ((1 << fmt.exponent_bits) - 1)
        coefficient = bits & ((1 << t) - 1)
    if coefficient > fmt.max_coefficient:
        coefficient = 0  # non-canonical significand: the value is zero
    digits = tuple(map(int, str(coefficient)))
    return Decimal((sign, digits, exponent - fmt.bias))


def decode_decimal32(bits: int) -> Decimal:
    """The exact value of a BID decimal32 given as its 32-bit unsigned integer."""
    return _decode(int(bits), _D32)


def decode_decimal64(bits: int) -> Decimal:
    """The exact value of a BID decimal64 given as its 64-bit unsigned integer."""
    return _decode(int(bits), _D64)


def decode_decimal128(raw: bytes) -> Decimal:
    """The exact value of a BID decimal128 given as its 16 bytes in network (wire) order."""
    if len(raw) != 16:
        raise ValueError(f"decimal128 needs 16 bytes, got {len(raw)}")
    return _decode(int.from_bytes(raw, "big"), _D128)


def as_decimal(value: Decimal | decimal32 | decimal64 | decimal128) -> Decimal:
    """A :class:`Decimal` for a Decimal (itself) or one of proton's raw-bit decimal classes."""
    if type(value) is Decimal:
        return value
    if isinstance(value, decimal32):
        return decode_decimal32(value)
    if isinstance(value, decimal64):
        return decode_decimal64(value)
    if isinstance(value, decimal128):
        return decode_decimal128(bytes(value))
    if isinstance(value, Decimal):
        return value
    raise TypeError(f"not a decimal: {type(value).__name__}")


def _encode(value: Decimal, fmt: _Format) -> int:
    if not isinstance(value, Decimal):
        raise TypeError(f"not a Decimal: {type(value).__name__}")
    k = fmt.bits
    t = fmt.trailing
    sign_bit = (1 << (k - 1)) if value.is_signed() else 0
    if value.is_infinite():
        return sign_bit | (0b11110 << (k - 6))
    if value.is_nan():
        top = 0b111111 if value.is_snan() else 0b111110
        payload = value.as_tuple().digits
        payload_int = int("".join(map(str, payload))) if payload else 0
        if payload_int >= 10 ** (fmt.precision - 1):
            raise ValueError(f"NaN payload too long for decimal{k}: {value}")
        return sign_bit | (top << (k - 7)) | payload_int
    _, digits, exp = value.as_tuple()
    assert isinstance(exp, int)  # finite
    exponent: int = exp
    coefficient = int("".join(map(str, digits)))
    emin = -fmt.bias
    emax = fmt.max_biased_exponent - fmt.bias
    if coefficient == 0:
        # Every zero is the same number; keep the quantum when it fits, clamp it otherwise.
        exponent = min(max(exponent, emin), emax)
    else:
        # Drop trailing zeros while the coefficient is too long or the exponent too small...
        while (coefficient > fmt.max_coefficient or exponent < emin) and coefficient % 10 == 0:
            coefficient //= 10
            exponent += 1
        # ... and add them while the exponent is too large and there are digits to spare.
        while exponent > emax and coefficient * 10 <= fmt.max_coefficient:
            coefficient *= 10
            exponent -= 1
        if coefficient > fmt.max_coefficient or not emin <= exponent <= emax:
            raise ValueError(f"{value} is not exactly representable as decimal{k}")
    biased = exponent + fmt.bias
    if coefficient >> t == 0:
        return sign_bit | (biased << t) | coefficient
    # Form 2: the coefficient's leading bits are 100 and implicit.
    return sign_bit | (0b11 << (k - 3)) | (biased << (t - 2)) | (coefficient & ((1 << (t - 2)) - 1))


def encode_decimal32(value: Decimal) -> int:
    """The BID decimal32 bits of a Decimal; ``ValueError`` if it is not exactly representable."""
    return _encode(value, _D32)


def encode_decimal64(value: Decimal) -> int:
    """The BID decimal64 bits of a Decimal; ``ValueError`` if it is not exactly representable."""
    return _encode(value, _D64)


def encode_decimal128(value: Decimal) -> bytes:
    """The 16 wire bytes (big-endian) of a Decimal as BID decimal128; ``ValueError`` if inexact."""
    return _encode(value, _D128).to_bytes(16, "big")
