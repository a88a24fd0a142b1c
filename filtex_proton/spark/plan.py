"""Which filter runs where: Spark Column expressions, or the engine in a UDF, and why.

A filter set is a conjunction, so each filter can take its own path: the
translated ones become one Spark predicate, the rest are evaluated by the
engine (udf.py) on the rows that predicate lets through. A SQL filter whose
top level is an AND is split the same way, conjunct by conjunct (TRUE AND
TRUE is the only way to be TRUE). Rows the archive marks irregular always go
to the engine with the whole set, whatever the plan says.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeAlias

from proton import Described, symbol

from filtex_proton.filters.sql import SqlFilter
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.limits import DEFAULT_LIMITS, Limits
from filtex_proton.spark import ir
from filtex_proton.spark.hints import bucket_hint, index_hint
from filtex_proton.spark.translate import Translator, UntranslatableError, residual_sql
from filtex_proton.sql import ast

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["FilterPlan", "FilterSetLike", "Path", "Plan", "apply_filter", "as_filter_set",
           "explain", "plan"]

FilterSetLike: TypeAlias = FilterSet | str | Mapping[str, Described]
Path: TypeAlias = Literal["auto", "column", "udf"]

_SQL_DESCRIPTORS: dict[str, str] = {
    "amqp": "amqp:sql-filter",
    "jms": "apache.org:selector-filter:string",
}


def as_filter_set(filter_set: FilterSetLike, *, dialect: str = "amqp",
                  limits: Limits = DEFAULT_LIMITS) -> FilterSet:
    """A decoded filter set from any of the accepted forms; raises FilterError if invalid.

    A string is one SQL filter (``dialect`` "amqp" or "jms") under the key "sql";
    a mapping is key -> ``proton.Described``, as a client sends it.
    """
    if isinstance(filter_set, FilterSet):
        return filter_set
    if isinstance(filter_set, str):
        descriptor = _SQL_DESCRIPTORS[dialect]
        return decode_filter_set({"sql": Described(symbol(descriptor), filter_set)}, limits)
    return decode_filter_set(filter_set, limits)


@dataclass(frozen=True, slots=True)
class FilterPlan:
    """One filter of the set: the path it takes and why."""

    key: str
    type_name: str
    path: Literal["column", "udf", "column+udf"]
    reason: str
    column: ir.Expr | None = None
    """The Spark predicate (TRUE where the filter, or its translated conjuncts, match)."""
    residual: Described | None = None
    """What the engine evaluates for it (the whole filter, or the untranslated conjuncts)."""

    def describe(self) -> str:
        lines = [f"  {self.key!r} ({self.type_name}): {self.path} - {self.reason}"]
        if self.column is not None:
            lines.append(f"      spark: {ir.to_text(self.column)}")
        if self.path == "column+udf" and self.residual is not None:
            lines.append(f"      engine: {self.residual.value!s}")
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Plan:
    """How a filter set is evaluated on an archive DataFrame; ``str()`` explains it."""

    filters: tuple[FilterPlan, ...]
    described: Mapping[str, Described]
    limits: Limits
    mode: Path
    now_ms: int
    uses_utc: bool = False
    notes: tuple[str, ...] = field(default=())

    @property
    def column_predicate(self) -> ir.Expr:
        return ir.and_(*(f.column for f in self.filters if f.column is not None))

    @property
    def residual(self) -> dict[str, Described]:
        return {f.key: f.residual for f in self.filters if f.residual is not None}

    def __str__(self) -> str:
        count = len(self.filters)
        lines = [f"filter set of {count} filter{'s' if count != 1 else ''}, path {self.mode}:"]
        if not self.filters:
            lines.append("  (empty: every message matches, decodable or not)")
        lines.extend(f.describe() for f in self.filters)
        if self.filters and self.mode != "udf":
            lines.append("  rows with regular = false (docs/ARCHIVE.md) are evaluated by the "
                         "engine with the whole set")
        if self.uses_utc:
            moment = dt.datetime.fromtimestamp(self.now_ms / 1000, dt.UTC)
            lines.append(f"  UTC() in Spark expressions is read once, when the plan was made: "
                         f"{moment.isoformat(timespec='milliseconds')} (the engine reads it "
                         "per message)")
        lines.extend(f"  {note}" for note in self.notes)
        return "\n".join(lines)

    def apply(self, df: DataFrame) -> DataFrame:
        """The rows of ``df`` (an archive DataFrame) that the filter set matches."""
        from pyspark.sql import functions as F  # noqa: N812

        from filtex_proton.spark.udf import match_udf

        missing = {"regular", "raw"} - set(df.columns)
        if missing:
            raise ValueError(f"not an archive DataFrame: no column(s) {', '.join(sorted(missing))}"
                             " (read it with filtex_proton.spark.read_archive)")
        if not self.filters:
            return df
        raw = F.col("raw")
        if self.mode == "udf":
            return df.where(match_udf(self.described, self.limits)(raw))
        predicate = self.column_predicate
        # An indexed archive's index columns: a conjunct the predicate implies, for Spark's
        # Parquet reader to skip by (the same rows match).
        # A bucketed archive's directories: the buckets the predicate can match in, for
        # Spark to prune the other files when it plans (never listed, opened or scheduled).
        buckets = bucket_hint(predicate, df.columns)
        predicate = ir.and_(index_hint(predicate, df.columns), predicate)
        regular = df.where(F.col("regular") & ir.to_column(predicate))
        if buckets is not None:
            regular = regular.where(F.expr(buckets))
        residual = self.residual
        if residual:
            regular = regular.where(match_udf(residual, self.limits)(raw))
        irregular = df.where(~F.col("regular")).where(match_udf(self.described, self.limits)(raw))
        return regular.unionByName(irregular)


def _split_sql(translator: Translator, key: str, item: SqlFilter) -> FilterPlan | None:
    """A top-level AND with some translatable conjuncts: those in Spark, the rest in the engine."""
    root = item.compiled.ast
    if not isinstance(root, ast.And):
        return None
    translated: list[ir.Expr] = []
    rest: list[ast.Expr] = []
    reasons: list[str] = []
    for operand in root.operands:
        try:
            translated.append(translator.sql(operand, item.compiled.dialect))
        except UntranslatableError as exc:
            rest.append(operand)
            reasons.append(str(exc))
    if not translated:
        return None
    remaining = rest[0] if len(rest) == 1 else ast.And(tuple(rest))
    residual = residual_sql(item.type_name, remaining, item.compiled.dialect)
    if residual is None:
        return None
    return FilterPlan(key, item.type_name, "column+udf",
                      f"{len(translated)} of {len(root.operands)} conjuncts in Spark; the "
                      f"engine evaluates the rest ({'; '.join(dict.fromkeys(reasons))})",
                      ir.and_(*translated), residual)


def plan(filter_set: FilterSetLike, *, path: Path = "auto", now_ms: int | None = None,
         dialect: str = "amqp", limits: Limits = DEFAULT_LIMITS) -> Plan:
    """Decide, per filter, Spark Columns or the engine; ``path`` forces one.

    ``path="column"`` raises ValueError if some filter cannot be translated;
    ``path="udf"`` sends everything to the engine.
    """
    decoded = as_filter_set(filter_set, dialect=dialect, limits=limits)
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    described = {str(key): value for key, value in decoded.echo().items()}
    translator = Translator(now)
    plans: list[FilterPlan] = []
    for key, item in decoded.items():
        if path == "udf":
            plans.append(FilterPlan(key, item.type_name, "udf", "the UDF path was asked for",
                                    residual=item.described()))
            continue
        try:
            predicate = translator.translate(item)
        except UntranslatableError as exc:
            split = _split_sql(translator, key, item) if isinstance(item, SqlFilter) else None
            if split is not None and path != "column":
                plans.append(split)
                continue
            if path == "column":
                raise ValueError(f"filter {key!r} ({item.type_name}) has no exact Spark "
                                 f"translation: {exc}") from None
            plans.append(FilterPlan(key, item.type_name, "udf", str(exc),
                                    residual=item.described()))
            continue
        plans.append(FilterPlan(key, item.type_name, "column",
                                "translated exactly to Spark expressions", predicate.expr))
    return Plan(tuple(plans), described, decoded.limits, path, now, translator.uses_utc)


def explain(filter_set: FilterSetLike, *, path: Path = "auto", dialect: str = "amqp",
            limits: Limits = DEFAULT_LIMITS) -> Plan:
    """The plan :func:`apply_filter` would use; print it to see, per filter, the path and why.

    Needs no Spark: the expressions are shown as Spark SQL text.
    """
    return plan(filter_set, path=path, dialect=dialect, limits=limits)


def apply_filter(df: DataFrame, filter_set: FilterSetLike, *, path: Path = "auto",
                 dialect: str = "amqp", limits: Limits = DEFAULT_LIMITS,
                 now_ms: int | None = None) -> DataFrame:
    """The rows of an archive DataFrame that ``filter_set`` matches, exactly as the broker
    would decide (docs/SEMANTICS.md); see :func:`plan` for ``path``."""
    return plan(filter_set, path=path, now_ms=now_ms, dialect=dialect, limits=limits).apply(df)
