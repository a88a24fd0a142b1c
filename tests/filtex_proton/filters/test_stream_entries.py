"""RabbitMQ's stream entries: the offset spec and match-unfiltered as options of the set, the
stream filter as a filter family (evaluation, the node matcher's index, pushdown, Spark)."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Array, Data, Described, symbol, timestamp, ulong

from filtex_proton.amqp.message import encode_message
from filtex_proton.amqp.view import DictMessageView
from filtex_proton.errors import FilterError
from filtex_proton.filters.options import OffsetSpec, StreamOptions, parse_interval
from filtex_proton.filterset import decode_filter_set
from filtex_proton.matcher import NodeMatcher
from filtex_proton.matcher.decompose import decompose
from filtex_proton.plugin import FiltexPlugin, LinkFilter
from filtex_proton.pushdown import pushdown

OFFSET = symbol("rabbitmq:stream-offset-spec")
FILTER = symbol("rabbitmq:stream-filter")
UNFILTERED = symbol("rabbitmq:stream-match-unfiltered")


def _set(**entries: Described) -> Any:
    return decode_filter_set(dict(entries))


@pytest.mark.parametrize(("value", "spec"), [
    ("first", OffsetSpec("first")), ("last", OffsetSpec("last")), ("next", OffsetSpec("next")),
    (symbol("first"), OffsetSpec("first")),
    (ulong(7), OffsetSpec("offset", 7)), (7, OffsetSpec("offset", 7)),
    (timestamp(1_700_000_000_000), OffsetSpec("timestamp", 1_700_000_000_000)),
    ("1h", OffsetSpec("interval", 3600)), ("7D", OffsetSpec("interval", 7 * 86400)),
    ("30s", OffsetSpec("interval", 30)), ("2m", OffsetSpec("interval", 120)),
    ("1M", OffsetSpec("interval", 30 * 86400)), ("1Y", OffsetSpec("interval", 365 * 86400)),
])
def test_an_offset_spec_is_read_once_as_an_option(value: Any, spec: OffsetSpec) -> None:
    filter_set = _set(offset=Described(OFFSET, value))
    assert filter_set.options == StreamOptions(offset=spec)
    assert len(filter_set) == 0  # not a filter: nothing to evaluate
    assert filter_set.matches(DictMessageView())
    assert filter_set.echo() == {symbol("offset"): Described(OFFSET, value)}


@pytest.mark.parametrize(("value", "words"), [
    (1.5, "not a double"), (True, "not a boolean"), (None, "not a null"),
    ("yesterday", "'yesterday' is not"), ("1 h", "is not"), ("1d", "is not"),
    (-1, "0 or more"), ({"a": 1}, "not a map"), (Described(symbol("x"), 1), "not a described"),
])
def test_an_offset_spec_of_another_type_is_refused(value: Any, words: str) -> None:
    with pytest.raises(FilterError, match=words) as raised:
        _set(o=Described(OFFSET, value))
    assert raised.value.key == "o"
    assert "rabbitmq:stream-offset-spec" in raised.value.render()


def test_an_option_given_twice_is_refused() -> None:
    with pytest.raises(FilterError, match="twice"):
        _set(a=Described(OFFSET, "first"), b=Described(OFFSET, "last"))


def test_match_unfiltered_is_a_boolean() -> None:
    with pytest.raises(FilterError, match="boolean, not a string"):
        _set(u=Described(UNFILTERED, "true"))
    assert _set(u=Described(UNFILTERED, True)).options.match_unfiltered


def test_parse_interval() -> None:
    assert parse_interval("12h") == 12 * 3600
    assert parse_interval("h") is None
    assert parse_interval("1H") is None  # RabbitMQ's units are case-sensitive


def _message(value: Any = None) -> DictMessageView:
    if value is None:
        return DictMessageView(message_annotations={})
    return DictMessageView(message_annotations={symbol("x-stream-filter-value"): value})


@pytest.mark.parametrize("value", ["a", ["a", "b"], Array(None, Data.STRING, "a", "b"),
                                   symbol("a"), [symbol("a")]])
def test_a_stream_filter_matches_its_values(value: Any) -> None:
    filter_set = _set(f=Described(FILTER, value))
    assert filter_set.matches(_message("a"))
    assert filter_set.matches(_message(symbol("a")))
    assert not filter_set.matches(_message("c"))
    assert not filter_set.matches(_message(5))
    assert not filter_set.matches(_message())
    assert not filter_set.matches(DictMessageView())


def test_match_unfiltered_also_takes_messages_without_a_value() -> None:
    filter_set = _set(f=Described(FILTER, "a"), u=Described(UNFILTERED, True))
    assert filter_set.matches(_message())
    assert filter_set.matches(DictMessageView(message_annotations={
        symbol("x-stream-filter-value"): None}))
    assert filter_set.matches(_message("a"))
    assert not filter_set.matches(_message("b"))
    assert not _set(f=Described(FILTER, "a"), u=Described(UNFILTERED, False)).matches(_message())


@pytest.mark.parametrize(("value", "words"), [
    (5, "a string or a list of strings, not a long"), ([], "at least one value"),
    (["a", 5], "strings as its values, not a long"), ({"a": "b"}, "not a map"),
])
def test_a_stream_filter_of_another_type_is_refused(value: Any, words: str) -> None:
    with pytest.raises(FilterError, match=words):
        _set(f=Described(FILTER, value))


def test_too_many_values_is_a_limit() -> None:
    with pytest.raises(FilterError) as raised:
        _set(f=Described(FILTER, [str(i) for i in range(257)]))
    assert raised.value.limit


def _link(**entries: Described) -> LinkFilter:
    return LinkFilter(FiltexPlugin().compile(dict(entries)), consumer=None)


def test_the_node_matcher_indexes_the_annotation() -> None:
    plugin = FiltexPlugin()
    matcher: NodeMatcher[str] = NodeMatcher()
    matcher.register("ab", _link(f=Described(FILTER, ["a", "b"])))
    matcher.register("c", _link(f=Described(FILTER, "c")))
    matcher.register("c+", _link(f=Described(FILTER, "c"), u=Described(UNFILTERED, True)))
    tagged = plugin.message(encode_message(
        message_annotations={symbol("x-stream-filter-value"): "b"}, body="x"))
    untagged = plugin.message(encode_message(body="y"))
    assert matcher.candidates(tagged) == ("ab",)
    assert matcher.match(tagged).matched == ("ab",)
    assert matcher.candidates(untagged) == ("c+",)
    assert matcher.match(untagged).matched == ("c+",)


def test_decomposition_with_and_without_match_unfiltered() -> None:
    plain = decompose(_set(f=Described(FILTER, "a")))
    assert len(plain) == 1 and len(plain[0]) == 1
    assert len(decompose(_set(f=Described(FILTER, "a"), u=Described(UNFILTERED, True)))) == 2


def test_the_stream_filter_stays_local_in_a_pushdown() -> None:
    result = pushdown(_set(f=Described(FILTER, "a"), o=Described(OFFSET, "first")))
    assert result.selector is None
    assert any("rabbitmq:stream-filter" in reason for reason in result.reasons)


def test_spark_leaves_the_stream_filter_to_the_engine() -> None:
    from filtex_proton.spark.translate import Translator
    from filtex_proton.spark.values import UntranslatableError

    item = _set(f=Described(FILTER, "a"))["f"]
    with pytest.raises(UntranslatableError, match="engine"):
        Translator(now_ms=0).translate(item)
