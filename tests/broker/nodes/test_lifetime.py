"""A message's lifetime read at the door (AMQP 1.0 part 3 §3.2.1 header ttl and priority,
§3.2.4 absolute-expiry-time; Artemis's x-opt-delivery-time and x-opt-delivery-delay)."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Described, symbol, timestamp, ubyte, uint

from filtex_broker.nodes.lifetime import COMMON, Lifetime, lifetime_of
from filtex_proton.amqp import encode_message
from filtex_proton.plugin import FilterMessage

NOW = 1_800_000_000_000


def _lifetime(header: dict[str, Any] | None = None, properties: dict[str, Any] | None = None,
              **annotations: Any) -> Lifetime:
    data = encode_message(header=header, properties=properties,
                          message_annotations={symbol(k.replace("_", "-")): v
                                               for k, v in annotations.items()} or None,
                          body="x")
    return lifetime_of(FilterMessage(data), NOW)


def test_a_message_that_sets_nothing_shares_the_common_lifetime() -> None:
    assert _lifetime() is COMMON
    assert _lifetime(header={"durable": True}, x_other=1) is COMMON
    assert _lifetime(header={"priority": ubyte(4)}) is COMMON


@pytest.mark.parametrize(("header", "properties", "expires"), [
    ({"ttl": uint(500)}, None, NOW + 500),  # §3.2.1: from when this broker took it
    (None, {"absolute-expiry-time": timestamp(NOW + 900)}, NOW + 900),  # §3.2.4
    ({"ttl": uint(500)}, {"absolute-expiry-time": timestamp(NOW + 100)}, NOW + 100),  # earlier
    ({"ttl": uint(500)}, {"absolute-expiry-time": timestamp(NOW + 9000)}, NOW + 500),
    ({"ttl": uint(0)}, None, None),  # 0: no expiry, as JMS setTimeToLive(0) and Artemis
    (None, {"absolute-expiry-time": timestamp(0)}, None),
])
def test_expiry(header: Any, properties: Any, expires: int | None) -> None:
    assert _lifetime(header, properties).expires_ms == expires


@pytest.mark.parametrize(("annotations", "visible"), [
    ({"x_opt_delivery_delay": 3000}, NOW + 3000),
    ({"x_opt_delivery_time": timestamp(NOW + 7000)}, NOW + 7000),
    ({"x_opt_delivery_time": NOW + 7000}, NOW + 7000),  # a long, as some clients send it
    ({"x_opt_delivery_time": NOW + 1000, "x_opt_delivery_delay": 5000}, NOW + 5000),  # later
    ({"x_opt_delivery_time": timestamp(NOW - 1000)}, None),  # in the past: at once
    ({"x_opt_delivery_delay": -5}, None),
    ({"x_opt_delivery_delay": "3000"}, None),  # a hint it cannot read: ignored
    ({"x_opt_delivery_delay": Described(symbol("d"), 3000)}, None),
])
def test_scheduled_delivery(annotations: dict[str, Any], visible: int | None) -> None:
    assert _lifetime(**annotations).visible_ms == visible


@pytest.mark.parametrize(("priority", "expected"), [
    (ubyte(0), 0), (ubyte(9), 9), (ubyte(200), 9), (ubyte(4), 4)])
def test_priority_is_clamped_to_nine(priority: Any, expected: int) -> None:
    assert _lifetime(header={"priority": priority}).priority == expected


def test_all_three_at_once() -> None:
    assert _lifetime({"ttl": uint(60_000), "priority": ubyte(8)}, None,
                     x_opt_delivery_delay=1000) == Lifetime(NOW + 60_000, NOW + 1000, 8)
