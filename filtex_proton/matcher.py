"""A node's matcher: which of many links' filter sets are TRUE for one message.

A queue or topic with thousands of filtered links cannot afford to evaluate
every set for every message. :class:`NodeMatcher` keeps an index over what each
set *requires* of a message and, per message, reads each indexed field once,
looks its value up (a dict lookup per field for equality), and returns the
links that could match: the *candidates*. Only candidates are evaluated, by
their own :class:`~filtex_proton.plugin.LinkFilter`, so the verdict is exactly
per-link evaluation's.

Exactness rests on one rule: what the index asks of a message is *implied* by
the set being TRUE under the dialect's three-valued logic and type rules
(:func:`decompose`). It may admit a message the set refuses (the evaluation
then says no), never the reverse. A set with nothing indexable is a candidate
for every message; a set that can never be TRUE (a false-filter) for none.
See docs/PLUGIN.md ("Many links on one node") and docs/SEMANTICS.md.
"""

from __future__ import annotations

import bisect
import enum
import math
import operator
import struct
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, NamedTuple, TypeAlias, TypeVar

from proton import Described, symbol

from filtex_proton.amqp.types import HEADER_DEFAULTS, Kind, kind_of
from filtex_proton.amqp.view import MISSING, MessageView, Section
from filtex_proton.filters.apache import DirectBinding, HeadersBinding, TopicBinding
from filtex_proton.filters.base import Filter
from filtex_proton.filters.constant import ConstantFilter
from filtex_proton.filters.group import GroupFilter, GroupOp
from filtex_proton.filters.property import PropertyFilter
from filtex_proton.filters.sql import SqlFilter
from filtex_proton.filterset import FilterSet
from filtex_proton.plugin import FilterMessage, LinkFilter

if TYPE_CHECKING:
    from filtex_proton.sql import Dialect
    from filtex_proton.sql import ast as sql_ast

__all__ = [
    "ALWAYS", "NEVER", "Atom", "Condition", "FieldEquals", "FieldExists", "FieldNotNull",
    "FieldNull", "FieldPrefix", "FieldRange", "FieldRef", "MatcherStats", "NodeMatch",
    "NodeMatcher", "Verdict", "decompose", "holds", "value_key", "verdict",
]

K = TypeVar("K", bound=Hashable)

#: How many alternatives (disjuncts) one set may index as; beyond, fewer atoms are kept.
MAX_DISJUNCTS: Final = 16
_FLOAT32: Final = struct.Struct("<f")
_TEXT: Final = frozenset({Kind.STRING, Kind.SYMBOL})
_NUMBER: Final = frozenset({Kind.INTEGER, Kind.FLOAT, Kind.DECIMAL, Kind.TIMESTAMP})


# ---------------------------------------------------------------------------------- verdicts


class Verdict(enum.Enum):
    """One link's answer for one message, as a node needs it."""

    MATCHED = "matched"
    NOT_MATCHED = "not-matched"
    """FALSE, NULL or an evaluation error; or ruled out by the index without evaluation."""
    OVER_BUDGET = "over-budget"
    """The per-message evaluation budget ran out: not a "no", worth retrying later."""


def verdict(link_filter: LinkFilter, message: FilterMessage) -> Verdict:
    """Evaluate one link (through its ``matches``, so subclasses still time or count)."""
    stats = link_filter.filter_set.stats
    before = stats.budget_exceeded
    if link_filter.matches(message):
        return Verdict.MATCHED
    return Verdict.OVER_BUDGET if stats.budget_exceeded != before else Verdict.NOT_MATCHED


# ------------------------------------------------------------------------- the predicates


@dataclass(frozen=True, slots=True)
class FieldRef:
    """A message field as a filter reads it.

    ``rules`` says whose value rules apply: ``"sql"`` (SQL and JMS: described
    values compare with nothing) or ``"property"`` (property filters and the
    headers binding: described values are unwrapped, §4.1.5, and numbers
    compare in single precision when either side is a float).
    """

    section: Section
    key: Any
    rules: Literal["sql", "property"] = "sql"


