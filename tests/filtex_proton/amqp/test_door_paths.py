"""The door check's straight line (``fast_door``) against the table loop it stands in front of.

``validate_message`` is the straight line, handing whatever it does not take to the table
loop (``validate_by_table``), which is the reference: on every message, valid or not, the
two must give the same answer, a view with the same bytes, spans, body and decoded values
(types included) or the same refusal (section, reason, offset, text). On the door check's
cases, their single-byte mutants and truncations, and random messages, whole or damaged.
The straight line alone (its fallback replaced by one that says so) must take the common
shapes, or it would be no fast path.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from filtex_proton.amqp.door_tables import Span
from filtex_proton.amqp.fast_door import Door, straight_line
from filtex_proton.amqp.message import RawMessageView
from filtex_proton.amqp.validate import (
    _READERS,
    InvalidMessageError,
    validate_by_table,
    validate_message,
)

from .door_cases import COMMON, EMPTY_SECTIONS, GOOD, REFUSED, UNCOMMON, mutants
from .filtex_amqp_strategies import damaged, messages, same


class NotTakenError(Exception):
    """Raised by the straight line alone where it would hand the message to the loop."""


def _not_taken(buf: bytes, spans: list[Span], decoded: dict[str, Any]) -> RawMessageView:
    raise NotTakenError


#: The straight line without the loop behind it.
alone: Door = straight_line(_READERS, _not_taken)


def answer(door: Door, data: bytes | bytearray | memoryview) -> tuple[Any, ...]:
    """What ``door`` makes of ``data``: the view's parts, or the refusal's."""
    try:
        view = door(data)
    except InvalidMessageError as exc:
        return ("refused", exc.section, exc.problem, exc.offset, str(exc))
    assert type(view) is RawMessageView
    return ("view", view.data, view._raw, view._offsets, view.body_offset, view.body_end,
            view._decoded)


def assert_same_answer(left: tuple[Any, ...], right: tuple[Any, ...]) -> None:
    assert left[:-1] == right[:-1]
    if left[0] == "view":  # decoded sections: same keys, order, values and types
        assert same(left[-1], right[-1]), (left[-1], right[-1])
    else:
        assert left[-1] == right[-1]


def check(data: bytes) -> bool:
    """Asserts that the door check and the table loop agree on ``data``, and so does the
    straight line alone where it takes it; whether it took it."""
    loop = answer(validate_by_table, data)
    assert_same_answer(answer(validate_message, data), loop)
    try:
        straight = answer(alone, data)
    except NotTakenError:
        return False
    assert straight[0] == "view", "the straight line refused a message on its own"
    assert_same_answer(straight, loop)
    return True


CASES: dict[str, bytes] = {
    **{f"common {i}": data for i, data in enumerate(COMMON)},
    **{f"uncommon {i}": data for i, data in enumerate(UNCOMMON)},
    **{f"empty sections {i}": data for i, data in enumerate(EMPTY_SECTIONS)},
    **{f"refused: {name}": data for name, (data, _, _) in REFUSED.items()},
}


@pytest.mark.parametrize("data", CASES.values(), ids=CASES.keys())
def test_every_door_case_gets_the_same_answer(data: bytes) -> None:
    check(data)


def test_the_straight_line_takes_the_common_shapes() -> None:
    taken = [i for i, data in enumerate(COMMON) if check(data)]
    assert taken == list(range(len(COMMON)))
    assert not any(check(data) for data, _, _ in REFUSED.values())


def test_other_byte_sequences_give_the_same_view() -> None:
    for data in (bytearray(COMMON[1]), memoryview(COMMON[1])):
        assert_same_answer(answer(validate_message, data), answer(validate_by_table, data))


@pytest.mark.parametrize("index", range(len(COMMON)))
def test_every_mutant_of_a_common_message_gets_the_same_answer(index: int) -> None:
    rng = random.Random(index)
    outcomes = {check(data) for data in mutants(COMMON[index], rng)}
    assert outcomes == {True, False}  # the mutants reach both the straight line and the loop


def test_every_mutant_of_the_full_message_gets_the_same_answer() -> None:
    for data in mutants(GOOD, random.Random(0)):
        check(data)


DOOR_SETTINGS = settings(max_examples=300, deadline=None,
                         suppress_health_check=[HealthCheck.too_slow])


@DOOR_SETTINGS
@given(data=messages())
def test_random_messages_get_the_same_answer(data: bytes) -> None:
    event("the straight line's" if check(data) else "left to the loop")


@DOOR_SETTINGS
@given(data=st.one_of(messages(), st.sampled_from(COMMON)).flatmap(damaged))
def test_damaged_messages_get_the_same_answer(data: bytes) -> None:
    event("the straight line's" if check(data) else "left to the loop")
