"""Malformed and hostile message bytes: DecodeError from the view, never another exception,
and ``LinkFilter.matches`` answers False for a message it cannot read (never raises).

Sections are decoded lazily, when a filter first reads them: a filter that reads only
well-formed sections of a message whose other sections are broken still matches. The
broker rejects such messages at the door (amqp:decode-error); the library only promises
that reading a broken section is a DecodeError, and that a filter reading one is False.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import Described, symbol, uint

from filtex_proton.amqp.decode import MAX_DEPTH, DecodeError, decode_value, skip_value
from filtex_proton.amqp.message import RawMessageView, encode_message, scan_sections
from filtex_proton.amqp.validate import InvalidMessageError, validate_message
from filtex_proton.amqp.view import Section
from filtex_proton.filters import matching
from filtex_proton.filterset import decode_filter_set
from filtex_proton.plugin import FiltexPlugin, LinkFilter

from .hostile_support import fuzz_target, fuzz_views

SILENT = logging.getLogger("hostile.silent")
SILENT.disabled = True


def sql(text: str) -> Described:
    return Described(symbol("amqp:sql-filter"), text)


def link(**filters: Described) -> LinkFilter:
    return LinkFilter(decode_filter_set(filters), consumer=2, logger=SILENT)


def tautology(field: str) -> Described:
    """TRUE for any message whose section can be read, whatever the field holds."""
    return sql(f"{field} IS NULL OR {field} IS NOT NULL")


#: One link per section a filter can read (TRUE whenever it can be read), and one more.
LINKS: dict[str, LinkFilter] = {
    "header": link(h=tautology("h.priority")),
    "delivery-annotations": link(d=tautology("d.x")),
    "message-annotations": link(m=tautology("m.x")),
    "properties": link(p=tautology("p.subject")),
    "application-properties": link(a=tautology("a.x")),
    "footer": link(f=tautology("f.x")),
    "everything": link(
        a=Described(symbol("amqp:all-filter"), [
            tautology("a.x"), Described(symbol("amqp:any-filter"), [tautology("h.ttl")])]),
        b=Described(symbol("amqp:true-filter"), True),
        c=tautology("p.to"),
        d=Described(symbol("amqp:not-filter"), [sql("NOT (d.k IS NULL OR d.k IS NOT NULL)")]),
        e=tautology("m.k"),
        f=tautology("f.k"),
    ),
    # not a tautology: False for messages without a string 'color'
    "property filter": link(p=Described(symbol("amqp:application-properties-filter"),
                                        {"x": None, "color": "&p:"})),
}
#: Which sections each link reads (all of them for "everything").
READS: dict[str, set[str]] = {name: {name} for name in LINKS}
READS["property filter"] = {"application-properties"}
READS["everything"] = {s.value for s in Section}
TAUTOLOGIES = set(LINKS) - {"property filter"}

GOOD = encode_message(
    header={"priority": 5, "durable": True}, delivery_annotations={"k": 1},
    message_annotations={"k": "v"}, properties={"subject": "s", "to": "t"},
    application_properties={"x": 1, "color": "blue"}, body="hello", footer={"k": b"\x00"},
)


def verdicts(data: bytes) -> dict[str, bool]:
    """Every link's verdict on the message; each must be a bool, whatever the bytes."""
    message = FiltexPlugin.message(data, origin=1)
    result: dict[str, bool] = {}
    for name, link_filter in LINKS.items():
        verdict = link_filter.matches(message)
        assert verdict is True or verdict is False
        result[name] = verdict
    return result


def broken_sections(data: bytes) -> set[str] | None:
    """The sections whose reading raises DecodeError, or None if the bytes do not even scan.

    Anything but DecodeError fails the test."""
    try:
        view = RawMessageView(data)
    except DecodeError:
        return None
    broken: set[str] = set()
    for section in Section:
        try:
            view.section(section)
            view.field(section, "x")
            view.has_field(section, "x")
        except DecodeError:
            broken.add(section.value)
    return broken


