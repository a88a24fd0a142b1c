"""A message's arrival (docs/PLUGIN.md, "A node that keeps messages: Arrival").

Units: the links an arrival names and in which order, links registered after it, links that said
no, a message taken again, arrivals shared between messages, and no reference cycle with the
matcher. The hypothesis test plays random registrations, arrivals, refusals and retakes against
per-link evaluation: an arrival never rules out a link whose filter matches its message (no
message is lost), and keeps ruled out a link that said no until that link registers again.
"""

from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Described, symbol

from filtex_proton.amqp.message import encode_message
from filtex_proton.matcher import Arrival, NodeMatcher, Verdict
from filtex_proton.plugin import FilterMessage, FiltexPlugin, LinkFilter

PLUGIN = FiltexPlugin()


def _filter(text: str | None) -> LinkFilter | None:
    if text is None:
        return None
    filter_set = PLUGIN.compile({symbol("f"): Described(symbol("amqp:sql-filter"), text)})
    return LinkFilter(filter_set, None)


def _message(**properties: Any) -> FilterMessage:
    return FilterMessage(encode_message(application_properties=properties))


def _matcher(**links: str | None) -> NodeMatcher[str]:
    matcher: NodeMatcher[str] = NodeMatcher()
    for key, text in links.items():
        matcher.register(key, _filter(text))
    return matcher


def test_the_candidates_at_arrival_in_registration_order() -> None:
    matcher = _matcher(eu="region = 'EU'", us="region = 'US'", big="amount * 2 > 100", any=None)
    arrival = matcher.arrival(_message(region="EU", amount=1))
    assert arrival.links() == ["eu", "big", "any"]
    assert [arrival.may_match(k) for k in ("eu", "us", "big", "any")] == [True, False, True, True]
    assert not arrival.may_match("never registered")
    assert matcher.verdict("big", _message(region="EU", amount=1)) is Verdict.NOT_MATCHED


def test_links_registered_later_may_match_until_they_say_no() -> None:
    matcher = _matcher(eu="region = 'EU'", us="region = 'US'")
    arrival = matcher.arrival(_message(region="US"))
    assert arrival.links() == ["us"]
    matcher.register("late", _filter("region = 'EU'"))  # not indexed for the message: may match
    assert arrival.may_match("late") and arrival.links() == ["us", "late"]
    narrowed = arrival.without({"late"})
    assert not narrowed.may_match("late") and narrowed.links() == ["us"]
    assert arrival.may_match("late")  # arrivals do not change: the narrowed one is another
    matcher.register("later", None)
    assert narrowed.links() == ["us", "later"]


def test_a_link_registered_again_may_match_again() -> None:
    matcher = _matcher(a="region = 'EU'", b="region = 'US'")
    arrival = matcher.arrival(_message(region="US")).without({"b"})
    assert arrival.links() == []
    matcher.register("a", _filter("region = 'US'"))  # new filters: the old answer is void
    matcher.register("b", _filter("region = 'US'"))
    assert arrival.links() == ["a", "b"]
    matcher.unregister("a")
    assert not arrival.may_match("a") and arrival.links() == ["b"]


def test_links_round_robin_from_after_the_last_served() -> None:
    matcher = _matcher(**{name: None for name in "abcd"})
    arrival = matcher.arrival(_message())
    assert arrival.links(matcher.order("b")) == ["c", "d", "a", "b"]
    assert arrival.links(matcher.order("d")) == ["a", "b", "c", "d"]
    assert arrival.links(0) == arrival.links() == ["a", "b", "c", "d"]
    served = matcher.order("c")
    matcher.unregister("c")  # the last served is gone: its place in the order still counts
    assert arrival.links(served) == ["d", "a", "b"]
    assert matcher.order("a") < matcher.order("b") < matcher.order("d")


def test_without_nothing_is_the_same_arrival() -> None:
    arrival = _matcher(a=None).arrival(_message())
    assert arrival.without(()) is arrival
    assert arrival.without({"unknown"}).links() == ["a"]


def test_a_message_taken_again_is_indexed_as_it_is_now() -> None:
    matcher = _matcher(first="n = 1", again="n = 2")
    arrival = matcher.arrival(_message(n=1)).without({"first"})
    assert arrival.links() == []
    retaken = arrival.again(_message(n=2))
    assert retaken.links() == ["again"] and not retaken.may_match("first")
    assert arrival.again(_message(n=1)).links() == ["first"]  # refusals are forgotten


def test_messages_with_the_same_candidates_share_one_arrival() -> None:
    matcher = _matcher(a="n = 1", b="n = 2")
    first = matcher.arrival(_message(n=1))
    assert matcher.arrival(_message(n=1)) is first
    assert matcher.arrival(_message(n=2)) is not first
    assert first.without({"a"}) is matcher.arrival(_message(n=3))  # both: nobody
    matcher.register("c", None)  # a registration: later arrivals must name it
    after = matcher.arrival(_message(n=1))
    assert after is not first and after.links() == first.links() == ["a", "c"]
    assert matcher.stats.messages == 5  # an arrival counts as a message, as candidates() does


