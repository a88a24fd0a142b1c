"""Pushdown of filter sets into JMS selectors (docs/SEMANTICS.md, "Pushdown to an upstream broker").

Table tests say what is translated and what stays local, with the spec section; the
hypothesis tests check the two promises on random filter sets and messages, with our own
JMS selector dialect standing in for the upstream: the selector is TRUE for every message
the set matches, and when the translation says it is exact the two agree on every message.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import Described, float32, symbol, timestamp, ubyte

from filtex_proton.amqp.view import DictMessageView, Section
from filtex_proton.filters.property import PropertyFilter
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.pushdown import Pushdown, is_jms_identifier, pushdown
from filtex_proton.sql import AMQP_SQL, ast
from filtex_proton.sql.printer import to_sql

from .sql.strategies import headers, printable, texts, values

SELECTOR = "apache.org:selector-filter:string"


def _d(descriptor: str, value: Any) -> Described:
    return Described(symbol(descriptor), value)


def _sql(text: str) -> Described:
    return _d("amqp:sql-filter", text)


def _push(**filters: Described) -> Pushdown:
    return pushdown(decode_filter_set(filters))


# ============================================================================ translated

TRANSLATED: list[tuple[str, dict[str, Described], str, bool]] = [
    # (spec section and what, filter set, selector, exact)
    ("§6.4.2.3 string =", {"s": _sql("region = 'EU'")}, "region = 'EU'", True),
    ("§6.4.2.3 string <>", {"s": _sql("region <> 'EU'")}, "region <> 'EU'", True),
    ("§6.4.2.3 string quote doubled", {"s": _sql("o = 'O''Neil'")}, "o = 'O''Neil'", True),
    ("§6.4.2.3 boolean", {"s": _sql("vip = TRUE")}, "vip = TRUE", True),
    ("§6.4.2.3 integer = (decimals round in JMS)", {"s": _sql("n = 5")}, "n = 5", False),
    ("§6.4.2.3 integer > relaxed to >=", {"s": _sql("amount > 1000")}, "amount >= 1000", False),
    ("§6.4.2.3 literal first, flipped", {"s": _sql("1000 < amount")}, "amount >= 1000", False),
    ("§6.4.2.3 negative integer", {"s": _sql("t <= -3")}, "t <= -3", False),
    ("§6.4.2.3 header priority, > as >=", {"s": _sql("h.priority > 4")}, "JMSPriority >= 5",
     True),
    ("§6.4.2.3 header priority 9 and above", {"s": _sql("h.priority >= 9")},
     "JMSPriority >= 9", True),
    ("§6.4.2.3 header durable", {"s": _sql("header.durable = TRUE")},
     "JMSDeliveryMode = 'PERSISTENT'", True),
    ("§6.4.3.1 IS NULL", {"s": _sql("a IS NULL")}, "a IS NULL", True),
    ("§6.4.3.1 IS NOT NULL", {"s": _sql("a.a IS NOT NULL")}, "a IS NOT NULL", True),
    ("§6.4.3.2 LIKE with ESCAPE", {"s": _sql("code LIKE 'A!_%' ESCAPE '!'")},
     "code LIKE 'A!_%' ESCAPE '!'", True),
    ("§6.4.3.2 NOT LIKE", {"s": _sql("code NOT LIKE 'x%'")}, "code NOT LIKE 'x%'", True),
    ("§6.4.3.3 IN strings", {"s": _sql("c IN ('a', 'b')")}, "c IN ('a', 'b')", True),
    ("§6.4.3.3 NOT IN (JMS: FALSE for non-strings)", {"s": _sql("c NOT IN ('a')")},
     "c NOT IN ('a')", False),
    ("JMS §3.8.1.2 BETWEEN as two comparisons", {"s": _sql("n BETWEEN 1 AND 5")},
     "n >= 1 AND n <= 5", False),
    ("§6.4.2.1 NOT flips polarity, bracketed for ActiveMQ", {"s": _sql("NOT (n > 5)")},
     "NOT (n > 5)", False),
    ("§6.4.2.2 OR", {"s": _sql("a = 'x' OR h.priority = 8")}, "a = 'x' OR JMSPriority = 8", True),
    ("§6.4.2.2 AND keeps what translates", {"s": _sql("a = 'x' AND p.subject = 'y'")},
     "a = 'x'", False),
    ("§6.4.2.2 NOT of OR drops what does not translate",
     {"s": _sql("NOT (a = 'x' OR p.subject = 'y')")}, "NOT (a = 'x')", False),
    ("apache-filters §2.2 JMS selector unchanged", {"j": _d(SELECTOR, "even = TRUE")},
     "even = TRUE", True),
    ("§4.1 application-properties string", {"p": _d("amqp:application-properties-filter",
                                                   {"region": "EU"})}, "region = 'EU'", False),
    ("§4.1.1 &p: prefix as LIKE", {"p": _d("amqp:application-properties-filter",
                                          {"code": "&p:A_1%"})},
     "code LIKE 'A!_1!%%' ESCAPE '!'", False),
    ("§4.1.1 &s: suffix as LIKE", {"p": _d("amqp:application-properties-filter",
                                          {"code": "&s:!x"})}, "code LIKE '%!!x' ESCAPE '!'",
     False),
    ("§4.1.1 && escape", {"p": _d("amqp:application-properties-filter", {"code": "&&p:"})},
     "code = '&p:'", False),
    ("§4.1.1 NULL reference matches all", {"p": _d("amqp:application-properties-filter",
                                                  {"a": None, "b": True})}, "b = TRUE", False),
    ("§4.2 header priority and durable", {"h": _d("amqp:header-filter",
                                                 {"priority": ubyte(7), "durable": False})},
     "JMSPriority = 7 AND JMSDeliveryMode = 'NON_PERSISTENT'", True),
    ("§5.2 false-filter", {"f": _d("amqp:false-filter", False)}, "1=0", True),
    ("§3.1 all-filter", {"g": _d("amqp:all-filter", [_sql("a = 'x'"), _sql("b = 'y'")])},
     "a = 'x' AND b = 'y'", True),
    ("§3.2 any-filter (a NULL member makes it NULL)",
     {"g": _d("amqp:any-filter", [_sql("a = 'x'"), _sql("b = 'y'")])}, "a = 'x' OR b = 'y'",
     False),
    ("§3.3 not-filter", {"g": _d("amqp:not-filter", [_sql("a IS NULL"), _sql("b IS NULL")])},
     "NOT (a IS NULL OR b IS NULL)", True),
    ("§2.3 the set is a conjunction", {"j": _d(SELECTOR, "x = 1 OR y = 2"),
                                      "s": _sql("a = 'x'"), "t": _d("amqp:true-filter", True)},
     "(x = 1 OR y = 2) AND a = 'x'", True),
]


@pytest.mark.parametrize(("case", "filters", "selector", "exact"), TRANSLATED,
                         ids=[case[0] for case in TRANSLATED])
def test_translated(case: str, filters: dict[str, Described], selector: str,
                    exact: bool) -> None:
    result = pushdown(decode_filter_set(filters))
    assert result.selector == selector
    assert result.exact is exact
    assert result.pushed and set(result.pushed) <= set(filters)
    assert list(result.residual) == list(filters)  # the whole set is still evaluated locally


# ============================================================================ kept local

LOCAL: list[tuple[str, Described, str]] = [
    # (spec section and why, filter, what the reason names)
    ("apache-filters §2.1 no-local needs the connection", _d("apache.org:no-local-filter:list",
                                                            []), "no-local"),
    ("apache-filters §1.2 legacy topic binding", _d(
        "apache.org:legacy-amqp-topic-binding:string", "a.*"), "topic-binding"),
    ("§6.4.4.4 p.subject: JMSType differs between upstreams", _sql("p.subject = 'x'"),
     "p.subject"),
    ("§6.4.2.3 string ordering: JMS orders numbers only", _sql("a > 'x'"), "a > 'x'"),
    ("§6.3.2 ISO 8601 text equals a timestamp", _sql("a = '2020-01-01T00:00:00Z'"), "2020"),
    ("§6.4.4.2 decimal literal: JMS has no decimals", _sql("a = 1.5"), "1.5"),
    ("§6.4.4.2 double literal: Java widens longs", _sql("a = 1.5E0"), "a ="),
    ("§6.4.4.2 binary literal", _sql("a = 0x1F"), "a ="),
    ("§6.4.4.2 integer beyond 2**53", _sql(f"a = {2**53 + 1}"), "a ="),
    ("§6.4.2.3 integer <>: a decimal may round onto it", _sql("a <> 5"), "a <> 5"),
    ("§6.4.3.4 EXISTS: presence is not IS NOT NULL", _sql("EXISTS(a)"), "EXISTS"),
    ("§6.4.4.1 arithmetic", _sql("a + 1 = 2"), "a + 1"),
    ("§6.4.3.2 escape beyond a Java char", _sql("a LIKE 'x' ESCAPE '\U0001d538'"), "LIKE"),
    ("§6.4.3.3 IN with numbers (JMS: strings only)", _sql("a IN (1, 2)"), "IN"),
    ("§6.4.4.5 map entry", _sql("a.k.x = 'y'"), "k"),
    ("§6.4.2.2 OR needs both sides", _sql("a = 'x' OR p.subject = 'y'"), "p.subject"),
    ("JMS §3.8.1.1 JMS* names are headers", _d("amqp:application-properties-filter",
                                               {"JMSType": "x"}), "JMSType"),
    ("Artemis AMQ* names are headers", _d("amqp:application-properties-filter",
                                          {"AMQPriority": 1}), "AMQPriority"),
    ("JMS §3.8.1.1 identifiers", _d("amqp:application-properties-filter", {"x-y": "a"}),
     "x-y"),
    ("§4.1 decimal reference", _d("amqp:application-properties-filter",
                                  {"a": Decimal("1.5")}), "decimal"),
    ("§4.1.1 float32 reference rounding", _d("amqp:application-properties-filter",
                                             {"a": float32(0.1)}), "float"),
    ("§4 absent is FALSE: no negation", _d("amqp:not-filter", [
        _d("amqp:application-properties-filter", {"a": "x"})]), "negation"),
    ("§4 message annotations", _d("amqp:message-annotations-filter", {"x-opt-a": "x"}),
     "section"),
    ("§4.2 header ttl", _d("amqp:header-filter", {"ttl": 5}), "ttl"),
    ("§4.2.1 priority 9: Artemis reads 10-255 as 9", _d("amqp:header-filter",
                                                        {"priority": ubyte(9)}), "priority"),
    ("§6.4.2.3 priority <= 9: Artemis reads 10-255 as 9", _sql("h.priority <= 9"), "priority"),
    ("§6.4.2.3 priority beyond JMS's 0-9", _sql("h.priority > 20"), "priority"),
    ("§3.2 any-filter with a local member", _d("amqp:any-filter", [
        _sql("a = 'x'"), _d("apache.org:no-local-filter:list", [])]), "no-local"),
]


@pytest.mark.parametrize(("case", "item", "named"), LOCAL, ids=[case[0] for case in LOCAL])
def test_kept_local(case: str, item: Described, named: str) -> None:
    result = _push(k=item)
    assert result.selector is None
    assert result.pushed == ()
    assert result.exact is False
    assert any(named in reason and reason.startswith("filter 'k'") for reason in result.reasons)


def test_true_filter_alone_pushes_nothing_and_is_exact() -> None:
    result = _push(t=_d("amqp:true-filter", True))
    assert (result.selector, result.exact, result.reasons) == (None, True, ())


def test_the_empty_set_pushes_nothing() -> None:
    result = pushdown(FilterSet())
    assert (result.selector, result.pushed, result.exact) == (None, (), True)


def test_a_selector_too_long_is_not_pushed() -> None:
    result = pushdown(decode_filter_set({"s": _sql("a = '" + "x" * 100 + "'")}), max_chars=50)
    assert result.selector is None
    assert "more than 50" in result.reasons[-1]


def test_only_the_translatable_filters_are_named_as_pushed() -> None:
    result = _push(a=_sql("a = 'x'"), n=_d("apache.org:no-local-filter:list", []),
                   b=_sql("EXISTS(b)"))
    assert result.selector == "a = 'x'"
    assert result.pushed == ("a",)
    assert len(result.reasons) == 2


def test_reasons_stay_terse_for_the_log() -> None:
    """§7.2: one attach must not write a log line per member of a hostile set."""
    filters = {f"n{i}": _d("apache.org:no-local-filter:list", []) for i in range(32)}
    result = pushdown(decode_filter_set(filters))
    assert len(result.reasons) == 16
    assert result.reasons[-2] == "... 17 more"
    assert result.reasons[-1].startswith("filter 'n31'")


def test_a_translation_failure_pushes_nothing_and_does_not_raise() -> None:
    # A filter object the decoder would never build (a reference of no known form) stands in
    # for a translation bug: the link must keep its upstream, without a selector.
    broken = PropertyFilter(symbol("amqp:application-properties-filter"), ["not", "a", "map"],
                            "amqp:application-properties-filter",
                            Section.APPLICATION_PROPERTIES, (), {}, (("k", object()),))
    result = pushdown(FilterSet({"ok": decode_filter_set({"s": _sql("a = 'x'")})["s"],
                                 "broken": broken}))
    assert result.selector is None and result.pushed == ()
    assert result.reasons[-1] == "filter 'broken': not translated (AttributeError)"


@pytest.mark.parametrize("op", ["=", "<>", ">", ">=", "<", "<="])
def test_priority_translations_survive_artemis_reading_10_to_255_as_9(op: str) -> None:
    jms = {"=": int.__eq__, "<>": int.__ne__, ">=": int.__ge__, "<=": int.__le__}
    pushed = 0
    for n in range(-2, 260):
        result = _push(s=_sql(f"h.priority {op} {n}"))
        if result.selector is None:
            continue
        pushed += 1
        _, jms_op, literal = result.selector.split()
        assert result.exact
        for priority in range(256):
            amqp = {"=": priority == n, "<>": priority != n, ">": priority > n,
                    ">=": priority >= n, "<": priority < n, "<=": priority <= n}[op]
            assert jms[jms_op](min(priority, 9), int(literal)) == amqp, (n, priority)
    assert pushed >= 9


@pytest.mark.parametrize(("name", "ok"), [
    ("a", True), ("_x$1", True), ("Order", True), ("order_id", True), ("1a", False),
    ("x-y", False), ("NOT", False), ("escape", False), ("JMSX", False), ("jmsType", False),
    ("AMQSize", False), ("é", False), ("", False),
])
def test_jms_identifiers(name: str, ok: bool) -> None:
    assert is_jms_identifier(name) is ok


# ============================================================================ exactness property

NAMES = ["a", "b", "c"]
_field = st.one_of(
    st.sampled_from(NAMES).map(lambda n: ast.Field(Section.APPLICATION_PROPERTIES, n)),
    st.sampled_from(["priority", "durable", "ttl"]).map(lambda n: ast.Field(Section.HEADER, n)),
    st.just(ast.Field(Section.PROPERTIES, "subject")),
)
_integers = st.one_of(st.integers(-3, 6),
                      st.sampled_from([255, 2**24 + 1, 2**53, 2**53 + 1, 2**63 - 1]))
# AMQP SQL strings hold no control characters (§6.4.4.2.5)
_sql_texts = texts.map(printable)
_literal = st.one_of(
    _integers, st.booleans(), _sql_texts, st.sampled_from(["a", "b", "2020-01-01"]),
    st.sampled_from([Decimal("1.5"), Decimal("1.0"), 1.0, 0.5]), st.none(),
).map(ast.Literal)
_signed = st.one_of(_literal, st.integers(1, 6).map(lambda n: ast.Unary("-", ast.Literal(n))))
_comparison = st.sampled_from(["=", "<>", "!=", ">", ">=", "<", "<="])
_strings = st.one_of(_sql_texts, st.sampled_from(["a", "b", ""])).map(ast.Literal)
_patterns = st.sampled_from([("a%", None), ("%b", None), ("_", None), ("a!%%", "!"),
                             ("%!_", "!"), ("", None)])


def _leaf() -> st.SearchStrategy[ast.Expr]:
    return st.one_of(
        st.builds(ast.Compare, _comparison, _field, _signed),
        st.builds(ast.Compare, _comparison, _signed, _field),
        st.builds(ast.IsNull, _field, negated=st.booleans()),
        st.builds(lambda f, p, neg: ast.Like(f, ast.Literal(p[0]),
                                             None if p[1] is None else ast.Literal(p[1]),
                                             negated=neg), _field, _patterns, st.booleans()),
        st.builds(ast.In, _field, st.lists(_strings, min_size=1, max_size=3).map(tuple),
                  negated=st.booleans()),
        st.builds(ast.Between, _field, _signed, _signed, negated=st.booleans()),
        st.builds(ast.Exists, _field),
        st.booleans().map(ast.Literal),
    )


def _tree(inner: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    some = st.lists(inner, min_size=2, max_size=3).map(tuple)
    return st.one_of(some.map(ast.And), some.map(ast.Or), st.builds(ast.Not, inner))


expressions = st.recursive(_leaf(), _tree, max_leaves=6).map(lambda e: to_sql(e, AMQP_SQL))
_references = st.one_of(
    texts.filter(lambda t: not t.startswith("&")),
    st.sampled_from(["&p:a", "&s:b", "&&a", "&p:", "a", "b"]), st.booleans(), _integers,
    st.sampled_from([1.0, float32(0.5), Decimal("1")]), st.none(),
)
_leaf_filters = st.one_of(
    expressions.map(_sql),
    expressions.map(_sql),
    st.sampled_from(["a = 'a'", "b > 2 OR c IS NULL", "NOT a LIKE 'a%'", "JMSPriority > 4",
                     "JMSDeliveryMode = 'PERSISTENT'"]).map(lambda t: _d(SELECTOR, t)),
    st.dictionaries(st.sampled_from([*NAMES, "x-y"]), _references, min_size=1, max_size=3)
    .map(lambda m: _d("amqp:application-properties-filter", m)),
    st.fixed_dictionaries({}, optional={"priority": st.integers(0, 9).map(ubyte),
                                        "durable": st.booleans()})
    .filter(bool).map(lambda m: _d("amqp:header-filter", m)),
    st.booleans().map(lambda b: _d("amqp:true-filter" if b else "amqp:false-filter", b)),
    st.just(_d("apache.org:no-local-filter:list", [])),
)
filters = st.recursive(_leaf_filters, lambda inner: st.one_of(
    st.builds(_d, st.sampled_from(["amqp:all-filter", "amqp:any-filter", "amqp:not-filter"]),
              st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda f: _d("apache.org:not-filter:list", [f]), inner),
), max_leaves=4)
filter_sets = st.dictionaries(st.sampled_from(["f", "g", "h"]), filters, min_size=1,
                              max_size=3).map(decode_filter_set)

# Decimals and timestamps a JMS broker sees as doubles and longs, next to integer literals.
_near = st.sampled_from([Decimal("1.00000000000000000001"), Decimal("0.99999999999999999999"),
                         Decimal("2.0"), Decimal("-3.000000000000000000001"), Decimal("NaN"),
                         float("nan"), 2.0**53, float32(2.0**24), timestamp(5), symbol("a"),
                         "a", "b", ""])
_app_values = st.one_of(values, _near)
messages = st.builds(
    DictMessageView,
    header=st.one_of(st.none(), headers),
    properties=st.one_of(st.none(), st.fixed_dictionaries({}, optional={"subject": texts})),
    application_properties=st.one_of(st.none(), st.dictionaries(
        st.sampled_from(NAMES), _app_values, max_size=3)),
)


def _selector_matches(selector: str, message: DictMessageView) -> bool:
    return decode_filter_set({"s": _d(SELECTOR, selector)}).matches(message)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filter_set=filter_sets, message_list=st.lists(messages, min_size=1, max_size=6))
def test_the_selector_is_implied_and_exact_when_it_says_so(
        filter_set: FilterSet, message_list: list[DictMessageView]) -> None:
    result = pushdown(filter_set)
    if result.selector is None:
        return
    for message in message_list:
        full = filter_set.matches(message)
        upstream = _selector_matches(result.selector, message)
        if full:
            assert upstream, f"{result.selector!r} drops a message {filter_set!r} matches"
        if result.exact:
            assert upstream == full, f"{result.selector!r} is not exact"


@settings(max_examples=300, deadline=None)
@given(filter_set=filter_sets)
def test_the_selector_always_parses_as_jms(filter_set: FilterSet) -> None:
    result = pushdown(filter_set)
    assert not any("does not parse" in reason for reason in result.reasons)


EDGE_VALUES: list[Any] = [
    -3, 0, 1, 2, 3, 2**53, 2**53 + 1, 1.0, 0.5, 2.0**53, float("nan"), float("inf"),
    float32(1.0), ubyte(1), Decimal("1"), Decimal("1.00000000000000000001"),
    Decimal("0.99999999999999999999"), Decimal("2.0"), Decimal("-3.000000000000000000001"),
    Decimal("NaN"), Decimal("-Infinity"), timestamp(1), timestamp(1577836800000), True, False,
    "a", "b", "", "2020-01-01", symbol("a"), b"a", None, float32(2.0**24),
]
GRID_SQL = [
    f"{form}".format(f"a {op} {literal}")
    for op in ("=", "<>", ">", ">=", "<", "<=")
    for literal in ("-3", "0", "1", "2", str(2**53), "'a'", "''", "'2020-01-01'", "TRUE")
    for form in ("{}", "NOT ({})", "NOT (NOT ({}))")
] + [
    f"{form}".format(text) for text in (
        "a BETWEEN 0 AND 2", "a NOT BETWEEN 0 AND 2", "a IN ('a', 'b')", "a NOT IN ('a')",
        "a LIKE 'a%'", "a NOT LIKE '_'", "a IS NULL", "a IS NOT NULL", "h.priority > 4",
        "h.durable = FALSE", "a = 'a' OR a = 1", "a = 'b' AND a >= 1")
    for form in ("{}", "NOT ({})")
]


GRID_REFERENCES = ["a", "&p:a", "&s:a", "&&a", "", True, False, 1, 2**24 + 1, 2**53 + 1]
GRID_FILTERS = [_sql(text) for text in GRID_SQL] + [
    _d(group, [_d("amqp:application-properties-filter", {"a": ref})])
    for ref in GRID_REFERENCES for group in ("amqp:all-filter", "amqp:not-filter")
] + [_d("amqp:header-filter", {"priority": ubyte(7)}), _d("amqp:header-filter", {"durable": True})]


@pytest.mark.parametrize("item", GRID_FILTERS, ids=[repr(f.value) for f in GRID_FILTERS])
def test_every_rule_in_both_polarities(item: Described) -> None:
    """Each rule against values JMS sees differently: decimals, NaN, timestamps, symbols."""
    filter_set = decode_filter_set({"s": item})
    result = pushdown(filter_set)
    if result.selector is None:
        return
    for value in EDGE_VALUES:
        for message in (DictMessageView(application_properties={"a": value}),
                        DictMessageView(header={"priority": ubyte(7), "durable": True})):
            full = filter_set.matches(message)
            upstream = _selector_matches(result.selector, message)
            assert upstream or not full, f"{result.selector!r} drops a match: a={value!r}"
            assert upstream == full or not result.exact, f"not exact for a={value!r}"