def check(data: bytes) -> tuple[set[str] | None, dict[str, bool]]:
    """The invariants for any bytes: only DecodeError, bool verdicts, False when unreadable."""
    for probe in (scan_sections, skip_value, decode_value):
        with contextlib.suppress(DecodeError):
            probe(data)
    broken = broken_sections(data)
    try:
        validate_message(data)  # the door check: only InvalidMessageError ...
    except InvalidMessageError:
        pass
    else:  # ... and what it lets through reads in every section
        assert broken == set(), f"the door check passed unreadable sections {broken}"
    result = verdicts(data)
    for name, verdict in result.items():
        if broken is None or READS[name] & broken:
            assert verdict is False, f"{name} matched a message it cannot read"
        elif name in TAUTOLOGIES:
            assert verdict is True, f"{name} did not match a readable message"
    return broken, result


def test_the_good_message_matches_everything() -> None:
    assert check(GOOD) == (set(), dict.fromkeys(LINKS, True))


def test_every_truncation_of_a_message() -> None:
    for end in range(len(GOOD)):
        check(GOOD[:end])


def test_every_single_byte_corruption_of_the_section_headers() -> None:
    """Each byte of each section's descriptor and size fields, set to a few hostile values."""
    for span in scan_sections(GOOD):
        for offset in range(span.start, min(span.value + 9, span.end)):
            for byte in (0x00, 0x40, 0x7F, 0xA1, 0xC1, 0xD0, 0xFF):
                check(GOOD[:offset] + bytes([byte]) + GOOD[offset + 1:])


# ---------------------------------------------------------------------------- the table


def app_props(key: bytes, value: bytes) -> bytes:
    data: bytes = fuzz_views.raw_application_properties(key, value)
    return data


def header_section() -> bytes:
    return encode_message(header={"priority": 9})


def nested(depth: int, opening: bytes) -> bytes:
    """``opening`` (a one-element compound's constructor, sized below) ``depth`` times."""
    inner = b"\x40"
    for _ in range(depth):
        if opening == b"\x00":  # described: descriptor, then the value
            inner = b"\x00\x53\x01" + inner
        elif opening == b"\xd1":  # map32 of one entry: key null, the value
            inner = (b"\xd1" + (len(inner) + 5).to_bytes(4, "big") + b"\x00\x00\x00\x02\x40"
                     + inner)
        else:  # list32 of one element
            inner = (b"\xd0" + (len(inner) + 4).to_bytes(4, "big") + b"\x00\x00\x00\x01"
                     + inner)
    return inner


