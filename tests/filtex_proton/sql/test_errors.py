"""Definitional errors (filtex CSD01 §2.3): typical mistakes give one FilterError that says
what is wrong, where (line/column), shows the line with a caret, and flags security limits
(§7.1). Nothing but FilterError ever escapes compile_sql."""

from __future__ import annotations

from typing import Any

import pytest

from filtex_proton.errors import GENERIC_LIMIT_TEXT, FilterError
from filtex_proton.limits import DEFAULT_LIMITS, Limits
from filtex_proton.sql import AMQP_SQL, JMS_SELECTOR, compile_sql, parse

A, J = AMQP_SQL, JMS_SELECTOR


def error_of(text: Any, dialect: Any = A, limits: Limits = DEFAULT_LIMITS) -> FilterError:
    with pytest.raises(FilterError) as caught:
        compile_sql(text, dialect, limits)
    error = caught.value
    assert type(error) is FilterError
    # parse() alone reports the same error as compile_sql()
    with pytest.raises(FilterError) as again:
        parse(text, dialect, limits)
    assert again.value.reason == error.reason
    return error


# (id, text, dialect, reason (exact, or a prefix ending in '...'), line, column, caret line)
MISTAKES = [
    ("§6.4.2.3 '==' is not an operator", "a == 1", A,
     "syntax error: unexpected '='; expected an expression", 1, 4, "   ^"),
    ("§6.4.2.3 '=<' is not an operator", "a =< b", A,
     "syntax error: unexpected '<'; expected an expression", 1, 4, "   ^"),
    ("§6.4.4.2.5 unterminated single-quoted string", "name = 'abc", A,
     "syntax error: unterminated string: no closing '", 1, 8, "       ^"),
    ("§6.4.4.2.5 unterminated double-quoted string", 'a = "x', A,
     'syntax error: unterminated string: no closing "', 1, 5, "    ^"),
    ("§6.4.4.4 unknown properties field", "p.colour = 'red'", A,
     "'colour' is not a field of the properties section (§6.4.4.4); the fields are "
     "absolute-expiry-time, content-encoding, content-type, correlation-id, creation-time, "
     "group-id, group-sequence, message-id, reply-to, reply-to-group-id, subject, to, user-id",
     1, 3, "  ^"),
    ("§6.4.4.4 unknown header field with a suggestion", "h.Priority > 4", A,
     "'Priority' is not a field of the header section (§6.4.4.4); did you mean 'priority'?",
     1, 3, "  ^"),
    ("§6.4.4.4 unknown field on a later line", "a = 1 AND\n  header.ttl > 1 AND h.colour = 1",
     A, "'colour' is not a field of the header section (§6.4.4.4)...", 2, 24,
     "                       ^"),
    ("§6.4.1 missing closing parenthesis", "(a = 1", A,
     "syntax error: unexpected end of expression; expected ')' or OR", 1, 7, "      ^"),
    ("§6.4.4.3 missing closing parenthesis of a call", "LOWER(a", A,
     "syntax error: unexpected end of expression; expected ')', '+' or '-' or ','", 1, 8,
     "       ^"),
    ("§6.4.3.3 IN without a list", "a IN 1", A,
     "syntax error: unexpected '1'; expected '('", 1, 6, "     ^"),
    ("§6.4.3.3 empty IN list", "a IN ()", A,
     "syntax error: unexpected ')'; expected an expression", 1, 7, "      ^"),
    ("§6.4.3.3 trailing comma in IN list", "a IN (1,", A,
     "syntax error: unexpected end of expression; expected an expression", 1, 9, "        ^"),
    # an unknown function is NULL (§6.4.4.3), no longer an error; its arguments must parse
    ("§6.4.4.3 the arguments of an unknown function must parse", "foo(1 +) = 1", A,
     "syntax error: unexpected ')'; expected an expression", 1, 8, "       ^"),
    ("§6.4.4.3.3 LEFT with one argument", "LEFT('a') = 'a'", A,
     "LEFT() takes 2 argument(s), not 1", 1, 1, "^"),
    ("§6.4.4.3.5 SUBSTRING with four arguments", "x = 1 OR SUBSTRING(s, 1, 2, 3) = 'a'", A,
     "SUBSTRING() takes 2 to 3 argument(s), not 4", 1, 10, "         ^"),
    ("§6.4.4.3.6 UTC with an argument", "UTC(1) > 0", A,
     "UTC() takes 0 argument(s), not 1", 1, 1, "^"),
    ("§6.4.4.3.1 LOWER with three arguments", "LOWER(a, 'tr', 'x') = 'a'", A,
     "LOWER() takes 1 to 2 argument(s), not 3", 1, 1, "^"),
    ("§6.4.3.2 ESCAPE of two characters", "a LIKE 'x' ESCAPE 'ab'", A,
     "the LIKE escape must be one character, not 'ab' (§6.4.3.2)", 1, 19,
     "                  ^"),
    ("§6.4.3.2 empty ESCAPE", "a LIKE 'x' ESCAPE ''", A,
     "the LIKE escape must be one character, not '' (§6.4.3.2)", 1, 19, "                  ^"),
    ("§6.4.3.2 pattern ending in the escape character", "a LIKE 'x!' ESCAPE '!'", A,
     "invalid LIKE pattern: the pattern ends with the escape character", 1, 8, "       ^"),
    ("§6.4.4.2.1 integer too large", "18446744073709551616 = a", A,
     "integer constant 18446744073709551616 is out of range (the largest is 2^64-1)", 1, 1,
     "^"),
    ("§6.4.4.2.1 integer with 5000 digits", "a = " + "9" * 5000, A,
     "integer constant 9999999999...", 1, 5, "    ^"),
    ("§6.4.4.2.1 JMS hex integer too large", "x = 0x10000000000000000", J,
     "integer constant 0x10000000000000000 is out of range (the largest is 2^64-1)", 1, 5,
     "    ^"),
    ("§6.4.4.2.3 approximate number beyond double", "x = 1.5E400", A,
     "number 1.5E400 is beyond the range of a double (§6.4.4.2.3)", 1, 5, "    ^"),
    ("§6.2 decimal constant beyond decimal128's 34 digits",
     "x = 1.00000000000000000000000000000000001", A,
     "decimal constant 1.00000000000000000000000000000000001 has more than the 34 digits of "
     "a decimal128 (§6.2)", 1, 5, "    ^"),
    ("§6.4.4.2.6 odd-length binary constant", "a = 0x123", A,
     "binary constant 0x123 needs pairs of hex digits (§6.4.4.2.6)", 1, 5, "    ^"),
    ("§6.4.1 trailing garbage", "a = 1 b", A,
     "syntax error: unexpected 'b'...", 1, 7, "      ^"),
    ("§6.4.1 trailing closing bracket", "a = 1 ]", A,
     "syntax error: unexpected ']'...", 1, 7, "      ^"),
    ("§6.4.1 two constants in a row", "'a' 'b'", A,
     "syntax error: unexpected \"'b'\"...", 1, 5, "    ^"),
    ("§6.4.1 comment characters are not SQL", "x = 1 # comment", A,
     "syntax error: unexpected character '#'...", 1, 7, "      ^"),
    ("§6.4.1 unexpected character", "a = @", A,
     "syntax error: unexpected character '@'; expected an expression", 1, 5, "    ^"),
    ("§6.4.4.6 unterminated delimited identifier", "[abc = 1", A,
     "syntax error: unterminated [delimited name]: no closing ]", 1, 1, "^"),
    ("§6.4.4.6 unterminated delimited map key", "x.[y = 1", A,
     "syntax error: unterminated [delimited name]: no closing ]", 1, 3, "  ^"),
    # named, with its position: not "unterminated", which sent users looking elsewhere
    ("§6.4.4.6 control character in a delimited identifier", "[a\x01b] = 1", A,
     "control character U+0001 inside a [delimited name], character 3 of it "
     "(control characters are not permitted, §6.4.4.6)", 1, 3, "  ^"),
    ("§6.4.4.6 C1 control character in a delimited identifier", "[a\x85b] = 1", A,
     "control character U+0085 inside a [delimited name], character 3 of it "
     "(control characters are not permitted, §6.4.4.6)", 1, 3, "  ^"),
    ("§6.4.4.6 line feed in a delimited identifier", "x = 1 OR\n [a\nb] = 1", A,
     "control character U+000A (LF) inside a [delimited name], character 3 of it "
     "(control characters are not permitted, §6.4.4.6)", 2, 4, "   ^"),
    ("§6.4.4.6 an unclosed [ is still unterminated", "[ab = 1", A,
     "syntax error: unterminated [delimited name]: no closing ]", 1, 1, "^"),
    ("§6.4.4.2.5 carriage return in a string", "s = 'a\rb'", A,
     "control character U+000D (CR) inside a string constant, character 3 of it "
     "(any valid printable Unicode characters, §6.4.4.2.5)", 1, 7, "      ^"),
    ("§6.4.4.2.2 decimal without digits after the point", "x = 7.", A,
     "number 7.: a decimal constant has digits on both sides of the point (§6.4.4.2.2); "
     "write 7.0", 1, 5, "    ^"),
    ("§6.4.4.2.6 lower-case hex digits", "b = 0x0a", A,
     "binary constant 0x0a is not '0x' followed by the hex digits 0-9 and A-F (§6.4.4.2.6); "
     "write 0x0A", 1, 5, "    ^"),
    ("§6.4.4.6 identifier starting with $", "x = 1 AND $y = 2", A,
     "'$y' is not a regular identifier: one starts with a letter and holds only letters, "
     "digits and '_' (§6.4.4.6); delimit it: [$y]", 1, 11, "          ^"),
    ("§6.4.4.6 reserved word as a name", "between = 1", A,
     "BETWEEN is a reserved word, not a name (§6.4.4.6; delimit it: [between])", 1, 1, "^"),
    ("JMS §3.8.1.1 reserved word as a name", "x = 1 OR Like = 2", J,
     "LIKE is a reserved word, not a name (JMS §3.8.1.1)", 1, 10, "         ^"),
    ("JMS §3.8.1.1 8 is no octal digit", "x = 08", J,
     "integer 08: a leading 0 makes a Java integer literal octal (JMS §3.8.1.1), and 8 and 9 "
     "are not octal digits", 1, 5, "    ^"),
    ("JMS §3.8.1.1 a hexadecimal literal beyond a Java long", "x = 0xFFFFFFFFFFFFFFFFL", J,
     "integer 0xFFFFFFFFFFFFFFFFL is above 2^63-1, the largest hexadecimal or octal selector "
     "literal (JMS §3.8.1.1: Java would read it as a negative long, Artemis and ActiveMQ refuse "
     "it); write the value in decimal", 1, 5, "    ^"),
    ("JMS §3.8.1.1 an octal literal beyond a Java long", "x = 01000000000000000000000", J,
     "integer 01000000000000000000000 is above 2^63-1, the largest hexadecimal or octal "
     "selector literal (JMS §3.8.1.1: Java would read it as a negative long, Artemis and "
     "ActiveMQ refuse it); write the value in decimal", 1, 5, "    ^"),
    ("§6.4.2.2 dangling AND", "a = 1 AND", A,
     "syntax error: unexpected end of expression; expected an expression", 1, 10,
     "         ^"),
    ("§6.4.2.1 NOT alone", "NOT", A,
     "syntax error: unexpected end of expression; expected an expression", 1, 4, "   ^"),
    ("§6.4.3.1 IS without NULL", "a IS 1", A,
     "syntax error: unexpected '1'; expected NOT or NULL", 1, 6, "     ^"),
    ("§6.4.3.4 EXISTS of a constant", "EXISTS(1)", A,
     "syntax error: unexpected '1'; expected a [name], a name or a section", 1, 8,
     "       ^"),
    ("§6.4.3.4 EXISTS without parentheses", "EXISTS a", A,
     "syntax error: unexpected 'a'; expected '('", 1, 8, "       ^"),
    ("§6.4.3 BETWEEN without AND", "a BETWEEN 1", A,
     "syntax error: unexpected end of expression...", 1, 12, "           ^"),
    ("§6.4.4.3.7 DATE of a constant that is not ISO 8601", "DATE('nope') = 1", A,
     "DATE('nope'): not an ISO 8601 date-time (§6.4.4.3.7)", 1, 6, "     ^"),
    ("§6.4.1 error on the second line", "a = 1\n AND b == 2", A,
     "syntax error: unexpected '='; expected an expression", 2, 9, "        ^"),
    ("§6.4.1 end of input after a newline", "a =\n", A,
     "syntax error: unexpected end of expression; expected an expression", 1, 4, "   ^"),
    ("apache §2.2 a JMS header has no entries", "JMSPriority.x = 1", J,
     "JMSPriority is a single value and has no entries", 1, 1, "^"),
]


