"""Property-based tests (hypothesis) of the SQL filter engine (filtex CSD01 §6, JMS selector):

(a) any text, and any mutation of a valid filter, gives a compiled filter or a FilterError;
(b) random valid ASTs print to text that parses back to the same tree (types and NaN included);
(c) the compiled evaluator agrees with the reference interpreter on random expressions and
    random messages with fields of every AMQP type, in both dialects;
and LIKE agrees with a textbook dynamic-programming matcher.
"""

from __future__ import annotations

import dataclasses
import math
import string
from collections.abc import Callable
from decimal import Decimal
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proton import (
    Described,
    symbol,
    ulong,
)

from filtex_proton.amqp.view import DictMessageView, Section
from filtex_proton.errors import FilterError
from filtex_proton.sql import AMQP_SQL, JMS_SELECTOR, CompiledSql, Dialect, ast, compile_sql
from filtex_proton.sql import functions as sql_functions
from filtex_proton.sql.compiler import compile_expression
from filtex_proton.sql.dialects import JMS_HEADERS
from filtex_proton.sql.like import compile_like
from filtex_proton.sql.parser import check_filter, parse
from filtex_proton.sql.portability import notes
from filtex_proton.sql.printer import to_sql
from filtex_proton.sql.reference import interpret, interpret_truth
from filtex_proton.sql.values import signed_constant

from .strategies import (
    ANNOTATION_KEYS,
    APP_NAMES,
    ISO_STRINGS,
    LIKE_ALPHABET,
    messages,
    printable,
    texts,
)
from .support import same_tree, same_value

PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow],
    derandomize=False,
)
DIALECTS = st.sampled_from([AMQP_SQL, JMS_SELECTOR])

# ==================================================================================== ASTs

HEADER_NAMES = ["durable", "priority", "ttl", "first-acquirer", "delivery-count"]
PROPERTIES_NAMES = [
    "message-id", "user-id", "to", "subject", "reply-to", "correlation-id", "content-type",
    "content-encoding", "absolute-expiry-time", "creation-time", "group-id", "group-sequence",
    "reply-to-group-id",
]
KEYWORDS = {"OR", "AND", "NOT", "IS", "NULL", "LIKE", "ESCAPE", "IN", "BETWEEN", "EXISTS",
            "TRUE", "FALSE", "INF", "NAN"}
# §6.4.4.6: no control characters (Cc: C0, DEL, C1) in delimited identifiers
any_name = st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=5)
vendor_words = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,5}", fullmatch=True).filter(
    lambda w: w.upper() not in KEYWORDS)


def literals(dialect: Dialect, *, evaluation: bool) -> st.SearchStrategy[ast.Literal]:
    """Constants exactly as the parser builds them for ``dialect`` (never negative)."""
    ints = st.one_of(st.integers(0, 10), st.integers(0, 2**63 - 1),
                     st.integers(2**63, 2**64 - 1).map(ulong),
                     st.sampled_from([2**63 - 1, ulong(2**63), ulong(2**64 - 1)]))
    floats_ = st.one_of(
        st.floats(min_value=0, allow_nan=False, allow_infinity=False).map(abs),
        st.just(math.inf), st.just(math.nan))
    strings = texts if evaluation else st.one_of(
        texts, st.text(st.characters(exclude_categories=["Cs"])))
    if dialect.lexicon == "sql":  # §6.4.4.2.5: "printable Unicode characters" only
        strings = strings.map(printable)
    options = [ints, floats_, strings, st.booleans(), st.none()]
    if dialect is AMQP_SQL:  # digits '.' digits: a non-negative exponent never comes out
        options.append(st.builds(
            lambda digits, places: Decimal((0, tuple(map(int, str(digits))), -places)),
            st.integers(0, 10**34 - 1), st.integers(1, 34)))
        options.append(st.binary(min_size=1, max_size=4))
    return st.one_of(options).map(ast.Literal)


def _index_expressions(dialect: Dialect) -> st.SearchStrategy[ast.Expr]:
    return st.one_of(
        st.integers(0, 4).map(ast.Literal),
        st.just(ast.Unary("-", ast.Literal(1))),
        st.sampled_from(["a", "b"]).map(lambda n: ast.Field(Section.APPLICATION_PROPERTIES, n)),
        st.just(ast.Literal(None)), st.just(ast.Literal("0")),
    )


