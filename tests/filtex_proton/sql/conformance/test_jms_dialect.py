"""Conformance table: the JMS selector dialect (apache-filters §2.2, JMS §3.8.1.1) against AMQP SQL:
JMS rows, lexical rules, Java literals, what each dialect accepts.
Rows are checked as ``rows.py`` says.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest
from proton import (
    Described,
    char,
    float32,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
)

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.errors import FilterError
from filtex_proton.sql import ast, compile_sql, functions, parse

from ..support import same_tree
from .rows import (
    EPOCH_2020,
    ROW_ARGS,
    U1,
    A,
    F,
    J,
    N,
    T,
    app_field,
    check,
    row,
)

# =============================================================================================
# apache-filters §2.2: the JMS selector dialect

def jms_msg(**sections: Any) -> dict[str, Any]:
    return sections


JMS_ROWS = [
    row(f"apache §2.2 {d}", text, exp, dialect=J, msg=msg) for d, text, exp, msg in [
        ("JMSMessageID of a string id gets AMQP_NO_PREFIX",
         "JMSMessageID = 'ID:AMQP_NO_PREFIX:abc'", T, jms_msg(properties={"message-id": "abc"})),
        ("JMSMessageID of an 'ID:' string is itself", "JMSMessageID = 'ID:abc'", T,
         jms_msg(properties={"message-id": "ID:abc"})),
        ("JMSMessageID of a uuid", "JMSMessageID = 'ID:AMQP_UUID:" + str(U1) + "'", T,
         jms_msg(properties={"message-id": U1})),
        ("JMSMessageID of a ulong", "JMSMessageID = 'ID:AMQP_ULONG:42'", T,
         jms_msg(properties={"message-id": ulong(42)})),
        ("JMSMessageID of a binary (upper-case hex)", "JMSMessageID = 'ID:AMQP_BINARY:0AFF'", T,
         jms_msg(properties={"message-id": b"\x0a\xff"})),
        ("JMSMessageID absent is NULL", "JMSMessageID IS NULL", T, jms_msg()),
        ("JMSMessageID LIKE", "JMSMessageID LIKE 'ID:%'", T,
         jms_msg(properties={"message-id": "x"})),
        ("JMSCorrelationID of a string is itself", "JMSCorrelationID = 'abc'", T,
         jms_msg(properties={"correlation-id": "abc"})),
        ("JMSCorrelationID of a uuid", "JMSCorrelationID = 'ID:AMQP_UUID:" + str(U1) + "'", T,
         jms_msg(properties={"correlation-id": U1})),
        ("JMSCorrelationID of a ulong", "JMSCorrelationID = 'ID:AMQP_ULONG:7'", T,
         jms_msg(properties={"correlation-id": ulong(7)})),
        ("JMSCorrelationID of a binary", "JMSCorrelationID = 'ID:AMQP_BINARY:01'", T,
         jms_msg(properties={"correlation-id": b"\x01"})),
        ("JMSType from x-opt-jms-type", "JMSType = 'mytype'", T,
         jms_msg(message_annotations={symbol("x-opt-jms-type"): "mytype"})),
        ("JMSType from a symbol x-opt-jms-type", "JMSType = 'mytype'", T,
         jms_msg(message_annotations={symbol("x-opt-jms-type"): symbol("mytype")})),
        ("JMSType from the subject", "JMSType = 'subj'", T,
         jms_msg(properties={"subject": "subj"})),
        ("JMSType prefers x-opt-jms-type to the subject", "JMSType = 'mytype'", T,
         jms_msg(properties={"subject": "subj"},
                 message_annotations={symbol("x-opt-jms-type"): "mytype"})),
        ("JMSType absent is NULL", "JMSType IS NULL", T, jms_msg()),
        ("JMSPriority", "JMSPriority = 9", T, jms_msg(header={"priority": ubyte(9)})),
        ("JMSPriority ordering", "JMSPriority > 4", T, jms_msg(header={"priority": ubyte(9)})),
        ("JMSPriority absent is 4", "JMSPriority = 4", T, jms_msg()),
        ("JMSPriority BETWEEN", "JMSPriority BETWEEN 0 AND 4", T, jms_msg()),
        ("JMSDeliveryMode of a durable message", "JMSDeliveryMode = 'PERSISTENT'", T,
         jms_msg(header={"durable": True})),
        ("JMSDeliveryMode of a non-durable message", "JMSDeliveryMode = 'NON_PERSISTENT'", T,
         jms_msg(header={"durable": False})),
        ("JMSDeliveryMode with durable absent", "JMSDeliveryMode = 'NON_PERSISTENT'", T,
         jms_msg()),
        ("JMSDeliveryMode is a string, not a boolean", "JMSDeliveryMode = TRUE", F,
         jms_msg(header={"durable": True})),
        ("JMSRedelivered FALSE when delivery-count is 0", "JMSRedelivered = FALSE", T,
         jms_msg(header={"delivery-count": uint(0)})),
        ("JMSRedelivered FALSE when delivery-count is absent", "NOT JMSRedelivered", T,
         jms_msg()),
        ("JMSRedelivered TRUE when delivery-count > 0", "JMSRedelivered", T,
         jms_msg(header={"delivery-count": uint(1)})),
        ("JMSXDeliveryCount is delivery-count + 1", "JMSXDeliveryCount = 3", T,
         jms_msg(header={"delivery-count": uint(2)})),
        ("JMSXDeliveryCount is 1 when absent", "JMSXDeliveryCount = 1", T, jms_msg()),
        ("JMSTimestamp is creation-time as a long", "JMSTimestamp = 1577836800000", T,
         jms_msg(properties={"creation-time": timestamp(EPOCH_2020)})),
        ("JMSTimestamp ordering", "JMSTimestamp > 1577836799999", T,
         jms_msg(properties={"creation-time": timestamp(EPOCH_2020)})),
        ("JMSTimestamp absent is NULL", "JMSTimestamp IS NULL", T, jms_msg()),
        ("JMSExpiration is absolute-expiry-time", "JMSExpiration = 1577836800000", T,
         jms_msg(properties={"absolute-expiry-time": timestamp(EPOCH_2020)})),
        ("JMSExpiration absent is 0", "JMSExpiration = 0", T, jms_msg()),
        ("JMSDestination", "JMSDestination = 'queue://a'", T,
         jms_msg(properties={"to": "queue://a"})),
        ("JMSReplyTo", "JMSReplyTo = 'r'", T, jms_msg(properties={"reply-to": "r"})),
        ("JMSXUserID decodes user-id as UTF-8", "JMSXUserID = 'bøb'", T,
         jms_msg(properties={"user-id": "bøb".encode()})),
        ("JMSXUserID of invalid UTF-8 is NULL", "JMSXUserID IS NULL", T,
         jms_msg(properties={"user-id": b"\xff"})),
        ("JMSXGroupID", "JMSXGroupID = 'g'", T, jms_msg(properties={"group-id": "g"})),
        ("JMSXGroupSeq", "JMSXGroupSeq = 3", T, jms_msg(properties={"group-sequence": uint(3)})),
        ("JMSXGroupSeq ordering", "JMSXGroupSeq < 4", T,
         jms_msg(properties={"group-sequence": uint(3)})),
        ("EXISTS(JMSPriority) is about presence", "EXISTS(JMSPriority)", F, jms_msg()),
        ("EXISTS(JMSType) via subject", "EXISTS(JMSType)", T,
         jms_msg(properties={"subject": "s"})),
        ("a delimited JMS header name is an application property", "[JMSPriority] = 1", T,
         jms_msg(application_properties={"JMSPriority": 1})),
        ("JMS header names are case-sensitive", "jmspriority = 1", T,
         jms_msg(application_properties={"jmspriority": 1})),
        ("unqualified names are application properties", "color = 'blue'", T,
         jms_msg(application_properties={"color": "blue"})),
        ("qualified AMQP fields work too", "h.priority = 4 AND p.subject = 's'", T,
         jms_msg(properties={"subject": "s"})),
        ("string ordering is FALSE", "s > 'a'", F, jms_msg(application_properties={"s": "b"})),
        ("NOT of a string ordering is TRUE", "NOT (s > 'a')", T,
         jms_msg(application_properties={"s": "b"})),
        ("string ordering between fields is FALSE", "s < y", F,
         jms_msg(application_properties={"s": "a", "y": "b"})),
        ("string equality works", "s = 'b' AND s <> 'c'", T,
         jms_msg(application_properties={"s": "b"})),
        ("boolean ordering is FALSE", "TRUE > FALSE", F, jms_msg()),
        ("boolean equality works", "t = TRUE", T, jms_msg(application_properties={"t": True})),
        ("char ordering is FALSE", "c < y", F,
         jms_msg(application_properties={"c": char("a"), "y": char("b")})),
        ("string vs number is FALSE", "s = 1", F, jms_msg(application_properties={"s": "1"})),
        ("string vs number <> is FALSE", "s <> 1", F, jms_msg(application_properties={"s": "1"})),
        ("NOT of an incomparable is TRUE", "NOT (s = 1)", T,
         jms_msg(application_properties={"s": "1"})),
        ("boolean vs number is FALSE", "t = 1", F, jms_msg(application_properties={"t": True})),
        ("IN with incomparable members is FALSE", "i IN ('1')", F,
         jms_msg(application_properties={"i": 1})),
        ("NOT IN with incomparable members is TRUE", "i NOT IN ('1')", T,
         jms_msg(application_properties={"i": 1})),
        ("NULL comparisons are still unknown", "absent = 1", N, jms_msg()),
        ("NOT of unknown is unknown", "NOT (absent = 1)", N, jms_msg()),
        ("symbol is a String", "s = 'abc'", T,
         jms_msg(application_properties={"s": symbol("abc")})),
        ("timestamp is a long", "ts = 1000 AND ts > 999", T,
         jms_msg(application_properties={"ts": timestamp(1000)})),
        ("timestamp is not read as ISO 8601", "ts = '1970-01-01T00:00:01Z'", F,
         jms_msg(application_properties={"ts": timestamp(1000)})),
        ("DATE() orders like a long", "DATE(s) > 999", T,
         jms_msg(application_properties={"s": "1970-01-01T00:00:01Z"})),
        ("decimal is a double", "d = 0.5", T,
         jms_msg(application_properties={"d": Decimal("0.5")})),
        ("ubyte is a number", "u = 200", T, jms_msg(application_properties={"u": ubyte(200)})),
        ("float32 is a number", "x < 1.5", T,
         jms_msg(application_properties={"x": float32(1.25)})),
        ("0x1F is an integer", "i = 0x1F", T, jms_msg(application_properties={"i": 31})),
        ("1.5 is a double", "x = 1.5", T, jms_msg(application_properties={"x": 1.5})),
        ("uuid is byte[16]: equal to itself", "u = y", T,
         jms_msg(application_properties={"u": U1, "y": U1})),
        ("LIKE", "s LIKE 'a%' AND s NOT LIKE '%z'", T,
         jms_msg(application_properties={"s": "abc"})),
        ("LIKE ESCAPE", "s LIKE 'a\\_%' ESCAPE '\\'", T,
         jms_msg(application_properties={"s": "a_c"})),
        ("IN of strings", "s IN ('x', 'abc')", T, jms_msg(application_properties={"s": "abc"})),
        ("IS NULL", "s IS NULL AND y IS NOT NULL", T,
         jms_msg(application_properties={"y": 1})),
        ("arithmetic", "i * 2 + 1 = 7 AND i / 2 = 1", T, jms_msg(application_properties={"i": 3})),
        ("NaN rules", "x <> x AND NOT x = x", T, jms_msg(application_properties={"x": math.nan})),
        ("blog-style filter", "JMSPriority > 4 OR (region IN ('EU', 'US') AND price >= 99.99)", T,
         jms_msg(application_properties={"region": "EU", "price": 100})),
    ]
]


@pytest.mark.parametrize(ROW_ARGS, JMS_ROWS)
def test_jms(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    check(text, dialect, msg, expected)


@pytest.mark.parametrize("name", [
    "JMSMessageID", "JMSCorrelationID", "JMSType", "JMSPriority", "JMSDeliveryMode",
    "JMSTimestamp", "JMSExpiration", "JMSRedelivered", "JMSDestination", "JMSReplyTo",
    "JMSXUserID", "JMSXGroupID", "JMSXGroupSeq", "JMSXDeliveryCount",
])
def test_jms_header_names_are_aliases_only_in_jms(name: str) -> None:
    """apache §2.2: JMS header names mean AMQP fields in JMS; in AMQP SQL they are just names."""
    assert same_tree(parse(name, J), ast.Alias(name))
    assert same_tree(parse(name, A), app_field(name))
    view = DictMessageView(application_properties={name: "app"})
    assert compile_sql(f"{name} = 'app'", A).evaluate(view) is True
    assert compile_sql(f"{name} = 'app'", J).evaluate(view) is not True


def test_jms_alias_has_no_entries() -> None:
    with pytest.raises(FilterError, match="single value"):
        compile_sql("JMSPriority.x = 1", J)


def test_dialects_parse_literals_differently() -> None:
    """apache §2.2 vs §6.4.4.2: the same text, different constants, different results."""
    view = DictMessageView(application_properties={"x": 31, "b": b"\x1f"})
    assert compile_sql("x = 0x1F", J).evaluate(view) is True
    assert compile_sql("x = 0x1F", A).evaluate(view) is None
    assert compile_sql("b = 0x1F", A).evaluate(view) is True
    assert compile_sql("b = 0x1F", J).evaluate(view) is False


# =============================================================================================
# §6.4.4.2, §6.4.4.6 against JMS §3.8.1.1: what each dialect's lexical rules accept.
# A filter accepted in AMQP SQL is one the spec's grammar accepts, so that it is portable.

LEXICAL_ROWS = [
    pytest.param(text, dialect, accepted, id=ident) for ident, text, dialect, accepted in [
        ("§6.4.4.2.2 7. has no digit after the point", "x = 7.", A, False),
        ("§6.4.4.2.2 .5 has no digit before the point", "x = .5", A, False),
        ("§6.4.4.2.2 7.0 and 0.5", "x = 7.0 OR x = 0.5", A, True),
        ("§6.4.4.2.3 7E3 needs a decimal coefficient", "x = 7E3", A, False),
        ("§6.4.4.2.3 .5E3 needs a digit before the point", "x = .5E3", A, False),
        ("§6.4.4.2.3 7.0E3", "x = 7.0E3", A, True),
        ("§6.4.4.2.3 a signed exponent stays accepted", "x = 7.0E-3", A, True),
        ("§6.4.4.2.1 10L is Java's", "x = 10L", A, False),
        ("§6.4.4.2.3 1.5f is Java's", "x = 1.5f", A, False),
        ("§6.4.4.2.6 lower-case hex digits", "b = 0x0a", A, False),
        ("§6.4.4.2.6 0X prefix", "b = 0X0A", A, False),
        ("§6.4.4.2.6 upper-case hex digits", "b = 0x0A", A, True),
        ("§6.4.4.2.5 LF in a string", "s = 'a\nb'", A, False),
        ("§6.4.4.2.5 CR in a string", "s = 'a\rb'", A, False),
        ("§6.4.4.2.5 TAB in a string", "s = 'a\tb'", A, False),
        ("§6.4.4.2.5 DEL in a string", "s = 'a\x7fb'", A, False),
        ("§6.4.4.2.5 C1 control in a string", 's = "a\x85b"', A, False),
        ("§6.4.4.2.5 a format character is no control character", "s = 'a\u200db'", A, True),
        ("§6.4.4.6 identifier starting with $", "$x = 1", A, False),
        ("§6.4.4.6 identifier holding $", "x$ = 1", A, False),
        ("§6.4.4.6 identifier starting with _", "_x = 1", A, False),
        ("§6.4.4.6 identifier holding _ after a letter", "x_1 = 1", A, True),
        ("§6.4.4.6 identifier holding a non-decimal digit", "x\u00b2 = 1", A, False),
        ("§6.4.4.6 delimited $ and _", "[$x] = 1 AND [_x] = 1", A, True),
        ("§6.4.4.6 reserved word as a name", "Or = 1", A, False),
        ("§6.4.4.6 reserved word as a map key", "m.and = 1", A, False),
        ("§6.4.4.6 delimited reserved word", "[Or] = 1 AND m.[and] = 1", A, True),
        ("§6.4.4.6 control character in a delimited identifier", "[a\rb] = 1", A, False),
        ("§6.4.4.6 vendor prefix is an identifier", "$acme:f() IS NULL", A, False),
        ("JMS §3.8.1.1 7. and .5", "x = 7. OR x = .5", J, True),
        ("JMS §3.8.1.1 7E3", "x = 7E3", J, True),
        ("JMS §3.8.1.1 10L and 10l", "x = 10L OR x = 10l", J, True),
        ("JMS §3.8.1.1 1.5f, 1.5D, 1e3d, 2f", "x = 1.5f OR x = 1.5D OR x = 1e3d OR x = 2f", J,
         True),
        ("JMS §3.8.1.1 0x1f and 0X1FL", "x = 0x1f OR x = 0X1FL", J, True),
        ("JMS §3.8.1.1 010 is octal", "x = 010", J, True),
        ("JMS §3.8.1.1 08 is no octal number", "x = 08", J, False),
        ("JMS §3.8.1.1 0x7FFFFFFFFFFFFFFF, the largest hex long", "x = 0x7FFFFFFFFFFFFFFF", J,
         True),
        ("JMS §3.8.1.1 0x8000000000000000 fits no Java long", "x = 0x8000000000000000", J, False),
        ("JMS §3.8.1.1 0777777777777777777777, the largest octal long",
         "x = 0777777777777777777777", J, True),
        ("JMS §3.8.1.1 1.5L", "x = 1.5L", J, False),
        ("JMS §3.8.1.1 $ and _ start Java identifiers", "$x = 1 AND _y = 2", J, True),
        ("JMS §3.8.1.1 control characters in strings", "s = 'a\nb'", J, True),
        *[(f"JMS §3.8.1.1 {word} is not an identifier", f"x = 1 OR {word} = 1", J, False)
          for word in ("Or", "and", "Between", "like", "In", "is", "Escape")],
        ("JMS §3.8.1.1 NULL is not an identifier", "x = 1 OR x = Null", J, True),  # the literal
        ("JMS §3.8.1.1 reserved word as a map key", "m.is = 1", J, False),
    ]
]


@pytest.mark.parametrize(("text", "dialect", "accepted"), LEXICAL_ROWS)
def test_lexical_rules(text: str, dialect: Any, accepted: bool) -> None:
    if accepted:
        parse(text, dialect)
    else:
        with pytest.raises(FilterError):
            parse(text, dialect)


JAVA_LITERALS = [
    pytest.param(text, value, id=f"JMS §3.8.1.1 {text}") for text, value in [
        ("010", 8), ("0", 0), ("00", 0), ("0777", 511), ("10L", 10), ("010L", 8),
        ("0x1f", 31), ("0X1FL", 31), ("09.5", 9.5), ("010e1", 100.0), ("1.5d", 1.5),
        ("1.1f", 1.100000023841858), ("2f", 2.0), ("1e3", 1000.0), (".5", 0.5), ("7.", 7.0),
    ]
]


@pytest.mark.parametrize(("text", "value"), JAVA_LITERALS)
def test_java_literals(text: str, value: Any) -> None:
    """Java's literal syntax, as JMS §3.8.1.1 says selectors write numbers: 010 is 8, not 10."""
    assert same_tree(parse(text, J), ast.Literal(value))