@pytest.mark.parametrize(
    ("text", "dialect", "reason", "line", "column", "caret"),
    [pytest.param(*row[1:], id=row[0]) for row in MISTAKES],
)
def test_typical_mistakes(
    text: str, dialect: Any, reason: str, line: int, column: int, caret: str
) -> None:
    error = error_of(text, dialect)
    if reason.endswith("..."):
        assert error.reason.startswith(reason[:-3]), error.reason
    else:
        assert error.reason == reason
    assert error.position is not None
    assert (error.position.line, error.position.column) == (line, column)
    offending_line = text.splitlines()[line - 1]
    shown, pointer = error.caret().split("\n")
    assert pointer == caret
    if len(offending_line) <= 120:
        assert shown == offending_line
    else:  # a long line is cut to a window
        assert shown.endswith("...") and offending_line.startswith(shown[:-3])
    assert error.limit is False
    rendered = str(error)
    assert rendered == f"{error.reason} at line {line}, column {column}\n{error.caret()}"
    assert error.client_text() == rendered  # not a limit: the client sees everything


def test_caret_window_on_a_long_line() -> None:
    """A very long line is shown as a window around the position, the caret under the error."""
    text = "x = 1 AND " + "y" * 200 + " == 2"
    error = error_of(text)
    assert error.position is not None
    assert (error.position.line, error.position.column) == (1, 213)
    shown, pointer = error.caret().split("\n")
    assert shown.startswith("...") and pointer.endswith("^")
    assert shown[len(pointer) - 1] == "="


