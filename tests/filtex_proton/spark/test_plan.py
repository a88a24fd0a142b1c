"""Which path each filter takes and why (explain works without Spark)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

from proton import Described, symbol, ubyte, ulong

from filtex_proton.errors import FilterError
from filtex_proton.filterset import decode_filter_set
from filtex_proton.spark import as_filter_set, explain, plan
from filtex_proton.spark.ir import FALSE, NULL, TRUE, Col, Lit, and_, case, not_, op, or_, to_text

BLOG = ("p.subject='order.created' AND p.creation_time > UTC()-3600000 AND region IN "
        "('AMER','EMEA') AND (h.priority>4 OR price>=99.99 OR premium_customer=TRUE)")


def d(name: str, value: Any) -> Described:
    return Described(symbol(name), value)


def paths(filters: dict[str, Described] | str) -> dict[str, str]:
    return {f.key: f.path for f in plan(filters, now_ms=0).filters}


def test_the_rabbitmq_filter_is_all_spark_expressions() -> None:
    planned = plan(BLOG, now_ms=1_000_000_000_000)
    assert [f.path for f in planned.filters] == ["column"]
    text = str(planned)
    assert "(subject = 'order.created')" in text
    assert "(creation_time > 999996400000L)" in text  # UTC() - 3600000 folded at plan time
    assert "application_properties['string:region'].string IN ('AMER', 'EMEA')" in text
    assert "(coalesce(priority, 4L) > 4L)" in text
    assert "UTC() in Spark expressions is read once" in text


@pytest.mark.parametrize("described", [
    d("amqp:true-filter", True), d("amqp:false-filter", False),
    d("amqp:header-filter", {"priority": ubyte(4), "durable": None}),
    d("amqp:properties-filter", {"subject": "&p:order.", "message-id": ulong(5)}),
    d("amqp:application-properties-filter", {"region": "EMEA", "n": 1.5}),
    d("amqp:message-annotations-filter", {symbol("x-opt-a"): 5, ulong(7): "seven"}),
    d("amqp:footer-filter", {symbol("k"): b"\x00"}),
    d("amqp:all-filter", [d("amqp:sql-filter", "a = 1"), d("amqp:true-filter", True)]),
    d("apache.org:not-filter:list", [d("amqp:sql-filter", "a IS NULL")]),
    d("apache.org:legacy-amqp-direct-binding:string", "order.created"),
    d("apache.org:legacy-amqp-headers-binding:map", {"x-match": symbol("any"), "a": 1, "b": None}),
    d("apache.org:no-local-filter:list", []),
    d("apache.org:legacy-amqp-topic-binding:string", "order.*.#"),
    d("apache.org:selector-filter:string",
      "JMSPriority > 4 AND JMSDeliveryMode = 'PERSISTENT' AND region LIKE 'E%' AND "
      "JMSXDeliveryCount BETWEEN 1 AND 3 AND EXISTS(JMSType)"),
    d("amqp:sql-filter", "a LIKE 'x!%_' ESCAPE '!' AND b NOT BETWEEN 1 AND 2 OR EXISTS(m.k)"),
    d("amqp:sql-filter", "p.creation_time > '2023-11-14T22:13:20Z' AND a <> p.creation_time"),
])
def test_translated_filters(described: Described) -> None:
    assert paths({"f": described}) == {"f": "column"}


@pytest.mark.parametrize(("described", "why"), [
    (d("apache.org:selector-filter:string", "JMSType = 'x'"), "JMSType is converted"),
    (d("apache.org:selector-filter:string", "JMSMessageID LIKE 'ID:%'"),
     "JMSMessageID is converted"),
    (d("amqp:sql-filter", "a + 1 > 2"), "arithmetic"),
    (d("amqp:sql-filter", "LOWER(p.subject) = 'x'"), "function LOWER()"),
    (d("amqp:sql-filter", "a.b.c = 1"), "map and list references"),
    (d("amqp:sql-filter", "a LIKE b"), "pattern read from the message"),
    (d("amqp:sql-filter", "p.subject = p.creation_time"), "ISO 8601"),
    (d("amqp:sql-filter", "a > 0.0000000000000000000001"), "does not fit decimal(38,18)"),
    (d("amqp:application-properties-filter", {"m": {"k": 1}}), "map reference values"),
    (d("amqp:any-filter", [d("apache.org:selector-filter:string", "JMSXUserID = 'bob'")]),
     "JMSXUserID is converted"),
])
def test_filters_left_to_the_engine_say_why(described: Described, why: str) -> None:
    (only,) = plan({"f": described}, now_ms=0).filters
    assert only.path == "udf" and why in only.reason
    assert only.residual == described


def test_a_top_level_and_is_split() -> None:
    (only,) = plan("n + 1 > 2 AND p.subject LIKE 'order%' AND h.priority > 4", now_ms=0).filters
    assert only.path == "column+udf"
    assert only.residual == d("amqp:sql-filter", "(n + 1) > 2")
    assert "startswith(subject, 'order')" in to_text(only.column)  # type: ignore[arg-type]


def test_forcing_a_path() -> None:
    with pytest.raises(ValueError, match="no exact Spark translation"):
        plan("a + 1 > 2", path="column")
    assert paths("a + 1 > 2") == {"sql": "column+udf"} or paths("a + 1 > 2") == {"sql": "udf"}
    forced = plan(BLOG, path="udf")
    assert [f.path for f in forced.filters] == ["udf"]
    assert forced.column_predicate == TRUE


def test_filter_set_forms() -> None:
    assert len(as_filter_set("a = 1")) == 1
    assert len(as_filter_set("JMSPriority > 4", dialect="jms")) == 1
    decoded = decode_filter_set({"x": d("amqp:true-filter", True)})
    assert as_filter_set(decoded) is decoded
    assert len(as_filter_set({"x": d("amqp:true-filter", True)})) == 1
    with pytest.raises(FilterError):
        as_filter_set("a = ")
    empty = explain({})
    assert "every message matches" in str(empty)


def test_ir_simplification() -> None:
    x = Col("x")
    assert and_(TRUE, x) == x and and_(FALSE, x) == FALSE and or_(TRUE, x) == TRUE
    assert or_(FALSE, x) == x and not_(not_(x)) == x and not_(NULL) == NULL
    assert case([(FALSE, x), (TRUE, Lit(1, "bigint"))]) == Lit(1, "bigint")
    assert case([(op("isnull", x), NULL)], NULL) == NULL
    assert to_text(op("eq", x, Lit("it's", "string"))) == "(x = 'it\\'s')"
