"""The door check's fast path against its general path, on good messages and on mutants.

``validate_message`` handles the common encodings in one pass and leaves anything else
to ``validate._general`` (the scan checking each section), which is the reference. Whatever
the fast path accepts, the general path must accept too, with the same spans, offsets
and decoded values of the same types; otherwise the door would have weakened.
"""

from __future__ import annotations

import random
import uuid
from typing import Any
from unittest import mock

import pytest
from proton import Array, Data, Described, char, int32, symbol, timestamp, ubyte, uint, ulong

from filtex_proton.amqp import validate
from filtex_proton.amqp.decode import UNDESCRIBED, DecodeError
from filtex_proton.amqp.message import RawMessageView, encode_message
from filtex_proton.amqp.validate import _CHECKS, validate_message
from tests.filtex_proton.amqp.door_cases import GOOD, REFUSED


def typed(value: Any) -> Any:
    """A value with the type of every part spelled out, so that 1 != ulong(1) here."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    return (type(value), repr(value))


def _fast(buf: bytes) -> RawMessageView | None:
    """What the fast path alone makes of ``buf``: None where it leaves it to the general path."""
    with mock.patch.object(validate, "_general", lambda _: None):
        return validate_message(buf)


def general(buf: bytes) -> RawMessageView | None:
    if not buf:
        return None  # validate_message refuses it before the scan
    try:
        return RawMessageView._checked(buf, _CHECKS)
    except DecodeError:
        return None


def assert_same(buf: bytes) -> bool:
    """Whether the fast path took the message; asserts it agrees with the general path."""
    fast = _fast(buf)
    if fast is None:
        return False
    slow = general(buf)
    assert slow is not None, f"the fast path accepted what the door refuses: {buf.hex()}"
    assert fast._raw == slow._raw
    assert fast._offsets is None  # every section there is, is decoded: no offsets needed
    assert (fast.body_offset, fast.body_end) == (slow.body_offset, slow.body_end)
    assert {k: typed(v) for k, v in fast._decoded.items()} == {
        k: typed(v) for k, v in slow._decoded.items()}
    assert slow._offsets is not None and fast._decoded.keys() == slow._offsets.keys()
    return True


#: Messages as clients commonly encode them: what the fast path is for.
COMMON: list[bytes] = [
    encode_message(properties={"message-id": ulong(3)},
                   application_properties={"k": int32(3), "region": "r3"},
                   body=b"x" * 100, body_kind="data"),
    encode_message(header={"durable": True, "priority": 4, "ttl": 1000, "delivery-count": 0},
                   message_annotations={"x-opt-a": "v", "x-opt-n": 5, ulong(2): None},
                   properties={"message-id": "id-1", "to": "q", "subject": "s",
                               "content-type": "text/plain", "creation-time": timestamp(7),
                               "correlation-id": uuid.UUID(int=9), "group-sequence": 2},
                   application_properties={"s": "é", "n": None, "l": 2**40, "b": False,
                                           "u": ubyte(200), "i": int32(-100), "f": 0.5,
                                           "c": char("x"), "sym": symbol("y"), "bin": b"\x01"},
                   body="hello", footer={"x-opt-sig": b"\x01"}),
    encode_message(delivery_annotations={"d": 1}, body=[1, "two"]),
    encode_message(body=[[1], [2]], body_kind="sequence"),
    encode_message(body=[b"a", b"b" * 300], body_kind="data"),
    encode_message(application_properties={"k": "v" * 300, "w": 7}),
    encode_message(header={}, properties={}, application_properties={}, footer={}),
    encode_message(footer={"x-opt-f": 1}),
]


def test_the_fast_path_takes_the_common_encodings() -> None:
    assert all(assert_same(data) for data in COMMON)


def test_the_general_path_takes_the_rest_and_reads_the_same() -> None:
    for data in (GOOD, encode_message(message_annotations={"a": Array(UNDESCRIBED, Data.INT, 1)}),
                 encode_message(message_annotations={"k": Described(ulong(1), 2)}),
                 encode_message(properties={"group-sequence": uint(2**31)}),
                 encode_message(application_properties={"k" * 300: "v", "w": 7})):
        assert_same(data)
        assert validate_message(data).data == data


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_fast_path_refuses_what_the_door_refuses(name: str) -> None:
    data = REFUSED[name][0]
    assert _fast(data) is None
    assert general(data) is None


def mutants(data: bytes, rng: random.Random) -> list[bytes]:
    """Truncations, and bytes replaced by boundary values, random ones or their neighbours."""
    out = [data[:i] for i in range(len(data))]
    for i in range(len(data)):
        for b in (0x00, 0x01, 0x40, 0x7F, 0x80, 0xA1, 0xFF, (data[i] + 1) & 0xFF,
                  (data[i] - 1) & 0xFF, rng.randrange(256)):
            out.append(data[:i] + bytes([b]) + data[i + 1:])
    return out


@pytest.mark.parametrize("index", range(len(COMMON)))
def test_no_mutant_gets_through_the_fast_path_alone(index: int) -> None:
    rng = random.Random(index)
    for data in mutants(COMMON[index], rng):
        assert_same(data)
