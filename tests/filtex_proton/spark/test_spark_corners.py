"""Hand-picked corners of the semantics, each on the Column path and on the UDF path.

The seeded corpus meets most of these by chance; here they are on purpose, so
that a regression names the rule it broke.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

from proton import Described, char, float32, symbol, timestamp, ubyte, uint, ulong

from filtex_proton.amqp.message import encode_message
from filtex_proton.filterset import decode_filter_set
from filtex_proton.spark import ArchiveWriter, apply_filter, plan, read_archive

from .conftest import engine_matches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NOW = 1_795_000_000_000
MESSAGES: list[dict[str, Any]] = [
    {},
    {"header": {"priority": 9, "durable": True}, "properties": {"subject": "order.created"}},
    {"header": {"priority": 4}, "properties": {"subject": ""}},
    {"properties": {"subject": "a..b", "creation-time": timestamp(1_700_000_000_000)}},
    {"application_properties": {"x": float("nan")}},
    {"application_properties": {"x": -0.0}},
    {"application_properties": {"x": 0.0, "y": None}},
    {"application_properties": {"x": ulong(2**64 - 1)}},
    {"application_properties": {"x": 2**63 - 1}},
    {"application_properties": {"x": float32(0.1)}},
    {"application_properties": {"x": 0.1}},
    {"application_properties": {"x": Decimal("0.1")}},
    {"application_properties": {"x": Decimal("99.99"), "y": 99.99}},
    {"application_properties": {"x": "a\nc", "y": "é😀"}},
    {"application_properties": {"x": "😀"}},
    {"application_properties": {"x": char("a")}},
    {"application_properties": {"x": "a"}},
    {"application_properties": {"x": symbol("a")}},
    {"application_properties": {"x": "2023-11-14T22:13:20Z"}},
    {"application_properties": {"x": "PT1H"}},
    {"application_properties": {"x": timestamp(3_600_000)}},
    {"application_properties": {"x": uuid.UUID(int=1), "y": uuid.UUID(int=2)}},
    {"application_properties": {"x": b"\x00\xff", "y": b"\x00"}},
    {"application_properties": {"x": True, "y": False}},
    {"application_properties": {"x": {"k": 1}, "y": [1, 2]}},
    {"application_properties": {"x": 3.4028235677973366e38}},
    {"application_properties": {"x": uint(5), "y": 5}},
    {"message_annotations": {"x-opt-a": 5, ulong(7): "seven"}},
    {"header": {"priority": ubyte(5), "delivery-count": uint(3)},
     "properties": {"to": "queue", "absolute-expiry-time": timestamp(10)}},
    {"properties": {"subject": "100%_done"}, "application_properties": {"x": "100%_done"}},
]
SQL = [
    "x = x", "x <> x", "x > 0", "x < 1", "x = 0", "x <> 0", "x IS NULL", "x IS NOT NULL",
    "y IS NULL", "EXISTS(y)", "EXISTS(a.y)", "NOT EXISTS(x)", "x IN (0, 1, NULL)",
    "x NOT IN (0, 1, NULL)", "x IN ('a', 'é😀')", "x BETWEEN -1 AND 1", "x NOT BETWEEN 0 AND 0",
    "x = 18446744073709551615", "x > 9223372036854775806", "x = 1.8446744073709552E19",
    "x = 0.1", "x = 0.1E0", "x >= 99.99", "x = y", "x < y", "x LIKE 'a_c'", "x LIKE '_'",
    "x LIKE 'a%'", "x NOT LIKE '%c'", "x LIKE '100!%!_%' ESCAPE '!'", "x LIKE '%'",
    "x = 'a'", "x > 'Z'", "x = '2023-11-14T22:13:20Z'", "x < 'PT2H'", "x = 3600000",
    "x = TRUE", "NOT x", "x", "x = 0x00FF", "x > 0x00", "x = INF", "x > 3.4E38", "x = NAN",
    "x <> NAN", "h.priority > 4", "h.priority = 4", "h.durable", "NOT h.durable",
    "h.delivery_count = 0", "p.subject = ''", "p.subject LIKE '%.%'", "EXISTS(h.priority)",
    "p.creation_time > '2023-11-14T00:00:00Z'", "p.creation_time > UTC() - 3600000",
    "m.[x-opt-a] = 5", "x = y OR x IS NULL", "(x > 0) IS NULL", "NOT (x > 0)",
]
JMS = [
    "JMSPriority > 4", "JMSPriority = 4", "JMSDeliveryMode = 'PERSISTENT'",
    "JMSRedelivered", "JMSXDeliveryCount = 4", "JMSExpiration = 0", "JMSExpiration = 10",
    "JMSDestination = 'queue'", "x > 0", "x = 'a'", "x > 'Z'", "x = 0.1", "x = y",
    "x IS NULL", "EXISTS(JMSTimestamp)", "JMSTimestamp > 0", "x = 99.99",
]


def d(name: str, value: Any) -> Described:
    return Described(symbol(name), value)


PROPERTY = [
    d("amqp:application-properties-filter", {"x": value}) for value in [
        0.0, -0.0, 0, float32(0.1), 0.1, Decimal("0.1"), Decimal("99.99"), "a", symbol("a"),
        "&p:a", "&s:c", "&&x", char("a"), uuid.UUID(int=1), b"\x00\xff", True,
        timestamp(3_600_000), ulong(2**64 - 1), 2**63 - 1, float("nan"), float32(3.4e38),
        3.4028235677973366e38, None, uint(5),
    ]
] + [
    d("amqp:header-filter", {"priority": ubyte(4)}),
    d("amqp:header-filter", {"durable": False, "delivery-count": uint(0)}),
    d("amqp:message-annotations-filter", {ulong(7): "seven"}),
    d("amqp:message-annotations-filter", {symbol("x-opt-a"): uint(5)}),
    d("amqp:properties-filter", {"subject": "&p:order."}),
]
OTHERS = [
    d("apache.org:legacy-amqp-topic-binding:string", pattern) for pattern in
    ["#", "*", "", "a.*.b", "a.#.b", "#.b", "order.#", "*.*", "100%_done"]
] + [
    d("apache.org:legacy-amqp-headers-binding:map", {"x-match": symbol("any"), "x": "&p:a",
                                                      "y": None}),
    d("apache.org:legacy-amqp-direct-binding:string", ""),
    d("amqp:any-filter", [d("amqp:sql-filter", "x > 0"), d("amqp:true-filter", True)]),
    d("amqp:not-filter", [d("amqp:sql-filter", "x > 0"), d("amqp:false-filter", False)]),
    d("apache.org:and-filter:list", [d("amqp:sql-filter", "x = x"),
                                     d("amqp:header-filter", {"priority": ubyte(4)})]),
]
FILTERS = ([d("amqp:sql-filter", text) for text in SQL]
           + [d("apache.org:selector-filter:string", text) for text in JMS]
           + PROPERTY + OTHERS)


@pytest.fixture(scope="module")
def corners(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[
        DataFrame, list[bytes], int]:
    directory: Path = tmp_path_factory.mktemp("corners")
    data = [encode_message(**sections) for sections in MESSAGES]
    with ArchiveWriter(directory, flush_interval=None, fsync=False, handle_sigterm=False) as w:
        for index, message in enumerate(data):
            w.append("q", message, 1_700_000_000_000 + index)
    df = read_archive(spark, directory).coalesce(1).cache()
    start = int(df.agg({"sequence": "min"}).collect()[0][0])
    return df, data, start


def test_every_corner_translates() -> None:
    untranslated = [f for f in FILTERS
                    if any(p.path != "column" for p in plan({"f": f}, now_ms=NOW).filters)]
    assert untranslated == []


def _compare(df: DataFrame, data: list[bytes], start: int, columns: list[Any]) -> None:
    """Each filter's verdict as a Spark column (5 per job) against the engine's."""
    problems = []
    for offset in range(0, len(FILTERS), 5):
        chunk = list(enumerate(FILTERS))[offset:offset + 5]
        selected = df.select("sequence", *(columns[i].alias(f"f{i}") for i, _ in chunk))
        rows = sorted((row["sequence"] - start, row) for row in selected.collect())
        for index, described in chunk:
            want = [engine_matches(decode_filter_set({"f": described}), m) for m in data]
            got = [bool(row[f"f{index}"]) for _, row in rows]
            if got != want:
                problems.append(f"{described}: spark {got}, engine {want}")
    assert not problems, "\n".join(problems)


def test_corners_on_the_column_path(corners: tuple[DataFrame, list[bytes], int]) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    from filtex_proton.spark.ir import to_column

    df, data, start = corners
    assert df.where(~F.col("regular")).count() == 0
    columns = [F.coalesce(to_column(plan({"f": f}, path="column", now_ms=NOW).column_predicate),
                          F.lit(False)) for f in FILTERS]
    _compare(df, data, start, columns)


def test_corners_on_the_udf_path(corners: tuple[DataFrame, list[bytes], int]) -> None:
    from pyspark.sql import functions as F  # noqa: N812

    from filtex_proton.limits import DEFAULT_LIMITS
    from filtex_proton.spark.udf import match_udf

    df, data, start = corners
    _compare(df, data, start, [match_udf({"f": f}, DEFAULT_LIMITS)(F.col("raw"))
                               for f in FILTERS])


def test_apply_filter_on_corners(corners: tuple[DataFrame, list[bytes], int]) -> None:
    df, data, start = corners
    for described in FILTERS[::15]:
        want = [i for i, message in enumerate(data)
                if engine_matches(decode_filter_set({"f": described}), message)]
        for path in ("column", "udf"):
            result = apply_filter(df, {"f": described}, path=path, now_ms=NOW)
            got = sorted(row["sequence"] - start for row in result.select("sequence").collect())
            assert got == want, (described, path)
