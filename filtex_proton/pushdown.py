"""Pushdown: the part of a filter set that a JMS selector on the upstream evaluates.

In relay mode the upstream broker (Artemis, ActiveMQ, Qpid) evaluates
``apache.org:selector-filter:string`` itself; a selector there keeps the
messages a consumer does not want on the upstream queue instead of taking and
holding them here. This module translates a compiled filter set into such a
selector, conservatively: the selector must be TRUE for every message the
filter set matches (it is *implied* by the set), so that pushing it never hides
a wanted message. The relay still evaluates the whole set locally, so the
selector only has to be implied, not equivalent; :attr:`Pushdown.exact` says
when it is also equivalent (then no non-match ever crosses the wire).

Translation is polarity-aware, because AMQP SQL and JMS disagree on values that
cannot be compared (NULL in AMQP SQL §2.1, FALSE in JMS 2.0 §3.8.1.2): under an
even number of negations a piece must be TRUE whenever the original is TRUE;
under an odd number it must be FALSE whenever the original is FALSE. A
conjunction may drop pieces in the first case and a disjunction in the second;
anything else without a sound translation makes its enclosing piece local.
docs/SEMANTICS.md ("Pushdown to an upstream broker") lists what is translated
and why each translation is exact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from filtex_proton.amqp.types import Kind, kind_of
from filtex_proton.amqp.view import Section
from filtex_proton.errors import FilterError
from filtex_proton.filters.apache import DirectBinding, HeadersBinding, NoLocalFilter, TopicBinding
from filtex_proton.filters.base import Filter
from filtex_proton.filters.constant import ConstantFilter
from filtex_proton.filters.group import GroupFilter, GroupOp
from filtex_proton.filters.matching import Reference, TextPattern
from filtex_proton.filters.property import PropertyFilter
from filtex_proton.filters.sql import SqlFilter
from filtex_proton.filters.stream import StreamFilter
from filtex_proton.filters.visitor import FamilyVisitor
from filtex_proton.filterset import FilterSet
from filtex_proton.sql import JMS_SELECTOR, ast, compile_sql, iso8601
from filtex_proton.sql.visitor import Visitor

__all__ = ["MAX_SELECTOR_CHARS", "Pushdown", "client_selector", "is_jms_identifier", "pushdown"]

MAX_SELECTOR_CHARS: Final = 8192
"""Longer selectors are not pushed: upstreams parse them per link, and limits vary."""

_MAX_REASONS: Final = 16
_BMP: Final = 0x10000
"""A Java char: an escape character beyond it is two chars to a Java selector parser."""
_JMS_PRIORITY_MAX: Final = 9
"""JMS priorities are 0-9 (JMS 2.0 §3.4.10); Artemis reads a larger AMQP priority as 9."""
_EXACT_INTEGER: Final = 2**53
"""Integer literals up to this magnitude compare exactly with doubles, in Java and here."""
_EXACT_FLOAT32: Final = 2**24
"""Integer references up to this magnitude survive §4.1.1's single-precision rule."""
_IDENTIFIER: Final = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_RESERVED: Final = frozenset({
    "NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE",
})
_RESERVED_PREFIXES: Final = ("JMS", "AMQ")
"""JMS 2.0 §3.8.1.1 reserves JMS*; Artemis reads AMQ* names (AMQPriority ...) as headers."""
_FLIP: Final = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "=": "=", "<>": "<>"}
_SOUND_NUMERIC: Final = {
    # How an application-property comparison with an integer literal is pushed, by polarity.
    # A decimal property reaches JMS as a double (rounded, but monotonically): x >= n and
    # x <= n survive the rounding when TRUE; x > n and x < n survive it when FALSE.
    True: {"=": "=", ">=": ">=", "<=": "<=", ">": ">=", "<": "<="},
    False: {"<>": "<>", ">": ">", "<": "<", ">=": ">", "<=": "<"},
}
_DELIVERY_MODE: Final = {True: "'PERSISTENT'", False: "'NON_PERSISTENT'"}


@dataclass(frozen=True, slots=True)
class Pushdown:
    """A filter set split for an upstream that evaluates JMS selectors."""

    selector: str | None
    """What to put on the upstream source, or ``None`` when nothing is pushed."""
    residual: FilterSet
    """What the relay evaluates itself: always the whole set (the selector is only implied)."""
    pushed: tuple[str, ...]
    """Keys of the filters that contributed to the selector (wholly or in part)."""
    exact: bool
    """Whether the selector is TRUE exactly for the messages the whole set matches."""
    reasons: tuple[str, ...]
    """Why each part that is not pushed stays local, for the log (at most 16)."""


