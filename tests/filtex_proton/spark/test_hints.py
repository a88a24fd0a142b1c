"""Index hints (no Spark needed): what a translated predicate implies, and only that."""

from __future__ import annotations

import pytest

from filtex_proton.archive import index_column
from filtex_proton.spark import ir, plan
from filtex_proton.spark.hints import implied_values, index_hint

NOW = 1_795_000_000_000
COLUMNS = {index_column(k) for k in ("region", "é😀", "a.b", "s")}


def _hint(text: str) -> str:
    return ir.to_text(index_hint(plan(text, now_ms=NOW).column_predicate, COLUMNS))


@pytest.mark.parametrize(("text", "hint"), [
    ("region = 'EU'", "(index_region IN ('=EU'))"),
    ("'EU' = region", "(index_region IN ('=EU'))"),
    ("region IN ('EU', 'US')", "(index_region IN ('=EU', '=US'))"),
    ("region = 'EU' AND p.subject = 'x'", "(index_region IN ('=EU'))"),
    ("region = 'EU' AND s IN ('a', 'b')",
     "((index_region IN ('=EU')) AND (index_s IN ('=a', '=b')))"),
    ("region = 'EU' OR region = 'US'", "(index_region IN ('=EU', '=US'))"),
    ("(region = 'EU' AND s = 'a') OR region = 'US'", "(index_region IN ('=EU', '=US'))"),
    ("[é😀] = 'x'", "(`index_%C3%A9%F0%9F%98%80` IN ('=x'))"),
    ("region = 'EU' AND region = 'US'", "FALSE"),
])
def test_an_equality_or_in_on_an_indexed_property_implies_its_values(text: str,
                                                                       hint: str) -> None:
    assert _hint(text) == hint


@pytest.mark.parametrize("text", [
    "region <> 'EU'",  # TRUE for every other value
    "NOT region = 'EU'",
    "region IS NULL",  # the absent property: an index must never drop it
    "region IS NOT NULL",
    "region = 'EU' OR p.subject = 'x'",  # TRUE without region
    "region = '2024-01-01'",  # a timestamp property equals it too (§6.3.2)
    "region IN ('2024-01-01', 'x')",
    "region LIKE 'E%'",
    "region = 5",
    "b = 'EU'",  # not indexed
    "p.subject = 'x'",
])
def test_anything_else_implies_nothing(text: str) -> None:
    assert _hint(text) == "TRUE"


def test_a_literal_null_can_never_be_equal() -> None:
    slot = ir.Field(ir.Get(ir.Col("application_properties"), "string:region"), "string")
    expr = ir.op("isin", slot, ir.Lit(None, "string"), ir.Lit("x", "string"))
    assert implied_values(expr) == {"region": frozenset({"x"})}
    assert implied_values(ir.NULL) is None  # never TRUE


def test_index_columns_escape_what_spark_would_need_quoted() -> None:
    assert index_column("region") == "index_region"
    assert index_column("a.b c") == "index_a%2Eb%20c"
    assert index_column("x-y_z9") == "index_x-y_z9"
