"""Conformance table: LIKE (§6.4.3.2), IS NULL, IN and BETWEEN (§6.4.3.1, §6.4.3.3), EXISTS and
references (§6.4.3.4, §6.4.4.5) and the functions (§6.4.4.3).

Rows are checked as ``rows.py`` says.
"""

from __future__ import annotations

from typing import Any

import pytest
from proton import (
    Data,
    Described,
    symbol,
)

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.sql import compile_sql

from ..support import evaluate
from .rows import (
    ROW_ARGS,
    F,
    J,
    N,
    T,
    check,
    row,
    undescribed_array,
)

# =============================================================================================
# §6.4.3.2 LIKE

LIKE_ROWS = [
    row(f"§6.4.3.2 {d}", text, exp) for d, text, exp in [
        ("exact match", "s LIKE 'abc'", T),
        ("case sensitive", "s LIKE 'ABC'", F),
        ("% suffix", "s LIKE 'a%'", T),
        ("% prefix", "s LIKE '%c'", T),
        ("% inside", "s LIKE 'a%c'", T),
        ("% matches empty", "s LIKE 'abc%'", T),
        ("_ matches one", "s LIKE 'a_c'", T),
        ("_ does not match two", "s LIKE 'a_'", F),
        ("_ does not match zero", "s LIKE 'abc_'", F),
        ("%% is %", "s LIKE '%%'", T),
        ("%% matches empty", "e LIKE '%%'", T),
        ("a%%c", "s LIKE 'a%%c'", T),
        ("empty pattern matches empty string", "e LIKE ''", T),
        ("empty pattern does not match text", "s LIKE ''", F),
        ("% matches empty string", "e LIKE '%'", T),
        ("_ does not match empty string", "e LIKE '_'", F),
        ("_ matches a newline", "nl LIKE 'a_b'", T),
        ("% matches across a newline", "nl LIKE 'a%'", T),
        ("%b after a newline", "nl LIKE '%b'", T),
        ("_ matches one astral code point", "astral LIKE '_'", T),
        ("__ does not match one astral code point", "astral LIKE '__'", F),
        ("astral literal", "astral LIKE '%\U0001d538%'", T),
        ("unicode combining text", "'e\u0301' LIKE '__'", T),
        ("regex metacharacters are literal", "'a.c' LIKE 'a.c'", T),
        ("dot is not a wildcard", "s LIKE 'a.c'", F),
        ("star is literal", "'a*' LIKE 'a*'", T),
        ("brackets are literal", "'[a]' LIKE '[a]'", T),
        ("brackets are not a class", "'a' LIKE '[a]'", F),
        ("backslash is literal without ESCAPE", "'a\\b' LIKE 'a\\b'", T),
        ("backslash is no escape by default", "'a%' LIKE 'a\\%'", F),
        ("minimal % with repeated segment", "'abcabc' LIKE '%abc'", T),
        ("several % segments", "'aXbXc' LIKE 'a%b%c'", T),
        ("segments must not overlap", "'aba' LIKE '%ab%ba%'", F),
        ("segments in order", "'abba' LIKE '%ab%ba%'", T),
        ("_ inside a floating segment", "'xxaya' LIKE '%a_a'", T),
        ("_% needs one char", "'a' LIKE 'a_%'", F),
        ("_%_ needs two chars", "'ab' LIKE '_%_'", T),
        ("NOT LIKE", "s NOT LIKE 'x%'", T),
        ("NOT LIKE of a match", "s NOT LIKE 'a%'", F),
        ("ESCAPE %", "pct LIKE '100!%' ESCAPE '!'", T),
        ("escaped % is literal", "'1000' LIKE '100!%' ESCAPE '!'", F),
        ("ESCAPE _", "under LIKE 'a!_b' ESCAPE '!'", T),
        ("escaped _ is literal", "'axb' LIKE 'a!_b' ESCAPE '!'", F),
        ("escaped escape", "'a!b' LIKE 'a!!b' ESCAPE '!'", T),
        ("escape + ordinary char is that char", "s LIKE 'a!bc' ESCAPE '!'", T),
        ("% as the escape char", "'a%' LIKE 'a%%' ESCAPE '%'", T),
        ("% as escape: %% is a literal %", "'ab' LIKE 'a%%' ESCAPE '%'", F),
        ("_ as the escape char", "'a_' LIKE 'a__' ESCAPE '_'", T),
        ("backslash as the escape char", "pct LIKE '100\\%' ESCAPE '\\'", T),
        ("astral escape char", "pct LIKE '100\U0001d538%' ESCAPE '\U0001d538'", T),
        ("escaped % in a floating segment", "'x50%y' LIKE '%0!%%' ESCAPE '!'", T),
        ("symbol operand", "p.content-type LIKE 'text/%'", T),
        ("pattern from a field", "s LIKE y", T),
        ("escape from a field", "pct LIKE '100#%' ESCAPE esc", T),
        ("field pattern ending in the escape is NULL", "s LIKE '%' + esc ESCAPE esc", N),
        ("folded pattern ending in the escape is NULL", "s LIKE 'a' + '!' ESCAPE '!'", N),
        ("folded two-char escape is NULL", "s LIKE 'a%' ESCAPE '!' + '!'", N),
        ("field escape of two chars is NULL", "s LIKE 'a%' ESCAPE s", N),
        ("NULL operand", "n LIKE 'a%'", N),
        ("absent operand", "absent LIKE 'a%'", N),
        ("NOT LIKE of NULL is NULL", "n NOT LIKE 'a%'", N),
        ("NULL pattern", "s LIKE NULL", N),
        ("NULL escape", "s LIKE 'a%' ESCAPE NULL", N),
        ("number operand is NULL", "i LIKE '5'", N),
        ("char operand is NULL", "c LIKE 'a'", N),
        ("binary operand is NULL", "bin LIKE '%'", N),
        ("number pattern is NULL", "s LIKE 5", N),
    ]
]
for _row in LIKE_ROWS:
    _row.values[2]["application_properties"].update({"y": "a%", "esc": "#"})