@pytest.mark.parametrize("text", [
    pytest.param("", id="§2.3 empty text"),
    pytest.param("   \n\t ", id="§2.3 blank text"),
])
def test_empty(text: str) -> None:
    error = error_of(text)
    assert error.reason == "the expression is empty"
    assert error.position is None
    assert error.limit is False


@pytest.mark.parametrize("value", [None, b"a = 1", 1, ["a = 1"]],
                         ids=["§6 None", "§6 bytes", "§6 int", "§6 list"])
def test_not_a_string(value: Any) -> None:
    error = error_of(value)
    assert error.reason.startswith("a SQL filter is a string, not ")
    assert error.limit is False


# --------------------------------------------------------------------------------------- §7.1

SMALL = Limits(max_sql_length=60, max_sql_nodes=12, max_sql_depth=6, max_in_list=3)


@pytest.mark.parametrize(("text", "reason", "position"), [
    pytest.param("a = '" + "x" * 60 + "'", "expression is 66 characters long; the limit is 60",
                 None, id="§7.1 text length"),
    pytest.param("a=1 AND b=2 AND c=3 AND d=4 AND e=5", "expression has more than 12 nodes",
                 None, id="§7.1 node count"),
    pytest.param("NOT NOT NOT NOT NOT NOT a", "expression nests deeper than 6 levels", (1, 25),
                 id="§7.1 nesting depth (NOT chain)"),
    pytest.param("-(-(-(-(-(-(a)))))) = 1", "expression nests deeper than 6 levels", (1, 11),
                 id="§7.1 nesting depth (arithmetic)"),
    pytest.param("a IN (1, 2, 3, 4)", "IN list has more than 3 values", (1, 3),
                 id="§7.1 IN list length"),
])
def test_limits(text: str, reason: str, position: tuple[int, int] | None) -> None:
    error = error_of(text, A, SMALL)
    assert error.reason == reason
    assert error.limit is True
    if position is None:
        assert error.position is None
    else:
        assert error.position is not None
        assert (error.position.line, error.position.column) == position
    # §7.1: the client is told only that a limit was hit
    assert error.client_text() == GENERIC_LIMIT_TEXT
    assert reason in str(error)


