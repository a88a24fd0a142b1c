"""Conformance table: identifiers, sections, well-known names and keywords (§6.4.4.4, §6.4.4.6),
constants and their AMQP types (§6.2, §6.4.4.2), and every production of the grammar as the AST it
builds (§6.4).

Rows are checked as ``rows.py`` says.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest
from proton import (
    symbol,
    ubyte,
    uint,
    ulong,
)

from filtex_proton.amqp.view import Section
from filtex_proton.errors import FilterError
from filtex_proton.sql import ast, compile_sql, parse

from ..support import same_tree
from .rows import (
    ROW_ARGS,
    A,
    J,
    T,
    app_field,
    check,
    row,
)

# =============================================================================================
# §6.4.4.4, §6.4.4.6: identifiers, sections, well-known names, keywords

IDENT_MSG = {
    "application_properties": {
        "my field": 1, "a]b": 2, "a[b": 3, "]": 4, "[": 5, "and": 6, "größe": 7, "$x": 8,
        "_x": 9, "x.y": 10, "x": {"y": 11}, "\U0001d538": 12, "1st": 13, "[]": 14, "NULL": 15,
        "h": 16, "a": {"b": 17}, "color": "blue", "Or": 18,
    },
    "header": {"priority": ubyte(9), "durable": True, "first-acquirer": True,
               "delivery-count": uint(3), "ttl": uint(60)},
    "properties": {"reply-to": "r", "to": "t", "content-type": symbol("text/plain")},
    "message_annotations": {symbol("x-opt-foo"): [42], symbol("k"): "mk"},
    "delivery_annotations": {symbol("k"): "dk"},
    "footer": {symbol("k"): "fk"},
}
IDENT_ROWS = [
    row(f"§6.4.4.6 {d}", text, exp, msg=IDENT_MSG) for d, text, exp in [
        ("delimited identifier with a space", "[my field] = 1", T),
        ("]] escapes ]", "[a]]b] = 2", T),
        ("[[ escapes [", "[a[[b] = 3", T),
        ("only ]]", "[]]] = 4", T),
        ("only [[", "[[[] = 5", T),
        ("[[]] is '[]'", "[[[]]] = 14", T),
        ("delimited reserved word", "[and] = 6", T),
        ("delimited NULL is a name", "[NULL] = 15", T),
        ("delimited name starting with a digit", "[1st] = 13", T),
        ("delimited astral name", "[\U0001d538] = 12", T),
        ("delimited name with a dot is one key", "[x.y] = 10", T),
        ("dotted name is a map reference", "x.y = 11", T),
        ("unicode letters in a regular identifier", "größe = 7", T),
        ("$ in a delimited identifier", "[$x] = 8", T),
        ("leading underscore in a delimited identifier", "[_x] = 9", T),
        ("a name 'h' without a dot is an application property", "h = 16", T),
        ("'a.b' is the application property b", "a.b IS NULL", T),
        ("'a.a.b' reaches into the application property a", "a.a.b = 17", T),
        ("delimited message annotation key", "m.[x-opt-foo][0] = 42", T),
        ("unqualified names are application properties (§6.1)", "color = 'blue'", T),
        ("qualified application-properties (§6.1)", "application-properties.color = 'blue'", T),
        ("application_properties qualifier", "application_properties.color = 'blue'", T),
        ("a. qualifier", "a.color = 'blue'", T),
        ("section qualifiers are case-insensitive", "APPLICATION_PROPERTIES.color = 'blue'", T),
        ("H. qualifier", "H.priority = 9", T),
        ("header. qualifier", "header.priority = 9", T),
        ("Header. qualifier", "Header.priority = 9", T),
        ("p. qualifier", "p.to = 't'", T),
        ("properties. qualifier", "properties.to = 't'", T),
        ("PROPERTIES. qualifier", "PROPERTIES.to = 't'", T),
        ("d. qualifier", "d.k = 'dk'", T),
        ("delivery_annotations. qualifier", "delivery_annotations.k = 'dk'", T),
        ("delivery-annotations. qualifier", "delivery-annotations.k = 'dk'", T),
        ("m. qualifier", "m.k = 'mk'", T),
        ("message_annotations. qualifier", "message_annotations.k = 'mk'", T),
        ("message-annotations. qualifier", "message-annotations.k = 'mk'", T),
        ("f. qualifier", "f.k = 'fk'", T),
        ("footer. qualifier", "footer.k = 'fk'", T),
        ("FOOTER. qualifier", "FOOTER.k = 'fk'", T),
        ("the spec's p.to example (§6.1)", "p.to = 't'", T),
        ("the spec's camelCase p.contentType example", "p.contentType = 'text/plain'", T),
        ("hyphenated p.reply-to", "p.reply-to = 'r'", T),
        ("underscore p.reply_to", "p.reply_to = 'r'", T),
        ("camelCase p.replyTo", "p.replyTo = 'r'", T),
        ("hyphenated h.first-acquirer", "h.first-acquirer", T),
        ("underscore h.delivery_count", "h.delivery_count = 3", T),
        ("camelCase h.deliveryCount", "h.deliveryCount = 3", T),
        ("keywords are case-insensitive: and/or/not", "NOT (h.durable and FALSE) or FALSE", T),
        ("keywords are case-insensitive: is not null", "p.to is not null", T),
        ("keywords are case-insensitive: like/escape", "p.to like 't!%' escape '!' OR TRUE", T),
        ("keywords are case-insensitive: in/between", "h.ttl in (60) AnD h.ttl between 1 and 99",
         T),
        ("keywords are case-insensitive: exists", "exists(p.to)", T),
        ("keywords are case-insensitive: true/false/null", "true AND NOT false AND null IS Null",
         T),
        ("keywords are case-insensitive: inf/nan", "inf > 1 AND nan <> nan", T),
        ("whitespace: tabs and newlines", "p.to\t=\n't'", T),
    ]
]


@pytest.mark.parametrize(ROW_ARGS, IDENT_ROWS)
def test_identifiers(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


def _well_known(section: Section, canonical: str) -> list[Any]:
    words = canonical.split("-")
    spellings = {
        "hyphenated": canonical, "underscore": "_".join(words),
        "camelCase": words[0] + "".join(w.capitalize() for w in words[1:]),
    }
    prefix = "h" if section is Section.HEADER else "p"
    return [
        pytest.param(f"{prefix}.{spelling}", section, canonical,
                     id=f"§6.4.4.4 {prefix}.{spelling} ({style})")
        for style, spelling in spellings.items()
    ]


WELL_KNOWN = [
    param
    for section, names in (
        (Section.HEADER, ["durable", "priority", "ttl", "first-acquirer", "delivery-count"]),
        (Section.PROPERTIES, [
            "message-id", "user-id", "to", "subject", "reply-to", "correlation-id",
            "content-type", "content-encoding", "absolute-expiry-time", "creation-time",
            "group-id", "group-sequence", "reply-to-group-id"]),
    )
    for canonical in names
    for param in _well_known(section, canonical)
]


@pytest.mark.parametrize(("text", "section", "canonical"), WELL_KNOWN)
def test_well_known_field_spellings(text: str, section: Section, canonical: str) -> None:
    assert same_tree(parse(text), ast.Field(section, canonical))
    assert same_tree(parse(f"EXISTS({text})"), ast.Exists(ast.Field(section, canonical)))


@pytest.mark.parametrize("text", [
    pytest.param("p.ReplyTo = 'r'", id="§6.4.4.4 PascalCase is not a spelling"),
    pytest.param("p.REPLY_TO = 'r'", id="§6.4.4.4 upper-case underscore is not a spelling"),
    pytest.param("p.Reply-To = 'r'", id="§6.4.4.4 field names are case-sensitive"),
    pytest.param("h.Priority = 4", id="§6.4.4.4 h.Priority is not a field"),
    pytest.param("p.replyto = 'r'", id="§6.4.4.4 run-together lower case is not a spelling"),
    pytest.param("p.colour = 'r'", id="§6.4.4.4 unknown properties field"),
    pytest.param("h.subject IS NULL", id="§6.4.4.4 properties field under header"),
    pytest.param("p.ttl IS NULL", id="§6.4.4.4 header field under properties"),
    pytest.param("EXISTS(h.colour)", id="§6.4.4.4 unknown field inside EXISTS"),
    pytest.param("p.[reply-to] = 'r' AND p.[x] = 1", id="§6.4.4.4 delimited unknown name"),
])
def test_unknown_well_known_names_are_definitional_errors(text: str) -> None:
    with pytest.raises(FilterError, match="is not a field of the"):
        compile_sql(text)


def test_delimited_well_known_name_is_accepted() -> None:
    """§6.4.4.6: a delimited identifier is the same name as the regular one."""
    assert same_tree(parse("p.[reply-to]"), ast.Field(Section.PROPERTIES, "reply-to"))
    assert same_tree(parse("p.[subject]"), ast.Field(Section.PROPERTIES, "subject"))


# =============================================================================================
# §6.2, §6.4.4.2: constants and their AMQP types, per dialect

CONSTANT_ROWS = [
    pytest.param(text, dialect, value, id=ident) for ident, text, dialect, value in [
        ("§6.4.4.2.1 small integer is a long", "1", A, 1),
        ("§6.4.4.2.1 0", "0", A, 0),
        ("§6.4.4.2.1 2^63-1 is a long", "9223372036854775807", A, 2**63 - 1),
        ("§6.4.4.2.1 2^63 is a ulong", "9223372036854775808", A, ulong(2**63)),
        ("§6.4.4.2.1 2^64-1 is a ulong", "18446744073709551615", A, ulong(2**64 - 1)),
        ("§6.4.4.2.1 leading zeros", "007", A, 7),
        ("§6.4.4.2.2 decimal constant is a decimal (AMQP)", "1.5", A, Decimal("1.5")),
        ("§6.4.4.2.2 decimal keeps its digits", "0.10", A, Decimal("0.10")),
        ("§6.4.4.2.2 decimal with 34 digits", "1.234567890123456789012345678901234", A,
         Decimal("1.234567890123456789012345678901234")),
        ("§6.4.4.2.3 approximate number is a double", "1.5E3", A, 1500.0),
        ("§6.4.4.2.3 lower-case e", "1.5e3", A, 1500.0),
        ("§6.4.4.2.3 negative exponent", "2.5E-3", A, 0.0025),
        ("§6.4.4.2.3 INF", "INF", A, math.inf),
        ("§6.4.4.2.3 NAN", "NAN", A, math.nan),
        ("§6.4.4.2.4 TRUE", "TRUE", A, True),
        ("§6.4.4.2.4 FALSE", "FALSE", A, False),
        ("§6.4.4.2.5 single-quoted string", "'abc'", A, "abc"),
        ("§6.4.4.2.5 double-quoted string", '"abc"', A, "abc"),
        ("§6.4.4.2.5 doubled single quote", "'it''s'", A, "it's"),
        ("§6.4.4.2.5 doubled double quote", '"say ""hi"""', A, 'say "hi"'),
        ("§6.4.4.2.5 the other quote needs no escape", "'say \"hi\"'", A, 'say "hi"'),
        ("§6.4.4.2.5 empty string", "''", A, ""),
        ("§6.4.4.2.5 empty double-quoted string", '""', A, ""),
        ("§6.4.4.2.5 unicode string", "'\U0001d538\u00e9'", A, "\U0001d538\u00e9"),
        ("§6.4.4.2.6 binary constant", "0x0A0B", A, b"\x0a\x0b"),
        ("§6.4.4.2 NULL", "NULL", A, None),
        ("apache §2.2 JMS: 1.5 is a double", "1.5", J, 1.5),
        ("apache §2.2 JMS: 0x1F is an integer", "0x1F", J, 31),
        ("apache §2.2 JMS: odd hex digits are fine for an integer", "0x123", J, 0x123),
        ("apache §2.2 JMS: a decimal above 2^63-1 is a ulong (hex is refused there)",
         "18446744073709551615", J, ulong(2**64 - 1)),
        ("apache §2.2 JMS: integer", "42", J, 42),
        ("apache §2.2 JMS: 1.5E3 is a double", "1.5E3", J, 1500.0),
    ]
]


