"""filtex_proton.tester: the filter tester as data (the broker's console shows it)."""

from __future__ import annotations

import pytest
from proton import Message

from filtex_proton.limits import Limits
from filtex_proton.tester import (
    check,
    describe,
    message_json,
    pushdown_json,
    spark_text,
    verdict,
)


def _encoded(body: object = "secret", priority: int | None = None, **properties: object) -> bytes:
    message = Message(body=body, properties=properties or None)
    if priority is not None:
        message.priority = priority
    return bytes(message.encode())


def test_a_valid_sql_filter_is_normalised_and_typed() -> None:
    checked = check("color='red' and h.priority>4", "sql")
    assert checked.filter_set is not None and checked.error is None
    assert checked.filters == [{"key": "filter", "type": "amqp:sql-filter",
                                "normalised": "(color = 'red') AND (h.priority > 4)",
                                "descriptor": "amqp:sql-filter"}]
    assert checked.as_json()["valid"] is True


@pytest.mark.parametrize(("text", "kind", "line", "column"), [
    ("color = 'red' AND", "sql", 1, 18),
    ("a = 1\nAND AND", "jms", 2, 5),
    ('{"a": 1', "json", 1, 8),
])
def test_an_invalid_filter_says_where(text: str, kind: str, line: int, column: int) -> None:
    checked = check(text, kind)
    assert checked.filter_set is None and checked.error is not None
    assert (checked.error["line"], checked.error["column"]) == (line, column)
    assert checked.as_json()["valid"] is False


def test_a_typed_json_filter_set_and_its_errors() -> None:
    checked = check('{"urgent": {"descriptor": "amqp:header-filter", '
                    '"value": {"priority": {"ubyte": 9}}}}', "json")
    assert checked.filter_set is not None
    assert describe(checked.filter_set)[0]["normalised"] == {"priority": {"ubyte": 9}}
    wrong = check('{"x": {"descriptor": "amqp:no-such-filter", "value": 1}}', "json")
    assert wrong.error is not None and "amqp:no-such-filter" in wrong.error["message"]
    not_a_set = check("[1, 2]", "json")
    assert not_a_set.error is not None and "JSON object" in not_a_set.error["message"]


def test_the_limits_apply() -> None:
    checked = check("a = 'x'", "sql", Limits(max_sql_length=3))
    assert checked.error is not None and checked.error["limit"] is True


def test_an_unknown_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="kind"):
        check("a = 1", "xml")


def test_verdicts_say_true_false_or_null_and_why() -> None:
    filter_set = check("color = 'red'", "sql").filter_set
    assert filter_set is not None
    assert verdict(filter_set, _encoded(color="red"))["result"] == "TRUE"
    false = verdict(filter_set, _encoded(color="blue"))
    assert (false["result"], false["key"]) == ("FALSE", "filter")
    null = verdict(filter_set, _encoded())
    assert null["result"] == "NULL" and "NULL" in null["reason"]
    assert verdict(filter_set, b"\x00garbage")["result"] == "NULL"
    assert filter_set.stats.evaluations == 3  # only the tester's own, fresh set counted


def test_messages_show_their_body_only_when_asked() -> None:
    data = _encoded("secret", priority=7, region="eu")
    shown = message_json(data)
    assert shown["application-properties"] == {"region": "eu"}
    assert shown["header"]["priority"] == {"ubyte": 7}
    assert "body" not in shown
    assert message_json(data, body=True)["body"] == ["secret"]
    assert "error" in message_json(b"\x00garbage")


def test_pushdown_and_spark_are_explained() -> None:
    filter_set = check("color = 'red' AND amount * 2 > 10", "sql").filter_set
    assert filter_set is not None
    pushed = pushdown_json(filter_set)
    assert pushed["selector"] is not None and "color = 'red'" in pushed["selector"]
    assert pushed["pushed"] == ["filter"]
    assert "filter set of 1 filter" in spark_text(filter_set)


def test_the_spark_plan_needs_no_spark_extra() -> None:
    """The console installed alone (``.[console]``) has neither PySpark nor pyarrow: its
    tester still shows the Spark plan, which is worked out without them."""
    import subprocess
    import sys

    code = ("import sys\n"
            "for name in ('pyarrow', 'pyspark', 'pandas'): sys.modules[name] = None\n"
            "from filtex_proton.tester import check, spark_text\n"
            "print(spark_text(check(\"a.x = 1 AND p.subject = 'o'\", 'sql').filter_set))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True)
    assert "translated exactly to Spark expressions" in result.stdout, result.stdout
    assert "(subject = 'o')" in result.stdout, result.stdout
