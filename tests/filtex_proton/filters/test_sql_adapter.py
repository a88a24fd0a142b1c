"""The SQL filter (spec §6) and the JMS selector (apache-filters §2.2) as filters."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Described, symbol, ubyte

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import EvaluationContext
from filtex_proton.filters.registry import decode_filter
from filtex_proton.limits import Limits

from .support import described, evaluate

pytest.importorskip("filtex_proton.sql")

SQL = "amqp:sql-filter"
SELECTOR = "apache.org:selector-filter:string"
VIEW = DictMessageView(header={"priority": ubyte(7)}, application_properties={"color": "red"})

CASES: list[tuple[str, Any, str, bool | None]] = [
    ("§6 sql-filter TRUE", SQL, "color = 'red'", True),
    ("§6 sql-filter FALSE", SQL, "color = 'blue'", False),
    ("§6 sql-filter NULL on an absent field", SQL, "size > 3", None),
    ("§6 sql-filter, numeric descriptor", 0x120, "h.priority > 4", True),
    ("§6 sql-filter given as a symbol value", SQL, symbol("color = 'red'"), True),
    ("apache §2.2 JMS selector TRUE", SELECTOR, "JMSPriority > 4 AND color = 'red'", True),
    ("apache §2.2 JMS selector, the registry's jms- spelling",
     "apache.org:jms-selector-filter:string", "JMSPriority = 7", True),
    ("apache §2.2 JMS selector, numeric descriptor", 0x0000468C00000004, "JMSPriority < 4", False),
    ("apache §2.2 JMSPriority means nothing special to amqp:sql-filter", SQL, "JMSPriority > 4",
     None),
]


@pytest.mark.parametrize(("descriptor", "text", "expected"),
                         [pytest.param(d, t, e, id=i) for i, d, t, e in CASES])
def test_sql_filters(descriptor: Any, text: str, expected: bool | None) -> None:
    assert evaluate(described(descriptor, text), VIEW) is expected


def test_syntax_errors_carry_the_position_and_a_caret() -> None:
    with pytest.raises(FilterError) as caught:
        decode_filter(described(SQL, "color = = 'red'"))
    error = caught.value
    assert error.position is not None and error.position.column == 9
    assert "^" in error.render()
    assert not error.limit


def test_errors_nested_in_groups_keep_the_position() -> None:
    with pytest.raises(FilterError) as caught:
        decode_filter(described("amqp:any-filter", [described(SQL, "a = ")]))
    assert caught.value.reason.startswith("amqp:any-filter member 1: ")
    assert caught.value.position is not None


def test_sql_length_limit_is_a_masked_limit_error() -> None:
    with pytest.raises(FilterError) as caught:
        decode_filter(described(SQL, "a = 1 OR b = 2"), Limits(max_sql_length=5))
    assert caught.value.limit
    assert "a = 1" not in caught.value.client_text()


def test_null_reason_names_the_absent_fields_when_explaining() -> None:
    ctx = EvaluationContext(explain=True)
    assert evaluate(described(SQL, "size > 3 AND p.subject = 'x' AND h.priority > 1"), VIEW,
                    ctx) is None
    assert ctx.reason is not None
    assert "application-properties.size" in ctx.reason
    assert "properties.subject" in ctx.reason
    assert "header.priority" not in ctx.reason  # present (and it has a default anyway)


def test_null_reason_is_cheap_when_not_explaining() -> None:
    ctx = EvaluationContext()
    assert evaluate(described(SQL, "size > 3"), VIEW, ctx) is None
    assert ctx.reason == "amqp:sql-filter evaluated to NULL"


def test_normalised_sql_is_printed_back_by_the_engine() -> None:
    built = decode_filter(described(0x120, "color='red'   and   h.priority>4"))
    normalised = built.normalised()
    assert str(normalised.descriptor) == SQL
    assert normalised.value != "color='red'   and   h.priority>4"
    again = decode_filter(described(SQL, normalised.value))
    assert again.evaluate(VIEW, EvaluationContext()) is True
    assert built.described().value == "color='red'   and   h.priority>4"  # echo is verbatim


def test_a_signaling_nan_decimal_is_nan_to_a_jms_selector_not_an_error() -> None:
    """apache-filters §2.2 maps decimals to JMS doubles; a signaling NaN is NaN there (Python's
    float() refuses one), so it equals nothing and no evaluation error is counted."""
    from decimal import Decimal

    from filtex_proton.amqp.view import DictMessageView
    from filtex_proton.filters.base import EvaluationContext
    from filtex_proton.filterset import decode_filter_set

    filter_set = decode_filter_set({symbol("f"): Described(
        symbol("apache.org:selector-filter:string"), "a = 1")})
    view = DictMessageView(application_properties={"a": Decimal("sNaN")})
    assert filter_set.evaluate(view, EvaluationContext()).result is False
    assert filter_set.stats.errors == 0
