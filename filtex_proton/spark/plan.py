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
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeAlias

from proton import Described, symbol

from filtex_proton.archive.columns import BUCKET_COLUMN
from filtex_proton.archive.layout import address_partition
from filtex_proton.filters.sql import SqlFilter
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.limits import DEFAULT_LIMITS, Limits
from filtex_proton.spark import ir
from filtex_proton.spark.hints import bucket_hint, bucket_keeps, index_hint
from filtex_proton.spark.translate import Translator, UntranslatableError, residual_sql
from filtex_proton.sql import ast

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["FilterPlan", "FilterSetLike", "Path", "Plan", "apply_filter", "as_filter_set",
           "explain", "plan", "select_archive"]

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
        return self._apply(df)

    def select(self, spark: SparkSession, directory: str | os.PathLike[str],
               addresses: Iterable[str] | None = None, *, since: str | None = None,
               until: str | None = None) -> DataFrame:
        """The matches in an archive directory: ``self.apply(read_archive(spark, directory,
        addresses, since=since, until=until))``, with the files planned here first.

        For a local archive the segment files are chosen from their directory names before
        Spark sees any: a bucketed file of regular rows only if its bucket can hold a match
        (the CRC-32 the writer used, :func:`~filtex_proton.spark.hints.bucket_keeps`), only
        the days and addresses asked for. Only those files' footers are read (the version
        check) and only they are handed to Spark, which then lists, prunes and schedules
        nothing else; the engine's pass over irregular rows is left out when no file can hold
        one (``regular=`` is a directory). A remote URL is read as :func:`read_archive` does.

        With a Spark Connect session the choice is made here, in the client, where it can read
        the directory (the server then must find the same files at that path); an archive it
        cannot read, or one given as a URL (``file:///...`` too), the server lists and reads.
        """
        from filtex_proton.archive.reader import check_segments, list_segments
        from filtex_proton.spark.session import read_archive, read_segments

        path = os.fspath(directory)
        if not os.path.isdir(path):
            return self._apply(read_archive(spark, path, addresses, since=since, until=until))
        addresses = None if addresses is None else list(addresses)  # used twice
        wanted = None if addresses is None else {address_partition(a) for a in addresses}
        keeps = (bucket_keeps(self.column_predicate) if self.filters and self.mode != "udf"
                 else lambda value: True)
        files = []
        for found in list_segments(path):
            # A file is left out only where the conditions Spark would apply to its directory
            # values are FALSE (a NULL partition value is kept: Spark decides it).
            values = found.partitions
            date, address = values.get("date"), values.get("address")
            if date is not None and ((since is not None and date < since)
                                     or (until is not None and date > until)):
                continue
            if wanted is not None and address is not None and address not in wanted:
                continue
            if values.get("regular") == "true" and found.bucketed \
                    and not keeps(values[BUCKET_COLUMN]):
                continue
            files.append(found)
        df = read_segments(spark, path, check_segments(f.path for f in files), addresses,
                           since=since, until=until)
        irregular = any(f.partitions.get("regular") != "true" for f in files)
        return self._apply(df, irregular=irregular, buckets=False)

    def _apply(self, df: DataFrame, *, irregular: bool = True, buckets: bool = True
               ) -> DataFrame:
        """:meth:`apply`; ``irregular``: ``df`` may hold irregular rows (False: none, so the
        engine's pass over them is left out); ``buckets``: add the bucket condition (False:
        the files were chosen already)."""
        from pyspark.sql import functions as F  # noqa: N812

        from filtex_proton.spark.udf import match_udf

        columns = df.columns
        missing = {"regular", "raw"} - set(columns)
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
        hint = bucket_hint(predicate, columns) if buckets else None
        predicate = ir.and_(index_hint(predicate, columns), predicate)
        regular = df.where(F.col("regular") & ir.to_column(predicate))
        if hint is not None:
            regular = regular.where(F.expr(hint))
        residual = self.residual
        if residual:
            regular = regular.where(match_udf(residual, self.limits)(raw))
        if not irregular:
            return regular
        irregulars = df.where(~F.col("regular")).where(match_udf(self.described,
                                                                 self.limits)(raw))
        return regular.unionByName(irregulars)


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


def select_archive(spark: SparkSession, directory: str | os.PathLike[str],
                   filter_set: FilterSetLike, addresses: Iterable[str] | None = None, *,
                   since: str | None = None, until: str | None = None, path: Path = "auto",
                   dialect: str = "amqp", limits: Limits = DEFAULT_LIMITS,
                   now_ms: int | None = None) -> DataFrame:
    """The messages of an archive directory that ``filter_set`` matches: the same rows as
    ``apply_filter(read_archive(spark, directory, addresses, since=since, until=until),
    filter_set)``, reading only the files that can hold matches (:meth:`Plan.select`)."""
    planned = plan(filter_set, path=path, now_ms=now_ms, dialect=dialect, limits=limits)
    return planned.select(spark, directory, addresses, since=since, until=until)