MALFORMED: dict[str, bytes] = {
    # wrong descriptors
    "not a described section": b"\x45",
    "section code 0x99": b"\x00\x53\x99\x45",
    "numeric descriptor of another domain": b"\x00\x80\x00\x00\x01\x00\x00\x00\x00\x70\x45",
    "unknown symbolic descriptor": b"\x00\xa3\x0bamqp:nonsen\x45",
    "descriptor as a string": b"\x00\xa1\x10amqp:header:list\x45",
    "descriptor ulong0": b"\x00\x44\x45",
    "described descriptor": b"\x00\x00\x53\x70\x45\x45",
    "header holding a map": b"\x00\x53\x70\xc1\x01\x00",
    "application-properties holding a list": b"\x00\x53\x74\x45",
    "sections out of order": encode_message(properties={"to": "t"}) + header_section(),
    "header twice": header_section() + header_section(),
    "symbolic descriptor longer than the message": b"\x00\xa3\xffamqp:header:list",
    # sizes that lie
    "list32 size 4 GiB": b"\x00\x53\x70\xd0\xff\xff\xff\xff\x00\x00\x00\x01\x40",
    "list32 count 2^31": b"\x00\x53\x70\xd0\x00\x00\x00\x05\x7f\xff\xff\xff\x40",
    "map32 count 2^31": b"\x00\x53\x74\xd1\x00\x00\x00\x06\x7f\xff\xff\xfe\x40\x40",
    "map8 size past its content": b"\x00\x53\x74\xc1\x09\x02\x40\x40",
    "map8 size short of its content": b"\x00\x53\x74\xc1\x02\x02\xa1\x01a\x40",
    "str32 longer than the message": app_props(b"\xa1\x01a", b"\xb1\x7f\xff\xff\xff"),
    "binary longer than the message": app_props(b"\xa1\x01a", b"\xa0\xff"),
    "array of 2^31 nulls": app_props(b"\xa1\x01a", b"\xf0\x00\x00\x00\x05\x7f\xff\xff\xff\x40"),
    "array of 2^31 ints in 9 bytes": app_props(
        b"\xa1\x01a", b"\xf0\x00\x00\x00\x09\x7f\xff\xff\xff\x71\x00\x00\x00\x01"),
    "array without a constructor": app_props(b"\xa1\x01a", b"\xe0\x01\x00"),
    "body size beyond the message": header_section() + b"\x00\x53\x75\xb0\x7f\xff\xff\xff",
    "truncated decimal128": app_props(b"\xa1\x01a", b"\x94\x00\x01"),
    # strings that are not what they say
    "key not UTF-8": app_props(b"\xa1\x02\xc3\x28", b"\x40"),
    "value not UTF-8": app_props(b"\xa1\x01a", b"\xa1\x03\xed\xa0\x80"),
    "str32 value not UTF-8": app_props(b"\xa1\x01a", b"\xb1\x00\x00\x00\x01\xff"),
    "symbol not ASCII": encode_message(message_annotations={"k": 1}).replace(b"\xa3\x01k",
                                                                              b"\xa3\x01\xe9"),
    "subject not UTF-8": encode_message(properties={"subject": "ab"}).replace(b"ab", b"\xff\xfe"),
    "char beyond U+10FFFF": app_props(b"\xa1\x01a", b"\x73\x00\x11\x00\x00"),
    "boolean byte 2": app_props(b"\xa1\x01a", b"\x56\x02"),
    "unknown format code": app_props(b"\xa1\x01a", b"\x3f"),
    # maps with an odd element count
    "map8 of 3 elements": b"\x00\x53\x74\xc1\x04\x03\x40\x40\x40",
    "map32 of 1 element": b"\x00\x53\x74\xd1\x00\x00\x00\x05\x00\x00\x00\x01\x40",
    "footer map of 1 element": encode_message(body="x") + b"\x00\x53\x78\xc1\x02\x01\x40",
    "unhashable map key": app_props(b"\xc0\x01\x00", b"\x40"),
    # nested deeper than the decoder goes
    "lists 10,000 deep": app_props(b"\xa1\x01a", nested(10_000, b"\xd0")),
    "maps 10,000 deep": app_props(b"\xa1\x01a", nested(10_000, b"\xd1")),
    "described 10,000 deep": app_props(b"\xa1\x01a", nested(10_000, b"\x00")),
    "lists 10,000 deep as the header": b"\x00\x53\x70" + nested(10_000, b"\xd0"),
}


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_messages(data: bytes) -> None:
    broken, result = check(data)
    assert broken is None or broken, "a malformed message read without a DecodeError"
    assert not all(result.values())


@pytest.mark.parametrize("data", MALFORMED.values(), ids=MALFORMED.keys())
def test_the_door_check_refuses_every_malformed_message(data: bytes) -> None:
    """What the broker rejects with amqp:decode-error before any filter could meet it."""
    with pytest.raises(InvalidMessageError) as caught:
        validate_message(data)
    assert caught.value.section in {s.value for s in Section} | {"message layout"}


@pytest.mark.parametrize("opening", [b"\xd0", b"\xd1", b"\x00"], ids=["list", "map", "described"])
def test_nesting_just_within_the_decoder_depth_reads(opening: bytes) -> None:
    view = RawMessageView(app_props(b"\xa1\x01a", nested(MAX_DEPTH - 2, opening)))
    assert view.has_field(Section.APPLICATION_PROPERTIES, "a")
    too_deep = RawMessageView(app_props(b"\xa1\x01a", nested(MAX_DEPTH + 1, opening)))
    with pytest.raises(DecodeError):
        too_deep.section(Section.APPLICATION_PROPERTIES)


def test_a_body_nested_10000_deep_is_skipped_not_decoded() -> None:
    """Filters never read the body: it is stepped over by its size fields, iteratively."""
    for opening in (b"\xd0", b"\xd1", b"\x00"):
        data = encode_message(header={"priority": 1}) + b"\x00\x53\x77" + nested(10_000, opening)
        assert check(data) == (set(), dict.fromkeys(LINKS, True) | {"property filter": False})


