"""Property tests of the codec: exact round trips, agreement with proton, and hostile bytes."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from filtex_proton.amqp import DecodeError, decode_value, encode_value, skip_value

from .filtex_amqp_strategies import (
    VALUES,
    proton_can_decode,
    proton_decode,
    proton_encode,
    same,
)

PROPERTY_SETTINGS = settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(value=VALUES)
def test_encode_then_decode_is_identity(value: Any) -> None:
    encoded = encode_value(value)
    decoded, end = decode_value(encoded)
    assert end == len(encoded)
    assert skip_value(encoded) == len(encoded)
    assert same(decoded, value), (decoded, value)


@PROPERTY_SETTINGS
@given(value=VALUES)
def test_we_read_proton_and_proton_reads_us(value: Any) -> None:
    from_proton = proton_encode(value)
    decoded, end = decode_value(from_proton)
    assert end == len(from_proton) == skip_value(from_proton)
    assert same(decoded, value), (decoded, value)
    if proton_can_decode(value):
        assert same(proton_decode(encode_value(value)), value)


def decode_or_refuse(raw: bytes) -> None:
    """Decoding hostile bytes may succeed or raise DecodeError; nothing else is allowed."""
    try:
        _, end = decode_value(raw)
    except DecodeError:
        pass
    else:
        assert 0 < end <= len(raw)
    try:
        end = skip_value(raw)
    except DecodeError:
        pass
    else:
        assert 0 < end <= len(raw)


@settings(max_examples=2000)
@given(raw=st.binary(max_size=64))
@example(raw=b"\xf0\x00\x00\x00\x05\xff\xff\xff\xff\x40")
@example(raw=b"\x00" * 64)
def test_random_bytes_only_ever_raise_decode_error(raw: bytes) -> None:
    decode_or_refuse(raw)


@settings(max_examples=1000)
@given(
    prefix=st.sampled_from(
        [b"\xc0", b"\xd0", b"\xc1", b"\xd1", b"\xe0", b"\xf0", b"\x00", b"\xa1", b"\xb1", b"\xa3"]
    ),
    rest=st.binary(max_size=64),
)
def test_random_compounds_only_ever_raise_decode_error(prefix: bytes, rest: bytes) -> None:
    decode_or_refuse(prefix + rest)


@PROPERTY_SETTINGS
@given(value=VALUES, data=st.data())
def test_damaged_encodings_only_ever_raise_decode_error(value: Any, data: st.DataObject) -> None:
    encoded = bytearray(encode_value(value))
    how = data.draw(st.sampled_from(["truncate", "flip", "set", "insert", "delete"]))
    at = data.draw(st.integers(0, len(encoded) - 1))
    if how == "truncate":
        del encoded[at:]
    elif how == "flip":
        encoded[at] ^= 1 << data.draw(st.integers(0, 7))
    elif how == "set":
        encoded[at] = data.draw(st.integers(0, 255))
    elif how == "insert":
        encoded.insert(at, data.draw(st.integers(0, 255)))
    else:
        del encoded[at]
    decode_or_refuse(bytes(encoded))


@PROPERTY_SETTINGS
@given(value=VALUES)
def test_every_truncation_is_refused(value: Any) -> None:
    encoded = encode_value(value)
    for cut in range(len(encoded)):
        try:
            decode_value(encoded[:cut])
        except DecodeError:
            continue
        raise AssertionError(f"a truncation to {cut} of {len(encoded)} bytes decoded")
