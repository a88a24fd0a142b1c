"""Filter sets turned into index conditions: what a message must satisfy for a set to be TRUE.

Exactness rests on one rule: what the index asks of a message is *implied* by the set
being TRUE under the dialect's three-valued logic and type rules. It may admit a message
the set refuses (the evaluation then says no), never the reverse. A set with nothing
indexable is a candidate for every message; a set that can never be TRUE (a false-filter)
for none. See docs/PLUGIN.md ("Many links on one node") and docs/SEMANTICS.md.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Final

from proton import Described

from filtex_proton.amqp.types import Kind, kind_of
from filtex_proton.amqp.view import Section
from filtex_proton.filters.apache import DirectBinding, HeadersBinding, NoLocalFilter, TopicBinding
from filtex_proton.filters.constant import ConstantFilter
from filtex_proton.filters.group import GroupFilter, GroupOp
from filtex_proton.filters.matching import Reference, TextPattern
from filtex_proton.filters.property import PropertyFilter
from filtex_proton.filters.sql import SqlFilter
from filtex_proton.filters.stream import FILTER_VALUE, StreamFilter
from filtex_proton.filters.visitor import FamilyVisitor
from filtex_proton.filterset import FilterSet
from filtex_proton.matcher.atoms import (
    ALWAYS,
    NEVER,
    TEXT_KINDS,
    Atom,
    Condition,
    FieldEquals,
    FieldExists,
    FieldNotNull,
    FieldNull,
    FieldPrefix,
    FieldRange,
    FieldRef,
    double_value,
    value_key,
)

if TYPE_CHECKING:
    from filtex_proton.sql import Dialect
    from filtex_proton.sql import ast as sql_ast

__all__ = ["MAX_DISJUNCTS", "STREAM_FILTER_FIELD", "decided_by_index", "decompose"]

#: How many alternatives (disjuncts) one set may index as; beyond, fewer atoms are kept.
MAX_DISJUNCTS: Final = 16


# ------------------------------------------------------------------------- decomposition


def _and(parts: list[Condition]) -> Condition:
    """All of ``parts``; alternatives multiply, and past MAX_DISJUNCTS the widest part is
    dropped (a weaker requirement is still a requirement)."""
    if any(part == NEVER for part in parts):
        return NEVER
    parts = sorted((p for p in parts if p != ALWAYS), key=len)
    result: Condition = ALWAYS
    for part in parts:
        if len(result) * len(part) > MAX_DISJUNCTS:
            continue
        result = tuple(tuple(dict.fromkeys(a + b)) for a in result for b in part)
    return result


def _or(parts: list[Condition]) -> Condition:
    """Any of ``parts``: their alternatives side by side (always, past MAX_DISJUNCTS)."""
    result: list[tuple[Atom, ...]] = []
    for part in parts:
        if any(not conjunction for conjunction in part):
            return ALWAYS
        result.extend(part)
    if len(result) > MAX_DISJUNCTS:
        return ALWAYS
    return tuple(dict.fromkeys(result))


def decompose(filter_set: FilterSet) -> Condition:
    """What a message must satisfy for ``filter_set`` to be TRUE (a necessary condition).

    Every filter of the set contributes what its TRUE requires; what cannot be
    expressed (arithmetic, functions, no-local, not-filters ...) contributes
    nothing, and is left to the evaluation.
    """
    try:
        return _and([_DECOMPOSER.visit_family(item) for _key, item in filter_set.items()])
    except Exception:  # deeper than the limits let through, or a filter we do not know
        return ALWAYS  # index nothing: the set is evaluated for every message


class _Decomposer(FamilyVisitor[Condition]):
    """What each filter family requires of a message for the filter to be TRUE."""

    def on_constant_filter(self, item: ConstantFilter) -> Condition:
        return ALWAYS if item.result else NEVER

    def on_sql_filter(self, item: SqlFilter) -> Condition:
        return _sql(item.compiled.ast, True, item.compiled.dialect)

    def on_property_filter(self, item: PropertyFilter) -> Condition:
        return _property(item)

    def on_group_filter(self, item: GroupFilter) -> Condition:
        # One NULL member makes a group NULL (§3), so TRUE needs ALL's members all TRUE
        # and ANY's some member TRUE. NONE (not-filter) needs members FALSE: not indexed.
        if item.op is GroupOp.ALL:
            return _and([self.visit_family(m) for m in item.members])
        if item.op is GroupOp.ANY:
            return _or([self.visit_family(m) for m in item.members])
        return ALWAYS

    def on_direct_binding(self, item: DirectBinding) -> Condition:
        return ((FieldEquals(_SUBJECT, frozenset({("s", item.key)})),),)

    def on_topic_binding(self, item: TopicBinding) -> Condition:
        return _topic(item)

    def on_headers_binding(self, item: HeadersBinding) -> Condition:
        return _headers(item)

    def on_no_local_filter(self, item: NoLocalFilter) -> Condition:
        return ALWAYS  # the message's connection of origin is not a message field

    def on_stream_filter(self, item: StreamFilter) -> Condition:
        # The annotation equals one of the values (string = symbol, as value_key keys them);
        # with match-unfiltered, or it is absent or null.
        keys = frozenset(("s", value) for value in item.values)
        equal: Condition = ((FieldEquals(STREAM_FILTER_FIELD, keys),),)
        unfiltered: Condition = ((FieldNull(STREAM_FILTER_FIELD),),)
        return _or([equal, unfiltered]) if item.match_unfiltered else equal


_DECOMPOSER: Final = _Decomposer()


_SUBJECT: Final = FieldRef(Section.PROPERTIES, "subject")
STREAM_FILTER_FIELD: Final = FieldRef(Section.MESSAGE_ANNOTATIONS, FILTER_VALUE)
"""RabbitMQ's ``x-stream-filter-value`` annotation, as ``rabbitmq:stream-filter`` reads it."""


