"""Hostile filter sets (spec §7.1): deep, wide and malformed, as proton.Data and as Python
values. Only FilterError comes out; limits refuse what is too big and are masked for the
client; an accepted set evaluates without raising and can be echoed on the attach."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import Connection, Data, Described, symbol, ulong

from filtex_proton.errors import FilterError
from filtex_proton.filters.base import EvaluationContext
from filtex_proton.filters.wire import max_nesting, write_data
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.limits import DEFAULT_LIMITS, Limits
from filtex_proton.plugin import FiltexPlugin

from .hostile_support import assert_masked, fuzz_target, fuzz_views, refusal

D = DEFAULT_LIMITS
GROUPS = [
    symbol("amqp:all-filter"), symbol("amqp:any-filter"), symbol("amqp:not-filter"),
    ulong(0x100), ulong(0x102), symbol("apache.org:or-filter:list"),
    symbol("apache.org:and-filter:list"), symbol("apache.org:not-filter:list"),
    ulong(0x468C00000007),
]
TRUE = Described(symbol("amqp:true-filter"), True)


def as_data(value: Any) -> Data:
    """``value`` in a proton.Data, as it would arrive: encoded to bytes and decoded again."""
    data = Data()
    write_data(value, data)
    wire = Data()
    wire.decode(data.encode())
    return wire


def deep_group_data(depth: int, group: Any = "amqp:not-filter") -> Data:
    """A filter set whose one filter is groups nested ``depth`` deep, put node by node."""
    data = Data()
    data.put_map()
    data.enter()
    data.put_symbol(symbol("deep"))
    for _ in range(depth):
        data.put_described()
        data.enter()
        if isinstance(group, str):
            data.put_symbol(symbol(group))
        else:
            data.put_ulong(group)
        data.put_list()
        data.enter()
    data.put_described()
    data.enter()
    data.put_symbol(symbol("amqp:true-filter"))
    data.put_bool(True)
    data.exit()
    for _ in range(depth):
        data.exit()
        data.exit()
    data.exit()
    wire = Data()
    wire.decode(data.encode())
    return wire


def check_accepted(filter_set: FilterSet) -> None:
    for message in fuzz_views.fixed_views():
        assert filter_set.matches(message, EvaluationContext(origin=1, consumer=2)) in (
            True, False)
    filter_set.as_data()
    filter_set.normalised()


# ---------------------------------------------------------------------------- deep


@pytest.mark.parametrize("group", GROUPS, ids=str)
def test_groups_10000_deep_as_python_values_are_refused_by_a_limit(group: Any) -> None:
    value = {symbol("deep"): fuzz_views.deep_group(10_000, group)}
    assert_masked(refusal(lambda: decode_filter_set(value)))
    assert_masked(refusal(lambda: FiltexPlugin().compile(value)))


@pytest.mark.parametrize("group", ["amqp:any-filter", "apache.org:not-filter:list", 0x101])
def test_groups_10000_deep_as_proton_data_are_refused_by_a_limit(group: Any) -> None:
    data = deep_group_data(10_000, group)
    assert_masked(refusal(lambda: decode_filter_set(data)))
    assert_masked(refusal(lambda: FiltexPlugin().compile(data)))


@pytest.mark.parametrize("source", ["python", "data"])
def test_group_depth_limit_boundary(source: str) -> None:
    def decode(depth: int) -> FilterSet:
        value = {symbol("g"): fuzz_views.deep_group(depth, symbol("amqp:not-filter"))}
        return decode_filter_set(as_data(value) if source == "data" else value)

    accepted = decode(D.max_group_depth)
    check_accepted(accepted)
    # an even number of not-filters around TRUE: TRUE
    assert accepted.matches(fuzz_views.fixed_views()[2]) is (D.max_group_depth % 2 == 0)
    error = refusal(lambda: decode(D.max_group_depth + 1))
    assert_masked(error)
    assert "max_group_depth" in error.reason


@pytest.mark.parametrize("source", ["python", "data"])
def test_property_values_10000_deep_are_refused_by_a_limit(source: str) -> None:
    value = {symbol("p"): Described(symbol("amqp:application-properties-filter"),
                                    {"a": fuzz_views.deep_list(10_000)})}
    assert_masked(refusal(lambda: decode_filter_set(as_data(value) if source == "data"
                                                    else value)))


def test_deep_value_in_a_filter_name_is_refused() -> None:
    data = Data()
    data.put_map()
    data.enter()
    write_data(fuzz_views.deep_list(10_000), data)
    write_data(TRUE, data)
    data.exit()
    error = refusal(lambda: decode_filter_set(data))
    assert error.limit


def test_deep_sql_inside_deep_groups() -> None:
    """A group at the depth limit holding SQL at its own depth limit: accepted, evaluates."""
    sql = Described(symbol("amqp:sql-filter"), "NOT " * (D.max_sql_depth - 3) + "a = 1")
    value: Any = sql
    for _ in range(D.max_group_depth):
        value = Described(symbol("amqp:all-filter"), [value])
    filter_set = decode_filter_set({symbol("x"): value})
    check_accepted(filter_set)


# ---------------------------------------------------------------------------- wide


def test_filter_set_of_10000_entries_is_refused_by_a_limit() -> None:
    value = {symbol(f"f{i}"): TRUE for i in range(10_000)}
    assert_masked(refusal(lambda: decode_filter_set(value)), "f9999")
    assert_masked(refusal(lambda: decode_filter_set(as_data(value))), "f9999")


def test_group_of_100000_members_is_refused_by_a_limit() -> None:
    value = {symbol("wide"): Described(symbol("amqp:any-filter"), [TRUE] * 100_000)}
    assert_masked(refusal(lambda: decode_filter_set(value)))
    # a proton.Data holds at most 65,535 nodes (three per member here): 20,000 members
    wide = {symbol("wide"): Described(symbol("amqp:any-filter"), [TRUE] * 20_000)}
    assert_masked(refusal(lambda: decode_filter_set(as_data(wide))))


class CountingData(Data):  # type: ignore[misc]
    """A proton.Data that counts the scalars read out of it (the cost of a wide value)."""

    def __init__(self, wire: Data) -> None:
        super().__init__()
        self.decode(wire.encode())
        self.reads = 0

    def get_object(self) -> Any:
        self.reads += 1
        return super().get_object()


@pytest.mark.parametrize("members", [max_nesting(D).width + 1, 20_000])
def test_a_wide_group_is_refused_before_its_members_are_read(members: int) -> None:
    wide = CountingData(as_data({symbol("wide"): Described(symbol("amqp:any-filter"),
                                                          [TRUE] * members)}))
    error = refusal(lambda: decode_filter_set(wide))
    assert_masked(error)
    assert f"a container of {members} members" in error.render()
    assert wide.reads <= 2  # the key, and the group's descriptor: no member


def test_a_property_map_near_protons_node_maximum_is_refused_unread() -> None:
    entries: dict[Any, Any] = {f"k{i}": i for i in range(30_000)}  # 60,000+ nodes
    wide = CountingData(as_data(
        {symbol("p"): Described(symbol("amqp:application-properties-filter"), entries)}))
    error = refusal(lambda: decode_filter_set(wide))
    assert_masked(error, "k29999")
    assert "a container of 60000 members" in error.render()
    assert wide.reads <= 2


def test_the_widest_containers_the_limits_allow_are_read() -> None:
    widest = {
        symbol("g"): Described(symbol("amqp:any-filter"), [TRUE] * D.max_group_members),
        symbol("p"): Described(symbol("amqp:application-properties-filter"),
                               {f"k{i}": i for i in range(D.max_property_entries)}),
    }
    assert len(decode_filter_set(as_data(widest))) == 2
    roomy = Limits(max_group_members=5_000)  # the width follows the limits
    group = {symbol("g"): Described(symbol("amqp:all-filter"), [TRUE] * 5_000)}
    assert len(decode_filter_set(as_data(group), roomy)) == 1
    assert_masked(refusal(lambda: decode_filter_set(as_data(group))))


def test_property_filter_of_100000_entries_is_refused_by_a_limit() -> None:
    entries: dict[Any, Any] = {f"k{i}": i for i in range(100_000)}
    value = {symbol("p"): Described(symbol("amqp:application-properties-filter"), entries)}
    assert_masked(refusal(lambda: decode_filter_set(value)), "k99999")
    headers = {symbol("h"): Described(symbol("apache.org:legacy-amqp-headers-binding:map"),
                                      entries)}
    assert_masked(refusal(lambda: decode_filter_set(headers)))


def test_long_topic_binding_is_refused_by_a_limit() -> None:
    pattern = "a." * 50_000 + "#"
    value = {symbol("t"): Described(symbol("apache.org:legacy-amqp-topic-binding:string"),
                                    pattern)}
    assert_masked(refusal(lambda: decode_filter_set(value)), pattern[:40])


# ---------------------------------------------------------------------------- malformed


def map8(*elements: bytes) -> bytes:
    body = b"".join(elements)
    return b"\xc1" + bytes([len(body) + 1, len(elements)]) + body


def sym8(raw: bytes) -> bytes:
    return b"\xa3" + bytes([len(raw)]) + raw


def str8(raw: bytes) -> bytes:
    return b"\xa1" + bytes([len(raw)]) + raw


def filter_set_wire(value: bytes, descriptor: bytes = b"amqp:application-properties-filter",
                    name: bytes = b"k") -> bytes:
    return map8(sym8(name), b"\x00" + sym8(descriptor) + value)


@pytest.mark.parametrize("wire", [
    pytest.param(filter_set_wire(b"\x41", b"amqp:true-filter", b"\xff"),
                 id="non-ASCII symbol name"),
    pytest.param(filter_set_wire(str8(b"a = \xff\xfe"), b"amqp:sql-filter"),
                 id="SQL text not UTF-8"),
    pytest.param(filter_set_wire(map8(str8(b"a"), str8(b"\xc3"))), id="value not UTF-8"),
    pytest.param(filter_set_wire(map8(sym8(b"\xe9"), b"\x40")), id="non-ASCII symbol key"),
    pytest.param(filter_set_wire(map8(str8(b"a"), b"\x73\xff\xff\xff\xff")),
                 id="char beyond U+10FFFF"),
    pytest.param(filter_set_wire(map8(str8(b"a"), b"\x73\x00\x11\x00\x00")),
                 id="char U+110000"),
])
def test_invalid_strings_from_the_wire_are_filter_errors(wire: bytes) -> None:
    """proton's Data.decode does not check UTF-8, ASCII or char ranges: the decoder must."""
    data = Data()
    data.decode(wire)
    error = refusal(lambda: decode_filter_set(data))
    assert error.limit is False
    refusal(lambda: FiltexPlugin().compile(data))


