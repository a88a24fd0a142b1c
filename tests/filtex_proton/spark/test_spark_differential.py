"""Spark result == the engine's result, row for row, on the Column path and on the UDF path.

The oracle is what the broker does: FilterSet.matches on a RawMessageView of the
same bytes (conftest.engine_matches). 400 seeded filter sets of every type meet
3000 seeded messages of every AMQP type; all of it runs in a handful of Spark
jobs on one local[2] session. Each test runs again through a Spark Connect server:
the same expressions and UDFs, built as Connect columns and run by the server, on a
share of the filter sets that still builds every form of Spark expression the
translation makes (the translation itself is the same code either way).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

import pyarrow as pa

from filtex_proton.limits import DEFAULT_LIMITS
from filtex_proton.spark import apply_filter, ir, plan
from filtex_proton.spark.ir import to_column
from filtex_proton.spark.udf import encode_filters, match_batch, match_udf, unbudgeted

from .conftest import FILTER_SETS, Corpus, first_sequence

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

NOW = 1_795_000_000_000  # the plan's UTC(): the corpus's times are far from it either way
CHUNK = 5  # small enough for whole-stage codegen to stay under Java's 64 KB a method
CONNECT_SHARE = 8
"""Through Spark Connect, every CONNECT_SHARE-th filter set, and any other whose Spark
expression has a form none of those has."""


def _through_connect(df: DataFrame) -> bool:
    return type(df).__module__.startswith("pyspark.sql.connect")


def _forms(expr: ir.Expr) -> set[str]:
    """The kinds of node in a Spark expression: each becomes another kind of Column."""
    if isinstance(expr, ir.Op):
        return {f"op {expr.name}"}.union(*(_forms(arg) for arg in expr.args))
    if isinstance(expr, ir.Get):
        return {"get"} | _forms(expr.map)
    if isinstance(expr, ir.Field):
        return {"field"} | _forms(expr.struct)
    if isinstance(expr, ir.Lit):
        return {f"lit {expr.type} {type(expr.value).__name__}"}
    return {"col"}


def _share(indexes: list[int], df: DataFrame, exprs: dict[int, ir.Expr] | None = None, *,
           share: int = CONNECT_SHARE) -> list[int]:
    """All of ``indexes`` on a local session; through Spark Connect, every ``share``-th, and
    any other with a form of ``exprs`` (the filter sets' expressions) those lack."""
    if not _through_connect(df):
        return indexes
    chosen = indexes[::share]
    if exprs is not None:
        seen = set().union(*(_forms(exprs[i]) for i in chosen))
        for index in indexes:
            new = _forms(exprs[index]) - seen
            if new:
                chosen.append(index)
                seen |= new
    return sorted(chosen)


def _mismatches(rows: list[tuple[int, list[bool]]], indexes: list[int],
                expected: list[list[bool]], corpus: Corpus, *, regular_only: bool) -> list[str]:
    problems = []
    for message, answers in rows:
        if regular_only and not corpus.regular[message]:
            continue
        for index, got in zip(indexes, answers, strict=True):
            if bool(got) != expected[index][message]:
                problems.append(f"filter set {index} {FILTER_SETS[index]!r} on message {message} "
                                f"{corpus.data[message]!r}: spark {got}, engine "
                                f"{expected[index][message]}")
    return problems


def _evaluate(df: DataFrame, columns: dict[int, object]) -> list[tuple[int, list[bool]]]:
    """One Spark job per chunk of filters: a boolean column each, per message."""

    start = first_sequence(df)
    results: dict[int, list[bool]] = {}
    items = list(columns.items())
    for offset in range(0, len(items), CHUNK):
        chunk = items[offset:offset + CHUNK]
        selected = df.select("sequence", *(c.alias(f"f{i}") for i, c in chunk))  # type: ignore[attr-defined]
        for row in selected.collect():
            results.setdefault(row["sequence"] - start, []).extend(
                row[f"f{i}"] for i, _ in chunk)
    return sorted(results.items())


def test_the_corpus_covers_both_kinds_of_rows(corpus: Corpus) -> None:
    kinds = Counter(corpus.regular)
    assert kinds[True] > 1500 and kinds[False] > 300


def test_the_plans_cover_every_path() -> None:
    paths = Counter(f.path for described in FILTER_SETS
                    for f in plan(described, now_ms=NOW).filters)
    assert paths["column"] > 300 and paths["udf"] > 20 and paths["column+udf"] >= 1


def test_column_path_equals_the_engine_on_regular_rows(
        any_archive_df: DataFrame, corpus: Corpus, expected: list[list[bool]]) -> None:
    """Every filter set that translates entirely, as Spark Columns, on every regular row."""
    from pyspark.sql import functions as F  # noqa: N812

    predicates: dict[int, ir.Expr] = {}
    for index, described in enumerate(FILTER_SETS):
        planned = plan(described, now_ms=NOW)
        if all(f.path == "column" for f in planned.filters):
            predicates[index] = planned.column_predicate
    assert len(predicates) > 250
    indexes = _share(list(predicates), any_archive_df, predicates)
    columns: dict[int, object] = {
        index: F.when(F.col("regular"), F.coalesce(to_column(predicates[index]), F.lit(False)))
        for index in indexes}
    rows = _evaluate(any_archive_df, columns)
    assert not _mismatches(rows, indexes, expected, corpus, regular_only=True)
    outcomes = Counter(expected[i][m] for i in indexes for m, r in enumerate(corpus.regular) if r)
    assert outcomes[True] > 10_000 and outcomes[False] > 10_000


def test_udf_path_equals_the_engine_on_every_row(
        any_archive_df: DataFrame, corpus: Corpus, expected: list[list[bool]]) -> None:
    """The UDF's worker-side code (shipped filters decoded in the worker, matches_raw), for
    every filter set on every row, in one Arrow UDF that answers them all at once."""
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.types import ArrayType, BooleanType

    indexes = _share(list(range(len(FILTER_SETS))), any_archive_df, share=4)
    shipped = [encode_filters(FILTER_SETS[index]) for index in indexes]
    limits = unbudgeted(DEFAULT_LIMITS)

    def answer_all(raws: pa.Array) -> pa.Array:
        columns = [match_batch(encoded, limits, raws).to_pylist() for encoded in shipped]
        return pa.array([list(row) for row in zip(*columns, strict=True)],
                        pa.list_(pa.bool_()))

    udf = F.arrow_udf(answer_all, ArrayType(BooleanType()))  # type: ignore[attr-defined]
    start = first_sequence(any_archive_df)
    rows = sorted((row["sequence"] - start, row["answers"]) for row in
                  any_archive_df.select("sequence", udf(F.col("raw")).alias("answers")).collect())
    assert len(rows) == len(corpus.data)
    assert not _mismatches(rows, indexes, expected, corpus, regular_only=False)


def test_match_udf_is_the_udf_the_plans_use(archive_df: DataFrame, corpus: Corpus,
                                            expected: list[list[bool]]) -> None:
    """A few of the plans' UDFs in one job (on the local session only: through Spark Connect,
    apply_filter's UDF path runs them)."""
    from pyspark.sql import functions as F  # noqa: N812

    indexes = list(range(0, len(FILTER_SETS), 150))
    columns: dict[int, object] = {
        index: match_udf(FILTER_SETS[index], DEFAULT_LIMITS)(F.col("raw")) for index in indexes
    }
    rows = _evaluate(archive_df, columns)
    assert not _mismatches(rows, indexes, expected, corpus, regular_only=False)


@pytest.mark.parametrize("path", ["auto", "udf", "column"])
def test_apply_filter_end_to_end(any_archive_df: DataFrame, corpus: Corpus,
                                 expected: list[list[bool]], path: str) -> None:
    """apply_filter itself (the regular/irregular split, the union, residual UDFs) on a
    sample of filter sets; "column" only where every filter translates."""
    start = first_sequence(any_archive_df)
    checked = 0
    for index in _share(list(range(0, len(FILTER_SETS), 25)), any_archive_df, share=2):
        described = FILTER_SETS[index]
        if path == "column" and any(f.path != "column"
                                    for f in plan(described, now_ms=NOW).filters):
            continue
        result = apply_filter(any_archive_df, described, path=path, now_ms=NOW)  # type: ignore[arg-type]
        got = sorted(row["sequence"] - start for row in result.select("sequence").collect())
        want = [m for m, ok in enumerate(expected[index]) if ok]
        assert got == want, (index, described)
        checked += 1
    assert checked >= (4 if _through_connect(any_archive_df) else 10)


def test_split_sql_filters_end_to_end(any_archive_df: DataFrame, corpus: Corpus) -> None:
    """A SQL filter split conjunct by conjunct: Spark for some, the engine for the rest."""
    from proton import Described, symbol

    from filtex_proton.filterset import decode_filter_set

    from .conftest import engine_matches

    start = first_sequence(any_archive_df)
    for text in ["n + 1 > 2 AND p.subject LIKE 'order%'",
                 "h.priority >= 4 AND LOWER(p.subject) = 'order.created' AND region <> 'x'",
                 "price > 0.0000000000000000000001 AND NOT flag"]:
        described = {"s": Described(symbol("amqp:sql-filter"), text)}
        planned = plan(described, now_ms=NOW)
        assert planned.filters[0].path == "column+udf", str(planned)
        result = apply_filter(any_archive_df, described, now_ms=NOW)
        got = sorted(row["sequence"] - start for row in result.select("sequence").collect())
        filter_set = decode_filter_set(described)
        assert got == [m for m, data in enumerate(corpus.data)
                       if engine_matches(filter_set, data)], text