def _topic(item: TopicBinding) -> Condition:
    """§1.2: the words before the first wildcard are a prefix of the subject (all of it
    when there is no wildcard); '#' alone also matches a message without a subject."""
    if item.hash_only:
        return ALWAYS
    words = [w for segment in item.segments for w in segment]
    pattern = ".".join(item.segments[0])
    if len(item.segments) == 1 and "*" not in words:
        return ((FieldEquals(_SUBJECT, frozenset({("s", pattern)})),),)
    literal: list[str] = []
    for word in item.segments[0]:
        if word == "*":
            break
        literal.append(word)
    if not literal:
        return ((FieldNotNull(_SUBJECT),),)
    return ((FieldPrefix(_SUBJECT, ".".join(literal)),),)


def _reference_atom(ref: FieldRef, reference: Reference) -> Atom:
    """What matching ``reference`` (§4.1.1, read at decode) requires of the field."""
    if isinstance(reference, TextPattern):
        if reference.how == "exact":
            return FieldEquals(ref, frozenset({("s", reference.text)}))
        if reference.how == "prefix":
            return FieldPrefix(ref, reference.text)
        return FieldNotNull(ref)  # a suffix: not indexed
    value = reference.value
    key = (value_key(value, "property")
           if kind_of(value) in (Kind.BOOLEAN, Kind.INTEGER, Kind.FLOAT) else None)
    if key is None:
        return FieldNotNull(ref)
    return FieldEquals(ref, frozenset({key}))


def _property(item: PropertyFilter) -> Condition:
    """§4: every non-null reference entry present and matching (an absent header
    field reads as its default, which :func:`holds` applies)."""
    atoms = [_reference_atom(FieldRef(item.section, key, "property"), reference)
             for key, reference in item.references]
    return (tuple(dict.fromkeys(atoms)),)


def _headers(item: HeadersBinding) -> Condition:
    """§1.3: x-match all needs every entry, any needs one; a null value needs the key."""
    alternatives: list[Atom] = []
    for key, reference in item.references:
        ref = FieldRef(Section.APPLICATION_PROPERTIES, key, "property")
        alternatives.append(FieldExists(ref) if reference is None
                            else _reference_atom(ref, reference))
    if item.match_all:
        return (tuple(dict.fromkeys(alternatives)),)
    return _or([((atom,),) for atom in alternatives])


# -- SQL (both dialects) -----------------------------------------------------------------


def _plain(node: Any) -> FieldRef | None:
    from filtex_proton.sql import ast

    if isinstance(node, ast.Field) and not node.path:
        return FieldRef(node.section, node.name)
    return None


_NO_CONSTANT: Final = object()


def _constant(node: Any) -> Any:
    """A literal's value (``-5`` is one: the parser folds a sign into it), else _NO_CONSTANT."""
    from filtex_proton.sql import ast

    return node.value if isinstance(node, ast.Literal) else _NO_CONSTANT