def test_limits_are_inclusive() -> None:
    compile_sql("a IN (1, 2, 3)", A, SMALL)
    compile_sql("x = '" + "y" * 54 + "'", A, SMALL)
    compile_sql("NOT NOT NOT NOT NOT a", A, SMALL)


def test_leading_zeros_do_not_count() -> None:
    """§6.4.4.2.1: the value, not the spelling, must fit (Python's int() digit limit aside)."""
    from filtex_proton.amqp.view import DictMessageView

    compiled = compile_sql("a = " + "0" * 5000 + "1")
    assert compiled.evaluate(DictMessageView(application_properties={"a": 1})) is True


def test_default_limits() -> None:
    too_long = "a = '" + "x" * DEFAULT_LIMITS.max_sql_length + "'"
    assert error_of(too_long).limit is True
    assert error_of("NOT " * (DEFAULT_LIMITS.max_sql_depth + 1) + "a").limit is True
    many = ", ".join(["1"] * (DEFAULT_LIMITS.max_in_list + 1))
    assert error_of(f"a IN ({many})").limit is True
    nodes = " OR ".join(["a"] * (DEFAULT_LIMITS.max_sql_nodes + 1))
    assert error_of(nodes).limit is True
    # parentheses alone make no nodes: deep but harmless
    compile_sql("(" * 2000 + "a" + ")" * 2000)