@dataclass(frozen=True, slots=True)
class FieldEquals:
    """The field's value has one of ``keys`` (see :func:`value_key`)."""

    field: FieldRef
    keys: frozenset[Hashable]


@dataclass(frozen=True, slots=True)
class FieldPrefix:
    """The field's value is a string or symbol starting with ``prefix``."""

    field: FieldRef
    prefix: str


@dataclass(frozen=True, slots=True)
class FieldRange:
    """The field's value is a number (or timestamp) whose double lies in [low, high].

    Bounds are inclusive even for ``<`` and ``>``: the double of a value can
    equal the double of a bound the exact value lies beyond.
    """

    field: FieldRef
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True, slots=True)
class FieldNull:
    """The field is absent or null (after the header's defaults)."""

    field: FieldRef


@dataclass(frozen=True, slots=True)
class FieldNotNull:
    """The field has a non-null value (after the header's defaults)."""

    field: FieldRef


@dataclass(frozen=True, slots=True)
class FieldExists:
    """The field is in the message (a map entry holding null counts)."""

    field: FieldRef


Atom: TypeAlias = FieldEquals | FieldPrefix | FieldRange | FieldNull | FieldNotNull | FieldExists
Condition: TypeAlias = tuple[tuple[Atom, ...], ...]
"""Alternatives, each a conjunction of atoms: ``()`` is never, ``((),)`` is always."""

ALWAYS: Final[Condition] = ((),)
NEVER: Final[Condition] = ()

# Which kind of atom is the broader (lowest first): the order of an entry's other atoms, and
# the anchor among atoms whose buckets cost the same (NodeMatcher._cost).
_RANK: Final[dict[type, int]] = {
    FieldEquals: 0, FieldPrefix: 1, FieldRange: 2, FieldNull: 3, FieldExists: 4, FieldNotNull: 5,
}


# ------------------------------------------------------------------------------ value keys


def _round32(x: float) -> float:
    """``x`` in single precision, or ``x`` itself when it is beyond single's range."""
    try:
        result: float = _FLOAT32.unpack(_FLOAT32.pack(x))[0]
    except OverflowError:
        return x
    return result


def _double(value: Any, kind: Kind) -> float:
    """The double nearest a number's exact value (monotone: the order is kept)."""
    if kind is Kind.FLOAT:
        return float(value)
    if kind is Kind.DECIMAL:
        from filtex_proton.amqp.bid import as_decimal

        exact = as_decimal(value)
        return math.nan if exact.is_nan() else float(exact)
    return float(int(value))


def value_key(value: Any, rules: Literal["sql", "property"]) -> Hashable | None:
    """The key a value is found under; ``None`` when it equals nothing indexable.

    Values the rules call equal get the same key (string = symbol; every
    numeric type by its double under SQL, its single-precision rounding under
    the property rules); the converse need not hold, the evaluation decides.
    """
    if value is None:
        return None
    if rules == "property":
        while isinstance(value, Described):
            value = value.value
    elif isinstance(value, Described):
        return None
    kind = kind_of(value)
    if kind in _TEXT:
        return ("s", str(value))
    if kind is Kind.BOOLEAN:
        return ("b", bool(value))
    if rules == "sql":
        if kind in _NUMBER:
            number = _double(value, kind)
            return None if math.isnan(number) else ("n", number)
        return None
    if kind is Kind.INTEGER or kind is Kind.FLOAT:
        number = float(value)
        return None if math.isnan(number) else ("f", _round32(number))
    return None


def _text(value: Any, rules: Literal["sql", "property"]) -> str | None:
    if value is None:
        return None
    if rules == "property":
        while isinstance(value, Described):
            value = value.value
    tp = type(value)
    if tp is str or tp is symbol or (isinstance(value, str) and kind_of(value) in _TEXT):
        return str(value)
    return None


def _number(value: Any) -> float | None:
    """The double of a SQL numeric value (timestamps included); None for others and NaN."""
    if value is None or isinstance(value, Described | bool):
        return None
    kind = kind_of(value)
    if kind not in _NUMBER:
        return None
    number = _double(value, kind)
    return None if math.isnan(number) else number