@dataclass(frozen=True, slots=True)
class _Part:
    """A translated piece: JMS text, whether it is equivalent, whether it needs brackets."""

    text: str
    exact: bool
    atomic: bool = True
    word: str | None = None
    """``AND`` or ``OR`` when the piece is such a chain (a chain of the same joins unbracketed)."""

    def wrapped(self) -> str:
        return self.text if self.atomic else f"({self.text})"

    def within(self, word: str) -> str:
        return self.text if self.word == word else self.wrapped()


_TRUE: Final = _Part("1=1", True)
_FALSE: Final = _Part("1=0", True)


def is_jms_identifier(name: str) -> bool:
    """Whether ``name`` reads as an application property in every upstream's selector."""
    return (_IDENTIFIER.fullmatch(name) is not None and name.upper() not in _RESERVED
            and not name.upper().startswith(_RESERVED_PREFIXES))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _combine(parts: Iterable[_Part | None], word: str, droppable: bool,
             exact_combination: bool) -> _Part | None:
    """AND or OR of translated pieces; ``droppable`` says whether a missing piece may go."""
    kept: list[_Part] = []
    exact = exact_combination
    for part in parts:
        if part is None:
            if not droppable:
                return None
            exact = False
        else:
            kept.append(part)
            exact = exact and part.exact
    neutral = _TRUE if word == "AND" else _FALSE
    kept = [part for part in kept if part.text != neutral.text]
    if not kept:
        return _Part(neutral.text, exact)
    if len(kept) == 1:
        return _Part(kept[0].text, exact, kept[0].atomic, kept[0].word)
    return _Part(_join(kept, word), exact, atomic=False, word=word)


def _join(parts: Iterable[_Part], word: str) -> str:
    return f" {word} ".join(part.within(word) for part in parts)


def _negate(part: _Part | None) -> _Part | None:
    if part is None:
        return None
    if part.text in (_TRUE.text, _FALSE.text):
        return _Part(_FALSE.text if part.text == _TRUE.text else _TRUE.text, part.exact)
    # Always bracketed: ActiveMQ's and Artemis's grammar read NOT as a unary operator that
    # binds tighter than comparisons ("NOT a = 1" is "(NOT a) = 1" there).
    return _Part(f"NOT ({part.text})", part.exact, atomic=False)