@pytest.mark.parametrize("text", [
    pytest.param("-" * 30000 + "1 = 1", id="§7.1 deep unary chain"),
    pytest.param("NOT " * 20000 + "a", id="§7.1 deep NOT chain"),
    pytest.param("a" + "[0]" * 20000, id="§7.1 deep positional chain"),
    pytest.param("x + " * 20000 + "1", id="§7.1 deep arithmetic chain"),
])
def test_absurd_limits_still_raise_only_filter_error(text: str) -> None:
    """With limits set absurdly high, recursion still ends in a FilterError, never a crash."""
    huge = Limits(max_sql_length=10**7, max_sql_nodes=10**7, max_sql_depth=10**7)
    try:
        compiled = compile_sql(text, A, huge)
    except FilterError as error:
        assert error.limit is True
    else:
        from filtex_proton.amqp.view import DictMessageView

        assert compiled.evaluate(DictMessageView()) in (True, False, None)


ODD_INPUTS = [
    "\x00", "'\x00'", "[\x00]", "\ud800", "'\ud800'", "[\ud800]", "\U0001f600", "a = '\U0001f600",
    "((((", "))))", "[[[[", "]]]]", "''''", '""""', "0x", "0xZZ", "1e", "1.e5", ".", "..", "1..2",
    "a..b", "a.", ".a", "p.", "p.[", "h.reply-to", "a:b", "a:b:c(1)", "::", "a::b()", "x[", "x[]",
    "x[1", "LIKE", "ESCAPE", "a LIKE", "a LIKE 'x' ESCAPE", "IN", "a IN", "a IN (", "BETWEEN",
    "EXISTS", "EXISTS(", "EXISTS()", "EXISTS(p.)", "NULL NULL", "TRUE FALSE", "NOT NOT",
    "a = = 1", "a < > 1", "a ! = 1", "a + * 1", "1 +", "- ", "--1", "'\\'", "'a\nb", "\n\n\n",
    "a\r\n= 1 AND\r\nb ==", "DATE()", "DATE(1, 2)", "UTC", "UTC(", "acme:", "acme:f(", "f(",
    "LOWER()", "[a]]", "[]]]", "a = 0x" + "0" * 10000, "a = " + "9" * 5000, "a = 1." + "0" * 5000,
    "a = 1E" + "9" * 5000, "a IN (" + "1," * 1500 + "1)", "JMSPriority[0]", "DATE('') = 1",
    "DATE('2020-02-30') = 1", "a LIKE 'x' ESCAPE NULL", "a LIKE '\\' ESCAPE '\\'",
]


@pytest.mark.parametrize("dialect", [A, J], ids=["§2.3 AMQP SQL", "apache §2.2 JMS"])
def test_only_filter_error_escapes(dialect: Any) -> None:
    for text in ODD_INPUTS:
        try:
            compile_sql(text, dialect)
        except FilterError as error:
            assert isinstance(error.reason, str) and error.reason
        except Exception as error:  # pragma: no cover - the failure being tested for
            pytest.fail(f"{text[:40]!r} raised {type(error).__name__}: {error}")
