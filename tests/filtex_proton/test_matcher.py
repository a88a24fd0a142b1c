"""The node matcher (docs/PLUGIN.md, "Many links on one node").

Table tests say what each filter kind is indexed as; the hypothesis tests check the one
promise that makes the matcher exact, on random filter sets of every family in both
dialects and random messages (absent, null, NaN, described, mixed numeric types): a link
is matched by the matcher exactly when its own :class:`LinkFilter` matches, and every
set that is TRUE is among the candidates. Registration churn keeps the index consistent.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import (
    UNDESCRIBED,
    Array,
    Data,
    Described,
    byte,
    char,
    float32,
    int32,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
)

from filtex_proton.amqp.message import encode_message
from filtex_proton.amqp.view import DictMessageView, MessageView, Section
from filtex_proton.errors import FilterError
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.limits import Limits
from filtex_proton.matcher import (
    ALWAYS,
    NEVER,
    FieldEquals,
    FieldExists,
    FieldNotNull,
    FieldNull,
    FieldPrefix,
    FieldRange,
    FieldRef,
    NodeMatcher,
    Verdict,
    decompose,
    value_key,
)
from filtex_proton.plugin import FilterMessage, LinkFilter
from filtex_proton.sql import AMQP_SQL, ast
from filtex_proton.sql.printer import to_sql

SQL = "amqp:sql-filter"
SELECTOR = "apache.org:selector-filter:string"
APP = Section.APPLICATION_PROPERTIES
#: A budget no test run reaches, so that verdicts do not depend on the machine's speed.
UNHURRIED = Limits(eval_budget_ms=1e9)


def _d(descriptor: str, value: Any) -> Described:
    return Described(symbol(descriptor), value)


def _set(*items: Described, limits: Limits = UNHURRIED) -> FilterSet:
    return decode_filter_set({f"f{i}": item for i, item in enumerate(items)}, limits)


def _link(*items: Described, consumer: Any = None, limits: Limits = UNHURRIED) -> LinkFilter:
    return LinkFilter(_set(*items, limits=limits), consumer)


def _message(view: MessageView, origin: Any = None) -> FilterMessage:
    message = FilterMessage(b"", origin)
    message._view = cast(Any, view)  # a decoded message, as the broker's view would give
    return message


def _app(**entries: Any) -> FilterMessage:
    return _message(DictMessageView(application_properties=entries))


def _ref(key: str, section: Section = APP, rules: str = "sql") -> FieldRef:
    return FieldRef(section, key, cast(Any, rules))


def _keys(*keys: Any) -> frozenset[Any]:
    return frozenset(keys)


# ===================================================================== what is indexed

A = _ref("a")
B = _ref("b")
SUBJECT = _ref("subject", Section.PROPERTIES)

DECOMPOSED: list[tuple[str, Described, Any]] = [
    ("= string", _d(SQL, "a = 'x'"), ((FieldEquals(A, _keys(("s", "x"))),),)),
    ("= ISO string also names its moment (§6.3.2)", _d(SQL, "a = '1970-01-01T00:00:01Z'"),
     ((FieldEquals(A, _keys(("s", "1970-01-01T00:00:01Z"), ("n", 1000.0))),),)),
    ("JMS: no ISO strings", _d(SELECTOR, "a = '1970-01-01T00:00:01Z'"),
     ((FieldEquals(A, _keys(("s", "1970-01-01T00:00:01Z"))),),)),
    ("= integer, by its double", _d(SQL, "a = 1"), ((FieldEquals(A, _keys(("n", 1.0))),),)),
    ("= decimal", _d(SQL, "a = 1.50"), ((FieldEquals(A, _keys(("n", 1.5))),),)),
    ("= negative", _d(SQL, "a = -2"), ((FieldEquals(A, _keys(("n", -2.0))),),)),
    ("= boolean", _d(SQL, "a = TRUE"), ((FieldEquals(A, _keys(("b", True))),),)),
    ("literal first", _d(SQL, "'x' = a"), ((FieldEquals(A, _keys(("s", "x"))),),)),
    ("= NaN is never TRUE", _d(SQL, "a = NaN"), NEVER),
    ("= NULL is never TRUE", _d(SQL, "a = NULL"), NEVER),
    ("<> needs a value", _d(SQL, "a <> 'x'"), ((FieldNotNull(A),),)),
    ("IN", _d(SQL, "a IN ('x', 2, NULL)"), ((FieldEquals(A, _keys(("s", "x"), ("n", 2.0))),),)),
    ("NOT IN needs a value", _d(SQL, "a NOT IN ('x')"), ((FieldNotNull(A),),)),
    ("LIKE prefix", _d(SQL, "a LIKE 'ab%c'"), ((FieldPrefix(A, "ab"),),)),
    ("LIKE escaped wildcard in the prefix", _d(SQL, "a LIKE 'a!%_' ESCAPE '!'"),
     ((FieldPrefix(A, "a%"),),)),
    ("LIKE without wildcard is equality", _d(SQL, "a LIKE 'ab'"),
     ((FieldEquals(A, _keys(("s", "ab"))),),)),
    ("LIKE leading wildcard", _d(SQL, "a LIKE '%b'"), ((FieldNotNull(A),),)),
    ("> as an inclusive lower bound", _d(SQL, "a > 3"), ((FieldRange(A, 3.0, None),),)),
    ("<= upper bound", _d(SQL, "a <= 2.5"), ((FieldRange(A, None, 2.5),),)),
    ("BETWEEN", _d(SQL, "a BETWEEN 1 AND 2"), ((FieldRange(A, 1.0, 2.0),),)),
    ("NOT BETWEEN needs a value", _d(SQL, "a NOT BETWEEN 1 AND 2"), ((FieldNotNull(A),),)),
    ("IS NULL", _d(SQL, "a IS NULL"), ((FieldNull(A),),)),
    ("IS NOT NULL", _d(SQL, "a IS NOT NULL"), ((FieldNotNull(A),),)),
    ("EXISTS", _d(SQL, "EXISTS(a)"), ((FieldExists(A),),)),
    ("a boolean field alone", _d(SQL, "a"), ((FieldEquals(A, _keys(("b", True))),),)),
    ("AND: a conjunction", _d(SQL, "a = 'x' AND b > 1"),
     ((FieldEquals(A, _keys(("s", "x"))), FieldRange(B, 1.0, None)),)),
    ("OR: alternatives", _d(SQL, "a = 'x' OR b > 1"),
     ((FieldEquals(A, _keys(("s", "x"))),), (FieldRange(B, 1.0, None),))),
    ("NOT pushed through (Kleene De Morgan)", _d(SQL, "NOT (a IS NULL OR b IS NOT NULL)"),
     ((FieldNotNull(A), FieldNull(B)),)),
    ("arithmetic: residue", _d(SQL, "a + 1 = 2"), ALWAYS),
    ("functions: residue", _d(SQL, "LOWER(a) = 'x'"), ALWAYS),
    ("field = field needs both", _d(SQL, "a = b"), ((FieldNotNull(A), FieldNotNull(B)),)),
    ("JMS header aliases: residue", _d(SELECTOR, "JMSPriority > 4"), ALWAYS),
    ("map path: residue", _d(SQL, "a.m.k = 1"), ALWAYS),
    ("true-filter", _d("amqp:true-filter", True), ALWAYS),
    ("false-filter", _d("amqp:false-filter", False), NEVER),
    ("no-local: residue", _d("apache.org:no-local-filter:list", []), ALWAYS),
    ("property: exact, &p:, && and numbers",
     _d("amqp:application-properties-filter", {"a": "x", "b": "&p:y", "c": "&&z", "d": 1}),
     ((FieldEquals(_ref("a", rules="property"), _keys(("s", "x"))),
       FieldPrefix(_ref("b", rules="property"), "y"),
       FieldEquals(_ref("c", rules="property"), _keys(("s", "&z"))),
       FieldEquals(_ref("d", rules="property"), _keys(("f", 1.0)))),)),
    ("property: &s: and a null reference",
     _d("amqp:application-properties-filter", {"a": "&s:x", "b": None}),
     ((FieldNotNull(_ref("a", rules="property")),),)),
    ("header property filter", _d("amqp:header-filter", {"priority": ubyte(4)}),
     ((FieldEquals(_ref("priority", Section.HEADER, "property"), _keys(("f", 4.0))),),)),
    ("direct binding", _d("apache.org:legacy-amqp-direct-binding:string", "k.a"),
     ((FieldEquals(SUBJECT, _keys(("s", "k.a"))),),)),
    ("topic binding: literal words", _d("apache.org:legacy-amqp-topic-binding:string", "a.b.*"),
     ((FieldPrefix(SUBJECT, "a.b"),),)),
    ("topic binding: no wildcard", _d("apache.org:legacy-amqp-topic-binding:string", "a.b"),
     ((FieldEquals(SUBJECT, _keys(("s", "a.b"))),),)),
    ("topic binding: '#' matches no subject too",
     _d("apache.org:legacy-amqp-topic-binding:string", "#"), ALWAYS),
    ("topic binding: leading '*'", _d("apache.org:legacy-amqp-topic-binding:string", "*.b"),
     ((FieldNotNull(SUBJECT),),)),
    ("headers binding: all", _d("apache.org:legacy-amqp-headers-binding:map",
                                {"a": "x", "b": None, "x-match": "all"}),
     ((FieldEquals(_ref("a", rules="property"), _keys(("s", "x"))),
       FieldExists(_ref("b", rules="property"))),)),
    ("headers binding: any", _d("apache.org:legacy-amqp-headers-binding:map",
                                {"a": "&p:x", "x-match": "any"}),
     ((FieldEquals(_ref("a", rules="property"), _keys(("s", "&p:x"))),),)),
    ("all-filter", _d("amqp:all-filter", [_d(SQL, "a = 1"), _d(SQL, "b = 2")]),
     ((FieldEquals(A, _keys(("n", 1.0))), FieldEquals(B, _keys(("n", 2.0)))),)),
    ("any-filter", _d("amqp:any-filter", [_d(SQL, "a = 1"), _d(SQL, "b = 2")]),
     ((FieldEquals(A, _keys(("n", 1.0))),), (FieldEquals(B, _keys(("n", 2.0))),))),
    ("not-filter: residue", _d("amqp:not-filter", [_d(SQL, "a = 1")]), ALWAYS),
]


@pytest.mark.parametrize(("case", "item", "expected"), DECOMPOSED,
                         ids=[case for case, _, _ in DECOMPOSED])
def test_decompose(case: str, item: Described, expected: Any) -> None:
    assert decompose(_set(item)) == expected


def test_a_set_is_the_conjunction_of_its_filters() -> None:
    condition = decompose(_set(_d(SQL, "a = 'x'"), _d(SQL, "b IS NULL")))
    assert condition == ((FieldEquals(A, _keys(("s", "x"))), FieldNull(B)),)


def test_too_many_alternatives_keep_fewer_conjuncts() -> None:
    wide = " OR ".join(f"a = {i}" for i in range(20))
    assert decompose(_set(_d(SQL, wide))) == ALWAYS
    condition = decompose(_set(_d(SQL, f"b = 'x' AND ({wide})")))
    assert condition == ((FieldEquals(B, _keys(("s", "x"))),),)


VALUE_KEYS: list[tuple[Any, str, Any]] = [
    ("x", "sql", ("s", "x")), (symbol("x"), "sql", ("s", "x")), (1, "sql", ("n", 1.0)),
    (ubyte(1), "sql", ("n", 1.0)), (1.0, "sql", ("n", 1.0)), (Decimal("1.0"), "sql", ("n", 1.0)),
    (timestamp(1), "sql", ("n", 1.0)), (True, "sql", ("b", True)), (math.nan, "sql", None),
    (Decimal("NaN"), "sql", None), (None, "sql", None), (b"x", "sql", None),
    (Described(symbol("d"), "x"), "sql", None), (Described(symbol("d"), "x"), "property",
                                                  ("s", "x")),
    (float32(0.1), "property", ("f", 0.10000000149011612)), (0.1, "property",
                                                             ("f", 0.10000000149011612)),
    (Decimal("1"), "property", None), (timestamp(1), "property", None),
]


@pytest.mark.parametrize(("value", "rules", "key"), VALUE_KEYS, ids=[repr(v) for v in VALUE_KEYS])
def test_value_keys(value: Any, rules: str, key: Any) -> None:
    assert value_key(value, cast(Any, rules)) == key


# ==================================================================== per predicate kind

PER_KIND: list[tuple[str, Described, Any, bool]] = [
    # (what, filter, application property a, matched)
    ("= string", _d(SQL, "a = 'x'"), "x", True),
    ("= string vs symbol", _d(SQL, "a = 'x'"), symbol("x"), True),
    ("= string vs char", _d(SQL, "a = 'x'"), None, False),
    ("= integer vs double", _d(SQL, "a = 1"), 1.0, True),
    ("= integer vs decimal", _d(SQL, "a = 1"), Decimal("1.000"), True),
    ("= integer vs timestamp", _d(SQL, "a = 1"), timestamp(1), True),
    ("= 2**53+1 vs 2**53 exactly", _d(SQL, f"a = {2**53 + 1}"), 2**53, False),
    ("= 2**53+1 vs the double 2**53", _d(SQL, f"a = {2**53 + 1}"), 2.0**53, True),
    ("= ISO string vs timestamp", _d(SQL, "a = '1970-01-01T00:00:01Z'"), timestamp(1000), True),
    ("JMS: = ISO string vs timestamp", _d(SELECTOR, "a = '1970-01-01T00:00:01Z'"),
     timestamp(1000), False),
    ("= vs NaN", _d(SQL, "a = 1"), math.nan, False),
    ("<> vs NaN is TRUE", _d(SQL, "a <> 1"), math.nan, True),
    ("= vs described", _d(SQL, "a = 'x'"), Described(symbol("d"), "x"), False),
    ("IN", _d(SQL, "a IN ('y', 'x')"), "x", True),
    ("IN miss", _d(SQL, "a IN ('y', 'z')"), "x", False),
    ("LIKE prefix", _d(SQL, "a LIKE 'ab%'"), "abc", True),
    ("LIKE prefix miss", _d(SQL, "a LIKE 'ab%'"), "acb", False),
    ("> on decimals", _d(SQL, "a > 1"), Decimal("1.00000000000000000001"), True),
    ("> on the bound", _d(SQL, "a > 1"), 1, False),
    ("BETWEEN", _d(SQL, "a BETWEEN 1 AND 2"), 1.5, True),
    ("BETWEEN timestamp", _d(SQL, "a BETWEEN 1 AND 2"), timestamp(2), True),
    ("range vs string", _d(SQL, "a > 1"), "2", False),
    ("IS NULL: present null", _d(SQL, "a IS NULL"), None, True),
    ("EXISTS: present null", _d(SQL, "EXISTS(a)"), None, True),
    ("property exact vs described", _d("amqp:application-properties-filter", {"a": "x"}),
     Described(symbol("d"), "x"), True),
    ("property &p:", _d("amqp:application-properties-filter", {"a": "&p:ab"}), "abc", True),
    ("property float32", _d("amqp:application-properties-filter", {"a": 0.1}), float32(0.1),
     True),
    ("headers binding: null value needs the key",
     _d("apache.org:legacy-amqp-headers-binding:map", {"a": None}), None, True),
]


@pytest.mark.parametrize(("case", "item", "value", "matched"), PER_KIND,
                         ids=[case for case, *_ in PER_KIND])
def test_per_kind(case: str, item: Described, value: Any, matched: bool) -> None:
    matcher: NodeMatcher[str] = NodeMatcher()
    matcher.register("l", _link(item))
    message = _app(a=value) if value is not None or "null" in case else _app()
    assert _link(item).matches(message) is matched  # the rule, per link
    assert matcher.match(message).matched == (("l",) if matched else ())


def test_absent_is_not_present_null() -> None:
    matcher: NodeMatcher[str] = NodeMatcher()
    matcher.register("exists", _link(_d(SQL, "EXISTS(a)")))
    matcher.register("null", _link(_d(SQL, "a IS NULL")))
    assert matcher.match(_app()).matched == ("null",)
    assert matcher.match(_app(a=None)).matched == ("exists", "null")


def test_header_defaults_apply_to_absent_fields() -> None:
    matcher: NodeMatcher[str] = NodeMatcher()
    matcher.register("sql", _link(_d(SQL, "h.priority = 4")))
    matcher.register("prop", _link(_d("amqp:header-filter", {"priority": ubyte(4)})))
    matcher.register("exists", _link(_d(SQL, "EXISTS(h.priority)")))
    assert matcher.match(_message(DictMessageView())).matched == ("sql", "prop")
    with_priority = _message(DictMessageView(header={"priority": ubyte(4)}))
    assert matcher.match(with_priority).matched == ("sql", "prop", "exists")


def test_legacy_bindings_read_the_subject() -> None:
    matcher: NodeMatcher[str] = NodeMatcher()
    matcher.register("direct", _link(_d("apache.org:legacy-amqp-direct-binding:string", "a.b")))
    matcher.register("topic", _link(_d("apache.org:legacy-amqp-topic-binding:string", "a.#")))
    matcher.register("hash", _link(_d("apache.org:legacy-amqp-topic-binding:string", "#")))
    subject = _message(DictMessageView(properties={"subject": "a.b"}))
    assert matcher.match(subject).matched == ("direct", "topic", "hash")
    assert matcher.match(_message(DictMessageView())).matched == ("hash",)


def test_no_local_uses_the_message_origin() -> None:
    matcher: NodeMatcher[str] = NodeMatcher()
    matcher.register("mine", _link(_d("apache.org:no-local-filter:list", []), consumer=1))
    assert matcher.match(_message(DictMessageView(), origin=1)).matched == ()
    assert matcher.match(_message(DictMessageView(), origin=2)).matched == ("mine",)


def test_links_without_filters_match_everything() -> None:
    matcher: NodeMatcher[str] = NodeMatcher()
    matcher.register("none", None)
    matcher.register("empty", LinkFilter(FilterSet(), None))
    assert matcher.match(_app()).matched == ("none", "empty")


def test_candidates_then_verdict_for_a_queue() -> None:
    matcher: NodeMatcher[str] = NodeMatcher()
    for name, text in (("x", "a = 'x'"), ("y", "a = 'y'"), ("any", "a LIKE '%'")):
        matcher.register(name, _link(_d(SQL, text)))
    message = _app(a="x")
    assert matcher.candidates(message) == ("x", "any")
    assert matcher.verdict("x", message) is Verdict.MATCHED
    assert matcher.verdict("any", message) is Verdict.MATCHED
    assert matcher.verdict("y", message) is Verdict.NOT_MATCHED


def test_counters_of_ruled_out_links() -> None:
    matcher: NodeMatcher[str] = NodeMatcher()
    x, y = _link(_d(SQL, "a = 'x'")), _link(_d(SQL, "a = 'y'"))
    matcher.register("x", x)
    matcher.register("y", y)
    for value in ("x", "x", "y", "z"):
        matcher.match(_app(a=value))
    assert (x.filter_set.stats.evaluations, x.filter_set.stats.matches) == (2, 2)
    assert (matcher.ruled_out("x"), matcher.ruled_out("y")) == (2, 3)
    assert matcher.stats.messages == 4 and matcher.stats.candidates == 3


def test_over_budget_is_its_own_verdict() -> None:
    tiny = Limits(eval_budget_ms=1e-9)  # spent before the second filter starts
    link = _link(_d(SQL, "a = 'x'"), _d(SQL, "b IS NULL"), limits=tiny)
    matcher: NodeMatcher[str] = NodeMatcher()
    matcher.register("slow", link)
    result = matcher.match(_app(a="x"))
    assert result.matched == () and result.over_budget == ("slow",)
    assert result.verdict("slow") is Verdict.OVER_BUDGET
    assert link.filter_set.stats.budget_exceeded == 1


def test_an_undecodable_message_is_evaluated_by_every_link() -> None:
    matcher: NodeMatcher[str] = NodeMatcher()
    links = {name: _link(_d(SQL, f"a = '{name}'")) for name in "xyz"}
    for name, link in links.items():
        matcher.register(name, link)
    errors: list[Any] = []
    links["x"].on_error = errors.append
    result = matcher.match(FilterMessage(b"\x00\x53\x77", origin="producer"))
    assert result.matched == () and result.evaluated == 3
    assert [link.filter_set.stats.errors for link in links.values()] == [1, 1, 1]
    assert errors == ["producer"] and matcher.stats.fallbacks == 1


def test_raw_messages_read_each_indexed_field_once() -> None:
    reads: list[tuple[Section, Any]] = []

    class Counting(DictMessageView):
        def field(self, section: Section, key: Any) -> Any:
            reads.append((section, key))
            return super().field(section, key)

    matcher: NodeMatcher[int] = NodeMatcher()
    for i in range(50):
        matcher.register(i, _link(_d(SQL, f"a = {i} AND b > {i}")))
    matcher.candidates(_message(Counting(application_properties={"a": 7, "b": 9})))
    assert sorted(reads, key=str) == [(APP, "a"), (APP, "b")]


def test_encoded_messages() -> None:
    matcher: NodeMatcher[str] = NodeMatcher()
    matcher.register("eu", _link(_d(SQL, "region = 'EU' AND amount > 100")))
    matcher.register("us", _link(_d(SQL, "region = 'US'")))
    data = encode_message(application_properties={"region": "EU", "amount": 150}, body="b")
    assert matcher.match(FilterMessage(data)).matched == ("eu",)


def test_register_replaces_and_unregister_forgets() -> None:
    matcher: NodeMatcher[str] = NodeMatcher()
    matcher.register("l", _link(_d(SQL, "a = 'x'")))
    matcher.register("l", _link(_d(SQL, "a = 'y'")))
    assert len(matcher) == 1 and matcher.match(_app(a="y")).matched == ("l",)
    matcher.unregister("l")
    matcher.unregister("l")  # twice is harmless
    assert "l" not in matcher and matcher.match(_app(a="y")).matched == ()
    assert matcher._slots == {}


# ======================================================================== differential

# Values of every AMQP kind, with the edges the type rules care about (kept here rather than
# shared with the SQL tests, whose strategies change with the SQL engine).
texts = st.one_of(st.text(alphabet="ab%_!.\\\n\U0001d538", max_size=5),
                  st.sampled_from(["2020-01-01", "1970-01-01T00:00:01Z", "PT1S", "T"]))
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 6), st.integers(-(2**63), 2**64 - 1),
    st.integers(0, 255).map(ubyte), st.integers(-128, 127).map(byte),
    st.integers(0, 2**32 - 1).map(uint), st.integers(-(2**31), 2**31 - 1).map(int32),
    st.integers(0, 2**64 - 1).map(ulong), st.floats(), st.floats(width=32).map(float32),
    st.sampled_from([Decimal("1.5"), Decimal("-0.0"), Decimal("Infinity"), Decimal("NaN"),
                     Decimal("9.99E6144")]),
    st.integers(-(2**45), 2**45).map(timestamp), st.characters(max_codepoint=127).map(char),
    st.uuids(), st.binary(max_size=3), texts, texts.map(symbol),
)
values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["k", "a"]), inner, max_size=2),
    st.lists(st.integers(-5, 5).map(int32), max_size=2).map(
        lambda xs: Array(cast(Any, UNDESCRIBED), Data.INT, *xs)),
    st.lists(inner, max_size=2).map(lambda xs: Described(symbol("d"), xs)),
    inner.map(lambda x: Described(symbol("d"), x)),
), max_leaves=4)
headers = st.fixed_dictionaries({}, optional={
    "durable": st.booleans(), "priority": st.integers(0, 255).map(ubyte),
    "ttl": st.integers(0, 2**32 - 1).map(uint), "first-acquirer": st.booleans(),
    "delivery-count": st.integers(0, 3).map(uint),
})

NAMES = ["a", "b", "c"]
_field = st.one_of(
    st.sampled_from(NAMES).map(lambda n: ast.Field(APP, n)),
    st.sampled_from(["priority", "durable", "ttl"]).map(lambda n: ast.Field(Section.HEADER, n)),
    st.just(ast.Field(Section.PROPERTIES, "subject")),
    st.just(ast.Field(Section.MESSAGE_ANNOTATIONS, "k")),
)
_integers = st.one_of(st.integers(-3, 6),
                      st.sampled_from([255, 2**24 + 1, 2**53, 2**53 + 1, 2**63 - 1]))
_literal = st.one_of(
    _integers, st.booleans(), texts, st.sampled_from(["a", "b", "ab", "2020-01-01", "PT1S"]),
    st.sampled_from([Decimal("1.5"), Decimal("1.0"), 1.0, 0.5, math.nan, math.inf]), st.none(),
).map(ast.Literal)
_signed = st.one_of(_literal, st.integers(1, 6).map(lambda n: ast.Unary("-", ast.Literal(n))))
_strings = st.one_of(texts, st.sampled_from(["a", "b", ""]), _integers).map(ast.Literal)
_patterns = st.sampled_from([("a%", None), ("ab%", None), ("%b", None), ("_", None),
                             ("a!%%", "!"), ("%!_", "!"), ("", None), ("a", None), ("a_%", None)])


def _leaf() -> st.SearchStrategy[ast.Expr]:
    comparison = st.sampled_from(["=", "<>", "!=", ">", ">=", "<", "<="])
    return st.one_of(
        st.builds(ast.Compare, comparison, _field, _signed),
        st.builds(ast.Compare, comparison, _signed, _field),
        st.builds(ast.Compare, st.just("="), _field, _signed),
        st.builds(ast.IsNull, _field, negated=st.booleans()),
        st.builds(lambda f, p, neg: ast.Like(f, ast.Literal(p[0]),
                                             None if p[1] is None else ast.Literal(p[1]),
                                             negated=neg), _field, _patterns, st.booleans()),
        st.builds(ast.In, _field, st.lists(_strings, min_size=1, max_size=3).map(tuple),
                  negated=st.booleans()),
        st.builds(ast.Between, _field, _signed, _signed, negated=st.booleans()),
        st.builds(ast.Exists, _field),
        _field,
        st.booleans().map(ast.Literal),
        st.builds(ast.Compare, st.just("="), st.builds(ast.Binary, st.just("+"), _field,
                                                       _literal), _signed),
    )


def _tree(inner: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
    some = st.lists(inner, min_size=2, max_size=3).map(tuple)
    return st.one_of(some.map(ast.And), some.map(ast.Or), st.builds(ast.Not, inner))


_expressions = st.recursive(_leaf(), _tree, max_leaves=5)
_sql_texts = st.one_of(
    _expressions.map(lambda e: (SQL, to_sql(e, AMQP_SQL))),
    _expressions.map(lambda e: (SELECTOR, to_sql(e, AMQP_SQL))),  # JMS reads what it parses
    st.sampled_from([
        "LOWER(a) = 'a'", "a.m.k = 1", "a + 1 > 2", "JMSPriority > 4", "JMSType = 'a'",
        "a = 'a' AND UPPER(b) LIKE 'A%'", "NOT (a > 1 AND b < 2)", "m.k = 'a'", "m.k IS NULL",
        "x:vendor(a) IS NULL", "a = b", "a[0] = 1", "DATE('2020-01-01') > a",
    ]).flatmap(lambda t: st.sampled_from([(SQL, t), (SELECTOR, t)])),
)
_references = st.one_of(
    texts, st.sampled_from(["&p:a", "&p:", "&s:b", "&&a", "a", "b", "ab"]), st.booleans(),
    _integers, st.sampled_from([1.0, float32(0.5), float32(0.1), 0.1, Decimal("1"),
                                timestamp(1)]),
    st.none(),
)
_sections = st.sampled_from(["amqp:application-properties-filter",
                             "amqp:message-annotations-filter"])
_leaf_filters = st.one_of(
    _sql_texts.map(lambda dt: _d(*dt)),
    _sql_texts.map(lambda dt: _d(*dt)),
    st.builds(lambda s, m: _d(s, {symbol(k) if "annotations" in s else k: v
                                  for k, v in m.items()}),
              _sections, st.dictionaries(st.sampled_from([*NAMES, "k"]), _references,
                                         min_size=1, max_size=3)),
    st.fixed_dictionaries({}, optional={"priority": st.integers(0, 9).map(ubyte),
                                        "durable": st.booleans()})
    .filter(bool).map(lambda m: _d("amqp:header-filter", m)),
    st.fixed_dictionaries({}, optional={"subject": st.sampled_from(["a", "&p:a", "a.b"])})
    .filter(bool).map(lambda m: _d("amqp:properties-filter", m)),
    st.sampled_from(["a", "a.b", "", "x"]).map(
        lambda k: _d("apache.org:legacy-amqp-direct-binding:string", k)),
    st.sampled_from(["#", "a.#", "*.b", "a.*", "a.b", "#.b", "a", "a.*.#", ""]).map(
        lambda k: _d("apache.org:legacy-amqp-topic-binding:string", k)),
    st.builds(lambda m, how: _d("apache.org:legacy-amqp-headers-binding:map",
                                {**m, "x-match": how}),
              st.dictionaries(st.sampled_from(NAMES), st.one_of(
                  st.none(), st.sampled_from(["a", "&p:a", 1, True, 0.5])), max_size=3),
              st.sampled_from(["all", "any"])),
    st.booleans().map(lambda b: _d("amqp:true-filter" if b else "amqp:false-filter", b)),
    st.just(_d("apache.org:no-local-filter:list", [])),
)
_filters = st.recursive(_leaf_filters, lambda inner: st.one_of(
    st.builds(_d, st.sampled_from(["amqp:all-filter", "amqp:any-filter", "amqp:not-filter"]),
              st.lists(inner, min_size=1, max_size=3)),
    st.builds(lambda f: _d("apache.org:not-filter:list", [f]), inner),
), max_leaves=4)
_filter_maps = st.dictionaries(st.sampled_from(["f", "g", "h"]), _filters, max_size=3)

_near = st.sampled_from([
    Decimal("1.00000000000000000001"), Decimal("0.99999999999999999999"), Decimal("2.0"),
    Decimal("NaN"), math.nan, 2.0**53, 2**53 + 1, float32(2.0**24), float32(0.1), 0.1,
    timestamp(5), timestamp(1000), symbol("a"), "a", "b", "ab", "", "a.b", True, False, 1, -2,
    ulong(3), Described(symbol("d"), "a"), Described(symbol("d"), 1), None,
])
_app_values = st.one_of(values, _near, _near)
_messages = st.builds(
    DictMessageView,
    header=st.one_of(st.none(), headers),
    properties=st.one_of(st.none(), st.fixed_dictionaries(
        {}, optional={"subject": st.one_of(texts, st.sampled_from(["a", "a.b", "a.b.c", "x"]))})),
    application_properties=st.one_of(st.none(), st.dictionaries(
        st.sampled_from(NAMES), _app_values, max_size=3)),
    message_annotations=st.one_of(st.none(), st.dictionaries(
        st.sampled_from(["k", "a"]).map(symbol), _app_values, max_size=2)),
)


def _compile(filters: dict[str, Described]) -> FilterSet | None:
    try:
        return decode_filter_set(filters, UNHURRIED)
    except FilterError:
        return None


DIFFERENTIAL = settings(max_examples=250, deadline=None,
                        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@DIFFERENTIAL
@given(sets=st.lists(_filter_maps, min_size=1, max_size=8),
       messages=st.lists(st.tuples(_messages, st.sampled_from([None, 1, 2])), min_size=1,
                         max_size=5))
def test_the_matcher_agrees_with_per_link_evaluation(
        sets: list[dict[str, Described]], messages: list[tuple[DictMessageView, Any]]) -> None:
    matcher: NodeMatcher[int] = NodeMatcher()
    probe: NodeMatcher[int] = NodeMatcher()  # candidates only: evaluates nothing
    ours: dict[int, LinkFilter] = {}
    theirs: dict[int, LinkFilter] = {}
    for i, filters in enumerate(sets):
        a, b = _compile(filters), _compile(filters)
        if a is None or b is None:
            continue
        ours[i], theirs[i] = LinkFilter(a, consumer=1), LinkFilter(b, consumer=1)
        matcher.register(i, ours[i])
        probe.register(i, ours[i])
    for view, origin in messages:
        expected = tuple(i for i, link in theirs.items() if link.matches(_message(view, origin)))
        candidates = set(probe.candidates(_message(view, origin)))
        assert set(expected) <= candidates, (view, [sets[i] for i in expected])
        assert matcher.match(_message(view, origin)).matched == expected, view
    for i, link in ours.items():  # evaluated links count exactly as before
        mine, reference = link.filter_set.stats, theirs[i].filter_set.stats
        assert mine.matches == reference.matches
        assert mine.evaluations + matcher.ruled_out(i) == reference.evaluations


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 9), _filter_maps), max_size=40),
       _messages)
def test_register_unregister_churn(operations: list[tuple[bool, int, dict[str, Described]]],
                                   view: DictMessageView) -> None:
    matcher: NodeMatcher[int] = NodeMatcher()
    live: dict[int, dict[str, Described]] = {}
    for add, key, filters in operations:
        if add and _compile(filters) is not None:
            matcher.register(key, LinkFilter(cast(FilterSet, _compile(filters)), consumer=1))
            live[key] = filters
        else:
            matcher.unregister(key)
            live.pop(key, None)
    expected = sorted(k for k, f in live.items()
                      if LinkFilter(cast(FilterSet, _compile(f)), 1).matches(_message(view)))
    assert sorted(matcher.match(_message(view)).matched) == expected
    assert len(matcher) == len(live)
    for key in list(live):
        matcher.unregister(key)
    assert matcher._slots == {} and not matcher._always


def test_an_exact_hit_is_counted_as_a_matching_evaluation() -> None:
    calls: list[FilterMessage] = []

    class Counting(LinkFilter):
        __slots__ = ()

        def matches(self, message: FilterMessage) -> bool:
            calls.append(message)
            return LinkFilter.matches(self, message)

    for always_evaluate, evaluated in ((False, 0), (True, 1)):
        calls.clear()
        matcher: NodeMatcher[str] = NodeMatcher(always_evaluate=always_evaluate)
        link = Counting(_set(_d(SQL, "a = 'x'")), None)
        matcher.register("x", link)
        assert matcher.match(_app(a="x")).matched == ("x",)
        assert len(calls) == evaluated
        assert (link.filter_set.stats.evaluations, link.filter_set.stats.matches) == (1, 1)


_bounds = st.one_of(st.integers(-50, 50), st.sampled_from(["1.0E300", "-1.0E300", "0.5", "2.5E1"]))
_range_sql = st.one_of(
    st.builds(lambda lo, hi: f"a BETWEEN {lo} AND {hi}", _bounds, _bounds),
    st.builds(lambda lo: f"a > {lo}", _bounds), st.builds(lambda hi: f"a <= {hi}", _bounds),
    st.builds(lambda lo, hi, b: f"a >= {lo} AND a < {hi} AND b = '{b}'", _bounds, _bounds,
              st.sampled_from("xyz")),
    st.builds(lambda b: f"b = '{b}'", st.sampled_from("xyz")),
)


@settings(max_examples=150, deadline=None)
@given(texts=st.lists(_range_sql, min_size=1, max_size=40),
       values=st.lists(st.tuples(st.one_of(
           st.integers(-60, 60), st.floats(allow_nan=False), st.sampled_from(
               [2**63 - 1, 1e300, -1e300, math.inf, -math.inf])), st.sampled_from("xyzw")),
           min_size=1, max_size=6),
       drop=st.lists(st.integers(0, 39), max_size=10))
def test_ranges_and_anchors_by_bucket_size(texts: list[str], values: list[tuple[Any, str]],
                                           drop: list[int]) -> None:
    """Many ranges on one field (bands bisected by low bound), conjunctions anchored on
    whichever atom's bucket is smaller at registration, some unregistered again."""
    matcher: NodeMatcher[int] = NodeMatcher()
    links = {i: _link(_d(SQL, text)) for i, text in enumerate(texts)}
    for i, link in links.items():
        matcher.register(i, link)
    for i in drop:
        if i in links:
            matcher.unregister(i)
            del links[i]
    for a, b in values:
        message = _app(a=a, b=b)
        expected = tuple(i for i, link in links.items() if link.matches(message))
        assert matcher.match(message).matched == expected, (a, b)
        assert set(expected) <= set(matcher.candidates(message))
    for i in list(links):
        matcher.unregister(i)
    assert matcher._slots == {}


def test_a_wide_equality_bucket_gives_way_to_a_narrow_range() -> None:
    matcher: NodeMatcher[int] = NodeMatcher()
    for i in range(200):
        matcher.register(i, _link(_d(SQL, f"amount BETWEEN {i} AND {i + 10} AND region = 'r'")))
    anchors = [type(entries[0][0]) for entries in matcher.conditions().values()]
    assert anchors[0] is FieldEquals and anchors[-1] is FieldRange
    assert len(matcher.candidates(_app(amount=100, region="r"))) < 40
    assert matcher.match(_app(amount=100, region="r")).matched == tuple(range(90, 101))