def paths(dialect: Dialect, *, evaluation: bool) -> st.SearchStrategy[tuple[Any, ...]]:
    key_names = st.sampled_from(["k", "a", "x y", "0"]) if evaluation else any_name
    reference = st.one_of(key_names.map(ast.Key), _index_expressions(dialect).map(ast.Index))
    return st.lists(reference, max_size=2).map(tuple)


def fields(dialect: Dialect, *, evaluation: bool) -> st.SearchStrategy[ast.Field]:
    app_names = st.sampled_from(APP_NAMES) if evaluation else st.one_of(
        st.sampled_from([*APP_NAMES, "h", "P", "application_properties", "Or", "nan", "x"]),
        any_name)
    known_keys = st.sampled_from([*ANNOTATION_KEYS, "reply-to"])
    map_names = known_keys if evaluation else st.one_of(known_keys, any_name)
    path = paths(dialect, evaluation=evaluation)
    return st.one_of(
        st.builds(ast.Field, st.just(Section.APPLICATION_PROPERTIES), app_names, path),
        st.builds(ast.Field, st.just(Section.HEADER), st.sampled_from(HEADER_NAMES),
                  st.just(())),
        st.builds(ast.Field, st.just(Section.PROPERTIES), st.sampled_from(PROPERTIES_NAMES),
                  st.just(())),
        st.builds(ast.Field,
                  st.sampled_from([Section.MESSAGE_ANNOTATIONS, Section.DELIVERY_ANNOTATIONS,
                                   Section.FOOTER]),
                  map_names, path),
    )


def _leaves(dialect: Dialect, *, evaluation: bool) -> st.SearchStrategy[ast.Expr]:
    constants = literals(dialect, evaluation=evaluation)
    references = fields(dialect, evaluation=evaluation)
    if dialect is JMS_SELECTOR:
        references = st.one_of(references, st.sampled_from(sorted(JMS_HEADERS)).map(ast.Alias))
    rare = st.one_of(
        st.just(ast.Call("UTC")),
        st.sampled_from(ISO_STRINGS[:3]).map(lambda s: ast.Call("DATE", (ast.Literal(s),))),
        st.builds(lambda v, n: ast.Call(n, (), vendor=v), vendor_words, vendor_words),
        # §6.4.4.3: an unprefixed function this broker does not understand is NULL
        st.builds(ast.Call, vendor_words.filter(lambda w: w.upper() not in sql_functions.FUNCTIONS),
                  st.lists(constants, max_size=2).map(tuple)),
    )
    return st.one_of(constants, references, references, rare)  # one_of weighs branches evenly


_PATTERN_TOKENS = [("char", c) for c in "ab\n\U0001d538!\\"] + [("%", ""), ("_", "")] + [
    ("escaped", c) for c in "%_a!"]


def _render_pattern(tokens: list[tuple[str, str]], escape: str | None) -> str:
    """A LIKE pattern that is valid for ``escape`` (§6.4.3.2), from abstract tokens."""
    out = []
    for kind, c in tokens:
        if kind == "char":
            out.append(escape + c if c == escape else c)
        elif kind in "%_":
            out.append(kind if kind != escape else "")
        elif escape is not None:
            out.append(escape + c)
        elif c not in "%_":
            out.append(c)
    return "".join(out)


def _like_parts(inner: st.SearchStrategy[ast.Expr], dialect: Dialect) -> st.SearchStrategy[Any]:
    """Pattern and escape; constant ones are valid, as the parser insists (§6.4.3.2).
    AMQP SQL strings hold no control characters (§6.4.4.2.5): no newline there."""
    escape_chars = st.sampled_from([None, "!", "\\", "%", "_", "\U0001d538"])
    tokens = _PATTERN_TOKENS if dialect.lexicon == "java" else [
        t for t in _PATTERN_TOKENS if t != ("char", "\n")]
    alphabet = LIKE_ALPHABET if dialect.lexicon == "java" else LIKE_ALPHABET.replace("\n", "")
    constant = st.builds(
        lambda escape, tokens: (ast.Literal(_render_pattern(tokens, escape)),
                                None if escape is None else ast.Literal(escape)),
        escape_chars, st.lists(st.sampled_from(tokens), max_size=6))
    constant_escape = escape_chars.map(lambda e: None if e is None else ast.Literal(e))
    # a computed escape is never checked at definition time: keep constants out of it
    computed = inner.map(lambda e: ast.Unary("+", e) if isinstance(e, ast.Literal) else e)
    return st.one_of(
        constant,
        st.tuples(computed, st.one_of(constant_escape, computed)),
        st.tuples(st.text(alphabet=alphabet, max_size=4).map(ast.Literal), computed),
    )


