"""Spec §4.2/§4.3 property filters: one per section, matching and definitional errors."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from proton import symbol, timestamp, ubyte, uint, ulong

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import EvaluationContext
from filtex_proton.limits import Limits

from .support import BrokenView, described, evaluate

HEADER = "amqp:header-filter"
DELIVERY = "amqp:delivery-annotations-filter"
MESSAGE = "amqp:message-annotations-filter"
PROPERTIES = "amqp:properties-filter"
APP = "amqp:application-properties-filter"
FOOTER = "amqp:footer-filter"

U = uuid.UUID("9f0c8a4e-5f4b-4a57-8b7e-2d5c6f1d2e3a")

MESSAGE_VIEW = DictMessageView(
    header={"durable": True, "priority": ubyte(7), "delivery-count": uint(2)},
    delivery_annotations={symbol("x-opt-trace"): "on"},
    message_annotations={symbol("x-opt-jms-type"): "order", ulong(7): "seven"},
    properties={"message-id": ulong(42), "subject": "orders.eu", "user-id": b"bob",
                "content-type": symbol("application/json"), "creation-time": timestamp(1000),
                "correlation-id": U},
    application_properties={"region": "eu-west", "amount": 12, "flag": None},
    footer={symbol("checksum"): uint(1234)},
)
EMPTY = DictMessageView()

CASES: list[tuple[str, str, dict[Any, Any], DictMessageView, bool]] = [
    # (id, descriptor, reference map, message, result)
    ("§4 an empty property filter matches every message", APP, {}, EMPTY, True),
    ("§4 entries are a logical AND: all match", APP, {"region": "eu-west", "amount": 12},
     MESSAGE_VIEW, True),
    ("§4 entries are a logical AND: one differs", APP, {"region": "eu-west", "amount": 13},
     MESSAGE_VIEW, False),
    ("§4.2.1 header: a present field matches", HEADER, {"priority": ubyte(7)}, MESSAGE_VIEW,
     True),
    ("§4.2.1 header: integer types within range match (long 7 vs ubyte 7)", HEADER,
     {"priority": 7}, MESSAGE_VIEW, True),
    ("§4.2.1 header: a present field differs", HEADER, {"durable": False}, MESSAGE_VIEW, False),
    ("§4.2.1 header: absent priority matches its default 4", HEADER, {"priority": ubyte(4)},
     EMPTY, True),
    ("§4.2.1 header: absent priority does not match 5", HEADER, {"priority": ubyte(5)}, EMPTY,
     False),
    ("§4.2.1 header: absent durable matches false", HEADER, {"durable": False}, EMPTY, True),
    ("§4.2.1 header: absent first-acquirer matches false", HEADER, {"first-acquirer": False},
     DictMessageView(header={}), True),
    ("§4.2.1 header: absent delivery-count matches 0", HEADER, {"delivery-count": uint(0)},
     DictMessageView(header={"durable": True}), True),
    ("§4.2.1 header: null field matches its default", HEADER, {"priority": 4},
     DictMessageView(header={"priority": None}), True),
    ("§4.2.1 header: ttl has no default, absent does not match", HEADER, {"ttl": uint(0)},
     EMPTY, False),
    ("§4.2.1 header: NULL reference matches an absent ttl", HEADER, {"ttl": None}, EMPTY, True),
    ("§4.2.2 delivery-annotations: symbol key, string reference key", DELIVERY,
     {"x-opt-trace": "on"}, MESSAGE_VIEW, True),
    ("§4.2.2 delivery-annotations: symbol reference key", DELIVERY,
     {symbol("x-opt-trace"): "off"}, MESSAGE_VIEW, False),
    ("§4.2.3 message-annotations: symbol key", MESSAGE, {symbol("x-opt-jms-type"): "order"},
     MESSAGE_VIEW, True),
    ("§4.2.3 message-annotations: ulong key", MESSAGE, {ulong(7): "seven"}, MESSAGE_VIEW, True),
    ("§4.2.3 message-annotations: absent key is NULL, does not match", MESSAGE,
     {"x-opt-none": "x"}, MESSAGE_VIEW, False),
    ("§4.2.3 message-annotations: section absent", MESSAGE, {"x-opt-jms-type": "order"}, EMPTY,
     False),
    ("§4.2.4 properties: subject prefix modifier", PROPERTIES, {"subject": "&p:orders."},
     MESSAGE_VIEW, True),
    ("§4.2.4 properties: subject suffix modifier", PROPERTIES, {"subject": "&s:.us"},
     MESSAGE_VIEW, False),
    ("§4.2.4 properties: absent field has no default: NULL, no match", PROPERTIES,
     {"reply-to": "x"}, MESSAGE_VIEW, False),
    ("§4.2.4 properties: ulong message-id, long reference", PROPERTIES, {"message-id": 42},
     MESSAGE_VIEW, True),
    ("§4.2.4 properties: uuid correlation-id", PROPERTIES, {"correlation-id": U}, MESSAGE_VIEW,
     True),
    ("§4.2.4 properties: binary user-id", PROPERTIES, {"user-id": b"bob"}, MESSAGE_VIEW, True),
    ("§4.2.4 properties: symbol content-type, string reference", PROPERTIES,
     {"content-type": "application/json"}, MESSAGE_VIEW, True),
    ("§4.2.4 properties: content-type prefix", PROPERTIES, {"content-type": "&p:application/"},
     MESSAGE_VIEW, True),
    ("§4.2.4 properties: timestamp creation-time", PROPERTIES,
     {"creation-time": timestamp(1000)}, MESSAGE_VIEW, True),
    ("§4.2.4 properties: symbol field name", PROPERTIES, {symbol("subject"): "orders.eu"},
     MESSAGE_VIEW, True),
    ("§4.2.5 application-properties: present null value matches NULL reference", APP,
     {"flag": None}, MESSAGE_VIEW, True),
    ("§4.2.5 application-properties: present null value does not match a value", APP,
     {"flag": False}, MESSAGE_VIEW, False),
    ("§4.2.5 application-properties: symbol reference key", APP, {symbol("region"): "eu-west"},
     MESSAGE_VIEW, True),
    ("§4.3 footer: symbol key, integer types", FOOTER, {"checksum": 1234}, MESSAGE_VIEW, True),
    ("§4.3 footer: section absent", FOOTER, {"checksum": 1234}, EMPTY, False),
]


@pytest.mark.parametrize(("descriptor", "reference", "message", "expected"),
                         [pytest.param(d, r, m, e, id=i) for i, d, r, m, e in CASES])
def test_property_filter(descriptor: str, reference: dict[Any, Any], message: DictMessageView,
                         expected: bool) -> None:
    assert evaluate(described(descriptor, reference), message) is expected


ERRORS: list[tuple[str, str, Any, str]] = [
    # (id, descriptor, described value, error text)
    ("§4 a property filter is a map, not a list", APP, [["a", 1]], "needs a map, not a list"),
    ("§4 a property filter is a map, not a string", HEADER, "priority", "needs a map"),
    ("§4 header: unknown field", HEADER, {"prio": 1}, "unknown header field 'prio'"),
    ("§4 properties: unknown field, with a suggestion", PROPERTIES, {"reply_to": "x"},
     "did you mean 'reply-to'"),
    ("§4 header: key must be text", HEADER, {1: 1}, "keys are field names"),
    ("§4 header: priority beyond ubyte", HEADER, {"priority": 256}, "priority' must be an integer"),
    ("§4 header: priority as a string", HEADER, {"priority": "4"}, "must be an integer"),
    ("§4 header: durable as an integer", HEADER, {"durable": 1}, "must be a boolean"),
    ("§4 header: ttl negative", HEADER, {"ttl": -1}, "from 0 to 4294967295"),
    ("§4 properties: creation-time as a long", PROPERTIES, {"creation-time": 5},
     "must be a timestamp"),
    ("§4 properties: user-id as a string", PROPERTIES, {"user-id": "bob"}, "must be binary"),
    ("§4 properties: to as a number", PROPERTIES, {"to": 5}, "must be a string or symbol"),
    ("§4 properties: message-id as a double", PROPERTIES, {"message-id": 1.5},
     "must be a message id"),
    ("§4 properties: group-sequence negative", PROPERTIES, {"group-sequence": -1},
     "AMQP uint"),
    ("§4 application-properties: key must be a string", APP, {5: "x"}, "keys are strings"),
    ("§4 message-annotations: a long key", MESSAGE, {5: "x"}, "symbols or ulongs"),
    ("§4 delivery-annotations: a boolean key", DELIVERY, {True: "x"}, "symbols or ulongs"),
    ("§4 footer: a binary key", FOOTER, {b"k": "x"}, "symbols or ulongs"),
    ("§4.1.1 unknown modifier in a property filter", APP, {"a": "&z:x"}, "unknown modifier"),
    ("§4.1.1 unknown modifier nested in a list", MESSAGE, {"a": ["&z:x"]}, "unknown modifier"),
]


@pytest.mark.parametrize(("descriptor", "value", "text"),
                         [pytest.param(d, v, t, id=i) for i, d, v, t in ERRORS])
def test_definitional_errors(descriptor: str, value: Any, text: str) -> None:
    with pytest.raises(FilterError, match=text) as caught:
        evaluate(described(descriptor, value))
    assert not caught.value.limit


def test_null_reference_is_valid_for_every_header_and_properties_field() -> None:
    from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS

    assert evaluate(described(HEADER, {name: None for name, _ in HEADER_FIELDS})) is True
    assert evaluate(described(PROPERTIES, {name: None for name, _ in PROPERTIES_FIELDS})) is True


def test_property_entries_limit_counts_nested_entries() -> None:
    limits = Limits(max_property_entries=4)
    assert evaluate(described(APP, {"a": [1, 2, 3]}), limits=limits) is False  # 4 entries: ok
    with pytest.raises(FilterError, match="max_property_entries") as caught:
        evaluate(described(APP, {"a": [1, 2, 3], "b": 1}), limits=limits)
    assert caught.value.limit


def test_property_filters_answer_true_or_false_never_null() -> None:
    for descriptor in (HEADER, PROPERTIES, APP, MESSAGE, DELIVERY, FOOTER):
        assert evaluate(described(descriptor, {}), EMPTY) is True
    assert evaluate(described(APP, {"a": 1}), EMPTY) is False


def test_a_failing_view_makes_the_filter_null_not_an_exception() -> None:
    ctx = EvaluationContext()
    assert evaluate(described(APP, {"a": 1}), BrokenView(), ctx) is None  # type: ignore[arg-type]
    assert ctx.error
    assert ctx.reason is not None and "corrupt section" in ctx.reason


def test_echo_keeps_the_value_as_received() -> None:
    from filtex_proton.filters.registry import decode_filter

    value = {"priority": 7, "ttl": None}
    built = decode_filter(described(0x170, value))
    assert built.described().descriptor == 0x170
    assert built.described().value is value
    assert str(built.normalised().descriptor) == HEADER