def _default(ref: FieldRef, raw: Any) -> Any:
    """The value filters see: an absent header field reads as its default, others as null."""
    if raw is not MISSING:
        return raw
    return HEADER_DEFAULTS.get(ref.key) if ref.section is Section.HEADER else None


def holds(atom: Atom, raw: Any) -> bool:
    """Whether the atom holds for a field whose message value is ``raw`` (MISSING if absent)."""
    ref = atom.field
    value = _default(ref, raw)
    if type(atom) is FieldEquals:
        return value_key(value, ref.rules) in atom.keys
    if type(atom) is FieldPrefix:
        text = _text(value, ref.rules)
        return text is not None and text.startswith(atom.prefix)
    if type(atom) is FieldRange:
        number = _number(value)
        return number is not None and (atom.low is None or number >= atom.low) and (
            atom.high is None or number <= atom.high)
    if type(atom) is FieldNull:
        return value is None
    if type(atom) is FieldNotNull:
        return value is not None
    return raw is not MISSING


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
        return _and([_filter(item) for _key, item in filter_set.items()])
    except Exception:  # deeper than the limits let through, or a filter we do not know
        return ALWAYS  # index nothing: the set is evaluated for every message


def _filter(item: Filter) -> Condition:
    if isinstance(item, ConstantFilter):
        return ALWAYS if item.result else NEVER
    if isinstance(item, SqlFilter):
        return _sql(item.compiled.ast, True, item.compiled.dialect)
    if isinstance(item, PropertyFilter):
        return _property(item)
    if isinstance(item, DirectBinding):
        return ((FieldEquals(_SUBJECT, frozenset({("s", item.key)})),),)
    if isinstance(item, TopicBinding):
        return _topic(item)
    if isinstance(item, HeadersBinding):
        return _headers(item)
    if isinstance(item, GroupFilter):
        # One NULL member makes a group NULL (§3), so TRUE needs ALL's members all TRUE
        # and ANY's some member TRUE. NONE (not-filter) needs members FALSE: not indexed.
        if item.op is GroupOp.ALL:
            return _and([_filter(m) for m in item.members])
        if item.op is GroupOp.ANY:
            return _or([_filter(m) for m in item.members])
    return ALWAYS


_SUBJECT: Final = FieldRef(Section.PROPERTIES, "subject")


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


def _reference_atom(ref: FieldRef, reference: Any, modifiers: bool) -> Atom:
    """What matching ``reference`` (§4.1.1) requires of the field."""
    kind = kind_of(reference)
    if kind is Kind.STRING and modifiers and reference.startswith("&"):
        if reference.startswith("&&"):
            return FieldEquals(ref, frozenset({("s", str(reference)[1:])}))
        if reference.startswith("&p:"):
            return FieldPrefix(ref, str(reference)[3:])
        return FieldNotNull(ref)
    key = value_key(reference, "property") if kind in _TEXT or kind in (
        Kind.BOOLEAN, Kind.INTEGER, Kind.FLOAT) else None
    if key is None:
        return FieldNotNull(ref)
    return FieldEquals(ref, frozenset({key}))


def _property(item: PropertyFilter) -> Condition:
    """§4: every non-null reference entry present and matching (an absent header
    field reads as its default, which :func:`holds` applies)."""
    atoms: list[Atom] = []
    composite = item.section.is_composite
    for key, reference in item.value.items():
        if reference is None:
            continue
        ref = FieldRef(item.section, str(key) if composite else key, "property")
        atoms.append(_reference_atom(ref, reference, modifiers=True))
    return (tuple(dict.fromkeys(atoms)),)


def _headers(item: HeadersBinding) -> Condition:
    """§1.3: x-match all needs every entry, any needs one; a null value needs the key."""
    alternatives: list[Atom] = []
    for key, _matcher in item.entries:
        ref = FieldRef(Section.APPLICATION_PROPERTIES, key, "property")
        reference = item.value.get(key, item.value.get(symbol(key)))
        if reference is None:
            alternatives.append(FieldExists(ref))
        else:
            alternatives.append(_reference_atom(ref, reference, modifiers=False))
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
    """A literal's value (``-5`` is a literal negated), else _NO_CONSTANT."""
    from filtex_proton.sql import ast, values

    if isinstance(node, ast.Literal):
        return node.value
    if isinstance(node, ast.Unary) and isinstance(node.operand, ast.Literal):
        value = node.operand.value
        if value is None or isinstance(value, bool) or kind_of(value) not in _NUMBER:
            return _NO_CONSTANT
        return values.negate(node.op, value)
    return _NO_CONSTANT


