"""The door check's table loop against its general path, on good messages and on mutants.

``validate_by_table`` (the loop over the sections' table) handles the common encodings in
one pass and leaves anything else to ``validate._general`` (the scan checking each
section), which is the reference. Whatever the loop accepts, the general path must accept
too, with the same spans, offsets and decoded values of the same types; otherwise the door
would have weakened. (The straight line in front of the loop is held to the loop by
test_door_paths.py.)
"""

from __future__ import annotations

import random
from typing import Any
from unittest import mock

import pytest

from filtex_proton.amqp import validate
from filtex_proton.amqp.decode import DecodeError
from filtex_proton.amqp.message import RawMessageView
from filtex_proton.amqp.validate import _CHECKS, validate_by_table

from .door_cases import COMMON, REFUSED, UNCOMMON, mutants


def typed(value: Any) -> Any:
    """A value with the type of every part spelled out, so that 1 != ulong(1) here."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    return (type(value), repr(value))


def _loop_alone(buf: bytes) -> RawMessageView | None:
    """What the table loop alone makes of ``buf``: None where it leaves it to the general path."""
    with mock.patch.object(validate, "_general", lambda _: None):
        return validate_by_table(buf)


def general(buf: bytes) -> RawMessageView | None:
    if not buf:
        return None  # validate_message refuses it before the scan
    try:
        return RawMessageView._checked(buf, _CHECKS)
    except DecodeError:
        return None


def assert_same(buf: bytes) -> bool:
    """Whether the table loop took the message; asserts it agrees with the general path."""
    fast = _loop_alone(buf)
    if fast is None:
        return False
    slow = general(buf)
    assert slow is not None, f"the table loop accepted what the door refuses: {buf.hex()}"
    assert fast._raw == slow._raw
    assert fast._offsets is None  # every section there is, is decoded: no offsets needed
    assert (fast.body_offset, fast.body_end) == (slow.body_offset, slow.body_end)
    assert {k: typed(v) for k, v in fast._decoded.items()} == {
        k: typed(v) for k, v in slow._decoded.items()}
    assert slow._offsets is not None and fast._decoded.keys() == slow._offsets.keys()
    return True


def test_the_table_loop_takes_the_common_encodings() -> None:
    assert all(assert_same(data) for data in COMMON)


def test_the_general_path_takes_the_rest_and_reads_the_same() -> None:
    for data in UNCOMMON:
        assert_same(data)
        assert validate_by_table(data).data == data


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_table_loop_refuses_what_the_door_refuses(name: str) -> None:
    data = REFUSED[name][0]
    assert _loop_alone(data) is None
    assert general(data) is None


@pytest.mark.parametrize("index", range(len(COMMON)))
def test_no_mutant_gets_through_the_table_loop_alone(index: int) -> None:
    rng = random.Random(index)
    for data in mutants(COMMON[index], rng):
        assert_same(data)