def test_jms_selector_must_be_a_conditional_expression() -> None:
    """JMS §3.8.1.1: "A selector is a conditional expression"; an expression is not."""
    from filtex_proton.filters.registry import decode_filter

    selector = symbol("apache.org:selector-filter:string")
    for text in ("3 + 5", "'a'", "NULL", "x = 1 AND 3", "NOT 5", "(1)"):
        with pytest.raises(FilterError, match="not a condition"):
            decode_filter(Described(selector, text))
    for text in ("x", "TRUE", "NOT x", "x AND (y = 1)", "x IS NULL"):
        decode_filter(Described(selector, text))
    decode_filter(Described(symbol("amqp:sql-filter"), "3 + 5"))  # NULL in AMQP SQL, not refused


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_jms_selector_matches_everything(text: str) -> None:
    """JMS §3.8.1.1: an empty selector is no selector; in AMQP SQL an empty filter is an error."""
    from filtex_proton.filters.base import EvaluationContext
    from filtex_proton.filters.registry import decode_filter

    built = decode_filter(Described(symbol("apache.org:selector-filter:string"), text))
    assert built.evaluate(DictMessageView(), EvaluationContext()) is True
    with pytest.raises(FilterError, match="empty"):
        decode_filter(Described(symbol("amqp:sql-filter"), text))


