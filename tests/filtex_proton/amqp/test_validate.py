"""The door check: every section but the body, checked once; the table of what
is refused, with the section each refusal names, and what the check leaves for the filters."""

from __future__ import annotations

import pickle

import pytest
from proton import int32, symbol, ulong

from filtex_proton.amqp import DecodeError
from filtex_proton.amqp.message import RawMessageView, encode_message
from filtex_proton.amqp.validate import (
    InvalidMessageError,
    validate_message,
    validate_view,
)
from filtex_proton.amqp.view import Section
from filtex_proton.plugin import FilterMessage

from .door_cases import EMPTY_SECTIONS, EXTRA_HEADER_FIELD, GOOD, REFUSED


@pytest.mark.parametrize(("data", "where", "words"), REFUSED.values(), ids=REFUSED.keys())
def test_refused_naming_the_section(data: bytes, where: str, words: str) -> None:
    with pytest.raises(InvalidMessageError) as caught:
        validate_message(data)
    error = caught.value
    assert error.section == where
    assert words in error.problem
    assert str(error).startswith(where)
    assert isinstance(error, DecodeError)  # what older callers catch


def test_the_good_message_passes_and_every_section_is_left_decoded() -> None:
    view = validate_message(GOOD)
    assert set(view._decoded) == {s.value for s in Section}
    assert view.field(Section.HEADER, "priority") == 7
    assert view.field(Section.PROPERTIES, "group-sequence") == 4
    assert view.field(Section.APPLICATION_PROPERTIES, "s") == "é"
    assert type(view.field(Section.APPLICATION_PROPERTIES, "i")) is int32
    assert view.field(Section.MESSAGE_ANNOTATIONS, ulong(9)) == "n"


def test_what_the_check_decodes_is_what_the_lazy_view_decodes() -> None:
    """The filters must see the same values whether the door check ran or not."""
    checked, lazy = validate_message(GOOD), RawMessageView(GOOD)
    for s in Section:
        left, right = checked.section(s), lazy.section(s)
        assert left == right
        assert left is not None and right is not None
        assert [type(v) for v in left.values()] == [type(v) for v in right.values()]


def test_filters_reuse_the_decoded_sections() -> None:
    message = FilterMessage(GOOD)
    view = message.validate()
    assert message.view is view
    assert view.section(Section.APPLICATION_PROPERTIES) is view._decoded["application-properties"]


def test_empty_and_null_sections_and_no_sections_but_the_body() -> None:
    for data in EMPTY_SECTIONS:
        assert validate_message(data).data == data


def test_a_view_read_lazily_first_is_still_checked() -> None:
    view = RawMessageView(encode_message(properties={"to": symbol("q")}))
    assert view.field(Section.PROPERTIES, "to") == "q"  # the lazy view does not type-check
    with pytest.raises(InvalidMessageError, match="properties section: field to is symbol"):
        validate_view(view)


def test_fields_after_the_known_ones_are_allowed() -> None:
    """A later version of the type may add fields (AMQP 1.0 §1.4): decoded, not type-checked."""
    assert validate_message(EXTRA_HEADER_FIELD).section(Section.HEADER) == {"durable": True}


def test_the_error_pickles() -> None:
    error = InvalidMessageError("footer", "odd", 3)
    again = pickle.loads(pickle.dumps(error))
    assert (again.section, again.problem, again.offset, str(again)) == (
        "footer", "odd", 3, str(error))
