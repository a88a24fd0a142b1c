"""Spec §3 group filters and the Apache logic filters (apache-filters §3): truth tables,
NULL propagation through nesting, decoding errors and limits."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Data, Described, symbol

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import EvaluationContext, Filter
from filtex_proton.filters.group import GroupFilter, GroupOp
from filtex_proton.filters.registry import decode_filter
from filtex_proton.limits import Limits

from .support import Exploding, Fixed, Slow, described, evaluate

T, F, N = True, False, None
ALL, ANY, NOT = "amqp:all-filter", "amqp:any-filter", "amqp:not-filter"
OR, AND, ANOT = "apache.org:or-filter:list", "apache.org:and-filter:list", \
    "apache.org:not-filter:list"
TRUE = described("amqp:true-filter", True)
FALSE = described("amqp:false-filter", True)


def group(op: GroupOp, *members: Filter) -> GroupFilter:
    return GroupFilter(symbol("test:group"), [], "test:group", op, members)


def run(filter_: Filter, ctx: EvaluationContext | None = None) -> bool | None:
    return filter_.evaluate(DictMessageView(), ctx or EvaluationContext())


TRUTH: list[tuple[str, GroupOp, tuple[bool | None, ...], bool | None]] = [
    ("§3.1 all: every member TRUE", GroupOp.ALL, (T, T), T),
    ("§3.1 all: one member FALSE", GroupOp.ALL, (T, F), F),
    ("§3.1 all: a single member", GroupOp.ALL, (F,), F),
    ("§3.2 any: one member TRUE", GroupOp.ANY, (F, T), T),
    ("§3.2 any: every member FALSE", GroupOp.ANY, (F, F), F),
    ("§3.3 not: no member TRUE", GroupOp.NONE, (F, F), T),
    ("§3.3 not: one member TRUE", GroupOp.NONE, (F, T), F),
    ("§3.3 not: a single TRUE member", GroupOp.NONE, (T,), F),
    ("§3 NULL: all(NULL, FALSE) is NULL, not FALSE", GroupOp.ALL, (N, F), N),
    ("§3 NULL: all(FALSE, NULL) is NULL", GroupOp.ALL, (F, N), N),
    ("§3 NULL: any(NULL, TRUE) is NULL, not TRUE", GroupOp.ANY, (N, T), N),
    ("§3 NULL: any(TRUE, NULL) is NULL", GroupOp.ANY, (T, N), N),
    ("§3 NULL: not(NULL) is NULL", GroupOp.NONE, (N,), N),
    ("§3 NULL: not(TRUE, NULL) is NULL", GroupOp.NONE, (T, N), N),
]


@pytest.mark.parametrize(("op", "members", "expected"),
                         [pytest.param(o, m, e, id=i) for i, o, m, e in TRUTH])
def test_truth_tables(op: GroupOp, members: tuple[bool | None, ...],
                      expected: bool | None) -> None:
    assert run(group(op, *(Fixed(m) for m in members))) is expected


NESTED: list[tuple[str, Any, bool | None]] = [
    ("§3 NULL propagates: all(any(not(NULL)), TRUE)",
     lambda: group(GroupOp.ALL, group(GroupOp.ANY, group(GroupOp.NONE, Fixed(N))), Fixed(T)), N),
    ("§3 NULL propagates: any(TRUE, all(TRUE, any(FALSE, NULL)))",
     lambda: group(GroupOp.ANY, Fixed(T),
                   group(GroupOp.ALL, Fixed(T), group(GroupOp.ANY, Fixed(F), Fixed(N)))), N),
    ("§3 NULL propagates: not(all(NULL)) is NULL, not TRUE",
     lambda: group(GroupOp.NONE, group(GroupOp.ALL, Fixed(N))), N),
    ("§3 nesting without NULL: not(any(FALSE, all(TRUE, FALSE)))",
     lambda: group(GroupOp.NONE, group(GroupOp.ANY, Fixed(F),
                                       group(GroupOp.ALL, Fixed(T), Fixed(F)))), T),
    ("§3 nesting without NULL: all(any(FALSE, TRUE), not(FALSE))",
     lambda: group(GroupOp.ALL, group(GroupOp.ANY, Fixed(F), Fixed(T)),
                   group(GroupOp.NONE, Fixed(F))), T),
    ("§3 an evaluation error in a nested member is NULL for every enclosing group",
     lambda: group(GroupOp.ANY, Fixed(T), group(GroupOp.ALL, Exploding())), N),
]


@pytest.mark.parametrize(("build", "expected"),
                         [pytest.param(b, e, id=i) for i, b, e in NESTED])
def test_nested_null_propagation(build: Any, expected: bool | None) -> None:
    assert run(build()) is expected


def test_first_failing_filter_gives_the_reason() -> None:
    first, second = Fixed(N), Fixed(N)
    ctx = EvaluationContext()
    assert run(group(GroupOp.ANY, Fixed(F), group(GroupOp.ALL, first), second), ctx) is None
    assert ctx.reason == f"fixed NULL {id(first)}"
    assert second.calls == 0  # NULL decides: nothing after it is evaluated


def test_group_evaluates_every_member_until_null() -> None:
    # any() must not stop at TRUE: a later NULL would make it NULL (§3).
    later = Fixed(F)
    assert run(group(GroupOp.ANY, Fixed(T), later)) is True
    assert later.calls == 1


DECODED: list[tuple[str, Described, bool | None]] = [
    ("§3.1 all-filter decoded", described(ALL, [TRUE, TRUE]), T),
    ("§3.1 all-filter decoded, numeric descriptor", described(0x100, [TRUE, FALSE]), F),
    ("§3.2 any-filter decoded", described(ANY, [FALSE, TRUE]), T),
    ("§3.2 any-filter decoded, numeric descriptor", described(0x101, [FALSE, FALSE]), F),
    ("§3.3 not-filter decoded", described(NOT, [FALSE, FALSE]), T),
    ("§3.3 not-filter decoded, numeric descriptor", described(0x102, [FALSE, TRUE]), F),
    ("apache §3.1 or-filter", described(OR, [FALSE, TRUE]), T),
    ("apache §3.1 or-filter, numeric descriptor", described(0x0000468C00000005, [FALSE]), F),
    ("apache §3.2 and-filter", described(AND, [TRUE, TRUE]), T),
    ("apache §3.2 and-filter, numeric descriptor", described(0x0000468C00000006, [TRUE, FALSE]),
     F),
    ("apache §3.3 not-filter negates", described(ANOT, [FALSE]), T),
    ("apache §3.3 not-filter, numeric descriptor", described(0x0000468C00000007, [TRUE]), F),
    ("§3 groups hold any filter type, groups included",
     described(ALL, [described(ANY, [FALSE, described(OR, [TRUE])]),
                     described(ANOT, [described(NOT, [TRUE])])]), T),
    ("§3 a NULL SQL member makes the group NULL: any(NULL, TRUE)",
     described(ANY, [described("amqp:sql-filter", "missing = 1"), TRUE]), N),
    ("apache §3 the Apache or-filter propagates NULL like §3",
     described(OR, [TRUE, described("amqp:sql-filter", "missing = 1")]), N),
]


@pytest.mark.parametrize(("value", "expected"),
                         [pytest.param(v, e, id=i) for i, v, e in DECODED])
def test_decoded_groups(value: Described, expected: bool | None) -> None:
    pytest.importorskip("filtex_proton.sql")
    assert evaluate(value) is expected


BAD: list[tuple[str, Described, str]] = [
    ("§3 empty all-filter is refused (one or more filters)", described(ALL, []), "is empty"),
    ("§3 empty any-filter is refused", described(ANY, []), "is empty"),
    ("§3 empty not-filter is refused", described(NOT, []), "is empty"),
    ("apache §3 empty or-filter is refused", described(OR, []), "is empty"),
    ("apache §3 empty and-filter is refused", described(AND, []), "is empty"),
    ("apache §3.3 not-filter needs exactly one filter, not none", described(ANOT, []),
     "exactly one filter"),
    ("apache §3.3 not-filter needs exactly one filter, not two", described(ANOT, [TRUE, TRUE]),
     "exactly one filter"),
    ("§3 a group is a list, not a map", described(ALL, {"a": TRUE}), "needs a list of filters"),
    ("§3 a group is a list, not a described filter", described(ANY, TRUE), "needs a list"),
    ("§3 members are described filters", described(ALL, [TRUE, True]),
     "member 2: expected a described filter, not a boolean"),
    ("§3 members with unknown descriptors", described(ANY, [described("ex:nope", 1)]),
     "member 1: unknown filter type ex:nope"),
    ("§3 errors inside nested members name the path",
     described(ALL, [TRUE, described(ANY, [described("amqp:header-filter", {"x": 1})])]),
     "amqp:all-filter member 2 > amqp:any-filter member 1: unknown header field 'x'"),
]


@pytest.mark.parametrize(("value", "text"), [pytest.param(v, t, id=i) for i, v, t in BAD])
def test_group_definitional_errors(value: Described, text: str) -> None:
    with pytest.raises(FilterError, match=text) as caught:
        decode_filter(value)
    assert not caught.value.limit


def _nested(depth: int, op: str = ALL) -> Described:
    value = TRUE
    for _ in range(depth):
        value = described(op, [value])
    return value


def test_depth_limit_allows_exactly_the_limit() -> None:
    limits = Limits(max_group_depth=5)
    assert evaluate(_nested(5), limits=limits) is True
    with pytest.raises(FilterError, match="max_group_depth") as caught:
        decode_filter(_nested(6), limits)
    assert caught.value.limit


@pytest.mark.parametrize("op", [ALL, NOT, OR, ANOT])
def test_10000_deep_nesting_is_refused_by_a_limit_not_recursion(op: str) -> None:
    with pytest.raises(FilterError) as caught:
        decode_filter(_nested(10_000, op))
    assert caught.value.limit


def test_10000_deep_nesting_within_generous_limits_decodes_and_evaluates_iteratively() -> None:
    limits = Limits(max_group_depth=20_000, max_property_entries=20_000)
    built = decode_filter(_nested(10_000, NOT), limits)
    assert built.evaluate(DictMessageView(), EvaluationContext()) is True  # even number of nots


def test_10000_deep_nesting_in_proton_data_is_refused() -> None:
    from filtex_proton.filterset import decode_filter_set

    data = Data()  # as proton fills link.remote_source.filter
    data.put_map()
    data.enter()
    data.put_symbol(symbol("deep"))
    for _ in range(10_000):
        data.put_described()
        data.enter()
        data.put_symbol(symbol(ALL))
        data.put_list()
        data.enter()
    data.put_bool(True)
    with pytest.raises(FilterError) as caught:
        decode_filter_set(data)
    assert caught.value.limit
    assert caught.value.key == "deep"


def test_group_members_limit() -> None:
    limits = Limits(max_group_members=3)
    assert evaluate(described(ANY, [FALSE, FALSE, TRUE]), limits=limits) is True
    with pytest.raises(FilterError, match="max_group_members") as caught:
        decode_filter(described(ANY, [FALSE] * 4), limits)
    assert caught.value.limit


def test_budget_is_checked_between_members() -> None:
    after = Fixed(T)
    ctx = EvaluationContext()
    ctx.begin(budget_ms=1)
    assert run(group(GroupOp.ALL, Slow(0.01), after), ctx) is None
    assert ctx.budget_exceeded
    assert after.calls == 0


def test_normalised_groups_use_symbolic_descriptors_throughout() -> None:
    received = described(0x101, [described(0x0000468C00000007, [described(0x110, True)])])
    built = decode_filter(received)
    assert built.normalised() == Described(symbol(ANY), [
        Described(symbol(ANOT), [Described(symbol("amqp:true-filter"), True)])])
    assert built.described() == received