@pytest.mark.parametrize(ROW_ARGS, LIKE_ROWS)
def test_like(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


def test_like_is_linear_for_hostile_patterns() -> None:
    """§6.4.3.2 + §7.1: many % and _ against a long non-matching text finishes quickly."""
    import time

    text = "a" * 20000
    pattern = "%a" * 40 + "%b"
    compiled = compile_sql(f"x LIKE '{pattern}'")
    start = time.perf_counter()
    assert compiled.evaluate(DictMessageView(application_properties={"x": text})) is False
    assert compile_sql("x LIKE '" + "_%" * 60 + "b'").evaluate(
        DictMessageView(application_properties={"x": text})) is False
    assert time.perf_counter() - start < 2.0


# =============================================================================================
# §6.4.3.1 IS NULL, §6.4.3.3 IN, BETWEEN (JMS, accepted in both dialects)

PREDICATE_ROWS = [
    row("§6.4.3.1 absent map entry IS NULL", "absent IS NULL", T),
    row("§6.4.3.1 present-null map entry IS NULL", "n IS NULL", T),
    row("§6.4.3.1 present value IS NOT NULL", "s IS NOT NULL", T),
    row("§6.4.3.1 absent IS NOT NULL is FALSE", "absent IS NOT NULL", F),
    row("§6.4.3.1 present-null IS NOT NULL is FALSE", "n IS NOT NULL", F),
    row("§6.4.3.1 NaN IS NOT NULL", "nan IS NOT NULL", T),
    row("§6.4.3.1 empty string IS NOT NULL", "e IS NOT NULL", T),
    row("§6.4.3.1 nested absent entry IS NULL", "a.m.missing IS NULL", T),
    row("§6.4.3.1 nested present-null entry IS NULL", "a.m.nul IS NULL", T),
    row("§6.4.3.1 absent properties field IS NULL", "p.subject IS NULL", T,
        msg={"properties": {"to": "x"}}),
    row("§6.4.3.1 properties field given as None counts as absent", "p.subject IS NULL", T,
        msg={"properties": {"subject": None}}),
    row("§6.4.3.1 absent properties section IS NULL", "p.message-id IS NULL", T, msg={}),
    row("§6.4.3.1 absent header priority takes its default 4", "h.priority IS NULL", F, msg={}),
    row("§6.4.3.1 absent header priority = 4", "h.priority = 4", T, msg={}),
    row("§6.4.3.1 header priority given as None takes its default", "h.priority = 4", T,
        msg={"header": {"priority": None}}),
    row("§6.4.3.1 absent durable is FALSE", "h.durable = FALSE", T, msg={"header": {}}),
    row("§6.4.3.1 absent first-acquirer is FALSE", "h.first-acquirer = FALSE", T, msg={}),
    row("§6.4.3.1 absent delivery-count is 0", "h.delivery-count = 0", T, msg={}),
    row("§6.4.3.1 absent ttl has no default", "h.ttl IS NULL", T, msg={}),
    row("§6.4.3.1 expression IS NULL", "(i + n) IS NULL", T),
    row("§6.4.3.1 vendor function IS NULL", "acme:anything(i) IS NULL", T),
    row("§6.4.3.3 IN matches", "s IN ('x', 'abc')", T),
    row("§6.4.3.3 IN does not match", "s IN ('x', 'y')", F),
    row("§6.4.3.3 single-item IN", "i IN (5)", T),
    row("§6.4.3.3 NOT IN", "s NOT IN ('x', 'y')", T),
    row("§6.4.3.3 NOT IN of a member", "s NOT IN ('x', 'abc')", F),
    row("§6.4.3.3 IN with a NULL member and a match is TRUE", "i IN (NULL, 5)", T),
    row("§6.4.3.3 IN with a NULL member and no match is NULL", "i IN (NULL, 6)", N),
    row("§6.4.3.3 NOT IN with a NULL member and no match is NULL", "i NOT IN (NULL, 6)", N),
    row("§6.4.3.3 NOT IN with a NULL member and a match is FALSE", "i NOT IN (6, NULL, 5)", F),
    row("§6.4.3.3 NULL IN (...) is NULL", "n IN (1, 2)", N),
    row("§6.4.3.3 absent IN (...) is NULL", "absent IN ('a')", N),
    row("§6.4.3.3 absent NOT IN (...) is NULL", "absent NOT IN ('a')", N),
    row("§6.4.3.3 IN with field members", "i IN (two, neg, 5)", T),
    row("§6.4.3.3 IN with expression members", "i IN (1 + 1, two * 2 + 1)", T),
    row("§6.4.3.3 IN across numeric types", "i IN (5.0)", T),
    row("§6.4.3.3 IN across integer types", "u IN (200)", T),
    row("§6.4.3.3 IN of ulong max", "ul IN (18446744073709551615)", T),
    row("§6.4.3.3 symbol IN strings", "sym IN ('abc')", T),
    row("§6.4.3.3 string IN with a symbol member", "'text/plain' IN (p.content-type)", T),
    row("§6.4.3.3 incomparable members are NULL", "i IN ('5')", N),
    row("§6.4.3.3 incomparable and matching members", "i IN ('5', 5)", T),
    row("§6.4.3.3 NOT IN with incomparable members", "i NOT IN ('5')", N),
    row("§6.4.3.3 mixed strings and a non-string operand", "i IN ('a', 'b')", N),
    row("§6.4.3.3 IN of booleans", "t IN (FALSE, TRUE)", T),
    row("§6.4.3.3 IN of binary", "bin IN (0x00, 0x0A0B)", T),
    row("§6.4.3.3 IN of uuids", "id IN (p.correlation-id)", T),
    row("§6.4.3.3 case sensitive IN", "s IN ('ABC')", F),
    row("§6.4.3.3 astral IN", "astral IN ('\U0001d538')", T),
    row("§6.4.3 BETWEEN inside (JMS §3.8.1.2 syntax)", "i BETWEEN 1 AND 10", T),
    row("§6.4.3 BETWEEN inclusive low", "i BETWEEN 5 AND 10", T),
    row("§6.4.3 BETWEEN inclusive high", "i BETWEEN 1 AND 5", T),
    row("§6.4.3 BETWEEN below", "i BETWEEN 6 AND 10", F),
    row("§6.4.3 BETWEEN empty range", "i BETWEEN 10 AND 1", F),
    row("§6.4.3 NOT BETWEEN", "i NOT BETWEEN 6 AND 10", T),
    row("§6.4.3 NOT BETWEEN inside", "i NOT BETWEEN 1 AND 10", F),
    row("§6.4.3 BETWEEN NULL operand", "n BETWEEN 1 AND 10", N),
    row("§6.4.3 NOT BETWEEN NULL operand", "n NOT BETWEEN 1 AND 10", N),
    row("§6.4.3 BETWEEN with NULL low, above high is FALSE", "i BETWEEN NULL AND 4", F),
    row("§6.4.3 BETWEEN with NULL low, below high is NULL", "i BETWEEN NULL AND 10", N),
    row("§6.4.3 NOT BETWEEN with NULL low, above high is TRUE", "i NOT BETWEEN NULL AND 4", T),
    row("§6.4.3 BETWEEN with NULL high, below low is FALSE", "i BETWEEN 6 AND NULL", F),
    row("§6.4.3 BETWEEN mixed numeric types", "d BETWEEN 1 AND 2.0E0", T),
    row("§6.4.3 BETWEEN strings in AMQP SQL", "s BETWEEN 'abb' AND 'abd'", T),
    row("§6.4.3 BETWEEN binds its own AND", "i BETWEEN 1 AND 10 AND t", T),
    row("§6.4.3 BETWEEN with expressions", "i + 1 BETWEEN two * 3 AND 6", T),
    row("§6.4.3 BETWEEN incomparable is NULL", "s BETWEEN 1 AND 2", N),
    row("apache §2.2 BETWEEN in JMS", "i BETWEEN 1 AND 10", T, dialect=J),
    row("apache §2.2 NOT BETWEEN in JMS", "i NOT BETWEEN 1 AND 10", F, dialect=J),
    row("apache §2.2 BETWEEN strings in JMS is FALSE", "s BETWEEN 'abb' AND 'abd'", F,
        dialect=J),
    row("apache §2.2 NOT BETWEEN strings in JMS is TRUE", "s NOT BETWEEN 'abb' AND 'abd'", T,
        dialect=J),
]


@pytest.mark.parametrize(ROW_ARGS, PREDICATE_ROWS)
def test_predicates(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


# =============================================================================================
# §6.4.3.4 EXISTS on all six sections and nested references; §6.4.4.5 references

EXISTS_ROWS = [
    row("§6.4.3.4 EXISTS header field present", "EXISTS(h.priority)", T),
    row("§6.4.3.4 EXISTS header field absent (despite its default)", "EXISTS(h.priority)", F,
        msg={"header": {"durable": True}}),
    row("§6.4.3.4 EXISTS header field in absent header", "EXISTS(header.durable)", F, msg={}),
    row("§6.4.3.4 EXISTS header field given as None", "EXISTS(h.ttl)", F,
        msg={"header": {"ttl": None}}),
    row("§6.4.3.4 EXISTS properties field present", "EXISTS(p.subject)", T),
    row("§6.4.3.4 EXISTS properties field absent", "EXISTS(p.subject)", F,
        msg={"properties": {"to": "q"}}),
    row("§6.4.3.4 EXISTS properties field given as None", "EXISTS(properties.reply_to)", F,
        msg={"properties": {"reply-to": None}}),
    row("§6.4.3.4 EXISTS application property", "EXISTS(s)", T),
    row("§6.4.3.4 EXISTS present-null application property", "EXISTS(n)", T),
    row("§6.4.3.4 EXISTS absent application property", "EXISTS(absent)", F),
    row("§6.4.3.4 EXISTS qualified application property", "EXISTS(a.s)", T),
    row("§6.4.3.4 EXISTS in an absent application-properties section", "EXISTS(x)", F, msg={}),
    row("§6.4.3.4 EXISTS delivery annotation", "EXISTS(d.[x-opt-d])", T),
    row("§6.4.3.4 EXISTS absent delivery annotation", "EXISTS(delivery_annotations.[x-opt-e])",
        F),
    row("§6.4.3.4 EXISTS message annotation", "EXISTS(m.[x-opt-jms-type])", T),
    row("§6.4.3.4 EXISTS present-null message annotation", "EXISTS(m.[x-opt-null])", T),
    row("§6.4.3.4 EXISTS absent message annotation", "EXISTS(message_annotations.[x-opt-q])",
        F),
    row("§6.4.3.4 EXISTS footer entry", "EXISTS(f.[x-opt-f])", T),
    row("§6.4.3.4 EXISTS absent footer entry", "EXISTS(footer.[x-opt-g])", F),
    row("§6.4.3.4 EXISTS in an absent footer", "EXISTS(f.[x-opt-f])", F,
        msg={"application_properties": {}}),
    row("§6.4.3.4 EXISTS nested map entry", "EXISTS(a.m.k)", T),
    row("§6.4.3.4 EXISTS nested present-null map entry", "EXISTS(a.m.nul)", T),
    row("§6.4.3.4 EXISTS nested absent map entry", "EXISTS(a.m.zz)", F),
    row("§6.4.3.4 EXISTS two levels deep", "EXISTS(a.m.inner.deep)", T),
    row("§6.4.3.4 EXISTS below an absent entry", "EXISTS(a.m.zz.deep)", F),
    row("§6.4.3.4 EXISTS below a present null", "EXISTS(a.m.nul.deep)", F),
    row("§6.4.3.4 EXISTS below a scalar", "EXISTS(a.s.k)", F),
    row("§6.4.3.4 EXISTS list element", "EXISTS(l[0])", T),
    row("§6.4.3.4 EXISTS null list element", "EXISTS(l[1])", T),
    row("§6.4.3.4 EXISTS list element out of range", "EXISTS(l[4])", F),
    row("§6.4.3.4 EXISTS negative position", "EXISTS(l[-1])", F),
    row("§6.4.3.4 EXISTS with a non-integer position", "EXISTS(l[1.0])", F),
    row("§6.4.3.4 EXISTS with a NULL position", "EXISTS(l[n])", F),
    row("§6.4.3.4 EXISTS nested list element", "EXISTS(l[2][1])", T),
    row("§6.4.3.4 EXISTS map in a list", "EXISTS(l[3].k)", T),
    row("§6.4.3.4 EXISTS array element", "EXISTS(arr[2])", T),
    row("§6.4.3.4 EXISTS array element out of range", "EXISTS(arr[3])", F),
    row("§6.4.3.4 EXISTS described list element", "EXISTS(desc[1])", T),
    row("§6.4.3.4 EXISTS described list out of range", "EXISTS(desc[2])", F),
    row("§6.4.3.4 EXISTS message annotation list element", "EXISTS(m.[x-opt-list][1])", T),
    row("§6.4.3.4 EXISTS position computed from a field", "EXISTS(l[one])", T),
    row("§6.4.3.4 NOT EXISTS", "NOT EXISTS(absent)", T),
    row("§6.4.3.4 EXISTS is never NULL", "EXISTS(absent) IS NULL", F),
    row("§6.4.3.4 EXISTS combined", "EXISTS(s) AND s = 'abc'", T),
]

REFERENCE_ROWS = [
    row("§6.4.4.5 map reference", "a.m.k = 'v'", T),
    row("§6.4.4.5 map reference with a delimited key", "a.m.[x y] = 2", T),
    row("§6.4.4.5 two-level map reference", "a.m.inner.deep = 1", T),
    row("§6.4.4.5 absent map entry is NULL", "a.m.zz = 'v'", N),
    row("§6.4.4.5 map reference on a scalar is NULL", "a.s.k IS NULL", T),
    row("§6.4.4.5 map reference on a list is NULL", "a.l.k IS NULL", T),
    row("§6.4.4.5 map reference below NULL is NULL", "a.m.nul.x IS NULL", T),
    row("§6.4.4.5 positional reference (0-based)", "l[0] = 1", T),
    row("§6.4.4.5 positional reference to a null element", "l[1] IS NULL", T),
    row("§6.4.4.5 nested positional references", "l[2][1] = 20", T),
    row("§6.4.4.5 positional then map reference", "l[3].k = 'w'", T),
    row("§6.4.4.5 out of range is NULL", "l[4] = 1", N),
    row("§6.4.4.5 far out of range is NULL", "l[18446744073709551615] IS NULL", T),
    row("§6.4.4.5 negative position is NULL", "l[-1] IS NULL", T),
    row("§6.4.4.5 non-integer position is NULL", "l[0.0] IS NULL", T),
    row("§6.4.4.5 string position is NULL", "l['0'] IS NULL", T),
    row("§6.4.4.5 boolean position is NULL", "l[FALSE] IS NULL", T),
    row("§6.4.4.5 NULL position is NULL", "l[n] IS NULL", T),
    row("§6.4.4.5 computed position", "l[1 + 1][0] = 10", T),
    row("§6.4.4.5 position from an unsigned field", "l[one] IS NULL", T),
    row("§6.4.4.5 position from an ubyte field", "l[one + one][one] = 20", T),
    row("§6.4.4.5 positional reference on a map is NULL", "m[0] IS NULL", T),
    row("§6.4.4.5 positional reference on a string is NULL", "s[0] IS NULL", T),
    row("§6.4.4.5 array element", "arr[2] = 3", T),
    row("§6.4.4.5 array element out of range", "arr[3] IS NULL", T),
    row("§6.4.4.5 described list element", "desc[0] = 7", T),
    row("§6.4.4.5 message annotation list element", "m.[x-opt-list][1] = 2", T),
    row("§6.4.4.4 a map value is not a simple value", "m = m", N),
    row("§6.4.4.4 a map value is not NULL", "m IS NULL", F),
    row("§6.4.4.4 header field with a path is NULL", "h.priority.x IS NULL", T),
    row("§6.4.4.4 absent header field with a path is NULL (no default)", "h.priority[0] IS NULL",
        T, msg={}),
]


@pytest.mark.parametrize(ROW_ARGS, EXISTS_ROWS + REFERENCE_ROWS)
def test_exists_and_references(
    text: str, dialect: Any, msg: dict[str, Any], expected: bool | None
) -> None:
    check(text, dialect, msg, expected)


def test_exists_on_array_of_nulls() -> None:
    """§6.4.3.4: an element that is there but null exists, in lists and arrays alike."""
    values = {"arr": undescribed_array(Data.NULL, None, None),
              "darr": Described(symbol("d"), undescribed_array(Data.NULL, None))}
    assert evaluate("EXISTS(arr[1])", application_properties=values) is True
    assert evaluate("EXISTS(arr[2])", application_properties=values) is False
    assert evaluate("EXISTS(darr[0])", application_properties=values) is True


# =============================================================================================
# §6.4.4.3 functions

FUNCTION_ROWS = [
    row(f"§6.4.4.3 {d}", text, exp) for d, text, exp in [
        (".1 LOWER", "LOWER('ÀBC') = 'àbc'", T),
        (".1 LOWER of a symbol", "LOWER(p.content-type) = 'text/plain'", T),
        (".1 LOWER is locale-neutral by default (I -> i)", "LOWER('I') = 'i'", T),
        (".1 LOWER tr: I -> dotless i", "LOWER('I', 'tr') = '\u0131'", T),
        (".1 LOWER tr: dotted I -> i", "LOWER('\u0130', 'tr') = 'i'", T),
        (".1 LOWER az-Latn-AZ is Turkic", "LOWER('I', 'az-Latn-AZ') = '\u0131'", T),
        (".1 LOWER TR_tr tag is Turkic", "LOWER('I', 'TR_tr') = '\u0131'", T),
        (".1 LOWER en is neutral", "LOWER('I', 'en') = 'i'", T),
        (".1 LOWER of a number is NULL", "LOWER(i) IS NULL", T),
        (".1 LOWER of NULL is NULL", "LOWER(n) IS NULL", T),
        (".1 LOWER with a NULL tag is NULL", "LOWER(s, n) IS NULL", T),
        (".1 LOWER with a number tag is NULL", "LOWER(s, 1) IS NULL", T),
        (".1 function names are case-insensitive", "lower('A') = 'a'", T),
        (".2 UPPER", "UPPER(s) = 'ABC'", T),
        (".2 UPPER sharp s (full case mapping)", "UPPER('ß') = 'SS'", T),
        (".2 UPPER is locale-neutral by default (i -> I)", "UPPER('i') = 'I'", T),
        (".2 UPPER tr: i -> dotted I", "UPPER('i', 'tr-TR') = '\u0130'", T),
        (".2 UPPER az: dotless i -> I", "UPPER('\u0131', 'az') = 'I'", T),
        (".2 UPPER of a number is NULL", "UPPER(i) IS NULL", T),
        (".2 UPPER for case-insensitive comparison", "UPPER(s) = UPPER('AbC')", T),
        (".3 LEFT", "LEFT(s, 2) = 'ab'", T),
        (".3 LEFT 0", "LEFT(s, 0) = ''", T),
        (".3 LEFT beyond the length", "LEFT(s, 99) = 'abc'", T),
        (".3 LEFT counts code points", "LEFT(astral + 'x', 1) = astral", T),
        (".3 LEFT negative count is an error: NULL", "LEFT(s, -1) IS NULL", T),
        (".3 LEFT negative count from a field: NULL", "LEFT(s, neg) IS NULL", T),
        (".3 LEFT non-integer count: NULL", "LEFT(s, 1.0) IS NULL", T),
        (".3 LEFT string count: NULL", "LEFT(s, '1') IS NULL", T),
        (".3 LEFT of a number: NULL", "LEFT(i, 1) IS NULL", T),
        (".3 LEFT with an unsigned count", "LEFT(s, one) = 'a'", T),
        (".3 LEFT with a ulong count", "LEFT(s, ul) = 'abc'", T),
        (".4 RIGHT", "RIGHT(s, 2) = 'bc'", T),
        (".4 RIGHT 0", "RIGHT(s, 0) = ''", T),
        (".4 RIGHT beyond the length", "RIGHT(s, 5) = 'abc'", T),
        (".4 RIGHT counts code points", "RIGHT('x' + astral, 1) = astral", T),
        (".4 RIGHT negative count: NULL", "RIGHT(s, -2) IS NULL", T),
        (".4 RIGHT NULL count: NULL", "RIGHT(s, n) IS NULL", T),
        (".5 SUBSTRING start 1", "SUBSTRING(s, 1, 2) = 'ab'", T),
        (".5 SUBSTRING middle", "SUBSTRING(s, 2, 1) = 'b'", T),
        (".5 SUBSTRING count beyond the end", "SUBSTRING(s, 2, 99) = 'bc'", T),
        (".5 SUBSTRING start past the end is empty", "SUBSTRING(s, 5, 1) = ''", T),
        (".5 SUBSTRING count 0", "SUBSTRING(s, 1, 0) = ''", T),
        (".5 SUBSTRING two arguments: to the end", "SUBSTRING(s, 2) = 'bc'", T),
        (".5 SUBSTRING start 0: NULL", "SUBSTRING(s, 0, 1) IS NULL", T),
        (".5 SUBSTRING negative start: NULL", "SUBSTRING(s, -1, 1) IS NULL", T),
        (".5 SUBSTRING negative count: NULL", "SUBSTRING(s, 1, -1) IS NULL", T),
        (".5 SUBSTRING non-integer start: NULL", "SUBSTRING(s, 1.5, 1) IS NULL", T),
        (".5 SUBSTRING of a number: NULL", "SUBSTRING(i, 1, 1) IS NULL", T),
        (".5 SUBSTRING counts code points", "SUBSTRING('a' + astral + 'c', 2, 1) = astral", T),
        (" vendor function is NULL", "acme:f(s) IS NULL", T),
        (" vendor function without arguments is NULL", "acme:now() IS NULL", T),
        (" vendor function named like a standard one is NULL", "acme:UPPER(s) IS NULL", T),
        (" vendor function in a comparison is NULL", "acme:f() = 1", N),
        (" NOT of a vendor function comparison is NULL", "NOT (acme:f() = 1)", N),
        (" vendor function with many arguments", "x:y(1, 'a', NULL, s, l[0]) IS NULL", T),
        (" functions compose", "LOWER(LEFT(UPPER(s), 2)) = 'ab'", T),
        (" function in an arithmetic expression", "LEFT(s, 1 + 1) = 'ab'", T),
    ]
]


@pytest.mark.parametrize(ROW_ARGS, FUNCTION_ROWS)
def test_functions(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)