class _Translator(Visitor[_Part | None], FamilyVisitor[_Part | None]):
    """Translates filters and SQL expressions; records why a piece stays local.

    An expression's handler reads the polarity it is under from ``self.positive``
    (set by :meth:`expr`); a node with no sound JMS form says :meth:`untranslated`.
    """

    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.where = ""
        self.positive = True

    def local(self, why: str) -> None:
        self.reasons.append(f"{self.where}: {why}")

    # -- filters -------------------------------------------------------------------

    def filter(self, item: Filter, positive: bool) -> _Part | None:
        """``item`` under an even (``positive``) or odd number of negations."""
        outer, self.positive = self.positive, positive
        try:
            return self.visit_family(item)
        finally:
            self.positive = outer

    def on_constant_filter(self, item: ConstantFilter) -> _Part | None:
        return _TRUE if item.result else _FALSE  # §5: TRUE drops out of a conjunction

    def on_sql_filter(self, item: SqlFilter) -> _Part | None:
        if item.compiled.dialect is JMS_SELECTOR:  # the upstream's own language
            if not item.compiled.text.strip():  # JMS §3.8.1.1: no selector, all match
                return _TRUE
            return _Part(item.compiled.text.strip(), True, atomic=False)
        return self.expr(item.compiled.ast, self.positive)

    def on_group_filter(self, item: GroupFilter) -> _Part | None:
        return self.group(item, self.positive)

    def on_property_filter(self, item: PropertyFilter) -> _Part | None:
        return self.property_filter(item, self.positive)

    def on_direct_binding(self, item: DirectBinding) -> _Part | None:
        return self.no_equivalent(item)

    def on_topic_binding(self, item: TopicBinding) -> _Part | None:
        return self.no_equivalent(item)

    def on_headers_binding(self, item: HeadersBinding) -> _Part | None:
        return self.no_equivalent(item)

    def on_no_local_filter(self, item: NoLocalFilter) -> _Part | None:
        return self.no_equivalent(item)

    def on_stream_filter(self, item: StreamFilter) -> _Part | None:
        return self.no_equivalent(item)  # a message annotation: no JMS selector reads those

    def no_equivalent(self, item: Filter) -> _Part | None:
        """The Apache bindings, no-local and the stream filter: what they test is not a JMS
        selector's (the routing key, the connection of origin, a message annotation); they
        stay local."""
        self.local(f"{item.type_name} has no JMS selector equivalent")
        return None

    def group(self, item: GroupFilter, positive: bool) -> _Part | None:
        # §3: a NULL member makes the group NULL, so "some member decides" keeps
        # exactness only with a single member.
        single = len(item.members) == 1
        if item.op is GroupOp.NONE:  # none TRUE = NOT (m1 OR m2 ...)
            members = [self.filter(m, not positive) for m in item.members]
            return _negate(_combine(members, "OR", positive, positive or single))
        members = [self.filter(m, positive) for m in item.members]
        if item.op is GroupOp.ALL:
            return _combine(members, "AND", positive, positive or single)
        return _combine(members, "OR", not positive, not positive or single)

    def property_filter(self, item: PropertyFilter, positive: bool) -> _Part | None:
        # §4: absent fields make an entry FALSE, not NULL, so only the positive side is sound.
        if not positive:
            self.local(f"{item.type_name} under a negation: an absent field is FALSE in §4, "
                       "NULL in JMS")
            return None
        if item.section not in (Section.APPLICATION_PROPERTIES, Section.HEADER):
            self.local(f"{item.type_name}: JMS selectors do not read this section")
            return None
        parts = [self.property_entry(item.section, key, reference)
                 for key, reference in item.references]
        return _combine(parts, "AND", True, True)

    def property_entry(self, section: Section, key: Any, reference: Reference) -> _Part | None:
        name = str(key)
        value = reference.text if isinstance(reference, TextPattern) else reference.value
        kind = kind_of(value)
        if section is Section.HEADER:
            part = _header_compare(name, "=", value, kind)
            if part is None:
                self.local(f"header field {name!r} = {value!r} has no JMS form in every upstream")
            return part
        if not is_jms_identifier(name):
            self.local(f"application property {name!r} is not a JMS identifier")
            return None
        if isinstance(reference, TextPattern):
            return self.text_pattern(name, reference)
        if kind is Kind.BOOLEAN:
            return _Part(f"{name} = {'TRUE' if value else 'FALSE'}", False)
        if kind is Kind.INTEGER and abs(int(value)) <= _EXACT_FLOAT32:
            return _Part(f"{name} = {int(value)}", False)
        self.local(f"property {name!r}: a {kind.name.lower()} reference is not translated")
        return None

    def text_pattern(self, name: str, pattern: TextPattern) -> _Part:
        """§4.1.1 bullets 6-7: equality, or a prefix or suffix as LIKE with the wildcards
        escaped (never exact: described values and symbols differ)."""
        if pattern.how == "exact":
            return _Part(f"{name} = {_quote(pattern.text)}", False)
        escaped = re.sub(r"([%_!])", r"!\1", pattern.text)
        like = f"{escaped}%" if pattern.how == "prefix" else f"%{escaped}"
        return _Part(f"{name} LIKE {_quote(like)} ESCAPE '!'", False)

    # -- SQL expressions (§6) -----------------------------------------------------------

    def expr(self, node: ast.Expr, positive: bool) -> _Part | None:
        """``node`` under an even (``positive``) or odd number of negations."""
        outer, self.positive = self.positive, positive
        try:
            return self.visit(node)
        finally:
            self.positive = outer

    def untranslated(self, node: ast.Expr) -> _Part | None:
        """A piece JMS cannot express soundly stays local: the reason logged, no part."""
        self.local(f"{_shown(node)} is not translated")
        return None

    def visit_and(self, node: ast.And) -> _Part | None:
        positive = self.positive
        return _combine((self.expr(o, positive) for o in node.operands), "AND", positive, True)

    def visit_or(self, node: ast.Or) -> _Part | None:
        positive = self.positive
        return _combine((self.expr(o, positive) for o in node.operands), "OR", not positive,
                        True)

    def visit_not(self, node: ast.Not) -> _Part | None:
        return _negate(self.expr(node.operand, not self.positive))

    def visit_literal(self, node: ast.Literal) -> _Part | None:
        if isinstance(node.value, bool):
            return _TRUE if node.value else _FALSE
        return self.untranslated(node)

    def visit_compare(self, node: ast.Compare) -> _Part | None:
        return self.compare(node, self.positive)

    def visit_between(self, node: ast.Between) -> _Part | None:
        operand = node.operand
        inside = ast.And((ast.Compare(">=", operand, node.low),
                          ast.Compare("<=", operand, node.high)))
        return self.expr(ast.Not(inside) if node.negated else inside, self.positive)

    def visit_is_null(self, node: ast.IsNull) -> _Part | None:
        name = _property(node.operand)
        if name is None:
            return self.untranslated(node)
        return _Part(f"{name} IS {'NOT ' if node.negated else ''}NULL", True)

    def visit_like(self, node: ast.Like) -> _Part | None:
        return self.like(node)

    def visit_in(self, node: ast.In) -> _Part | None:
        return self.in_list(node, self.positive)

    # A value, not a predicate, or a predicate JMS selectors read differently: local.

    def visit_field(self, node: ast.Field) -> _Part | None:
        return self.untranslated(node)

    def visit_alias(self, node: ast.Alias) -> _Part | None:
        return self.untranslated(node)

    def visit_exists(self, node: ast.Exists) -> _Part | None:
        return self.untranslated(node)

    def visit_unary(self, node: ast.Unary) -> _Part | None:
        return self.untranslated(node)

    def visit_binary(self, node: ast.Binary) -> _Part | None:
        return self.untranslated(node)

    def visit_call(self, node: ast.Call) -> _Part | None:
        return self.untranslated(node)

    def compare(self, node: ast.Compare, positive: bool) -> _Part | None:
        op = "<>" if node.op == "!=" else node.op
        left, right = _constant(node.left) or node.left, _constant(node.right) or node.right
        if isinstance(left, ast.Literal):
            left, right, op = right, left, _FLIP[op]
        if isinstance(right, ast.Literal) and isinstance(left, ast.Field) and not left.path:
            value, kind = right.value, kind_of(right.value) if right.value is not None else None
            if left.section is Section.HEADER:
                part = _header_compare(left.name, op, value, kind)
            elif _property(left) is None:
                part = None
            elif kind in (Kind.STRING, Kind.SYMBOL) and op in ("=", "<>") \
                    and iso8601.to_millis(str(value)) is None:  # §6.3.2: ISO text vs timestamps
                part = _Part(f"{left.name} {op} {_quote(str(value))}", positive)
            elif kind is Kind.BOOLEAN and op in ("=", "<>"):
                part = _Part(f"{left.name} {op} {'TRUE' if value else 'FALSE'}", positive)
            elif kind is Kind.INTEGER and abs(int(value)) <= _EXACT_INTEGER \
                    and op in _SOUND_NUMERIC[positive]:
                part = _Part(f"{left.name} {_SOUND_NUMERIC[positive][op]} {int(value)}", False)
            else:
                part = None
            if part is not None:
                return part
        return self.untranslated(node)

    def like(self, node: ast.Like) -> _Part | None:
        name = _property(node.operand)
        pattern, escape = node.pattern, node.escape
        if (name is not None and isinstance(pattern, ast.Literal) and isinstance(pattern.value, str)
                and (escape is None or (isinstance(escape, ast.Literal)
                                        and isinstance(escape.value, str)
                                        and len(escape.value) == 1
                                        and ord(escape.value) < _BMP))):
            tail = "" if escape is None else f" ESCAPE {_quote(str(escape.value))}"
            negated = "NOT " if node.negated else ""
            return _Part(f"{name} {negated}LIKE {_quote(str(pattern.value))}{tail}", True)
        return self.untranslated(node)

    def in_list(self, node: ast.In, positive: bool) -> _Part | None:
        # JMS 2.0 §3.8.1.1: IN lists hold string literals only.
        name = _property(node.operand)
        texts = [item.value for item in node.items
                 if isinstance(item, ast.Literal) and isinstance(item.value, str)
                 and kind_of(item.value) in (Kind.STRING, Kind.SYMBOL)
                 and iso8601.to_millis(str(item.value)) is None]
        if name is None or not texts or len(texts) != len(node.items):
            return self.untranslated(node)
        negated = "NOT " if node.negated else ""
        listed = ", ".join(_quote(str(text)) for text in texts)
        return _Part(f"{name} {negated}IN ({listed})", positive and not node.negated)