@pytest.mark.parametrize("value", [
    pytest.param({"\u00fc": TRUE}, id="non-ASCII filter name"),
    pytest.param({symbol("\u2603"): TRUE}, id="non-ASCII symbol name"),
    pytest.param({"\udcff": TRUE}, id="lone surrogate name"),
    pytest.param({"k": Described(symbol("amqp:application-properties-filter"), {"a": "\udcff"})},
                 id="lone surrogate value"),
    pytest.param({"k": Described(symbol("amqp:application-properties-filter"),
                                 {"a": symbol("\u00e9")})}, id="non-ASCII symbol value"),
    pytest.param({"k": Described(symbol("amqp:sql-filter"), "a = '\udcff'")},
                 id="lone surrogate in SQL"),
])
def test_values_proton_cannot_encode_are_refused(value: dict[Any, Any]) -> None:
    """What is accepted must be echoable on the attach (``as_data``)."""
    try:
        filter_set = decode_filter_set(value)
    except FilterError:
        return
    filter_set.as_data()


@pytest.mark.parametrize("value", [
    pytest.param(None, id="null"), pytest.param([TRUE], id="list"),
    pytest.param({1: TRUE}, id="integer name"), pytest.param({"k": "a = 1"}, id="not described"),
    pytest.param({"k": Described(symbol("amqp:sql-filter"), 7)}, id="SQL not a string"),
    pytest.param({"k": Described(None, None)}, id="null descriptor"),
    pytest.param({"k": Described(symbol("amqp:not-filter"), [])}, id="empty group"),
    pytest.param({"k": Described(symbol("amqp:header-filter"), {"priority": "high"})},
                 id="wrong header type"),
    pytest.param({"k": Described(symbol("amqp:properties-filter"), {"&x": "y"})},
                 id="unknown properties field"),
    pytest.param({"k": Described(symbol("amqp:application-properties-filter"),
                                 {"a": "&z:bad"})}, id="unknown modifier"),
])
def test_malformed_filter_sets_are_filter_errors(value: Any) -> None:
    try:
        filter_set = decode_filter_set(value)
    except FilterError as error:
        assert error.limit is False
    else:
        assert value is None
        check_accepted(filter_set)


