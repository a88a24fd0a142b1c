"""apache-filters §1 legacy bindings and §2 JMS filters (no-local, selector)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from proton import symbol

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import EvaluationContext
from filtex_proton.limits import Limits

from .support import described, evaluate

DIRECT = "apache.org:legacy-amqp-direct-binding:string"
TOPIC = "apache.org:legacy-amqp-topic-binding:string"
HEADERS = "apache.org:legacy-amqp-headers-binding:map"
NO_LOCAL = "apache.org:no-local-filter:list"
SELECTOR = "apache.org:selector-filter:string"


def subject(text: str | None) -> DictMessageView:
    return DictMessageView(properties={} if text is None else {"subject": text})


DIRECT_CASES = [
    ("apache §1.1 direct: exact subject", "orders", "orders", True),
    ("apache §1.1 direct: other subject", "orders", "order", False),
    ("apache §1.1 direct: case-sensitive", "orders", "Orders", False),
    ("apache §1.1 direct: no wildcards", "*", "orders", False),
    ("apache §1.1 direct: absent subject never matches", "", None, False),
]


@pytest.mark.parametrize(("key", "text", "expected"),
                         [pytest.param(k, t, e, id=i) for i, k, t, e in DIRECT_CASES])
def test_direct_binding(key: str, text: str | None, expected: bool) -> None:
    assert evaluate(described(DIRECT, key), subject(text)) is expected
    assert evaluate(described(0x0000468C00000000, key), subject(text)) is expected


def test_direct_binding_without_properties_section() -> None:
    assert evaluate(described(DIRECT, "x"), DictMessageView()) is False


TOPIC_CASES = [
    ("apache §1.2 topic: the registry's example, usd.stock", "*.stock.#", "usd.stock", True),
    ("apache §1.2 topic: the registry's example, eur.stock.db", "*.stock.#", "eur.stock.db",
     True),
    ("apache §1.2 topic: the registry's example, stock.nasdaq", "*.stock.#", "stock.nasdaq",
     False),
    ("apache §1.2 topic: literal words", "a.b", "a.b", True),
    ("apache §1.2 topic: literal words, extra word", "a", "a.b", False),
    ("apache §1.2 topic: * is exactly one word", "a.*", "a", False),
    ("apache §1.2 topic: * is one word", "a.*.c", "a.b.c", True),
    ("apache §1.2 topic: * is not two words", "a.*.c", "a.b.b.c", False),
    ("apache §1.2 topic: # is zero words", "a.#", "a", True),
    ("apache §1.2 topic: # is many words", "a.#", "a.b.c.d", True),
    ("apache §1.2 topic: # in front", "#.b", "a.b.b", True),
    ("apache §1.2 topic: # in the middle", "a.#.b.#.c", "a.x.b.y.c", True),
    ("apache §1.2 topic: # in the middle, zero words each", "a.#.b.#.c", "a.b.c", True),
    ("apache §1.2 topic: # in the middle, missing word", "a.#.b.#.c", "a.c", False),
    ("apache §1.2 topic: # and * together", "#.*", "", False),
    ("apache §1.2 topic: # # adjacent", "a.#.#.b", "a.b", True),
    ("apache §1.2 topic: # alone matches anything", "#", "x.y.z", True),
    ("apache §1.2 topic: # alone matches the empty subject", "#", "", True),
    ("apache §1.2 topic: * does not match the empty subject (no words)", "*", "", False),
    ("apache §1.2 topic: empty words count", "a.*.b", "a..b", True),
    ("apache §1.2 topic: # inside a word is literal", "a#", "a#", True),
    ("apache §1.2 topic: # inside a word is no wildcard", "a#", "ab", False),
    ("apache §1.2 topic: case-sensitive", "A.#", "a.b", False),
    ("apache §1.2 topic: absent subject matches a single #", "#", None, True),
    ("apache §1.2 topic: absent subject does not match #.#", "#.#", None, False),
    ("apache §1.2 topic: absent subject does not match *", "*", None, False),
]


@pytest.mark.parametrize(("pattern", "text", "expected"),
                         [pytest.param(p, t, e, id=i) for i, p, t, e in TOPIC_CASES])
def test_topic_binding(pattern: str, text: str | None, expected: bool) -> None:
    assert evaluate(described(TOPIC, pattern), subject(text)) is expected
    assert evaluate(described(0x0000468C00000001, pattern), subject(text)) is expected


@given(st.lists(st.sampled_from(["a", "b", "*", "#"]), max_size=6),
       st.lists(st.sampled_from(["a", "b", ""]), max_size=6))
def test_topic_binding_agrees_with_a_recursive_oracle(pattern: list[str], words: list[str]) -> None:
    text, pat = ".".join(words), ".".join(pattern)
    expected = _reference_topic_words(pattern, words if text else [])
    assert evaluate(described(TOPIC, pat), subject(text)) is expected


def _reference_topic_words(pattern: list[str], words: list[str]) -> bool:
    """Word-level oracle by plain recursion (small inputs only)."""
    if not pattern:
        return not words
    head, rest = pattern[0], pattern[1:]
    if head == "#":
        return any(_reference_topic_words(rest, words[i:]) for i in range(len(words) + 1))
    if not words:
        return False
    return (head in ("*", words[0])) and _reference_topic_words(rest, words[1:])


def test_topic_search_checks_the_budget_on_huge_subjects() -> None:
    pattern = "#." + ".".join(["a"] * 200) + ".b.#"
    text = ".".join(["a"] * 20_000)
    ctx = EvaluationContext()
    ctx.begin(budget_ms=0.001)
    assert evaluate(described(TOPIC, pattern), subject(text), ctx) is None
    assert ctx.budget_exceeded


APP = {"color": "red", "size": 5, "flag": None, "x-extra": "y"}

HEADERS_CASES: list[tuple[str, dict[Any, Any], bool]] = [
    ("apache §1.3 headers: x-match all, every pair matches",
     {"x-match": symbol("all"), "color": "red", "size": 5}, True),
    ("apache §1.3 headers: x-match all, one pair differs",
     {"x-match": symbol("all"), "color": "red", "size": 6}, False),
    ("apache §1.3 headers: x-match any, one pair matches",
     {"x-match": symbol("any"), "color": "blue", "size": 5}, True),
    ("apache §1.3 headers: x-match any, no pair matches",
     {"x-match": symbol("any"), "color": "blue", "size": 6}, False),
    ("apache §1.3 headers: no x-match means all", {"color": "red", "size": 6}, False),
    ("apache §1.3 headers: NULL value matches any value of a present key",
     {"x-match": symbol("all"), "color": None}, True),
    ("apache §1.3 headers: NULL value matches a present null", {"flag": None}, True),
    ("apache §1.3 headers: NULL value needs the key", {"absent": None}, False),
    ("apache §1.3 headers: other x- keys are ignored", {"x-other": "zzz", "color": "red"}, True),
    ("apache §1.3 headers: x- keys are ignored even if they would match",
     {"x-match": symbol("any"), "x-extra": "y"}, False),
    ("apache §1.3 headers: all over no pairs is TRUE", {"x-match": symbol("all")}, True),
    ("apache §1.3 headers: integer types compare by value", {"size": 5}, True),
    ("apache §1.3 headers: '&' is literal (no modifiers)", {"color": "&p:r"}, False),
    ("apache §1.3 headers: x-match may be a string", {"x-match": "any", "size": 5}, True),
]


@pytest.mark.parametrize(("binding", "expected"),
                         [pytest.param(b, e, id=i) for i, b, e in HEADERS_CASES])
def test_headers_binding(binding: dict[Any, Any], expected: bool) -> None:
    view = DictMessageView(application_properties=APP)
    assert evaluate(described(HEADERS, binding), view) is expected
    assert evaluate(described(0x0000468C00000002, binding), view) is expected


@pytest.mark.parametrize(("binding", "text"), [
    pytest.param({"x-match": "some"}, "x-match must be", id="apache §1.3 x-match any/all"),
    pytest.param({"x-match": 1}, "x-match must be", id="apache §1.3 x-match is a symbol"),
    pytest.param({5: "x"}, "keys are strings", id="apache §1.3 keys are strings"),
    pytest.param({"a": [1]}, "simple types only", id="apache §1.3 values are simple: list"),
    pytest.param({"a": {"b": 1}}, "simple types only", id="apache §1.3 values are simple: map"),
    pytest.param(["color", "red"], "needs a map", id="apache §1.3 the binding is a map"),
])
def test_headers_binding_errors(binding: Any, text: str) -> None:
    with pytest.raises(FilterError, match=text):
        evaluate(described(HEADERS, binding))


@pytest.mark.parametrize("descriptor", [DIRECT, TOPIC, SELECTOR])
@pytest.mark.parametrize("value", [5, None, ["a"], {"a": 1}])
def test_string_bindings_need_a_string(descriptor: str, value: Any) -> None:
    with pytest.raises(FilterError, match="needs a string"):
        evaluate(described(descriptor, value))


def test_binding_strings_are_bounded_by_the_text_limit() -> None:
    with pytest.raises(FilterError, match="max_sql_length") as caught:
        evaluate(described(TOPIC, "a" * 11), limits=Limits(max_sql_length=10))
    assert caught.value.limit


NO_LOCAL_CASES: list[tuple[str, Any, Any, bool]] = [
    ("apache §2.1 no-local: same connection is refused", "c1", "c1", False),
    ("apache §2.1 no-local: another connection is accepted", "c1", "c2", True),
    ("apache §2.1 no-local: unknown origin is not the consumer's", None, "c1", True),
    ("apache §2.1 no-local: unknown origin, unknown consumer: eligible", None, None, True),
    ("apache §2.1 no-local: identities compare by equality", ("conn", 1), ("conn", 1), False),
]


@pytest.mark.parametrize(("origin", "consumer", "expected"),
                         [pytest.param(o, c, e, id=i) for i, o, c, e in NO_LOCAL_CASES])
@pytest.mark.parametrize("descriptor", [NO_LOCAL, "apache.org:jms-no-local-filter:list",
                                        0x0000468C00000003])
@pytest.mark.parametrize("value", [[], "NoLocalFilter{}"], ids=["list", "qpid-jms-string"])
def test_no_local(descriptor: Any, value: Any, origin: Any, consumer: Any,
                  expected: bool) -> None:
    ctx = EvaluationContext(origin=origin, consumer=consumer)
    assert evaluate(described(descriptor, value), ctx=ctx) is expected


@pytest.mark.parametrize("value", [5, None, {"a": 1}, True])
def test_no_local_value_type(value: Any) -> None:
    with pytest.raises(FilterError, match="needs a list"):
        evaluate(described(NO_LOCAL, value))
