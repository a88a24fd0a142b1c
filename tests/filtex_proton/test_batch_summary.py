"""Batch summaries (docs/PLUGIN.md, "Skipping a batch: BatchSummary").

Units: what each kind of atom lets a summary rule out (equality, IN, ranges, prefixes, null,
existence), the exact keys giving way to a Bloom filter, fields the summary does not track, a
field it could not read, and the encoded form. The hypothesis test is the rule skipping rests on:
a summary never rules out a batch holding a message the filter set matches, over random
batches and filters of SQL, property and stream-filter kinds, before and after encoding.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Described, symbol

from filtex_proton.amqp.message import encode_message
from filtex_proton.matcher import (
    STREAM_FILTER_FIELD,
    BatchSummary,
    Condition,
    decompose,
    tracked_fields,
)
from filtex_proton.matcher.summary import EXACT_KEYS
from filtex_proton.plugin import FilterMessage, FiltexPlugin, LinkFilter

PLUGIN = FiltexPlugin()


def _filter(entries: dict[str, tuple[str, Any]]) -> LinkFilter:
    filter_set = PLUGIN.compile({symbol(name): Described(symbol(descriptor), value)
                                 for name, (descriptor, value) in entries.items()})
    return LinkFilter(filter_set, None)


def _sql(text: str) -> LinkFilter:
    return _filter({"f": ("amqp:sql-filter", text)})


def _message(annotations: dict[Any, Any] | None = None, subject: str | None = None,
             **properties: Any) -> FilterMessage:
    return FilterMessage(encode_message(
        application_properties=properties, message_annotations=annotations,
        properties={"subject": subject} if subject is not None else None))


def _summary(link_filter: LinkFilter, messages: list[FilterMessage]) -> tuple[BatchSummary,
                                                                                Condition]:
    condition = decompose(link_filter.filter_set)
    summary = BatchSummary(tracked_fields(condition) | {STREAM_FILTER_FIELD})
    for message in messages:
        summary.add(message)
    return summary, condition


def _admits(text: str, messages: list[FilterMessage]) -> bool:
    summary, condition = _summary(_sql(text), messages)
    return summary.may_match(condition)


BATCH = [_message(type="order.paid", amount=5, region="EU"),
         _message(type="order.shipped", amount=70, region="US")]


@pytest.mark.parametrize(("text", "admitted"), [
    ("type = 'order.paid'", True),
    ("type = 'order.created'", False),
    ("type IN ('order.created', 'order.cancelled')", False),
    ("type IN ('order.created', 'order.shipped')", True),
    ("type = 'order.created' OR region = 'US'", True),
    ("type = 'order.created' AND amount > 1", False),
    ("amount > 100", False),
    ("amount BETWEEN 71 AND 80", False),
    ("amount BETWEEN 10 AND 20", True),  # within min..max: a range is not a value set
    ("amount >= 70", True),
    ("amount < 4", False),
    ("amount < 5", True),  # the index's bounds are inclusive (a double may equal the bound)
    ("amount <= 5.0", True),
    ("type LIKE 'order.s%'", True),
    ("type LIKE 'invoice.%'", False),
    ("coupon IS NULL", True),
    ("coupon IS NOT NULL", False),
    ("region IS NULL", False),
    ("amount + 1 > 1000", True),  # nothing indexable: every batch may match
])
def test_what_a_summary_rules_out(text: str, admitted: bool) -> None:
    assert _admits(text, BATCH) is admitted


def test_a_field_it_does_not_track_rules_nothing_out() -> None:
    summary = BatchSummary()
    for message in BATCH:
        summary.add(message)
    assert summary.may_match(decompose(_sql("type = 'order.created'").filter_set))


def test_a_stream_filter_on_the_annotation_with_and_without_match_unfiltered() -> None:
    batch = [_message({symbol("x-stream-filter-value"): "eu"}), _message()]
    only_us = _filter({"s": ("rabbitmq:stream-filter", "us")})
    assert not _summary(only_us, batch)[0].may_match(decompose(only_us.filter_set))
    unfiltered = _filter({"s": ("rabbitmq:stream-filter", "us"),
                          "u": ("rabbitmq:stream-match-unfiltered", True)})
    assert _summary(unfiltered, batch)[0].may_match(decompose(unfiltered.filter_set))
    tagged = [_message({symbol("x-stream-filter-value"): "eu"})]
    assert not _summary(unfiltered, tagged)[0].may_match(decompose(unfiltered.filter_set))


def test_a_property_filter_on_the_subject() -> None:
    wanted = _filter({"p": ("amqp:properties-filter", {symbol("subject"): "eu.orders"})})
    condition = decompose(wanted.filter_set)
    other, _ = _summary(wanted, [_message(subject="us.orders")])
    same, _ = _summary(wanted, [_message(subject="eu.orders")])
    assert (other.may_match(condition), same.may_match(condition)) == (False, True)


def test_exact_keys_give_way_to_a_bloom_filter() -> None:
    many = [_message(type=f"t{i}") for i in range(EXACT_KEYS * 4)]
    summary, condition = _summary(_sql("type = 't7'"), many)
    field = summary.fields[next(iter(tracked_fields(condition)))]
    assert field.keys is None and field.bloom is not None
    assert summary.may_match(condition), "a Bloom filter never forgets a key"
    absent = [_sql(f"type = 'absent{i}'") for i in range(200)]
    ruled_out = sum(not summary.may_match(decompose(f.filter_set)) for f in absent)
    assert ruled_out >= 190, f"false positives: {200 - ruled_out} of 200"


def test_a_field_it_could_not_read_rules_nothing_out() -> None:
    damaged = FilterMessage(encode_message(application_properties={"type": "a"})[:-3])
    summary, condition = _summary(_sql("type = 'b'"), [damaged])
    assert summary.may_match(condition)


def test_the_encoded_form_gives_the_same_answers() -> None:
    many = [_message({symbol("x-stream-filter-value"): f"v{i % 3}"}, type=f"t{i}", amount=i)
            for i in range(EXACT_KEYS * 2)]
    texts = ["type = 't5'", "type = 'none'", "amount > 1000", "amount < 3", "type LIKE 'q%'"]
    for text in texts:
        summary, condition = _summary(_sql(text), many)
        again = BatchSummary.decode(summary.encode())
        assert again.messages == summary.messages == len(many)
        assert again.may_match(condition) is summary.may_match(condition), text


@pytest.mark.parametrize("garbage", [b"", b"\x45", b"\xc0\x01\x00", b"\xc0\x03\x02\x50\x07\x40"])
def test_garbage_is_not_a_summary(garbage: bytes) -> None:
    with pytest.raises(ValueError, match="not a segment summary"):
        BatchSummary.decode(garbage)


_VALUES = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "ab"]), st.integers(-3, 3),
                    st.sampled_from([0.5, 2.0, -1.5]), st.booleans())
_FILTERS = st.sampled_from([
    ("amqp:sql-filter", "k = 'a'"), ("amqp:sql-filter", "k IN ('b', 'c')"),
    ("amqp:sql-filter", "k > 1"), ("amqp:sql-filter", "k BETWEEN -1 AND 0.5"),
    ("amqp:sql-filter", "k IS NULL"), ("amqp:sql-filter", "k LIKE 'a%'"),
    ("amqp:sql-filter", "k = 2 OR j = 'a'"), ("amqp:sql-filter", "k <> 'a' AND j IS NOT NULL"),
    ("amqp:sql-filter", "k = TRUE"), ("amqp:sql-filter", "NOT (k = 'a')"),
    ("amqp:application-properties-filter", {"k": "a"}),
    ("amqp:application-properties-filter", {"k": 2}),
    ("amqp:application-properties-filter", {"j": "a"}),
    ("rabbitmq:stream-filter", "a"),
])


@settings(max_examples=300, deadline=None)
@given(batch=st.lists(st.dictionaries(st.sampled_from(["k", "j"]), _VALUES), min_size=1,
                      max_size=6),
       entry=_FILTERS, tagged=st.lists(st.sampled_from([None, "a", "b"]), min_size=6,
                                       max_size=6))
def test_a_summary_never_rules_out_a_batch_holding_a_match(
        batch: list[dict[str, Any]], entry: tuple[str, Any], tagged: list[str | None]) -> None:
    link_filter = _filter({"f": entry})
    messages = [_message(None if tag is None else {symbol("x-stream-filter-value"): tag},
                         **properties)
                for properties, tag in zip(batch, tagged, strict=False)]
    summary, condition = _summary(link_filter, messages)
    if any(link_filter.matches(message) for message in messages):
        assert summary.may_match(condition)
        assert BatchSummary.decode(summary.encode()).may_match(condition)