def _flat(kind: type[ast.And] | type[ast.Or]) -> Callable[[tuple[ast.Expr, ...]], ast.Expr]:
    # The parser flattens 'x AND y AND z' and '(x AND y) AND z' alike, so an And never
    # starts with an And (nor an Or with an Or); it may contain one elsewhere.
    def build(operands: tuple[ast.Expr, ...]) -> ast.Expr:
        first = operands[0]
        if isinstance(first, kind):
            return kind((*first.operands, *operands[1:]))
        return kind(operands)

    return build


def expressions(dialect: Dialect, *, evaluation: bool) -> st.SearchStrategy[ast.Expr]:
    exists_targets: st.SearchStrategy[Any] = fields(dialect, evaluation=evaluation)
    if dialect is JMS_SELECTOR:
        exists_targets = st.one_of(
            exists_targets, st.sampled_from(sorted(JMS_HEADERS)).map(ast.Alias))

    def predicates(inner: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
        two_to_four = st.lists(inner, min_size=2, max_size=4).map(tuple)
        comparison = st.sampled_from(["=", "<>", "!=", ">", ">=", "<", "<="])
        return st.one_of(
            st.builds(ast.Compare, comparison, inner, inner),
            two_to_four.map(_flat(ast.And)),
            two_to_four.map(_flat(ast.Or)),
            st.builds(ast.Not, inner),
            st.builds(ast.IsNull, inner, negated=st.booleans()),
            st.builds(lambda o, pe, neg: ast.Like(o, pe[0], pe[1], negated=neg),
                      inner, _like_parts(inner, dialect), st.booleans()),
            st.builds(ast.In, inner, st.lists(inner, min_size=1, max_size=3).map(tuple),
                      negated=st.booleans()),
            st.builds(ast.Between, inner, inner, inner, negated=st.booleans()),
            st.builds(ast.Exists, exists_targets),
        )

    def extend(inner: st.SearchStrategy[ast.Expr]) -> st.SearchStrategy[ast.Expr]:
        two_to_four = st.lists(inner, min_size=2, max_size=4).map(tuple)
        comparison = st.sampled_from(["=", "<>", "!=", ">", ">=", "<", "<="])
        return st.one_of(
            st.builds(ast.Unary, st.sampled_from("+-"), inner),
            st.builds(ast.Binary, st.sampled_from("+-*/%"), inner, inner),
            st.builds(ast.Binary, st.sampled_from("+-*/%"), inner, inner),
            st.builds(ast.Compare, comparison, inner, inner),
            two_to_four.map(_flat(ast.And)),
            two_to_four.map(_flat(ast.Or)),
            st.builds(ast.Not, inner),
            st.builds(ast.IsNull, inner, negated=st.booleans()),
            st.builds(lambda o, pe, neg: ast.Like(o, pe[0], pe[1], negated=neg),
                      inner, _like_parts(inner, dialect), st.booleans()),
            st.builds(ast.In, inner, st.lists(inner, min_size=1, max_size=3).map(tuple),
                      negated=st.booleans()),
            st.builds(ast.Between, inner, inner, inner, negated=st.booleans()),
            st.builds(ast.Exists, exists_targets),
            st.builds(lambda n, a: ast.Call(n, (a,)), st.sampled_from(["LOWER", "UPPER"]), inner),
            st.builds(lambda n, a, t: ast.Call(n, (a, t)), st.sampled_from(["LOWER", "UPPER"]),
                      inner, st.sampled_from(["tr", "en", "AZ-latn"]).map(ast.Literal)),
            st.builds(lambda n, a, b: ast.Call(n, (a, b)),
                      st.sampled_from(["LEFT", "RIGHT", "SUBSTRING"]), inner, inner),
            st.builds(lambda a, b, c: ast.Call("SUBSTRING", (a, b, c)), inner, inner, inner),
            # a constant DATE() argument must be ISO 8601 (§6.4.4.3.7); wrap other constants
            inner.map(lambda e: ast.Call(
                "DATE", (ast.Unary("+", e) if isinstance(e, ast.Literal) else e,))),
            st.builds(lambda v, n, args: ast.Call(n, args, vendor=v), vendor_words,
                      vendor_words, st.lists(inner, max_size=2).map(tuple)),
        )

    tree = st.recursive(_leaves(dialect, evaluation=evaluation), extend, max_leaves=12)
    # a filter is mostly a predicate at the top: bias towards one
    return st.one_of(predicates(tree), predicates(tree), tree)


def dialect_and_tree(*, evaluation: bool) -> st.SearchStrategy[tuple[Dialect, ast.Expr]]:
    return st.one_of([
        expressions(dialect, evaluation=evaluation).map(lambda tree, d=dialect: (d, tree))
        for dialect in (AMQP_SQL, JMS_SELECTOR)
    ])


PRINTABLE_TREES = dialect_and_tree(evaluation=False)
EVALUABLE_TREES = dialect_and_tree(evaluation=True)


# ============================================================== (a) only FilterError escapes

TOKENS = [
    "a", "b", "h.", "p.", "m.", "a.", "[x]", "[a]]b]", "[[", "]]", "priority", "reply-to",
    "message-id", "contentType", "=", "<>", "!=", "<", ">", "<=", ">=", "+", "-", "*", "/", "%",
    "(", ")", ",", ".", "[", "]", ":", "AND", "OR", "NOT", "IS", "NULL", "LIKE", "ESCAPE", "IN",
    "BETWEEN", "EXISTS", "TRUE", "FALSE", "INF", "NAN", "1", "0", "18446744073709551615",
    "18446744073709551616", "1.5", "1.5E3", "1E999", ".5", "7.", "0x1F", "0x1", "0x", "'a'",
    "'it''s'", '"q"', "'", '"', "'%'", "'_'", "'!'", "LOWER", "UPPER", "LEFT", "RIGHT",
    "SUBSTRING", "UTC", "DATE", "acme:f", "'2020-01-01'", "'PT1S'", " ", "\n", "JMSPriority",
    "JMSMessageID", "JMSType", "JMSDeliveryMode", "\x00", "\x85", "é", "\U0001d538",
]
CORPUS = [
    "p.subject = 'order.created' AND p.creation_time > UTC() - 3600000 AND region IN ('EU','US')"
    " AND (h.priority > 4 OR price >= 99.99 OR premium_customer = TRUE)",
    "color = 'blue'", "a.m.[x y][0] IS NOT NULL", "EXISTS(m.[x-opt-jms-type])",
    "s LIKE 'a!%%' ESCAPE '!' OR s NOT LIKE '_b%'", "x NOT BETWEEN -1.5 AND 2.5E3",
    "LOWER(LEFT(s, 3), 'tr') <> SUBSTRING(s, 1, 2) + 'x'", "acme:f(1, 'a') IS NULL",
    "DATE('2020-01-01T00:00:00Z') < p.absolute-expiry-time", "NOT (a % 2 = 0) AND b / 3 > INF",
    "[a]]b] = 0x0A0B OR [[[x] = NAN", "JMSPriority > 4 AND JMSType = 'order'",
    "h.first_acquirer OR p.replyToGroupId IS NULL", "l[1 + 1].k = \"q\"\"q\"",
]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(CORPUS))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 8)))
        operation = draw(st.sampled_from(["delete", "insert", "replace", "duplicate", "swap"]))
        if operation == "delete":
            text = text[:i] + text[j:]
        elif operation == "insert":
            piece = draw(st.one_of(st.sampled_from(TOKENS), st.text(max_size=2)))
            text = text[:i] + piece + text[i:]
        elif operation == "replace":
            piece = draw(st.one_of(st.sampled_from(TOKENS), st.characters()))
            text = text[:i] + piece + text[j:]
        elif operation == "duplicate":
            text = text[:j] + text[i:j] + text[j:]
        else:
            k = draw(st.integers(0, len(text)))
            text = text.replace(text[i:j], text[k:k + 3], 1) if i < j else text
    return text