DIALECT_MSG = {
    "application_properties": {
        "a": 1, "s": "x", "dm": Described(symbol("d"), {"k": 1, symbol("sk"): 2}),
        "dl": Described(symbol("d"), [7]), "when": "2024-05-01",
    },
    "properties": {"creation-time": timestamp(1714521600000)},  # 2024-05-01T00:00:00Z
}
DIALECT_ROWS = [
    row(f"{sec} {d}", text, exp, dialect=dia, msg=DIALECT_MSG) for sec, d, text, dia, exp in [
        # §6.4.4.3: "If a function is not understood by an implementation, it MUST be
        # evaluated as NULL"; its arguments are not evaluated (1/0 would not be an error anyway)
        ("§6.4.4.3", "unknown function is NULL", "foo(a) IS NULL", A, T),
        ("§6.4.4.3", "unknown function compares as NULL", "foo() = 1", A, N),
        ("§6.4.4.3", "unknown function with arguments", "Foo(a, 'x', 1 / 0) IS NULL", A, T),
        ("§6.4.4.3", "inside a known one", "LOWER(foo(s)) IS NULL", A, T),
        ("§6.4.4.3", "OR TRUE still matches", "bar(a) = 1 OR a = 1", A, T),
        ("§6.4.4.3", "vendor function is NULL", "acme:f(a) IS NULL", A, T),
        ("§6.4.4.3", "unknown function in JMS", "foo(a) IS NULL", J, T),
        ("§6.4.4.3", "known function name any case", "lower(s) = 'x'", A, T),
        # §6.4.4.3.7, §6.3.2: ISO 8601 forms beyond fromisoformat
        ("§6.4.4.3.7", "ordinal date", "p.creation-time = DATE('2024-122')", A, T),
        ("§6.4.4.3.7", "basic ordinal date", "p.creation-time = DATE('2024122')", A, T),
        ("§6.4.4.3.7", "ordinal date with a time", "DATE('2024-122T10:00Z') > p.creation-time",
         A, T),
        ("§6.4.4.3.7", "reduced precision: month", "p.creation-time = DATE('2024-05')", A, T),
        ("§6.4.4.3.7", "reduced precision: year", "DATE('2024') < p.creation-time", A, T),
        ("§6.4.4.3.7", "24:00 ends the day", "p.creation-time = DATE('2024-04-30T24:00')", A, T),
        ("§6.4.4.3.7", "24:00:00Z ends the day", "p.creation-time = DATE('2024-04-30T24:00:00Z')",
         A, T),
        ("§6.4.4.3.7", "24:00:01 is no time", "DATE(s + '2024-04-30T24:00:01') IS NULL", A, T),
        ("§6.4.4.3.7", "day 366 of a common year", "DATE(s + '2023-366') IS NULL", A, T),
        ("§6.4.4.3.7", "week date", "p.creation-time = DATE('2024-W18-3')", A, T),
        ("§6.3.2", "ordinal string vs timestamp", "p.creation-time = '2024-122'", A, T),
        ("§6.3.2", "reduced string vs timestamp", "p.creation-time = '2024-05'", A, T),
        ("§6.3.2", "24:00 string vs timestamp", "p.creation-time = '2024-04-30T24:00Z'", A, T),
        # §6.4.4.5: a map reference looks through a described map, as [n] through a list
        ("§6.4.4.5", "map reference through a described map", "dm.k = 1", A, T),
        ("§6.4.4.5", "symbol key through a described map", "dm.sk = 2", A, T),
        ("§6.4.4.5", "missing key of a described map", "dm.z IS NULL", A, T),
        ("§6.4.4.5", "EXISTS through a described map", "EXISTS(dm.k) AND NOT EXISTS(dm.z)", A, T),
        ("§6.4.4.5", "positional through a described list", "dl[0] = 7", A, T),
        ("§6.4.4.5", "no named field of a described list", "dl.k IS NULL", A, T),
        ("§6.4.4.5", "described map in JMS", "dm.k = 1", J, T),
    ]
]


@pytest.mark.parametrize(ROW_ARGS, DIALECT_ROWS)
def test_each_dialect_reads_what_its_rules_accept(
    text: str, dialect: Any, msg: dict[str, Any], expected: bool | None,
) -> None:
    check(text, dialect, msg, expected)


def test_dates_read_the_same_in_date_and_in_comparisons() -> None:
    """§6.4.4.3.7 and §6.3.2 use one reader (the Spark archive too): they cannot disagree."""
    from filtex_proton.sql.iso8601 import parse_datetime, to_millis

    for text in ("2024-122", "2024-05", "2024", "2024-04-30T24:00", "2024-366T23:59:59.5Z"):
        assert parse_datetime(text) is not None
        assert to_millis(text) == parse_datetime(text)
        fn = functions.FUNCTIONS["DATE"].apply(text)
        assert fn is not None and int(fn) == parse_datetime(text)
