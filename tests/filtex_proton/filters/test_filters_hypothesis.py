"""Random filter sets and messages: evaluation never raises, decoding raises only FilterError."""

from __future__ import annotations

import importlib.util
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import (
    Described,
    byte,
    char,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS
from filtex_proton.amqp.view import DictMessageView
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import EvaluationContext
from filtex_proton.filters.registry import FILTER_TYPES
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.limits import Limits

HAVE_SQL = importlib.util.find_spec("filtex_proton.sql") is not None
LIMITS = Limits(max_group_depth=16, max_group_members=8, eval_budget_ms=10_000)
KEYS = ["a", "b", "c", "x-opt-a", "x-match"]
TEXT = st.sampled_from(["", "a", "b", "a.b", "x.y.z", "&p:a", "&s:b", "&&a", "orders.eu", "#"])


def _ints() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(0, 255).map(ubyte), st.integers(0, 2**16 - 1).map(ushort),
        st.integers(0, 2**32 - 1).map(uint), st.integers(0, 2**64 - 1).map(ulong),
        st.integers(-128, 127).map(byte), st.integers(-(2**15), 2**15 - 1).map(short),
        st.integers(-(2**31), 2**31 - 1).map(int32), st.integers(-(2**63), 2**63 - 1),
    )


SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.booleans(), _ints(), st.floats(), st.floats(width=32).map(float32),
    st.integers(-(2**40), 2**40).map(timestamp), st.characters().map(char),
    st.uuids(), st.binary(max_size=4), TEXT, TEXT.map(symbol),
    st.decimals(allow_nan=True, places=2, max_value=Decimal(10**6), min_value=Decimal(-(10**6))),
)

VALUES: st.SearchStrategy[Any] = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=3),
        st.builds(Described, st.sampled_from([symbol("ex:t"), ulong(1)]), inner),
    ),
    max_leaves=6,
)


def _d(name: str, value: Any) -> Described:
    return Described(symbol(name), value)


def _field_value(type_name: str) -> st.SearchStrategy[Any]:
    return {
        "boolean": st.booleans(),
        "ubyte": st.integers(0, 255).map(ubyte),
        "uint": st.integers(0, 2**32 - 1).map(uint),
        "string": TEXT,
        "symbol": TEXT.map(symbol),
        "timestamp": st.integers(0, 2**40).map(timestamp),
        "binary": st.binary(max_size=3),
        "*message-id": st.one_of(TEXT, st.integers(0, 9).map(ulong), st.uuids()),
    }[type_name]


def _composite(name: str, fields: tuple[tuple[str, str], ...]) -> st.SearchStrategy[Described]:
    return st.lists(st.sampled_from(fields), max_size=3, unique=True).flatmap(
        lambda chosen: st.fixed_dictionaries(
            {field: st.one_of(st.none(), _field_value(t)) for field, t in chosen}
        )
    ).map(lambda value: _d(name, value))


LEAVES: st.SearchStrategy[Described] = st.one_of(
    st.sampled_from([_d("amqp:true-filter", True), _d("amqp:false-filter", False)]),
    _composite("amqp:header-filter", HEADER_FIELDS),
    _composite("amqp:properties-filter", PROPERTIES_FIELDS),
    st.builds(_d, st.sampled_from(["amqp:application-properties-filter",
                                   "amqp:message-annotations-filter",
                                   "amqp:delivery-annotations-filter", "amqp:footer-filter"]),
              st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3)),
    st.builds(_d, st.sampled_from(["apache.org:legacy-amqp-direct-binding:string",
                                   "apache.org:legacy-amqp-topic-binding:string"]), TEXT),
    st.builds(lambda v: _d("apache.org:legacy-amqp-headers-binding:map", v),
              st.dictionaries(st.sampled_from(["a", "b", "c"]), SCALARS, max_size=3)),
    st.just(_d("apache.org:no-local-filter:list", [])),
    *([st.builds(_d, st.sampled_from(["amqp:sql-filter", "apache.org:selector-filter:string"]),
                 st.sampled_from(["a = 1", "b LIKE 'x%' OR c IS NULL", "a + 1 > b / 0",
                                  "NOT (a IN ('x', 'y'))", "a BETWEEN 1 AND b"]))]
      if HAVE_SQL else []),
)