any_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=string.printable, max_size=40),
    st.lists(st.sampled_from(TOKENS), max_size=20).map(" ".join),
    st.lists(st.sampled_from(TOKENS), max_size=20).map("".join),
    mutated(),
)


@PROPERTY_SETTINGS
@given(text=any_text, dialect=DIALECTS, view=messages)
def test_a_only_filter_error_escapes(text: str, dialect: Dialect, view: DictMessageView) -> None:
    """§2.3: any text is either a valid filter or a definitional error, never a crash; and a
    filter that compiles evaluates without raising, as the reference interpreter does."""
    try:
        compiled = compile_sql(text, dialect)
    except FilterError as error:
        assert error.reason
        return
    with _frozen_clock():
        result = compiled.evaluate(view)
        assert result in (True, False, None)
        assert interpret_truth(compiled.ast, view, dialect) is result


# ======================================================================= (b) round trip


def _signs_folded(node: Any) -> Any:
    """The tree as the parser builds it: a sign on a numeric literal folded into it."""
    if isinstance(node, tuple):
        return tuple(_signs_folded(item) for item in node)
    if not isinstance(node, ast.Node):
        return node
    changed = {f.name: _signs_folded(getattr(node, f.name)) for f in dataclasses.fields(node)
               if f.name != "pos"}
    node = dataclasses.replace(node, **changed)
    if isinstance(node, ast.Unary) and isinstance(node.operand, ast.Literal):
        folded = signed_constant(node.op, node.operand.value)
        if folded is not None:
            return ast.Literal(folded, pos=node.pos)
    return node