def test_client_chosen_names_are_clipped_in_texts_and_counters() -> None:
    """A client cannot flood the log with its own 100 KB names, nor grow the refusal
    counters without bound with ever new descriptors (§7.2)."""
    plugin = FiltexPlugin(logger=logging.getLogger("hostile.silent"))
    plugin.logger.disabled = True
    session = Connection().session()
    for i in range(200):
        name = f"k{i}" + "n" * 100_000
        try:
            plugin.compile({name: Described(symbol(f"x:{i}" + "d" * 100_000), True)})
        except FilterError as error:
            assert len(error.render()) < 1_000
            assert len(error.client_text()) < 1_000
            plugin.refuse(session.sender(f"link{i}"), error)
        else:  # pragma: no cover
            pytest.fail("an unknown filter type was accepted")
    assert plugin.stats.refused == 200
    assert len(plugin.stats.refusals) == 1, list(plugin.stats.refusals)[:3]


# ---------------------------------------------------------------------------- fuzzing

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**64 - 1).map(ulong), st.floats(allow_nan=True),
    st.text(max_size=12), st.text(alphabet="abc&p:s", max_size=8).map(symbol),
    st.binary(max_size=8), st.sampled_from(fuzz_views.SQL_SEEDS),
)


def values(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.text(max_size=6), children, max_size=4),
            st.builds(Described, st.sampled_from(fuzz_views.DESCRIPTORS), children),
        )

    return st.recursive(leaves, extend, max_leaves=24)


