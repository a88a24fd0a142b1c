"""The registry: every filter type under its symbolic and numeric descriptor."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Described, int32, symbol, ubyte, uint, ulong

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import EvaluationContext
from filtex_proton.filters.registry import (
    ALL_CAPABILITIES,
    FILTER_TYPES,
    decode_filter,
    display_descriptor,
    lookup,
)
from filtex_proton.filterset import decode_filter_set

TRUE = Described(symbol("amqp:true-filter"), True)
VIEW = DictMessageView(
    header={"priority": ubyte(7)},
    delivery_annotations={symbol("d"): 1},
    message_annotations={symbol("m"): 1},
    properties={"subject": "a.b"},
    application_properties={"k": "v"},
    footer={symbol("f"): 1},
)

#: A valid value for every type, and its result against VIEW (with origin c1, consumer c2).
SAMPLES: dict[str, tuple[Any, bool]] = {
    "amqp:all-filter": ([TRUE], True),
    "amqp:any-filter": ([TRUE], True),
    "amqp:not-filter": ([TRUE], False),
    "amqp:true-filter": (True, True),
    "amqp:false-filter": (True, False),
    "amqp:sql-filter": ("k = 'v'", True),
    "amqp:header-filter": ({"priority": 7}, True),
    "amqp:delivery-annotations-filter": ({"d": 1}, True),
    "amqp:message-annotations-filter": ({"m": 2}, False),
    "amqp:properties-filter": ({"subject": "a.b"}, True),
    "amqp:application-properties-filter": ({"k": "v"}, True),
    "amqp:footer-filter": ({"f": 1}, True),
    "apache.org:legacy-amqp-direct-binding:string": ("a.b", True),
    "apache.org:legacy-amqp-topic-binding:string": ("a.*", True),
    "apache.org:legacy-amqp-headers-binding:map": ({"k": "w"}, False),
    "apache.org:no-local-filter:list": ([], True),
    "apache.org:selector-filter:string": ("k = 'v'", True),
    "apache.org:or-filter:list": ([TRUE], True),
    "apache.org:and-filter:list": ([TRUE], True),
    "apache.org:not-filter:list": ([TRUE], False),
    "rabbitmq:stream-filter": ("x", False),  # VIEW has no x-stream-filter-value
}

CODES = {
    "amqp:all-filter": 0x100, "amqp:any-filter": 0x101, "amqp:not-filter": 0x102,
    "amqp:true-filter": 0x110, "amqp:false-filter": 0x111, "amqp:sql-filter": 0x120,
    "amqp:header-filter": 0x170, "amqp:delivery-annotations-filter": 0x171,
    "amqp:message-annotations-filter": 0x172, "amqp:properties-filter": 0x173,
    "amqp:application-properties-filter": 0x174, "amqp:footer-filter": 0x178,
    "apache.org:legacy-amqp-direct-binding:string": 0x0000468C00000000,
    "apache.org:legacy-amqp-topic-binding:string": 0x0000468C00000001,
    "apache.org:legacy-amqp-headers-binding:map": 0x0000468C00000002,
    "apache.org:no-local-filter:list": 0x0000468C00000003,
    "apache.org:selector-filter:string": 0x0000468C00000004,
    "apache.org:or-filter:list": 0x0000468C00000005,
    "apache.org:and-filter:list": 0x0000468C00000006,
    "apache.org:not-filter:list": 0x0000468C00000007,
    "rabbitmq:stream-filter": None,  # symbolic only, as RabbitMQ documents it
}


def test_the_table_holds_exactly_the_specified_types_and_codes() -> None:
    assert {t.name: t.code for t in FILTER_TYPES} == CODES
    assert set(SAMPLES) == set(CODES)


@pytest.mark.parametrize("name", sorted(CODES))
@pytest.mark.parametrize("form", ["symbol", "ulong"])
def test_every_type_decodes_under_every_descriptor_form(name: str, form: str) -> None:
    if name.endswith(("sql-filter", "selector-filter:string")):
        pytest.importorskip("filtex_proton.sql")
    code = CODES[name]
    if form == "ulong" and code is None:
        pytest.skip("named by symbol only")
    descriptor = symbol(name) if form == "symbol" else ulong(code)
    value, expected = SAMPLES[name]
    built = decode_filter(Described(descriptor, value))
    assert built.type_name == name
    assert built.evaluate(VIEW, EvaluationContext(origin="c1", consumer="c2")) is expected
    assert built.described().descriptor is descriptor  # echoed as received


@pytest.mark.parametrize("name", sorted(CODES))
def test_a_string_descriptor_is_refused_not_read_as_a_symbol(name: str) -> None:
    """AMQP 1.0 part 1 §1.5: descriptors other than symbol and ulong are reserved. (It
    used to be decoded as the symbol it spells; the "str" form above pinned that.)"""
    value, _expected = SAMPLES[name]
    with pytest.raises(FilterError, match=r"is a string; AMQP 1.0 part 1 §1.5"):
        decode_filter(Described(name, value))
    with pytest.raises(FilterError, match="is a string") as raised:
        decode_filter_set({"f": Described(name, value)})
    assert raised.value.key == "f"  # the client is told which filter


@pytest.mark.parametrize("name", sorted(CODES))
@pytest.mark.parametrize(("form", "kind"), [(int, "long"), (uint, "uint"), (int32, "int"),
                                            (ubyte, "ubyte")])
def test_a_numeric_descriptor_other_than_ulong_is_refused(name: str, form: Any, kind: str) -> None:
    """AMQP 1.0 part 1 §1.5: a numeric descriptor is a ulong. A Python client writing
    ``Described(0x120, ...)`` sends a long; it is told to send a ulong, not silently obeyed."""
    value, _expected = SAMPLES[name]
    code = CODES[name]
    if code is None:
        pytest.skip("named by symbol only")
    if form is not int:
        code &= 0x7F  # the same refusal for a code the narrow type can hold
    with pytest.raises(FilterError, match=rf"is a {kind}; AMQP 1.0 part 1 §1.5.*ulong\("):
        decode_filter(Described(form(code), value))


@pytest.mark.parametrize(("alias", "name"), [
    ("apache.org:jms-selector-filter:string", "apache.org:selector-filter:string"),
    ("apache.org:jms-no-local-filter:list", "apache.org:no-local-filter:list"),
])
def test_aliases(alias: str, name: str) -> None:
    found = lookup(symbol(alias))
    assert found is not None and found.name == name


@pytest.mark.parametrize("descriptor", [
    symbol("amqp:nope"), symbol("AMQP:SQL-FILTER"), ulong(0x121), ulong(0x0000468C00000008),
])
def test_unknown_descriptors(descriptor: Any) -> None:
    assert lookup(descriptor) is None
    with pytest.raises(FilterError, match="unknown filter type"):
        decode_filter(Described(descriptor, True))


@pytest.mark.parametrize("descriptor", [True, 1.5, None, [0x120], b"amqp:sql-filter"])
def test_descriptors_of_reserved_types(descriptor: Any) -> None:
    """AMQP 1.0 part 1 §1.5: neither a symbol nor a ulong, so not a filter type at all."""
    assert lookup(descriptor) is None
    with pytest.raises(FilterError, match=r"AMQP 1\.0 part 1 §1\.5"):
        decode_filter(Described(descriptor, True))


def test_display_descriptor() -> None:
    assert display_descriptor(symbol("amqp:sql-filter")) == "amqp:sql-filter"
    assert display_descriptor(ulong(0x120)) == "0x00000000:0x00000120 (amqp:sql-filter)"
    assert display_descriptor(ulong(0x0000468C00000004)) == \
        "0x0000468c:0x00000004 (apache.org:selector-filter:string)"
    assert display_descriptor(ulong(0x999)) == "0x00000000:0x00000999"


def test_capabilities_offer_every_group_of_types() -> None:
    for capability in ("AMQP_FILTEX_SQL_V1_0", "AMQP_FILTEX_PROP_V1_0", "AMQP_FILTEX_GROUP_V1_0",
                       "AMQP_FILTEX_ALL_V1_0", "APACHE.ORG:JMS_FILTERS", "APACHE.ORG:SELECTOR",
                       "APACHE.ORG:NO_LOCAL", "APACHE.ORG:LOGIC_FILTERS",
                       "APACHE.ORG:LEGACY_AMQP_EXCHANGE_FILTERS"):
        assert capability in ALL_CAPABILITIES
    assert len(set(ALL_CAPABILITIES)) == len(ALL_CAPABILITIES)


@pytest.mark.parametrize(("value", "text"), [
    (True, "expected a described filter, not a boolean"),
    ("amqp:true-filter", "expected a described filter, not a string"),
    ({1, 2}, "a Python set is not an AMQP value"),
    (Described(symbol("amqp:header-filter"), {"priority": ubyte(300)}), "out of the range"),
    (Described(symbol("amqp:true-filter"), (True,)), "a Python tuple is not an AMQP value"),
])
def test_malformed_values(value: Any, text: str) -> None:
    with pytest.raises(FilterError, match=text):
        decode_filter(value)