def _not_null(*nodes: Any) -> Condition:
    """A comparison is NULL when an operand is: TRUE or FALSE needs its fields non-null."""
    atoms = tuple(FieldNotNull(ref) for ref in map(_plain, nodes) if ref is not None)
    return (atoms,)


def _equal_keys(constant: Any, dialect: Dialect) -> frozenset[Hashable] | None:
    """The keys of the values ``= constant`` can be TRUE for; None when not indexable."""
    if isinstance(constant, Described):
        return None
    kind = kind_of(constant)
    if kind in TEXT_KINDS:
        keys: set[Hashable] = {("s", str(constant))}
        if dialect.iso_strings:  # §6.3.2: a timestamp equals a string naming its moment
            from filtex_proton.sql import iso8601

            millis = iso8601.to_millis(str(constant))
            if millis is not None:
                keys.add(("n", float(millis)))
        return frozenset(keys)
    if kind is Kind.BOOLEAN:
        return frozenset({("b", bool(constant))})
    if kind in (Kind.INTEGER, Kind.FLOAT, Kind.DECIMAL):
        number = double_value(constant, kind)
        return frozenset() if math.isnan(number) else frozenset({("n", number)})
    return None


def _bound(constant: Any) -> float | None:
    """A numeric bound's double; NaN for NaN; None for what is not a number."""
    if constant is None or isinstance(constant, Described | bool):
        return None
    kind = kind_of(constant)
    if kind not in (Kind.INTEGER, Kind.FLOAT, Kind.DECIMAL):
        return None
    return double_value(constant, kind)




def _sql(node: sql_ast.Expr, want: bool, dialect: Dialect) -> Condition:
    """What the expression being ``want`` (TRUE, or FALSE under a NOT) requires.

    Kleene logic keeps De Morgan: NOT (a AND b) is TRUE exactly when a or b is
    FALSE. Every comparison, IN, LIKE and BETWEEN is NULL when its operand is,
    so being TRUE or FALSE needs a plain field operand non-null.
    """
    from filtex_proton.sql import ast

    if isinstance(node, ast.Literal):
        return ALWAYS if node.value is want else NEVER
    if isinstance(node, ast.And | ast.Or):
        parts = [_sql(o, want, dialect) for o in node.operands]
        return _and(parts) if isinstance(node, ast.And) == want else _or(parts)
    if isinstance(node, ast.Not):
        return _sql(node.operand, not want, dialect)
    if isinstance(node, ast.Field):
        ref = _plain(node)
        if ref is None:
            return ALWAYS
        return ((FieldEquals(ref, frozenset({("b", want)})),),)
    if isinstance(node, ast.IsNull):
        ref = _plain(node.operand)
        if ref is None:
            return ALWAYS
        return ((FieldNull(ref) if node.negated != want else FieldNotNull(ref),),)
    if isinstance(node, ast.Exists):
        ref = _plain(node.field)
        return ((FieldExists(ref),),) if ref is not None and want else ALWAYS
    if isinstance(node, ast.Compare):
        return _compare(node, want, dialect)
    if isinstance(node, ast.In):
        return _in(node, want, dialect)
    if isinstance(node, ast.Like):
        return _like(node, want)
    if isinstance(node, ast.Between):
        return _between(node, want)
    return ALWAYS


def _compare(node: sql_ast.Compare, want: bool, dialect: Dialect) -> Condition:
    from filtex_proton.sql.values import MIRRORED

    op, left, right = node.op, node.left, node.right
    ref, constant = _plain(left), _constant(right)
    if ref is None or constant is _NO_CONSTANT:
        ref, constant, op = _plain(right), _constant(left), MIRRORED[op]
    if ref is None or constant is _NO_CONSTANT:
        return _not_null(left, right)
    if constant is None:
        return NEVER  # anything compared with NULL is NULL
    if not want or op in ("<>", "!="):
        return ((FieldNotNull(ref),),)
    if op == "=":
        keys = _equal_keys(constant, dialect)
        if keys is None:
            return ((FieldNotNull(ref),),)
        return ((FieldEquals(ref, keys),),) if keys else NEVER  # = NaN is never TRUE
    bound = _bound(constant)
    if bound is None:
        return ((FieldNotNull(ref),),)
    if math.isnan(bound):
        return NEVER  # NaN is neither greater nor lesser
    low, high = (bound, None) if op in (">", ">=") else (None, bound)
    return ((FieldRange(ref, low, high),),)