@PROPERTY_SETTINGS
@given(case=PRINTABLE_TREES)
def test_b_printed_ast_parses_back_to_itself(case: tuple[Dialect, ast.Expr]) -> None:
    dialect, tree = case
    text = to_sql(tree, dialect)
    try:
        again = parse(text, dialect)
    except FilterError as error:  # pragma: no cover - the failure being tested for
        raise AssertionError(f"printed text does not parse: {text!r}\n{error}") from None
    assert same_tree(again, _signs_folded(tree)), f"{text!r}\n{tree!r}\n{again!r}"
    assert to_sql(again, dialect) == to_sql(_signs_folded(tree), dialect)  # a normal form
    # The normal form is portable: only what the tree itself holds beyond the grammar
    # (BETWEEN) may be noted, never how the printer spelled a constant (§6.4.4.2.3).
    flagged = [note for note in notes(again, text, dialect)
               if note.kind == "not-portable" and "BETWEEN" not in note.text]
    assert not flagged, f"{text!r}: {flagged}"


@pytest.mark.parametrize(("dialect", "tree", "text"), [
    pytest.param(AMQP_SQL, ast.Literal(Decimal("1234567890123456789012345678901.234")),
                 "1234567890123456789012345678901.234", id="§6.4.4.2.2 34-digit decimal"),
    pytest.param(AMQP_SQL, ast.Call("LOWER", (ast.Compare("=", ast.Literal(1), ast.Literal(1)),)),
                 "LOWER((1 = 1))", id="§6.4.4.3 predicate as a function argument"),
    pytest.param(AMQP_SQL, ast.Field(Section.APPLICATION_PROPERTIES, "l",
                                     (ast.Index(ast.Not(ast.Literal(True))),)),
                 "l[(NOT TRUE)]", id="§6.4.4.5 predicate as a position"),
    pytest.param(AMQP_SQL, ast.Field(Section.APPLICATION_PROPERTIES, "h", (ast.Key("x"),)),
                 "a.h.x", id="§6.4.4.4 application property named like a section"),
    pytest.param(AMQP_SQL, ast.Field(Section.MESSAGE_ANNOTATIONS, "a]b[c"),
                 "m.[a]]b[[c]", id="§6.4.4.6 delimited name with both escapes"),
    pytest.param(AMQP_SQL, ast.Field(Section.APPLICATION_PROPERTIES, "l",
                                     (ast.Index(ast.Field(Section.APPLICATION_PROPERTIES, "$1")),
                                      ast.Index(ast.Literal(0)))),
                 "l[ [$1] ][0]", id="§6.4.4.5-6 delimited name as a position (atheris: ']]')"),
    pytest.param(AMQP_SQL, ast.Literal(1.2345e-20), "0.000000000000000000012345E0",
                 id="§6.4.4.2.3 unsigned exponent: a small double shifts its point"),
    pytest.param(JMS_SELECTOR, ast.Literal(1.2345e-20), "1.2345E-20",
                 id="JMS §3.8.1.1 Java's signed exponent"),
    pytest.param(JMS_SELECTOR, ast.Literal(ulong(2**64 - 1)), "18446744073709551615",
                 id="apache §2.2 ulong constant"),
    pytest.param(JMS_SELECTOR, ast.Field(Section.APPLICATION_PROPERTIES, "JMSType"),
                 "[JMSType]", id="apache §2.2 property named like a JMS header"),
])
def test_printer_examples(dialect: Dialect, tree: ast.Expr, text: str) -> None:
    assert to_sql(tree, dialect) == text
    assert same_tree(parse(text, dialect), tree)