def _property(node: ast.Expr) -> str | None:
    """The application property an operand reads, if JMS can name it."""
    if (isinstance(node, ast.Field) and node.section is Section.APPLICATION_PROPERTIES
            and not node.path and is_jms_identifier(node.name)):
        return node.name
    return None


def _constant(node: ast.Expr) -> ast.Literal | None:
    """A literal (``-1`` is one: the parser folds a sign into it)."""
    return node if isinstance(node, ast.Literal) else None


def _header_compare(name: str, op: str, value: Any, kind: Kind | None) -> _Part | None:
    """h.priority and h.durable: the JMS headers every upstream maps the same way."""
    if name == "priority" and kind is Kind.INTEGER:
        return _priority(op, int(value))
    if name == "durable" and kind is Kind.BOOLEAN and op in ("=", "<>"):
        return _Part(f"JMSDeliveryMode {op} {_DELIVERY_MODE[bool(value)]}", True)
    return None


def _priority(op: str, n: int) -> _Part | None:
    """JMSPriority, where it is exact although Artemis reads priorities above 9 as 9.

    The priority is an integer (§4.2.1: 4 when absent), so ``> n`` is ``>= n+1`` and
    ``< n`` is ``<= n-1``; then every comparison with 0..8, and ``>= 9``, gives the
    same answer for a priority p and for min(p, 9).
    """
    if op == ">":
        op, n = ">=", n + 1
    elif op == "<":
        op, n = "<=", n - 1
    if 0 <= n <= _JMS_PRIORITY_MAX - 1 or (op == ">=" and n == _JMS_PRIORITY_MAX):
        return _Part(f"JMSPriority {op} {n}", True)
    return None