def test_more_distinct_candidate_sets_than_are_shared_are_still_right() -> None:
    matcher: NodeMatcher[int] = NodeMatcher()
    for k in range(8):
        matcher.register(k, None)
    everyone = matcher.arrival(_message())
    subsets = [{k for k in range(8) if bits >> k & 1} for bits in range(256)]
    narrowed = [everyone.without(subset) for subset in subsets]  # 256 distinct answers
    assert len(matcher._arrivals) <= 64 + 2 * len(matcher)  # bounded: the cache started again
    assert [a.links() for a in narrowed] == [[k for k in range(8) if k not in subset]
                                             for subset in subsets]
    assert everyone.without({7}) is everyone.without({7})  # shared again from now on


def test_answers_are_may_match_worked_out_once_per_arrival() -> None:
    matcher = _matcher(a="n = 1", b="n = 2")
    arrivals = [matcher.arrival(_message(n=n % 3)) for n in range(30)]
    answers = matcher.answers("a")
    assert [answers[x] for x in arrivals] == [x.may_match("a") for x in arrivals]
    assert len(answers) == 3 and matcher.answers("a") is answers  # one per distinct arrival
    matcher.unregister("a")  # the links changed: the answers are worked out again
    assert matcher.answers("a") is not answers and not any(matcher.answers("a")[x]
                                                           for x in arrivals)
    assert not matcher._answers  # nothing kept for a key that is not a link
    matcher.register("a", _filter("n = 0"))
    assert [matcher.answers("a")[x] for x in arrivals[:3]] == [True, True, True]  # registered later
    many = matcher.answers("b")
    for n in range(200):
        many[matcher.arrival(_message(n=n)).without({"a"} if n % 2 else ())]
    assert len(many) <= 64


def test_no_reference_cycle_between_a_matcher_and_its_arrivals() -> None:
    """A node's matcher goes with the node, by reference counting, whatever arrivals remain
    (entries, say): a cycle would wait for a full collection."""
    matcher = _matcher(a="n = 1", b=None)
    arrivals = [matcher.arrival(_message(n=n)) for n in range(3)]
    gone = weakref.ref(matcher)
    gc.disable()
    try:
        del matcher
        assert gone() is None
    finally:
        gc.enable()
    assert arrivals[1].links() == ["a", "b"]  # still answers
    assert arrivals[0].without({"b"}).links() == []
    with pytest.raises(ReferenceError):
        arrivals[0].again(_message(n=1))


# ================================================================== no lost message

TEXTS = [None, "a = 'x'", "a IN ('x', 'y')", "n > 3", "n BETWEEN 2 AND 5", "a LIKE 'x%'",
         "a IS NULL", "n + 0 = 4", "a = 'x' AND n < 3", "a = 'y' OR n = 1", "NOT (a = 'x')",
         "a <> 'y'", "FALSE"]
KEYS = st.integers(0, 5)
_messages = st.builds(
    lambda a, n: _message(**{k: v for k, v in (("a", a), ("n", n)) if v is not None}),
    st.sampled_from([None, "x", "y", "xy", "z"]), st.one_of(st.none(), st.integers(0, 6)))
_operations = st.lists(st.one_of(
    st.tuples(st.just("register"), KEYS, st.integers(0, len(TEXTS) - 1)),
    st.tuples(st.just("unregister"), KEYS),
    st.tuples(st.just("arrive"), _messages),
    st.tuples(st.just("say no"), st.integers(0, 7), st.integers(0, 7)),
    st.tuples(st.just("again"), st.integers(0, 7)),
), min_size=8, max_size=50)


class _Kept:
    """A message a node keeps, its arrival, and who said no to it (with their version)."""

    def __init__(self, message: FilterMessage, arrival: Arrival[int]) -> None:
        self.message = message
        self.arrival = arrival
        self.said_no: dict[int, int] = {}


@settings(max_examples=300, deadline=None)
@given(_operations)
def test_an_arrival_never_rules_out_a_link_that_matches(operations: list[tuple[Any, ...]]) -> None:
    matcher: NodeMatcher[int] = NodeMatcher()
    texts: dict[int, str | None] = {}
    versions: dict[int, int] = {}  # a key's registrations so far
    kept: list[_Kept] = []

    def matches(key: int, message: FilterMessage) -> bool:
        link_filter = _filter(texts[key])  # per-link evaluation, on a filter of its own
        return link_filter is None or link_filter.matches(message)

    for operation in operations:
        match operation:
            case ("register", key, text):
                texts[key] = TEXTS[text]
                versions[key] = versions.get(key, 0) + 1
                matcher.register(key, _filter(texts[key]))
            case ("unregister", key):
                texts.pop(key, None)
                matcher.unregister(key)
            case ("arrive", message):
                kept.append(_Kept(message, matcher.arrival(message)))
            case ("say no", index, pick) if kept:  # one of the links offered it refuses it
                one = kept[index % len(kept)]
                refusing = [k for k in one.arrival.links() if not matches(k, one.message)]
                if refusing:
                    key = refusing[pick % len(refusing)]
                    one.arrival = one.arrival.without({key})
                    one.said_no[key] = versions[key]
            case ("again", index) if kept:
                one = kept[index % len(kept)]
                one.arrival, one.said_no = one.arrival.again(one.message), {}
        for one in kept:
            named = one.arrival.links()
            for key, text in texts.items():
                if matches(key, one.message):
                    assert one.arrival.may_match(key), (key, text, operations)
                if versions[key] == one.said_no.get(key):  # said no, not registered since
                    assert not one.arrival.may_match(key)
                assert (key in named) == one.arrival.may_match(key)
                assert matcher.answers(key)[one.arrival] == one.arrival.may_match(key)
            assert named == sorted(named, key=matcher.order)
