"""The section scanner and the view's laziness, against real proton: every section found,
what is not a message refused at scan time, sections decoded once and only when asked, the
body never; random and damaged messages read back exactly or raise only decode errors."""

from __future__ import annotations

import struct
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import (
    Message,
    symbol,
    ubyte,
)

from filtex_proton.amqp.decode import DecodeError
from filtex_proton.amqp.encode import encode_value
from filtex_proton.amqp.message import (
    NO_BODY,
    RawMessageView,
    SectionSpan,
    encode_message,
    scan_sections,
)
from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS
from filtex_proton.amqp.view import DictMessageView, Section

from .filtex_amqp_strategies import (
    ANNOTATIONS,
    APPLICATION,
    HEADER_VALUES,
    PROPERTY_VALUES,
    SCALARS,
    composite_fields,
    optional,
    same,
)
from .view_cases import (  # the shared cases
    AP,
    DA,
    MA,
    F,
    H,
    P,
    exact,
    rich_proton_message,
)

# --------------------------------------------------------------------------- scanning


def every_section_message() -> bytes:
    return encode_message(
        header={"priority": 1},
        delivery_annotations={"d": 1},
        message_annotations={"m": 2},
        properties={"subject": "s"},
        application_properties={"a": 3},
        body=[b"x" * 300, b"y"],
        body_kind="data",
        footer={"f": 4},
    )


def test_scan_finds_every_section_and_the_body() -> None:
    raw = every_section_message()
    spans = scan_sections(raw)
    assert [s.section for s in spans] == [H, DA, MA, P, AP, None, None, F]
    assert [s.code for s in spans] == [0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x75, 0x78]
    assert spans[0].start == 0
    assert all(a.end == b.start for a, b in pairwise(spans))
    assert spans[-1].end == len(raw)
    assert all(s.value == s.start + 3 for s in spans)
    view = RawMessageView(raw)
    assert view.spans == spans
    assert view.data is raw
    assert (view.body_offset, view.body_end) == (spans[5].start, spans[6].end)
    assert raw[view.body_offset : view.body_end] == encode_message(
        body=[b"x" * 300, b"y"], body_kind="data"
    )
    assert view.field(F, "f") == 4
    assert view.field(F, symbol("f")) == 4


def test_body_offsets_without_a_body() -> None:
    raw = encode_message(header={}, footer={"f": 1})
    view = RawMessageView(raw)
    footer_start = scan_sections(raw)[-1].start
    assert view.body_offset == view.body_end == footer_start
    raw = encode_message(properties={})
    view = RawMessageView(raw)
    assert view.body_offset == view.body_end == len(raw)


def test_empty_bytes_are_a_message_with_nothing() -> None:
    view = RawMessageView(b"")
    assert all(view.section(s) is None for s in Section)
    assert view.spans == []


def symbolic(name: str, value: Any) -> bytes:
    return b"\x00" + encode_value(symbol(name)) + encode_value(value)


def ulong_descriptor(code: int, value: Any) -> bytes:
    return b"\x00\x80" + struct.pack(">Q", code) + encode_value(value)