FILTER_SETS = st.dictionaries(
    st.one_of(st.text(max_size=8), st.text(alphabet="xyz", max_size=4).map(symbol)),
    st.builds(Described, st.sampled_from(fuzz_views.DESCRIPTORS), values(SCALARS)),
    max_size=4,
)


def decode_both_ways(value: Any, decode: Callable[[Any], FilterSet]) -> None:
    try:
        filter_set = decode(value)
    except FilterError as error:
        if error.limit:
            assert_masked(error)
        return
    check_accepted(filter_set)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=FILTER_SETS)
def test_random_filter_sets_as_python_values(value: dict[Any, Any]) -> None:
    decode_both_ways(value, decode_filter_set)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=FILTER_SETS)
def test_random_data_trees(value: dict[Any, Any]) -> None:
    try:
        data = as_data(value)
    except Exception:  # hypothesis made a value proton cannot encode: nothing to decode
        return
    decode_both_ways(data, decode_filter_set)
    decode_both_ways(data, FiltexPlugin(limits=Limits(max_group_depth=2)).compile)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decisions=st.binary(min_size=1, max_size=200), through_data=st.booleans())
def test_structured_filter_sets_from_the_fuzz_target(decisions: bytes,
                                                     through_data: bool) -> None:
    """The fuzz target's structured mode: well-formed AMQP, ill-formed filters."""
    fuzz_target("fuzz_filter_set").structured(decisions, through_data=through_data)