def _shown(node: ast.Expr) -> str:
    from filtex_proton.sql.printer import to_sql

    try:
        text = to_sql(node)
    except Exception:  # printing is for the reason only
        text = type(node).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def pushdown(filter_set: FilterSet, *, max_chars: int = MAX_SELECTOR_CHARS) -> Pushdown:
    """Split ``filter_set`` into an implied JMS selector and the local evaluation.

    The set is a conjunction, so every filter is translated on its own and the
    selector is the AND of the pieces that translate; the others stay local.
    The selector is checked with our JMS selector parser before it is offered.
    Never raises: pushdown only saves traffic, it must not cost a link its attach.
    """
    translator = _Translator()
    pieces: list[tuple[str, _Part]] = []
    exact = True
    try:
        for key, item in filter_set.items():
            translator.where = f"filter {key!r}"
            part = translator.filter(item, True)
            if part is None:
                exact = False
            elif part.text != _TRUE.text:
                pieces.append((key, part))
            exact = exact and (part is None or part.exact)
    except Exception as exc:  # RecursionError with raised limits, or a translation bug
        return _nothing(filter_set, translator.reasons,
                        f"{translator.where}: not translated ({type(exc).__name__})")
    if not pieces:
        return Pushdown(None, filter_set, (), exact, _terse(translator.reasons))
    selector = (pieces[0][1].text if len(pieces) == 1
                else _join((part for _, part in pieces), "AND"))
    if len(selector) > max_chars:
        return _nothing(filter_set, translator.reasons,
                        f"the selector would be {len(selector)} characters, more than {max_chars}")
    try:
        compile_sql(selector, JMS_SELECTOR, filter_set.limits)
    except FilterError as exc:  # a translation bug must not cost the link its upstream
        return _nothing(filter_set, translator.reasons,
                        f"the selector does not parse: {exc.reason}")
    return Pushdown(selector, filter_set, tuple(key for key, _ in pieces), exact,
                    _terse(translator.reasons))


def _nothing(filter_set: FilterSet, reasons: list[str], why: str) -> Pushdown:
    return Pushdown(None, filter_set, (), False, _terse([*reasons, why]))


def _terse(reasons: list[str]) -> tuple[str, ...]:
    """At most ``_MAX_REASONS`` reasons (the last one kept): they go to the log (§7.2)."""
    if len(reasons) <= _MAX_REASONS:
        return tuple(reasons)
    hidden = len(reasons) - _MAX_REASONS + 1
    return (*reasons[:_MAX_REASONS - 2], f"... {hidden} more", reasons[-1])


def client_selector(filter_set: FilterSet) -> str | None:
    """The first JMS selector of a (decoded) filter set, as the client sent it: what a relay
    passes upstream when nothing else can be pushed (the upstream evaluates its own dialect)."""
    for _key, item in filter_set.items():
        if isinstance(item, SqlFilter) and item.compiled.dialect is JMS_SELECTOR:
            return item.compiled.text
    return None
