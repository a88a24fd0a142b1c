"""Hostile SQL filters (spec §7.1): refused by a limit, never by RecursionError, MemoryError
or a hang; limit refusals masked for the client; everything else bounded and correct."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import ulong

from filtex_proton.amqp.view import DictMessageView, MessageView
from filtex_proton.errors import FilterError
from filtex_proton.limits import DEFAULT_LIMITS, Limits
from filtex_proton.sql import AMQP_SQL, JMS_SELECTOR, Dialect, compile_sql
from filtex_proton.sql.values import MAX_CONCAT_LENGTH

from .hostile_support import assert_masked, deep_parens, fuzz_views, refusal

D = DEFAULT_LIMITS
#: Length limit out of the way, so that the structural limits are what refuses.
LONG = Limits(max_sql_length=10**6)
#: Every structural limit out of the way too: what is left is the engine's own robustness.
ABSURD = Limits(max_sql_length=10**7, max_sql_nodes=10**7, max_sql_depth=10**7,
                max_in_list=10**7)
DIALECTS = [pytest.param(AMQP_SQL, id="amqp"), pytest.param(JMS_SELECTOR, id="jms")]


def view(**application_properties: Any) -> MessageView:
    return DictMessageView(application_properties=application_properties)


# ---------------------------------------------------------------------------- deep nesting

def deep_texts(n: int) -> dict[str, str]:
    """Texts nested ``n`` deep, each way the grammar allows nesting."""
    return {
        "parentheses": deep_parens(n),
        "NOT chain": "NOT " * n + "a = 1",
        "unary minus chain": "-" * n + "1 = a",
        "unary plus/minus mix": "+-" * (n // 2) + "1 = a",
        "arithmetic chain": "a = " + " + ".join(["1"] * n),
        "right-nested arithmetic": "a = " + "1 + (" * n + "1" + ")" * n,
        "AND of parenthesised ORs": "(a = 1 OR " * n + "b = 2" + ")" * n,
        "nested function calls": "LOWER(" * n + "a" + ")" * n + " = 'x'",
        "nested positional references": "a" + "[a" * n + "]" * n + " = 1",
        "positional chain": "a" + "[0]" * n + " = 1",
        "IN inside IN": "a IN ((" * n + "1" + "))" * n,
        "NOT and parentheses": "NOT (" * n + "a = 1" + ")" * n,
    }


DEEP = deep_texts(10_000)
#: The same shapes 3,000 deep: three times Python's recursion limit, a third of the work.
DEEP_3000 = deep_texts(3_000)


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("text", DEEP.values(), ids=DEEP.keys())
def test_nesting_10000_deep_is_refused_by_a_limit(text: str, dialect: Dialect) -> None:
    """At the default limits every 10,000-deep text is a limit refusal (§7.1)."""
    error = refusal(lambda: compile_sql(text, dialect))
    assert_masked(error, text[:60], text[-60:])


@pytest.mark.parametrize("text", DEEP.values(), ids=DEEP.keys())
def test_nesting_10000_deep_with_only_the_length_limit_raised(text: str) -> None:
    """With room for the text, the depth and node limits refuse it; parentheses alone make
    no tree nodes, and signs on a constant fold into the literal as they are parsed, so those
    pass (harmless: the parser's stack is a list, not the C stack)."""
    try:
        compiled = compile_sql(text, AMQP_SQL, LONG)
    except FilterError as error:
        assert_masked(error, text[:60])
    else:
        assert text in (DEEP["parentheses"], DEEP["unary minus chain"],
                        DEEP["unary plus/minus mix"])
        assert compiled.evaluate(view(a=1)) is True  # an even number of minus signs: 1 = a




@pytest.mark.parametrize("name", DEEP.keys())
def test_deep_nesting_with_absurd_limits_never_crashes(name: str) -> None:
    """Even with every limit lifted, deep nesting ends in a FilterError (the compiler's
    recursion is caught) or a working filter, never a RecursionError escaping."""
    text = DEEP_3000[name]
    try:
        compiled = compile_sql(text, AMQP_SQL, ABSURD)
    except FilterError as error:
        assert error.limit is True
    else:
        result = compiled.evaluate(view(a=1, b=2))
        assert result in (True, False, None)


def test_not_chain_at_the_depth_limit_is_accepted_and_correct() -> None:
    depth = D.max_sql_depth - 2  # NOT nodes plus the comparison and its operands
    compiled = compile_sql("NOT " * depth + "a = 1")
    assert compiled.evaluate(view(a=1)) is (depth % 2 == 0)
    assert_masked(refusal(lambda: compile_sql("NOT " * (D.max_sql_depth + 1) + "a = 1")))


# ---------------------------------------------------------------------------- wide and long


def in_list(count: int) -> str:
    return "a IN (" + ", ".join(str(i) for i in range(count)) + ")"


def test_in_list_of_100000_values_is_refused_by_a_limit() -> None:
    text = in_list(100_000)
    assert_masked(refusal(lambda: compile_sql(text)), text[:40])  # the length limit
    assert_masked(refusal(lambda: compile_sql(text, AMQP_SQL, LONG)), text[:40])  # max_in_list


def test_in_list_at_its_limit_is_accepted_and_correct() -> None:
    limits = Limits(max_sql_length=10**6, max_sql_nodes=10**4)
    compiled = compile_sql(in_list(D.max_in_list), AMQP_SQL, limits)
    assert compiled.evaluate(view(a=D.max_in_list - 1)) is True
    assert compiled.evaluate(view(a=D.max_in_list)) is False
    assert_masked(refusal(lambda: compile_sql(in_list(D.max_in_list + 1), AMQP_SQL, limits)))


def sql_of_length(length: int) -> str:
    text = "a = '" + "x" * (length - 6) + "'"
    assert len(text) == length
    return text


def test_sql_of_8_kib_is_accepted_and_8_kib_plus_1_refused() -> None:
    assert D.max_sql_length == 8192
    compiled = compile_sql(sql_of_length(8192))
    assert compiled.evaluate(view(a="x" * 8186)) is True
    too_long = sql_of_length(8193)
    error = refusal(lambda: compile_sql(too_long))
    assert_masked(error, "x" * 40)
    assert "8193" in error.reason


def test_many_nodes_are_refused_by_a_limit() -> None:
    text = " OR ".join(["a"] * (D.max_sql_nodes + 1))
    assert_masked(refusal(lambda: compile_sql(text, AMQP_SQL, LONG)))


# ---------------------------------------------------------------------------- huge constants


@pytest.mark.parametrize(("text", "dialect"), [
    pytest.param("a = " + "9" * 8000, AMQP_SQL, id="integer of 8000 digits"),
    pytest.param("a = 18446744073709551616", AMQP_SQL, id="integer 2^64"),
    pytest.param("a = " + "9" * 4000 + "." + "9" * 4000, AMQP_SQL, id="decimal of 8000 digits"),
    pytest.param("a = 1." + "0" * 40 + "1", AMQP_SQL, id="decimal of 42 digits"),
    pytest.param("a = " + "9" * 5000 + "E5", AMQP_SQL, id="approximate beyond double"),
    pytest.param("a = 1E99999999", AMQP_SQL, id="exponent 99999999"),
    pytest.param("a = 0x" + "F" * 8001, AMQP_SQL, id="odd hex of 8001 digits"),
    pytest.param("a = 0x" + "F" * 8000, JMS_SELECTOR, id="jms hex integer of 8000 digits"),
    pytest.param("a = " + "9" * 5000 + ".5", JMS_SELECTOR, id="jms decimal beyond double"),
])
def test_huge_constants_are_refused_with_a_short_message(text: str, dialect: Dialect) -> None:
    error = refusal(lambda: compile_sql(text, dialect))
    assert error.limit is False  # a definitional error the client should see in full
    assert len(error.reason) < 200, error.reason  # ... without its own 8 KB echoed back
    assert len(error.client_text()) < 600


@pytest.mark.parametrize(("text", "value", "expected"), [
    ("a = " + "0" * 8000 + "1", 1, True),
    ("a = 18446744073709551615", ulong(2**64 - 1), True),
    ("a = 1.0E-99999999", 0.0, True),  # §6.4.4.2.3: a decimal coefficient
    ("a = 0x" + "AB" * 4000, bytes.fromhex("ab" * 4000), True),  # §6.4.4.2.6: upper case
    ("a = 1." + "0" * 33, 1, True),
])
def test_huge_but_valid_constants_evaluate_correctly(text: str, value: Any,
                                                     expected: bool) -> None:
    assert compile_sql(text).evaluate(view(a=value)) is expected


@pytest.mark.parametrize("text", [
    "h.[" + "x" * 8000 + "] = 1",
    "$" + "y" * 8000 + " = 1",  # an unknown function y...y(1) is NULL now (§6.4.4.3)
    "a = 1 '" + "z" * 8000 + "'",
    "JMSPriority" + "[0]" * 2000 + " = 1",
    "'" + "q" * 8000,
    "[" + "w" * 8000,
])
def test_error_texts_do_not_echo_kilobytes(text: str) -> None:
    error = refusal(lambda: compile_sql(text, JMS_SELECTOR if "JMS" in text else AMQP_SQL))
    assert len(error.reason) < 400, error.reason[:100]
    assert len(error.client_text()) < 800


# ---------------------------------------------------------------------------- amplification


def concat_tree(levels: int) -> str:
    """((a+a)+(a+a))...: 2**levels leaves, a text of about 4 * 2**levels characters."""
    text = "a"
    for _ in range(levels):
        text = f"({text}+{text})"
    return text


def test_string_concatenation_cannot_amplify_a_message() -> None:
    """A thousand-fold concatenation of a 100 KB property would build 100 MB per message;
    a concatenation past MAX_CONCAT_LENGTH is an evaluation error (NULL) instead."""
    compiled = compile_sql(concat_tree(10) + " IS NULL")  # 1024 leaves, 2048 nodes
    message = view(a="x" * 100_000)
    tracemalloc.start()
    try:
        result = compiled.evaluate(message)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result is True
    assert peak < 4 * MAX_CONCAT_LENGTH * 8, peak


def test_concatenation_up_to_the_cap_is_exact() -> None:
    half = MAX_CONCAT_LENGTH // 2
    compiled = compile_sql("a + b = c")
    assert compiled.evaluate(view(a="x" * half, b="y" * half, c="x" * half + "y" * half)) is True
    assert compiled.evaluate(view(a="x" * half, b="y" * (half + 1), c="")) is None


# ---------------------------------------------------------------------------- fuzzing

TOKENS = st.sampled_from([
    "a", "b", "p.subject", "h.priority", "a.list[0]", "map.key", "[x y]", "JMSPriority",
    "=", "<>", "!=", "<", ">=", "+", "-", "*", "/", "%", "(", ")", ",", "AND", "OR", "NOT",
    "IS", "NULL", "LIKE", "ESCAPE", "IN", "BETWEEN", "EXISTS", "TRUE", "FALSE", "NAN", "INF",
    "1", "0", "18446744073709551616", "1.5", "7.", ".5", "1E400", "0x0F", "0xF", "'x'",
    "'%_\\'", "''", "\"d\"", "'\\'", "LOWER(", "SUBSTRING(", "DATE(", "UTC()", "acme:f(",
    "'2021-03-17'", "[", "]", ".", "'", "\x00", "\u2603",
])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tokens=st.lists(TOKENS, max_size=40), dialect=st.sampled_from([AMQP_SQL, JMS_SELECTOR]),
       tiny=st.booleans())