def _in(node: sql_ast.In, want: bool, dialect: Dialect) -> Condition:
    ref = _plain(node.operand)
    if ref is None:
        return ALWAYS
    if node.negated or not want:
        return ((FieldNotNull(ref),),)
    keys: set[Hashable] = set()
    for item in node.items:
        constant = _constant(item)
        if constant is None:
            continue  # a NULL member makes a miss NULL, but a hit is still TRUE
        found = None if constant is _NO_CONSTANT else _equal_keys(constant, dialect)
        if found is None:
            return ((FieldNotNull(ref),),)
        keys |= found
    return ((FieldEquals(ref, frozenset(keys)),),) if keys else NEVER


def _like(node: sql_ast.Like, want: bool) -> Condition:
    ref = _plain(node.operand)
    if ref is None:
        return ALWAYS
    pattern = _constant(node.pattern)
    escape = None if node.escape is None else _constant(node.escape)
    if node.negated or not want or not isinstance(pattern, str) or (
            node.escape is not None and not (isinstance(escape, str) and len(escape) == 1)):
        return ((FieldNotNull(ref),),)
    literal: list[str] = []
    chars = iter(pattern)
    for char in chars:  # the characters before the first unescaped wildcard
        if escape is not None and char == escape:
            escaped = next(chars, None)
            if escaped is None:
                return NEVER  # a pattern ending with the escape is NULL for every value
            literal.append(escaped)
        elif char in "%_":
            prefix = "".join(literal)
            return ((FieldPrefix(ref, prefix) if prefix else FieldNotNull(ref),),)
        else:
            literal.append(char)
    return ((FieldEquals(ref, frozenset({("s", "".join(literal))})),),)


def _between(node: sql_ast.Between, want: bool) -> Condition:
    ref = _plain(node.operand)
    if ref is None:
        return ALWAYS
    if node.negated or not want:
        return ((FieldNotNull(ref),),)
    low, high = _constant(node.low), _constant(node.high)
    if low is None or high is None:
        return NEVER
    lo = None if low is _NO_CONSTANT else _bound(low)
    hi = None if high is _NO_CONSTANT else _bound(high)
    if (lo is not None and math.isnan(lo)) or (hi is not None and math.isnan(hi)):
        return NEVER
    if lo is None and hi is None:
        return ((FieldNotNull(ref),),)
    return ((FieldRange(ref, lo, hi),),)


# ------------------------------------------------------------------- decided by the index


def decided_by_index(filter_set: FilterSet) -> bool:
    """Whether the index's condition *is* the set (not just implied by it), so that a hit
    is a match without evaluating: one filter (no budget between filters) testing string
    equality, IN over strings, a prefix, or a binding key, on one plain field."""
    if len(filter_set) != 1:
        return False
    ((_key, item),) = filter_set.items()
    if isinstance(item, DirectBinding):
        return True
    if isinstance(item, PropertyFilter):
        return all(isinstance(reference, TextPattern) and reference.how != "suffix"
                   for _key, reference in item.references)
    if not isinstance(item, SqlFilter):
        return False
    from filtex_proton.sql import ast

    node, dialect = item.compiled.ast, item.compiled.dialect
    if isinstance(node, ast.Compare) and node.op == "=":
        pair = (node.left, node.right)
        if _plain(pair[0]) is None:
            pair = (node.right, node.left)
        constants = [pair[1]] if _plain(pair[0]) is not None else []
    elif isinstance(node, ast.In) and not node.negated and _plain(node.operand) is not None:
        constants = list(node.items)
    elif (isinstance(node, ast.Like) and not node.negated and node.escape is None
          and _plain(node.operand) is not None):
        pattern = _constant(node.pattern)
        return isinstance(pattern, str) and "_" not in pattern and (
            "%" not in pattern or pattern.index("%") == len(pattern) - 1)
    else:
        return False
    for constant in constants:
        value = _constant(constant)
        if value is _NO_CONSTANT or value is None or isinstance(value, Described):
            return False
        keys = _equal_keys(value, dialect)
        if keys is None or any(key[0] != "s" for key in keys):  # type: ignore[index]
            return False
    return bool(constants)
