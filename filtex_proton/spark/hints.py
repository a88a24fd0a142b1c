"""Index hints: conditions a filter's Spark predicate implies about indexed application properties.

Why: Spark pushes a predicate down to Parquet (row group statistics, dictionaries, Bloom
filters, the page index) only for top-level columns, never for a value inside the
``application_properties`` map, which is where the translated predicate reads. An indexed
archive (``filtex_proton.archive.ArchiveIndex``) has a top-level ``index_<key>`` column per
indexed property: ``=`` and the value's string slot, or the empty string. When the predicate
can only be TRUE if the property's string slot is one of some strings, ``index_<key> IN
('=v', ...)`` is implied, and adding it to the predicate changes no result: it only lets Spark
skip what cannot match. The analysis is conservative: anything it does not understand implies
nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Final, TypeAlias

from filtex_proton.archive.columns import BUCKET_COLUMN, bucket_of, index_column, parse_bucket
from filtex_proton.spark import ir

__all__ = ["bucket_hint", "bucket_keeps", "implied_values", "index_hint"]

#: Key -> the only string-slot values for which the expression can be TRUE; a key that is
#: not there is unconstrained. ``None``: the expression is never TRUE.
Constraint: TypeAlias = Mapping[str, frozenset[str]] | None

_NONE: Final[Mapping[str, frozenset[str]]] = {}
_PREFIX: Final = "string:"


def _string_slot(expr: ir.Expr) -> str | None:
    """K for ``application_properties['string:K'].string``, else None."""
    match expr:
        case ir.Field(struct=ir.Get(map=ir.Col(name="application_properties", fields=()),
                                    key=key), name="string") if key.startswith(_PREFIX):
            return key[len(_PREFIX):]
    return None


def _strings(items: tuple[ir.Expr, ...]) -> frozenset[str] | None:
    """The values of string literals (NULL ones can never be equal: left out); None if any item
    is not a string literal."""
    values: set[str] = set()
    for item in items:
        if not (isinstance(item, ir.Lit) and item.type == "string"):
            return None
        if item.value is not None:
            values.add(str(item.value))
    return frozenset(values)


def _both(a: Constraint, b: Constraint) -> Constraint:
    if a is None or b is None:
        return None
    merged = dict(a)
    for key, values in b.items():
        merged[key] = merged[key] & values if key in merged else values
    return merged


def _either(parts: list[Constraint]) -> Constraint:
    possible = [p for p in parts if p is not None]
    if not possible:
        return None
    keys = set(possible[0]).intersection(*possible[1:])
    return {key: frozenset().union(*(p[key] for p in possible)) for key in keys}


def implied_values(expr: ir.Expr) -> Constraint:
    """What ``expr`` being TRUE implies about application properties' string slots."""
    match expr:
        case ir.Lit(value=value):
            return _NONE if value is True else None  # FALSE and NULL are never TRUE
        case ir.Op(name="eq", args=(left, right)):
            for slot, other in ((left, right), (right, left)):
                key, values = _string_slot(slot), _strings((other,))
                if key is not None and values is not None:
                    return {key: values}
            return _NONE
        case ir.Op(name="isin", args=(subject, *items)):
            key, values = _string_slot(subject), _strings(tuple(items))
            return _NONE if key is None or values is None else {key: values}
        case ir.Op(name="and", args=args):
            result: Constraint = _NONE
            for arg in args:
                result = _both(result, implied_values(arg))
            return result
        case ir.Op(name="or", args=args):
            return _either([implied_values(arg) for arg in args])
        case ir.Op(name="coalesce", args=args):  # TRUE: the first non-NULL argument is
            return _either([implied_values(arg) for arg in args])
        case ir.Op(name="case", args=args):
            # TRUE only through a branch whose condition and value are both TRUE, or the default.
            branches = [_both(implied_values(args[i]), implied_values(args[i + 1]))
                        for i in range(0, len(args) - 1, 2)]
            return _either([*branches, implied_values(args[-1])])
    return _NONE  # NOT, functions, other comparisons: implies nothing we use