def _not_null(*nodes: Any) -> Condition:
    """A comparison is NULL when an operand is: TRUE or FALSE needs its fields non-null."""
    atoms = tuple(FieldNotNull(ref) for ref in map(_plain, nodes) if ref is not None)
    return (atoms,)


def _equal_keys(constant: Any, dialect: Dialect) -> frozenset[Hashable] | None:
    """The keys of the values ``= constant`` can be TRUE for; None when not indexable."""
    if isinstance(constant, Described):
        return None
    kind = kind_of(constant)
    if kind in _TEXT:
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
        number = _double(constant, kind)
        return frozenset() if math.isnan(number) else frozenset({("n", number)})
    return None


def _bound(constant: Any) -> float | None:
    """A numeric bound's double; NaN for NaN; None for what is not a number."""
    if constant is None or isinstance(constant, Described | bool):
        return None
    kind = kind_of(constant)
    if kind not in (Kind.INTEGER, Kind.FLOAT, Kind.DECIMAL):
        return None
    return _double(constant, kind)


_MIRROR: Final = {"=": "=", "<>": "<>", "!=": "!=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


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
    op, left, right = node.op, node.left, node.right
    ref, constant = _plain(left), _constant(right)
    if ref is None or constant is _NO_CONSTANT:
        ref, constant, op = _plain(right), _constant(left), _MIRROR[op]
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


# ----------------------------------------------------------------------------- the index


def _exact(filter_set: FilterSet) -> bool:
    """Whether the index's condition *is* the set (not just implied by it), so that a hit
    is a match without evaluating: one filter (no budget between filters) testing string
    equality, IN over strings, a prefix, or a binding key, on one plain field."""
    if len(filter_set) != 1:
        return False
    ((_key, item),) = filter_set.items()
    if isinstance(item, DirectBinding):
        return True
    if isinstance(item, PropertyFilter):
        return all(reference is None or (
            kind_of(reference) in _TEXT and not (
                kind_of(reference) is Kind.STRING and reference.startswith("&")
                and not reference.startswith(("&p:", "&&"))))
            for reference in item.value.values())
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


class _Registration(Generic[K]):
    __slots__ = ("always", "candidate", "entries", "exact", "key", "link_filter", "seq",
                 "since")

    def __init__(self, key: K, link_filter: LinkFilter | None, seq: int, since: int) -> None:
        self.key = key
        self.link_filter = link_filter
        self.seq = seq
        self.since = since
        self.candidate = 0
        self.entries: list[_Entry[K]] = []
        self.always = False
        self.exact = False
        """A hit is a match: counted as an evaluation that matched, without evaluating."""


class _Entry(Generic[K]):
    """One alternative of one set: indexed by ``anchor``; ``rest`` checked on a hit."""

    __slots__ = ("anchor", "registration", "rest", "sort")

    def __init__(self, registration: _Registration[K], anchor: Atom,
                 rest: tuple[Atom, ...], sort: int) -> None:
        self.registration = registration
        self.anchor = anchor
        self.rest = rest
        self.sort = sort


Bucket: TypeAlias = "dict[_Entry[Any], None]"
_NO_ENTRIES: Final[tuple[_Entry[Any], ...]] = ()


class _Slot:
    """The entries anchored on one field (section, key): one read per message.

    Equality under the SQL rules is the common case and has its own dict, so
    that a slot holding only such entries costs one lookup (``simple``).
    """

    __slots__ = ("bands", "default", "eq_prop", "eq_sql", "exists", "highs", "key", "lows",
                 "notnull", "null", "prefix_lengths", "prefixes", "section", "simple", "size")

    def __init__(self, section: Section, key: Any) -> None:
        self.section = section
        self.key = key
        self.default = HEADER_DEFAULTS.get(key) if section is Section.HEADER else None
        # Equality buckets are keyed by value_key, except that a string's ("s", text) is
        # kept as the plain text (no tuple to build per message; a str never equals a tuple).
        self.eq_sql: dict[Hashable, Bucket] = {}
        self.eq_prop: dict[Hashable, Bucket] = {}
        self.prefixes: dict[tuple[str, str], Bucket] = {}
        self.prefix_lengths: dict[tuple[str, int], int] = {}
        self.lows: list[tuple[float, int, _Entry[Any]]] = []
        """Ranges with a low bound only, by bound: a value's hits are a prefix."""
        self.highs: list[tuple[float, int, _Entry[Any]]] = []
        """Ranges with a high bound only, by bound: a value's hits are a suffix."""
        self.bands: dict[float, list[tuple[float, int, _Entry[Any]]]] = {}
        """Ranges with both bounds, by width class (a power of two above the width, or
        inf) and then by low bound: a value x can only be in those whose low lies in
        [x - class, x], found by bisection instead of a scan of every range."""
        self.null: Bucket = {}
        self.notnull: Bucket = {}
        self.exists: Bucket = {}
        self.size = 0
        self.simple = True

    def _update(self) -> None:
        self.simple = not (self.eq_prop or self.prefixes or self.lows or self.highs
                           or self.bands or self.null or self.notnull or self.exists)

    def cost(self, atom: Atom) -> float:
        """How many entries a hit on ``atom`` would share its bucket with, weighted by how
        broad the atom's kind is: the anchor of a conjunction is its cheapest atom."""
        if type(atom) is FieldEquals:
            by_key = self.eq_sql if atom.field.rules == "sql" else self.eq_prop
            return float(sum(len(by_key.get(_ikey(key), _NO_ENTRIES)) + 1 for key in atom.keys))
        if type(atom) is FieldPrefix:
            bucket = self.prefixes.get((atom.field.rules, atom.prefix), _NO_ENTRIES)
            return 2.0 * (len(bucket) + 1)
        if type(atom) is FieldRange:
            if atom.low is None or atom.high is None:
                return 8.0 * (len(self.lows if atom.high is None else self.highs) + 1)
            window = _band(atom.low, atom.high)
            band = self.bands.get(window, [])
            if window == math.inf:
                return 8.0 * (len(band) + 1)
            near = bisect.bisect_right(band, (atom.high, math.inf)) - bisect.bisect_left(
                band, (atom.low - window,))
            return 2.0 * (near + 1)
        if type(atom) is FieldNull:
            return 16.0 * (len(self.null) + 1)
        return 32.0 * (len(self._bucket(atom)) + 1)

    def _ranges(self, atom: FieldRange) -> list[tuple[float, int, _Entry[Any]]]:
        if atom.high is None:
            return self.lows
        if atom.low is None:
            return self.highs
        return self.bands.setdefault(_band(atom.low, atom.high), [])

    def add(self, entry: _Entry[Any]) -> None:
        atom = entry.anchor
        self.size += 1
        if type(atom) is FieldEquals:
            by_key = self.eq_sql if atom.field.rules == "sql" else self.eq_prop
            for key in atom.keys:
                by_key.setdefault(_ikey(key), {})[entry] = None
        elif type(atom) is FieldPrefix:
            rules = atom.field.rules
            self.prefixes.setdefault((rules, atom.prefix), {})[entry] = None
            length = (rules, len(atom.prefix))
            self.prefix_lengths[length] = self.prefix_lengths.get(length, 0) + 1
        elif type(atom) is FieldRange:
            bound = atom.high if atom.low is None else atom.low
            assert bound is not None
            bisect.insort(self._ranges(atom), (bound, entry.sort, entry))
        else:
            self._bucket(atom)[entry] = None
        self._update()

    def remove(self, entry: _Entry[Any]) -> None:
        atom = entry.anchor
        self.size -= 1
        if type(atom) is FieldEquals:
            by_key = self.eq_sql if atom.field.rules == "sql" else self.eq_prop
            for key in atom.keys:
                ikey = _ikey(key)
                bucket = by_key[ikey]
                del bucket[entry]
                if not bucket:
                    del by_key[ikey]
        elif type(atom) is FieldPrefix:
            rules = atom.field.rules
            bucket = self.prefixes[(rules, atom.prefix)]
            del bucket[entry]
            if not bucket:
                del self.prefixes[(rules, atom.prefix)]
            length = (rules, len(atom.prefix))
            self.prefix_lengths[length] -= 1
            if not self.prefix_lengths[length]:
                del self.prefix_lengths[length]
        elif type(atom) is FieldRange:
            ranges = self._ranges(atom)
            bound = atom.high if atom.low is None else atom.low
            del ranges[bisect.bisect_left(ranges, (bound, entry.sort))]
            if not ranges and atom.low is not None and atom.high is not None:
                del self.bands[_band(atom.low, atom.high)]
        else:
            del self._bucket(atom)[entry]
        self._update()

    def _bucket(self, atom: Atom) -> Bucket:
        if type(atom) is FieldNull:
            return self.null
        return self.notnull if type(atom) is FieldNotNull else self.exists

    def hits(self, raw: Any) -> Any:
        """The entries whose anchor holds for this field value (an iterable)."""
        value = self.default if raw is MISSING else raw
        if self.simple:
            if type(value) is str:
                return self.eq_sql.get(value, _NO_ENTRIES)
            key = value_key(value, "sql")
            return _NO_ENTRIES if key is None else self.eq_sql.get(_ikey(key), _NO_ENTRIES)
        found: list[_Entry[Any]] = []
        if raw is not MISSING:
            found.extend(self.exists)
        if value is None:
            found.extend(self.null)
            return found
        found.extend(self.notnull)
        if self.eq_sql:
            key = value_key(value, "sql")
            if key is not None:
                found.extend(self.eq_sql.get(_ikey(key), _NO_ENTRIES))
        if self.eq_prop:
            key = value_key(value, "property")
            if key is not None:
                found.extend(self.eq_prop.get(_ikey(key), _NO_ENTRIES))
        if self.prefixes:
            texts = {"sql": _text(value, "sql"), "property": _text(value, "property")}
            for rules, length in self.prefix_lengths:
                text = texts[rules]
                if text is not None and length <= len(text):
                    found.extend(self.prefixes.get((rules, text[:length]), _NO_ENTRIES))
        if self.lows or self.highs or self.bands:
            number = _number(value)
            if number is not None:
                lows = self.lows
                found.extend(entry for _low, _sort, entry in lows[:bisect.bisect_right(
                    lows, (number, math.inf))])
                highs = self.highs
                found.extend(entry for _high, _sort, entry in highs[bisect.bisect_left(
                    highs, (number, -1)):])
                for window, band in self.bands.items():
                    start = 0 if window == math.inf else bisect.bisect_left(
                        band, (number - window,))
                    for _low, _sort, entry in band[start:bisect.bisect_right(
                            band, (number, math.inf))]:
                        if number <= entry.anchor.high:  # type: ignore[union-attr,operator]
                            found.append(entry)
        return found


_EMPTY_SLOT: Final = _Slot(Section.APPLICATION_PROPERTIES, None)


def _ikey(key: Hashable) -> Hashable:
    """An equality bucket's key for a value_key: a string's text alone."""
    return key[1] if type(key) is tuple and key[0] == "s" else key


def _band(low: float, high: float) -> float:
    """The width class of a range with both bounds: a power of two at least twice its
    width (so that rounding in ``x - class`` cannot lose one), or inf."""
    width = high - low
    if not math.isfinite(width):
        return math.inf
    return math.ldexp(1.0, math.frexp(width)[1] + 1)


@dataclass(slots=True)
class MatcherStats:
    """What the matcher did, for metrics and for judging the index."""

    messages: int = 0
    candidates: int = 0
    """Sets returned as candidates (each evaluated, or offered to the caller)."""
    fallbacks: int = 0
    """Messages whose indexed fields could not be read: every set was a candidate."""


class NodeMatch(NamedTuple, Generic[K]):
    """The links one message goes to (a topic's answer), in registration order."""

    matched: tuple[K, ...]
    over_budget: tuple[K, ...]
    """Evaluated, but out of budget: not a "no" (a queue may try again later)."""
    evaluated: int
    """How many sets were candidates (evaluated, or matched exactly by the index)."""

    def verdict(self, key: K) -> Verdict:
        if key in self.matched:
            return Verdict.MATCHED
        return Verdict.OVER_BUDGET if key in self.over_budget else Verdict.NOT_MATCHED


class NodeMatcher(Generic[K]):
    """The filtered links of one node, indexed by what their filter sets require.

    ``register(key, link_filter)`` when a link attaches (``None`` or an empty
    set: it matches everything), ``unregister(key)`` when it detaches. Per
    message, a topic calls :meth:`match` (every link whose set is TRUE); a
    queue calls :meth:`candidates` and then :meth:`verdict` on candidates with
    credit until one matches. Keys are whatever the node keeps per link.

    A set the index decides exactly (string equality and the like, see
    :func:`_exact`) is counted in its stats as evaluated and matched without
    running its ``matches``; ``always_evaluate=True`` runs it anyway (for a
    container whose ``LinkFilter`` subclass times evaluations).
    """

    def __init__(self, *, always_evaluate: bool = False) -> None:
        self.always_evaluate = always_evaluate
        self._registrations: dict[K, _Registration[K]] = {}
        self._slots: dict[tuple[Section, Any], _Slot] = {}
        self._always: dict[_Registration[K], None] = {}
        self._seq = 0
        self.stats = MatcherStats()

    def __len__(self) -> int:
        return len(self._registrations)

    def __contains__(self, key: object) -> bool:
        return key in self._registrations

    # -- attach and detach ------------------------------------------------------------

    def register(self, key: K, link_filter: LinkFilter | None) -> None:
        """Index a link's compiled filter set (replacing what ``key`` had)."""
        if key in self._registrations:
            self.unregister(key)
        self._seq += 1
        registration = _Registration(key, link_filter, self._seq, self.stats.messages)
        self._registrations[key] = registration
        if link_filter is None or link_filter.is_trivial:
            condition = ALWAYS
        else:
            condition = decompose(link_filter.filter_set)
            registration.exact = not self.always_evaluate and _exact(link_filter.filter_set)
        if any(not conjunction for conjunction in condition):
            registration.always = True
            self._always[registration] = None
            return
        for conjunction in condition:
            ordered = sorted(conjunction, key=lambda atom: _RANK[type(atom)])
            anchor = min(ordered, key=self._cost)  # the first of the cheapest
            self._seq += 1
            entry = _Entry(registration, anchor, tuple(a for a in ordered if a is not anchor),
                           self._seq)
            registration.entries.append(entry)
            slot_key = (anchor.field.section, anchor.field.key)
            slot = self._slots.get(slot_key)
            if slot is None:
                slot = self._slots[slot_key] = _Slot(*slot_key)
            slot.add(entry)

    def _cost(self, atom: Atom) -> float:
        """What anchoring on ``atom`` would cost a message that hits it (see _Slot.cost)."""
        slot = self._slots.get((atom.field.section, atom.field.key))
        return (slot or _EMPTY_SLOT).cost(atom)

    def unregister(self, key: K) -> None:
        """Forget a link; unknown keys are ignored (a detach may race a refusal)."""
        registration = self._registrations.pop(key, None)
        if registration is None:
            return
        self._always.pop(registration, None)
        for entry in registration.entries:
            slot_key = (entry.anchor.field.section, entry.anchor.field.key)
            slot = self._slots[slot_key]
            slot.remove(entry)
            if not slot.size:
                del self._slots[slot_key]
        registration.entries = []

    # -- per message ---------------------------------------------------------------------

    def candidates(self, message: FilterMessage) -> tuple[K, ...]:
        """The links whose sets could be TRUE, in registration order; evaluates nothing.

        Every link not returned has a set that is not TRUE for this message.
        If the message or an indexed field cannot be decoded, every link is
        returned, so that evaluation counts and reports the error as before.
        """
        found = self._found(message)
        return tuple(r.key for r in found)

    def verdict(self, key: K, message: FilterMessage) -> Verdict:
        """Evaluate one registered link for one message (always by its ``matches``: a
        queue also asks about messages that arrived before the link did)."""
        link_filter = self._registrations[key].link_filter
        return Verdict.MATCHED if link_filter is None else verdict(link_filter, message)

    def match(self, message: FilterMessage) -> NodeMatch[K]:
        """Every link whose filter set is TRUE for the message (a topic's publish)."""
        found = self._found(message)
        exact_ok = not self._fell_back
        matched: list[K] = []
        over: list[K] = []
        for registration in found:
            link_filter = registration.link_filter
            if link_filter is None:
                matched.append(registration.key)
                continue
            stats = link_filter.filter_set.stats
            if registration.exact and exact_ok:
                stats.evaluations += 1
                stats.matches += 1
                matched.append(registration.key)
                continue
            before = stats.budget_exceeded
            if link_filter.matches(message):
                matched.append(registration.key)
            elif stats.budget_exceeded != before:
                over.append(registration.key)
        return NodeMatch(tuple(matched), tuple(over), len(found))

    def ruled_out(self, key: K) -> int:
        """Messages since ``key`` registered for which the index ruled it out, unevaluated."""
        registration = self._registrations[key]
        return self.stats.messages - registration.since - registration.candidate

    def conditions(self) -> dict[K, Condition]:
        """Each registered key's indexed condition (for tests and diagnostics)."""
        return {key: ALWAYS if r.always else tuple((e.anchor, *e.rest) for e in r.entries)
                for key, r in self._registrations.items()}

    _fell_back = False
    """Whether the last message was handed to every set (no exact shortcut then)."""

    def _found(self, message: FilterMessage) -> list[_Registration[K]]:
        stats = self.stats
        stats.messages += 1
        try:  # no indexed field: the message need not even be scanned
            found = self._indexed(message.view) if self._slots else {}
        except Exception:  # an undecodable message or field: let every set see it
            stats.fallbacks += 1
            self._fell_back = True
            result = list(self._registrations.values())
        else:
            self._fell_back = False
            if not found:  # already in registration order: no sort (sets with no index)
                result = list(self._always)
            else:
                if self._always:
                    found.update(self._always)
                result = list(found)
                if len(result) > 1:
                    result.sort(key=_by_seq)
        for registration in result:
            registration.candidate += 1
        stats.candidates += len(result)
        return result

    def _indexed(self, view: MessageView) -> dict[_Registration[K], None]:
        found: dict[_Registration[K], None] = {}
        cache: dict[tuple[Section, Any], Any] = {}
        numbers: dict[tuple[Section, Any], Any] = {}
        field = view.field
        for slot_key, slot in self._slots.items():
            raw = cache[slot_key] = field(slot.section, slot.key)
            if slot.simple and type(raw) is str:  # slot.hits' first case, without the call
                hits = slot.eq_sql.get(raw, _NO_ENTRIES)
            else:
                hits = slot.hits(raw)
            if not hits:
                continue
            for entry in hits:
                registration = entry.registration
                if registration in found:
                    continue
                if entry.rest:
                    for atom in entry.rest:
                        ref = atom.field
                        rest_key = (ref.section, ref.key)
                        value = cache.get(rest_key, _UNREAD)
                        if value is _UNREAD:
                            value = cache[rest_key] = view.field(ref.section, ref.key)
                        if type(atom) is FieldRange:  # the usual rest: its number once
                            number = numbers.get(rest_key, _UNREAD)
                            if number is _UNREAD:
                                number = numbers[rest_key] = _number(_default(ref, value))
                            if number is None or (atom.low is not None and number < atom.low) or (
                                    atom.high is not None and number > atom.high):
                                break
                        elif not holds(atom, value):
                            break
                    else:
                        found[registration] = None
                else:
                    found[registration] = None
        return found


_UNREAD: Final = object()


_by_seq: Final = operator.attrgetter("seq")