def test_symbolic_and_long_descriptors_are_accepted() -> None:
    raw = (
        symbolic("amqp:header:list", [True, ubyte(3)])
        + ulong_descriptor(0x71, {symbol("d"): 1})
        + symbolic("amqp:message-annotations:map", {symbol("m"): 1})
        + symbolic("amqp:properties:list", [None, None, None, "s"])
        + symbolic("amqp:application-properties:map", {"a": 1})
        + symbolic("amqp:data:binary", b"d1")
        + symbolic("amqp:data:binary", b"d2")
        + symbolic("amqp:footer:map", {symbol("f"): 1})
    )
    view = RawMessageView(raw)
    assert view.section(H) == {"durable": True, "priority": 3}
    assert view.section(DA) == {"d": 1}
    assert view.section(P) == {"subject": "s"}
    assert view.field(AP, "a") == 1
    assert view.field(F, "f") == 1
    assert [s.code for s in view.spans] == [0x70, 0x71, 0x72, 0x73, 0x74, 0x75, 0x75, 0x78]
    for name, code in [("amqp:amqp-sequence:list", 0x76), ("amqp:amqp-value:*", 0x77)]:
        body = symbolic(name, [1])
        assert scan_sections(body)[0].code == code
    long_symbol = b"\x00\xb3" + struct.pack(">I", 16) + b"amqp:header:list" + b"\x45"
    assert scan_sections(long_symbol)[0].section is H
    # proton.Message (0.40) silently ignores sections with symbolic descriptors.
    msg = Message()
    msg.decode(raw)
    assert msg.priority == 4
    assert msg.subject is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"\x40", "expected a described message section"),
        (encode_value([1]), "expected a described"),
        (b"\x00\x53\x69\x45", "not a message section"),
        (b"\x00\x53\x79\x45", "not a message section"),
        (b"\x00\x44\x45", "not a message section"),
        (symbolic("amqp:other:list", []), "unknown section descriptor"),
        (b"\x00\xa1\x01x\x45", "section descriptor of format code 0xa1"),
        (encode_message(properties={}) + encode_message(header={}), "out of order"),
        (encode_message(header={}) + encode_message(header={}), "repeated"),
        (encode_message(body=1, footer={}) + encode_message(body=2), "out of order"),
        (encode_message(footer={}) + encode_message(footer={}), "repeated"),
        (b"\x00\x53\x70\xc1\x01\x00", "cannot hold format code 0xc1"),
        (b"\x00\x53\x74\x45", "cannot hold format code 0x45"),
        (b"\x00\x53\x75\xa1\x00", "cannot hold format code 0xa1"),
        (b"\x00\x53\x76\xc1\x01\x00", "cannot hold"),
        (b"\x00\x53\x70\x00\x53\x01\x45", "cannot hold format code 0x00"),
        (b"\x00\x53\x70\xc0\x05\x00", "runs past the end"),
        (b"\x00\x53\x77\xb1\x00\x00\x01\x00", "runs past the end"),
        (b"\x00\x53\x77\x00\x53", "truncated"),
        (b"\x00\x53\x77\x99", "unknown format code"),
        (b"\x00", "truncated"),
        (b"\x00\x53", "truncated"),
        (b"\x00\x53\x70", "truncated"),
        (b"\x00\xa3\x10amqp:hea", "truncated|unknown section descriptor"),
    ],
)
def test_what_is_not_a_message_is_refused_at_scan_time(raw: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        scan_sections(raw)
    with pytest.raises(DecodeError, match=reason):
        RawMessageView(raw)


def test_multiple_body_sections_of_a_kind_are_accepted() -> None:
    raw = encode_message(body=[[1], [2], []], body_kind="sequence")
    assert [s.code for s in scan_sections(raw)] == [0x76] * 3


def test_null_section_values_are_empty_sections() -> None:
    raw = b"".join(bytes((0, 0x53, code, 0x40)) for code in (0x70, 0x71, 0x72, 0x73, 0x74))
    view = RawMessageView(raw + b"\x00\x53\x78\x40")
    for section in Section:
        assert view.section(section) == {}


def test_extra_composite_fields_are_ignored() -> None:
    raw = b"\x00\x53\x70" + encode_value([True, ubyte(1), None, None, None, "future field"])
    view = RawMessageView(raw)
    assert view.section(H) == {"durable": True, "priority": 1}


# --------------------------------------------------------------------------- laziness


def test_sections_are_decoded_lazily_and_cached() -> None:
    bad_map = b"\xc1\x03\x02\x40\x99"  # sizes right, a value with an unknown format code
    raw = encode_message(header={"priority": 2}) + b"\x00\x53\x74" + bad_map
    view = RawMessageView(raw)  # the scan does not look inside sections
    assert view.field(H, "priority") == 2
    for _ in range(2):
        with pytest.raises(DecodeError, match="unknown format code 0x99"):
            view.field(AP, "anything")
        with pytest.raises(DecodeError):
            view.has_field(AP, "anything")
        with pytest.raises(DecodeError):
            view.section(AP)
    header = view.section(H)
    assert view.section(H) is header


def test_the_body_is_never_decoded() -> None:
    garbage_value = b"\xb0\x00\x00\x00\x04\xff\xff\xff\xff"  # a binary: never looked inside
    raw = encode_message(properties={"subject": "s"}) + b"\x00\x53\x77" + garbage_value
    raw += b"\x00\x53\x77\xc0\x03\x01\x99\x99"  # a second amqp-value, with garbage in a list
    view = RawMessageView(raw)
    assert view.field(P, "subject") == "s"
    assert view.body_end == len(raw)


def test_view_accepts_bytearray_and_memoryview() -> None:
    raw = every_section_message()
    for buf in (bytearray(raw), memoryview(raw)):
        view = RawMessageView(buf)
        assert type(view.data) is bytes
        assert view.field(AP, "a") == 3


def test_view_agrees_with_a_dict_view_of_the_same_message() -> None:
    raw = bytes(rich_proton_message().encode())
    raw_view = RawMessageView(raw)
    dict_view = DictMessageView(
        **{s.name.lower(): raw_view.section(s) for s in Section}  # type: ignore[arg-type]
    )
    for section in Section:
        entries = raw_view.section(section) or {}
        for key in [*entries, "missing", "priority", "subject"]:
            assert same(raw_view.field(section, key), dict_view.field(section, key))
            assert raw_view.has_field(section, key) == dict_view.has_field(section, key)


def test_section_span_is_a_named_tuple() -> None:
    span = scan_sections(encode_message(body=1))[0]
    assert span == SectionSpan(None, 0x77, 0, 3, 5)
    assert NO_BODY is not None
    assert repr(NO_BODY) == "NO_BODY"
    assert "body(0x77)" in repr(RawMessageView(encode_message(body=1)))


# --------------------------------------------------------------------------- properties


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    header=optional(composite_fields(HEADER_VALUES)),
    properties=optional(composite_fields(PROPERTY_VALUES)),
    delivery=optional(ANNOTATIONS),
    annotations=optional(ANNOTATIONS),
    application=optional(APPLICATION),
    footer=optional(ANNOTATIONS),
    body=st.one_of(st.just(NO_BODY), SCALARS),
)
def test_random_messages_read_back_exactly(
    header: dict[str, Any] | None,
    properties: dict[str, Any] | None,
    delivery: dict[Any, Any] | None,
    annotations: dict[Any, Any] | None,
    application: dict[str, Any] | None,
    footer: dict[Any, Any] | None,
    body: Any,
) -> None:
    raw = encode_message(
        header=header,
        delivery_annotations=delivery,
        message_annotations=annotations,
        properties=properties,
        application_properties=application,
        body=body,
        footer=footer,
    )
    view = RawMessageView(raw)
    for section, given_fields, names in (
        (H, header, [n for n, _ in HEADER_FIELDS]),
        (P, properties, [n for n, _ in PROPERTIES_FIELDS]),
    ):
        if given_fields is None:
            assert view.section(section) is None
            continue
        expected = {n: given_fields[n] for n in names if given_fields.get(n) is not None}
        exact(view.section(section), expected)
        for name in names:
            assert view.has_field(section, name) == (name in expected)
    for section, entries in ((DA, delivery), (MA, annotations), (AP, application), (F, footer)):
        if entries is None:
            assert view.section(section) is None
        else:
            exact(view.section(section), entries)
    # proton agrees on what it can express.
    msg = Message()
    msg.decode(raw)
    if header is not None and header.get("priority") is not None:
        assert msg.priority == header["priority"]
    else:
        assert msg.priority == 4
    subject = (properties or {}).get("subject")
    if subject is not None and "\x00" not in subject:  # proton cuts strings at a NUL
        assert msg.subject == subject
    if application:
        got = msg.properties
        assert list(got) == list(application)