def test_a_broken_section_fails_only_the_filters_that_read_it() -> None:
    data = header_section() + app_props(b"\xa1\x01x", nested(10_000, b"\xd0"))
    broken, result = check(data)
    assert broken == {"application-properties"}
    assert result["header"] is True  # the header alone is fine (lazy decoding)
    assert result["application-properties"] is False
    assert result["everything"] is False


def test_undecodable_messages_are_counted_as_errors() -> None:
    link_filter = link(a=sql("a.x = 1"))
    for data in (b"\xff", MALFORMED["value not UTF-8"]):
        assert link_filter.matches(FiltexPlugin.message(data)) is False
    stats = link_filter.filter_set.stats
    assert (stats.evaluations, stats.matches, stats.nulls) == (2, 0, 2)
    assert stats.errors == 2  # bytes that do not scan, and a section SQL cannot read (§7.2)


# ---------------------------------------------------------------------------- big, valid


@pytest.fixture
def key_classes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    calls = [0]
    real = matching.key_class

    def counted(key: Any) -> Any:
        calls[0] += 1
        return real(key)

    monkeypatch.setattr(matching, "key_class", counted)
    yield calls


def test_map_matching_work_is_linear_in_the_message(key_classes: list[int]) -> None:
    """A nested reference map of 250 keys against a message map of 100,000 entries, all
    the keys at its end: each key once, not 250 scans of the whole map (spec §7.2)."""
    reference: dict[Any, Any] = {f"k{i}": 1 for i in range(250)}
    filter_set = decode_filter_set({"p": Described(
        symbol("amqp:application-properties-filter"), {"cfg": reference})})
    entries: dict[Any, Any] = {uint(i): None for i in range(100_000)}
    entries.update(reference)
    data = encode_message(application_properties={"cfg": entries})
    view = RawMessageView(data)
    view.section(Section.APPLICATION_PROPERTIES)  # decode outside the count
    key_classes[0] = 0
    assert filter_set.matches(view) is True
    assert key_classes[0] <= len(entries) + len(reference)
    entries["k249"] = 2
    assert decode_filter_set({"p": Described(
        symbol("amqp:application-properties-filter"), {"cfg": reference})}).matches(
            RawMessageView(encode_message(application_properties={"cfg": entries}))) is False


def test_map_matching_keys_stay_type_aware() -> None:
    """The indexed lookup keeps §4.1.1's key rules: string = symbol, integer types alike,
    a boolean is not the integer 1."""
    reference: dict[Any, Any] = {"s": 1, 1: "one", "t": True, "u": None}
    filter_set = decode_filter_set({"p": Described(
        symbol("amqp:application-properties-filter"), {"m": reference})})

    def matches(entries: dict[Any, Any]) -> bool:
        padded: dict[Any, Any] = {f"pad{i}": i for i in range(100)} | entries
        return filter_set.matches(RawMessageView(encode_message(
            application_properties={"m": padded})))

    assert matches({symbol("s"): 1, uint(1): "one", "t": True}) is True
    assert matches({"s": 1, True: "one", "t": True}) is False
    assert matches({"s": 1, 1: "one", "t": 1}) is False


# ---------------------------------------------------------------------------- fuzzing

SEEDS = fuzz_views.message_seeds()
EDITS = st.lists(st.tuples(st.integers(0, 6_000), st.integers(0, 255)), max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(SEEDS), edits=EDITS, cut=st.integers(0, 6_000),
       insert=st.binary(max_size=16))
def test_mutated_messages(seed: bytes, edits: list[tuple[int, int]], cut: int,
                          insert: bytes) -> None:
    data = bytearray(seed)
    for position, byte in edits:
        if data:
            data[position % len(data)] = byte
    at = cut % (len(data) + 1)
    data[at:at] = insert
    fuzz_target("fuzz_message").test_one_input(bytes(data))
    check(bytes(data))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_random_bytes(data: bytes) -> None:
    fuzz_target("fuzz_message").test_one_input(data)
    check(data)
