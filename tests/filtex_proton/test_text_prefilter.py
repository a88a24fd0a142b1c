"""The byte search before an evaluation (docs/PLUGIN.md, "Skipping a batch").

Units: which conditions have texts to search for (string equality, IN, LIKE prefixes; not
numbers, booleans, nulls or an empty text), one search shared by alternatives, a symbol and a
described value found alike. The hypothesis test is the rule it rests on: the search never
passes over a message the filter set matches (AMQP 1.0 part 1 §1.6.20-21: a string's UTF-8
bytes are in the encoding verbatim).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from proton import Described, symbol

from filtex_proton.amqp.message import encode_message
from filtex_proton.matcher import decompose, text_prefilter
from filtex_proton.matcher.literals import required_texts
from filtex_proton.plugin import FilterMessage, FiltexPlugin, LinkFilter

PLUGIN = FiltexPlugin()


def _filter(descriptor: str, value: Any) -> LinkFilter:
    return LinkFilter(PLUGIN.compile({symbol("f"): Described(symbol(descriptor), value)}), None)


def _sql(text: str) -> LinkFilter:
    return _filter("amqp:sql-filter", text)


def _texts(text: str) -> Any:
    return required_texts(decompose(_sql(text).filter_set))


@pytest.mark.parametrize(("text", "texts"), [
    ("type = 'order.created'", (((b"order.created",),),)),
    ("type IN ('ab', 'c')", (((b"c", b"ab"),),)),
    ("type LIKE 'inv%'", (((b"inv",),),)),
    ("type = 'a' AND n > 3", (((b"a",),),)),
    ("type = 'a' OR n > 3", None),
    ("n = 3", None),
    ("flag = TRUE", None),
    ("type IS NULL", None),
    ("type = ''", None),
    ("NOT (type = 'a')", None),
])
def test_which_conditions_have_texts(text: str, texts: Any) -> None:
    assert _texts(text) == texts


def test_alternatives_share_one_search() -> None:
    prefilter = text_prefilter(decompose(_sql(
        "subject = 'order.created' AND region IN ('EU', 'UK') AND (p > 4 OR q = TRUE)"
    ).filter_set))
    assert prefilter is not None
    assert prefilter(b"..order.created..") and not prefilter(b"..EU..UK..order.paid")


@pytest.mark.parametrize("value", ["order.created", symbol("order.created"),
                                   Described(symbol("x"), "order.created")])
def test_strings_symbols_and_described_values_are_found(value: Any) -> None:
    link_filter = _filter("amqp:application-properties-filter", {"type": "order.created"})
    data = encode_message(application_properties={"type": value})
    prefilter = text_prefilter(decompose(link_filter.filter_set))
    assert prefilter is not None and prefilter(data)
    assert link_filter.matches(FilterMessage(data))


_VALUES = st.one_of(st.none(), st.sampled_from(["a", "ab", "é", "b€", ""]),
                    st.sampled_from([symbol("a"), symbol("ab")]), st.integers(-2, 2),
                    st.booleans())
_SQL = st.sampled_from([
    "k = 'a'", "k IN ('ab', 'é')", "k LIKE 'a%'", "k = 'b€' OR j = 'a'", "k = 'a' AND j > 0",
    "(k = 'a' OR k = 'ab') AND (j = 1 OR j = 'é')", "k <> 'a'", "k = 'ab' AND NOT j = 'a'",
])


@settings(max_examples=300, deadline=None)
@given(properties=st.dictionaries(st.sampled_from(["k", "j"]), _VALUES), text=_SQL)
def test_the_search_never_passes_over_a_match(properties: dict[str, Any], text: str) -> None:
    link_filter = _sql(text)
    data = encode_message(application_properties=properties)
    prefilter = text_prefilter(decompose(link_filter.filter_set))
    if link_filter.matches(FilterMessage(data)):
        assert prefilter is None or prefilter(data)