@pytest.mark.parametrize(("text", "dialect", "value"), CONSTANT_ROWS)
def test_constants(text: str, dialect: Any, value: Any) -> None:
    assert same_tree(parse(text, dialect), ast.Literal(value))


# =============================================================================================
# §6.4: every production of the grammar, as the AST it builds

def _lit(value: Any) -> ast.Literal:
    return ast.Literal(value)


_a, _b, _c = app_field("a"), app_field("b"), app_field("c")
PRODUCTIONS = [
    pytest.param(text, tree, id=ident) for ident, text, tree in [
        ("§6.4.1 boolean constant", "TRUE", _lit(True)),
        ("§6.4.1 boolean-valued expression", "a", _a),
        ("§6.4.2.3 =", "a = 1", ast.Compare("=", _a, _lit(1))),
        ("§6.4.2.3 <>", "a <> 1", ast.Compare("<>", _a, _lit(1))),
        ("§6.4.2.3 !=", "a != 1", ast.Compare("!=", _a, _lit(1))),
        ("§6.4.2.3 >", "a > 1", ast.Compare(">", _a, _lit(1))),
        ("§6.4.2.3 >=", "a >= 1", ast.Compare(">=", _a, _lit(1))),
        ("§6.4.2.3 <", "a < 1", ast.Compare("<", _a, _lit(1))),
        ("§6.4.2.3 <=", "a <= 1", ast.Compare("<=", _a, _lit(1))),
        ("§6.4.2.3 comparison without spaces", "a<=1", ast.Compare("<=", _a, _lit(1))),
        ("§6.4.3.1 IS NULL", "a IS NULL", ast.IsNull(_a)),
        ("§6.4.3.1 IS NOT NULL", "a IS NOT NULL", ast.IsNull(_a, negated=True)),
        ("§6.4.3.2 LIKE", "a LIKE 'x%'", ast.Like(_a, _lit("x%"))),
        ("§6.4.3.2 NOT LIKE ESCAPE", "a NOT LIKE 'x' ESCAPE '!'",
         ast.Like(_a, _lit("x"), _lit("!"), negated=True)),
        ("§6.4.3.2 LIKE with expression pattern", "a LIKE b + '%'",
         ast.Like(_a, ast.Binary("+", _b, _lit("%")))),
        ("§6.4.3.3 IN", "a IN (1, 'b', c)", ast.In(_a, (_lit(1), _lit("b"), _c))),
        ("§6.4.3.3 NOT IN", "a NOT IN (1)", ast.In(_a, (_lit(1),), negated=True)),
        ("§6.4.3 BETWEEN", "a BETWEEN 1 AND 2", ast.Between(_a, _lit(1), _lit(2))),
        ("§6.4.3 NOT BETWEEN", "a NOT BETWEEN b AND c",
         ast.Between(_a, _b, _c, negated=True)),
        ("§6.4.3.4 EXISTS", "EXISTS(a)", ast.Exists(_a)),
        ("§6.4.3.4 EXISTS of a qualified field", "EXISTS(p.subject)",
         ast.Exists(ast.Field(Section.PROPERTIES, "subject"))),
        ("§6.4.3.4 EXISTS of a nested reference", "EXISTS(a.m.k[0])",
         ast.Exists(app_field("m", ast.Key("k"), ast.Index(_lit(0))))),
        ("§6.4.2.1 NOT", "NOT a", ast.Not(_a)),
        ("§6.4.2.1 NOT NOT", "NOT NOT a", ast.Not(ast.Not(_a))),
        ("§6.4.2.2 AND (flattened)", "a AND b AND c", ast.And((_a, _b, _c))),
        ("§6.4.2.2 OR (flattened)", "a OR b OR c", ast.Or((_a, _b, _c))),
        ("§6.4.2.2 AND binds tighter than OR", "a OR b AND c", ast.Or((_a, ast.And((_b, _c))))),
        ("§6.4.2.2 parenthesised OR", "(a OR b) AND c", ast.And((ast.Or((_a, _b)), _c))),
        ("§6.4.2.2 right-nested parenthesised AND is kept", "a AND (b AND c)",
         ast.And((_a, ast.And((_b, _c))))),
        ("§6.4.2.1 NOT binds tighter than AND", "NOT a AND b", ast.And((ast.Not(_a), _b))),
        ("§6.4.2.1 NOT over a comparison", "NOT a = 1", ast.Not(ast.Compare("=", _a, _lit(1)))),
        ("§6.4.1 parentheses vanish", "((a))", _a),
        ("§6.4.1 comparison of predicates", "(a = 1) = TRUE",
         ast.Compare("=", ast.Compare("=", _a, _lit(1)), _lit(True))),
        ("§6.4.4.1.1 unary -", "-a", ast.Unary("-", _a)),
        ("§6.4.4.1.1 unary +", "+a", ast.Unary("+", _a)),
        # A sign on a numeric constant is folded into it at parse time (the same value the
        # evaluation gives), so that every reader of the tree sees one literal.
        ("§6.4.4.1.1 negative constant is one literal", "-1", _lit(-1)),
        ("§6.4.4.1.1 signed constants fold", "- -1", _lit(1)),
        ("§6.4.4.1.1 a sign on a string stays an operator", "-'x'", ast.Unary("-", _lit("x"))),
        ("§6.4.4.1.1 a sign on NULL stays an operator", "-NULL", ast.Unary("-", _lit(None))),
        ("§6.4.4.1.1 double unary", "- -a", ast.Unary("-", ast.Unary("-", _a))),
        ("§6.4.4.1.2 + and * precedence", "a + b * c",
         ast.Binary("+", _a, ast.Binary("*", _b, _c))),
        ("§6.4.4.1.2 - is left-associative", "a - b - c",
         ast.Binary("-", ast.Binary("-", _a, _b), _c)),
        ("§6.4.4.1.2 / and % same level", "a / b % c",
         ast.Binary("%", ast.Binary("/", _a, _b), _c)),
        ("§6.4.4.1.2 unary binds tighter than *", "-a * b",
         ast.Binary("*", ast.Unary("-", _a), _b)),
        ("§6.4.4.1.2 arithmetic binds tighter than comparison", "a + 1 = b",
         ast.Compare("=", ast.Binary("+", _a, _lit(1)), _b)),
        ("§6.4.4.3.1 LOWER", "LOWER(a)", ast.Call("LOWER", (_a,))),
        ("§6.4.4.3.1 LOWER with a tag", "lower(a, 'tr')", ast.Call("LOWER", (_a, _lit("tr")))),
        ("§6.4.4.3.2 UPPER", "UPPER(a)", ast.Call("UPPER", (_a,))),
        ("§6.4.4.3.3 LEFT", "LEFT(a, 1)", ast.Call("LEFT", (_a, _lit(1)))),
        ("§6.4.4.3.4 RIGHT", "RIGHT(a, 1)", ast.Call("RIGHT", (_a, _lit(1)))),
        ("§6.4.4.3.5 SUBSTRING/3", "SUBSTRING(a, 1, 2)",
         ast.Call("SUBSTRING", (_a, _lit(1), _lit(2)))),
        ("§6.4.4.3.5 SUBSTRING/2", "SUBSTRING(a, 1)", ast.Call("SUBSTRING", (_a, _lit(1)))),
        ("§6.4.4.3.6 UTC", "UTC()", ast.Call("UTC", ())),
        ("§6.4.4.3.7 DATE", "DATE('2020-01-01')", ast.Call("DATE", (_lit("2020-01-01"),))),
        ("§6.4.4.3 vendor function", "acme:f(1, a)",
         ast.Call("f", (_lit(1), _a), vendor="acme")),
        ("§6.4.4.3 vendor function without arguments", "acme:f()",
         ast.Call("f", (), vendor="acme")),
        ("§6.4.4.3 function argument in parentheses may be a predicate", "LOWER((a = 1))",
         ast.Call("LOWER", (ast.Compare("=", _a, _lit(1)),))),
        ("§6.4.4.4 header field", "h.priority", ast.Field(Section.HEADER, "priority")),
        ("§6.4.4.4 properties field", "p.reply-to", ast.Field(Section.PROPERTIES, "reply-to")),
        ("§6.4.4.4 delivery annotation", "d.k", ast.Field(Section.DELIVERY_ANNOTATIONS, "k")),
        ("§6.4.4.4 message annotation", "m.[x-opt-a]",
         ast.Field(Section.MESSAGE_ANNOTATIONS, "x-opt-a")),
        ("§6.4.4.4 footer entry", "f.k", ast.Field(Section.FOOTER, "k")),
        ("§6.4.4.4 qualified application property", "a.x", app_field("x")),
        ("§6.4.4.5 map reference", "a.m.k", app_field("m", ast.Key("k"))),
        ("§6.4.4.5 delimited map key", "a.m.[k k]", app_field("m", ast.Key("k k"))),
        ("§6.4.4.5 positional reference", "l[0]", app_field("l", ast.Index(_lit(0)))),
        ("§6.4.4.5 computed position and key", "l[1 + 1].k",
         app_field("l", ast.Index(ast.Binary("+", _lit(1), _lit(1))), ast.Key("k"))),
        ("§6.4.4.5 nested positions", "l[0][1]",
         app_field("l", ast.Index(_lit(0)), ast.Index(_lit(1)))),
        ("§6.4.4.5 annotation with a position", "m.[x-opt-foo][0]",
         ast.Field(Section.MESSAGE_ANNOTATIONS, "x-opt-foo", (ast.Index(_lit(0)),))),
        ("§6.4.4.5 position given by a field", "l[[i]]", app_field("l", ast.Index(app_field("i")))),
        ("§6.4.4.6 delimited identifier", "[a b]", app_field("a b")),
        ("§6.4.4.6 ]] escape", "[a]]b]", app_field("a]b")),
        ("§6.4.4.6 [[ escape", "[a[[b]", app_field("a[b")),
        ("§6.4.4.6 empty delimited identifier", "[]", app_field("")),
    ]
]


@pytest.mark.parametrize(("text", "tree"), PRODUCTIONS)
def test_productions(text: str, tree: Any) -> None:
    assert same_tree(parse(text), tree), parse(text)


def test_positions_are_recorded() -> None:
    """The AST carries source positions (line/column) for error messages."""
    tree = parse("a = 1 AND\n  b LIKE 'x'")
    assert isinstance(tree, ast.And)
    like = tree.operands[1]
    assert like.pos is not None and (like.pos.line, like.pos.column) == (2, 5)