def refuse_or_read_everything(raw: bytes) -> None:
    """A message from hostile bytes either reads or raises DecodeError; nothing else."""
    try:
        view = RawMessageView(raw)
    except DecodeError:
        return
    assert 0 <= view.body_offset <= view.body_end <= len(raw)
    for section in Section:
        try:
            view.section(section)
            view.field(section, "priority")
            view.has_field(section, "subject")
        except DecodeError:
            pass


@settings(max_examples=1500)
@given(raw=st.binary(max_size=80))
def test_random_bytes_make_no_view_or_only_decode_errors(raw: bytes) -> None:
    refuse_or_read_everything(raw)


@settings(max_examples=1500)
@given(
    code=st.integers(0x70, 0x78),
    descriptor=st.sampled_from([b"\x00\x53", b"\x00\x80" + bytes(7)]),
    rest=st.binary(max_size=60),
)
def test_random_section_contents_only_raise_decode_errors(
    code: int, descriptor: bytes, rest: bytes
) -> None:
    refuse_or_read_everything(descriptor + bytes((code,)) + rest)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_messages_only_raise_decode_errors(data: st.DataObject) -> None:
    raw = bytearray(
        data.draw(st.sampled_from([every_section_message(), bytes(rich_proton_message().encode())]))
    )
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(raw) - 1))
        how = data.draw(st.sampled_from(["flip", "set", "truncate", "delete"]))
        if how == "flip":
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif how == "set":
            raw[at] = data.draw(st.integers(0, 255))
        elif how == "truncate":
            del raw[at:]
        else:
            del raw[at]
        if not raw:
            break
    refuse_or_read_everything(bytes(raw))


def test_every_truncation_of_a_message_is_refused_or_shorter() -> None:
    raw = bytes(rich_proton_message().encode())
    boundaries = {s.end for s in scan_sections(raw)}
    for cut in range(1, len(raw)):
        if cut in boundaries:
            assert len(RawMessageView(raw[:cut]).spans) >= 1  # a shorter, valid message
        else:
            with pytest.raises(DecodeError):
                RawMessageView(raw[:cut])