def test_token_soup_raises_only_filter_error(tokens: list[str], dialect: Dialect,
                                             tiny: bool) -> None:
    text = " ".join(tokens)
    limits = Limits(max_sql_length=64, max_sql_nodes=12, max_sql_depth=4) if tiny else D
    try:
        compiled = compile_sql(text, dialect, limits)
    except FilterError as error:
        if error.limit:
            assert_masked(error)
        return
    for message in fuzz_views.fixed_views():
        assert compiled.evaluate(message) in (True, False, None)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200))
def test_arbitrary_text_raises_only_filter_error(text: str) -> None:
    for dialect in (AMQP_SQL, JMS_SELECTOR):
        try:
            compiled = compile_sql(text, dialect)
        except FilterError:
            continue
        assert compiled.evaluate(view(a=1)) in (True, False, None)


@pytest.mark.parametrize("build", [
    pytest.param(lambda n: "a = 1 AND " * n + "b = 2", id="AND chain"),
    pytest.param(lambda n: "a LIKE '" + "%_" * n + "'", id="LIKE of many wildcards"),
    pytest.param(lambda n: "a IN (" + "'x'," * n + "'y')", id="IN of strings"),
])
def test_compile_work_is_bounded_by_the_length_limit(build: Callable[[int], str]) -> None:
    """Whatever the shape, the text is at most 8 KiB: everything either compiles or is
    refused, and the compiled filter evaluates."""
    n = 1
    while len(build(n * 2)) <= D.max_sql_length:
        n *= 2
    try:
        compiled = compile_sql(build(n))
    except FilterError as error:
        assert error.limit
    else:
        assert compiled.evaluate(view(a="x", b=2)) in (True, False, None)