GROUPS = ["amqp:all-filter", "amqp:any-filter", "amqp:not-filter", "apache.org:or-filter:list",
          "apache.org:and-filter:list", "apache.org:not-filter:list"]


def _group(name: str, members: list[Described]) -> Described:
    return _d(name, members[:1] if name == "apache.org:not-filter:list" else members)


FILTERS: st.SearchStrategy[Described] = st.recursive(
    LEAVES,
    lambda inner: st.builds(_group, st.sampled_from(GROUPS), st.lists(inner, min_size=1,
                                                                       max_size=4)),
    max_leaves=12,
)

FILTER_SETS = st.dictionaries(st.sampled_from(["f1", "f2", "f3", "jms-selector"]), FILTERS,
                              max_size=3)


def _section(keys: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.dictionaries(keys, VALUES, max_size=4))


MESSAGES = st.builds(
    DictMessageView,
    header=_section(st.sampled_from([f for f, _ in HEADER_FIELDS])),
    delivery_annotations=_section(st.sampled_from(KEYS).map(symbol)),
    message_annotations=_section(st.sampled_from(KEYS).map(symbol)),
    properties=_section(st.sampled_from([f for f, _ in PROPERTIES_FIELDS])),
    application_properties=_section(st.sampled_from(KEYS)),
    footer=_section(st.sampled_from(KEYS).map(symbol)),
)


def _decode_or_refuse(value: Any) -> FilterSet | None:
    try:
        return decode_filter_set(value, LIMITS)
    except FilterError:
        return None  # e.g. a random reference string that is an unknown '&' modifier


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FILTER_SETS, st.lists(MESSAGES, min_size=1, max_size=3),
       st.sampled_from([None, "c1"]), st.sampled_from([None, "c1", "c2"]))
def test_random_filter_sets_never_raise_from_matches(
    filters: dict[str, Described], messages: list[DictMessageView], origin: Any, consumer: Any,
) -> None:
    filter_set = _decode_or_refuse(filters)
    if filter_set is None:
        return
    ctx = EvaluationContext(origin=origin, consumer=consumer, explain=True)
    for message in messages:
        assert filter_set.matches(message, ctx) in (True, False)
        outcome = filter_set.evaluate(message, ctx)
        assert outcome.result in (True, False, None)
        assert outcome.result is not None or outcome.reason
    stats = filter_set.stats
    assert stats.evaluations == 2 * len(messages)
    assert stats.matches + stats.nulls <= stats.evaluations
    assert stats.errors == 0  # the built-in filters catch nothing unexpected on valid input


@settings(max_examples=150, deadline=None)
@given(FILTER_SETS)
def test_valid_sets_survive_a_trip_through_proton_data(filters: dict[str, Described]) -> None:
    filter_set = _decode_or_refuse(filters)
    if not filter_set:
        return  # (an empty set echoes no filter at all)
    data = filter_set.as_data()
    from_data = decode_filter_set(data, LIMITS)
    assert from_data.as_data().encode() == data.encode()
    assert list(from_data) == list(filter_set)


JUNK_DESCRIPTORS = st.one_of(
    st.sampled_from([symbol(t.name) for t in FILTER_TYPES]),
    st.sampled_from([ulong(t.code) for t in FILTER_TYPES if t.code is not None]),
    st.sampled_from([symbol("ex:nope"), ulong(0x999), True, None, 1.5]),
)
JUNK: st.SearchStrategy[Any] = st.recursive(
    st.one_of(SCALARS, st.text(max_size=5)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), _ints(), st.sampled_from(KEYS).map(
            symbol)), inner, max_size=3),
        st.builds(Described, JUNK_DESCRIPTORS, inner),
    ),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.one_of(st.sampled_from(["k1", "k2"]), st.integers(0, 3)), JUNK,
                       max_size=3),
       MESSAGES)
def test_malformed_filter_sets_raise_only_filter_error(filters: dict[Any, Any],
                                                       message: DictMessageView) -> None:
    try:
        filter_set = decode_filter_set(filters, LIMITS)
    except FilterError as error:
        assert error.key is not None or len(filters) == 0 or "filter set" in error.reason
        return
    assert filter_set.matches(message, EvaluationContext()) in (True, False)