# ============================================================ (c) compiled == reference

NOW_MS = 1_577_836_800_000


def _frozen_clock() -> Any:
    """UTC() fixed for both evaluators, so results do not depend on the time of the run."""
    return mock.patch.object(sql_functions, "time",
                             SimpleNamespace(time_ns=lambda: NOW_MS * 1_000_000))


def _raw(evaluate: Callable[[], Any]) -> Any:
    try:
        return ("value", evaluate())
    except Exception as error:  # pragma: no cover - reported by the assertion below
        return ("raised", type(error).__name__)


def _is_whole_filter(tree: ast.Expr, text: str, dialect: Dialect) -> bool:
    try:
        check_filter(tree, text, dialect)
    except FilterError:
        return False
    return True


@PROPERTY_SETTINGS
@given(case=EVALUABLE_TREES, view=messages)
def test_c_compiled_agrees_with_reference(
    case: tuple[Dialect, ast.Expr], view: DictMessageView
) -> None:
    dialect, tree = case
    with _frozen_clock():
        evaluator = compile_expression(tree, dialect)
        expected_truth = interpret_truth(tree, view, dialect)
        compiled = CompiledSql("", tree, dialect, evaluator)
        assert compiled.evaluate(view) is expected_truth
        # the same through the public text API, which takes what the wire takes: in JMS
        # only a conditional expression
        text = to_sql(tree, dialect)
        if _is_whole_filter(tree, text, dialect):
            assert compile_sql(text, dialect).evaluate(view) is expected_truth
        else:
            with pytest.raises(FilterError, match="is not a condition"):
                compile_sql(text, dialect)
        # and the values themselves, of every sub-expression: same type, NaN-aware
        for node, _ in ast.walk(tree):
            if isinstance(node, ast.Key | ast.Index):
                continue
            got = _raw(lambda n=node: compile_expression(n, dialect)(view))
            want = _raw(lambda n=node: interpret(n, view, dialect))
            assert got[0] == want[0] == "value", (node, got, want)
            assert same_value(got[1], want[1]), (node, got, want)


# ===================================================================== LIKE vs a DP matcher


def like_oracle(text: str, pattern: str, escape: str | None) -> bool | None:
    """O(n*m) dynamic programming over (pattern token, text position): the textbook matcher.
    ``None`` for a pattern that ends in the escape character."""
    tokens: list[tuple[str, str | None]] = []
    chars = iter(pattern)
    for c in chars:
        if escape is not None and c == escape:
            escaped = next(chars, None)
            if escaped is None:
                return None
            tokens.append(("lit", escaped))
        elif c == "%":
            tokens.append(("any*", None))
        elif c == "_":
            tokens.append(("any1", None))
        else:
            tokens.append(("lit", c))
    reachable = {0}
    for kind, value in tokens:
        nxt: set[int] = set()
        for i in reachable:
            if kind == "any*":
                nxt.update(range(i, len(text) + 1))
            elif i < len(text) and (kind == "any1" or text[i] == value):
                nxt.add(i + 1)
        reachable = nxt
    return len(text) in reachable


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet="ab!%_\n\U0001d538", max_size=10),
       pattern=st.text(alphabet="ab!%_\n\U0001d538", max_size=8),
       escape=st.sampled_from([None, "!", "%", "_", "a"]))
def test_like_agrees_with_dynamic_programming(text: str, pattern: str, escape: str | None) -> None:
    """§6.4.3.2: the linear-time matcher accepts exactly what the textbook matcher accepts."""
    expected = like_oracle(text, pattern, escape)
    try:
        matcher = compile_like(pattern, escape)
    except ValueError:
        assert expected is None
        return
    assert matcher(text) is expected


@pytest.mark.parametrize("text", ["3 + 5", "'text'", "NULL", "a AND 0", "NOT 'x'"])
def test_the_api_refuses_what_the_jms_selector_type_refuses_on_the_wire(text: str) -> None:
    """JMS §3.8.1.1: a selector is a conditional expression; compile_sql and the wire agree."""

    from filtex_proton.filterset import decode_filter_set

    with pytest.raises(FilterError, match="is not a condition"):
        compile_sql(text, JMS_SELECTOR)
    with pytest.raises(FilterError, match="is not a condition"):
        decode_filter_set({symbol("f"): Described(symbol("apache.org:selector-filter:string"),
                                                  text)})
    compile_sql(text, AMQP_SQL)  # an AMQP SQL filter may be any expression (§6.4.2)