def index_hint(predicate: ir.Expr, columns: Collection[str]) -> ir.Expr:
    """A conjunct implied by ``predicate`` over the index columns in ``columns`` (TRUE if none).

    Only for rows where the index columns are set (an indexed segment's rows); a row that
    ``predicate`` makes TRUE also makes the hint TRUE, so ``predicate AND hint`` is the same
    filter.
    """
    constraint = implied_values(predicate)
    if constraint is None:
        return ir.TRUE  # never TRUE anyway: nothing to add
    parts: list[ir.Expr] = []
    for key, values in sorted(constraint.items()):
        column = index_column(key)
        if column not in columns:
            continue
        if not values:
            return ir.FALSE
        parts.append(ir.op("isin", ir.Col(column),
                           *(ir.Lit("=" + v, "string") for v in sorted(values))))
    return ir.and_(*parts)


def bucket_hint(predicate: ir.Expr, columns: Collection[str]) -> str | None:
    """A Spark SQL condition on ``index_bucket`` (a bucketed archive's directories) implied by
    ``predicate``, for Spark to prune whole files when it plans the query (None if none).

    For every key the predicate pins to some strings, a file bucketed by that key's index column
    (``index_bucket`` = ``<column>.<N>.<b>``) is kept only if one of the strings' CRC-32 modulo
    N is b; files bucketed by another key, not bucketed (NULL) or with a name that does not parse
    are kept. A row's bucket is its index value's, and a row the predicate makes TRUE has one of
    these index values, so the rows of the skipped files could never match. SQL text, not an
    expression tree: built from Python, each literal would cost a round trip to the JVM, and
    this is one (the strings' CRCs are computed here: no key value is in the text).
    """
    if BUCKET_COLUMN not in columns:
        return None
    constraint = implied_values(predicate)
    if constraint is None:
        return None
    bucket = f"`{BUCKET_COLUMN}`"
    # try_*: an unparsable name is NULL (kept), not an error under ANSI mode.
    count = f"nullif(try_cast(try_element_at(split({bucket}, '[.]'), 2) AS BIGINT), 0)"
    number = f"try_cast(try_element_at(split({bucket}, '[.]'), 3) AS BIGINT)"
    parts: list[str] = []
    for key, values in sorted(constraint.items()):
        column = index_column(key)  # letters, digits, _, - and %XX only: safe in a literal
        crcs = sorted({bucket_of("=" + value, 1 << 32) for value in values})
        matching = " OR ".join(f"pmod({crc}, {count}) = {number}" for crc in crcs) or "FALSE"
        parts.append(f"({bucket} IS NULL OR NOT startswith({bucket}, '{column}.') "
                     f"OR coalesce({matching}, TRUE))")
    return " AND ".join(parts) or None


def bucket_keeps(predicate: ir.Expr) -> Callable[[str | None], bool]:
    """Whether a file of regular rows in the bucket directory named by an ``index_bucket``
    value can hold a row that ``predicate`` makes TRUE: :func:`bucket_hint` decided in Python,
    for a file list planned before Spark sees it (the other files are then never handed to it).

    The same rule, and no more: only a value written exactly as the writer writes it
    (``<column>.<N>.<b>``, ASCII digits, N > 0) is pruned; None (no bucket directory), another
    key's buckets and names that do not parse are kept.
    """
    constraint = implied_values(predicate)
    if constraint is None:
        return lambda value: False  # no row can match: no regular file is needed
    crcs = {index_column(key): {bucket_of("=" + v, 1 << 32) for v in values}
            for key, values in constraint.items()}

    def keeps(value: str | None) -> bool:
        parsed = None if value is None else parse_bucket(value)
        if parsed is None:
            return True
        column, count, number = parsed
        wanted = crcs.get(column)
        return wanted is None or any(crc % count == number for crc in wanted)

    return keeps
