"""What the conformance tables share: the dialects, the truth values, a message with every
section and a field of every AMQP type, and the row helper that makes each spec section the
row's pytest id (OASIS filtex CSD01 §6; apache-filters §2.2 for the JMS selector).

Every row is evaluated by the compiled evaluator *and* by the reference interpreter
(tests/filtex_proton/sql/support.py asserts they agree), then compared with the expected
TRUE / FALSE / NULL (None) written out by hand.
"""

from __future__ import annotations

import math
import uuid
from decimal import Decimal
from typing import Any

import pytest
from proton import (
    Array,
    Data,
    Described,
    char,
    int32,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
)

from filtex_proton.amqp.view import Section
from filtex_proton.sql import AMQP_SQL, JMS_SELECTOR, ast

from ..support import evaluate

__all__ = [
    "EPOCH_2020",
    "ROW_ARGS",
    "U1",
    "U_HIGH",
    "U_LOW",
    "A",
    "F",
    "J",
    "N",
    "T",
    "app_field",
    "check",
    "message",
    "row",
    "undescribed_array",
]

A = AMQP_SQL
J = JMS_SELECTOR
T, F, N = True, False, None

EPOCH_2020 = 1577836800000  # 2020-01-01T00:00:00Z in ms
U1 = uuid.UUID("12345678-1234-5678-1234-567812345678")
U_LOW = uuid.UUID("00000000-0000-0000-0000-000000000001")
U_HIGH = uuid.UUID("ffffffff-0000-0000-0000-000000000000")


def undescribed_array(element_type: int, *elements: Any) -> Array:
    from proton import UNDESCRIBED

    return Array(UNDESCRIBED, element_type, *elements)


def message() -> dict[str, Any]:
    """A message with every section and a field of every AMQP type (fresh for each use)."""
    return {
        "header": {
            "durable": True, "priority": ubyte(7), "ttl": uint(1000),
            "first-acquirer": False, "delivery-count": uint(2),
        },
        "properties": {
            "message-id": "msg-1", "user-id": b"bob", "to": "queue://orders",
            "subject": "order.created", "reply-to": "replies", "correlation-id": U1,
            "content-type": symbol("text/plain"), "content-encoding": symbol("utf-8"),
            "absolute-expiry-time": timestamp(EPOCH_2020 + 3_600_000),
            "creation-time": timestamp(EPOCH_2020), "group-id": "g1",
            "group-sequence": uint(3), "reply-to-group-id": "rg",
        },
        "application_properties": {
            "s": "abc", "sym": symbol("abc"), "e": "", "i": 5, "neg": -5, "t": True, "f": False,
            "n": None, "d": Decimal("1.5"), "dbl": 2.5, "nan": math.nan, "inf": math.inf,
            "u": ubyte(200), "ul": ulong(2**64 - 1), "lmax": 2**63 - 1, "lmin": -(2**63),
            "c": char("a"), "id": U1, "bin": b"\x0a\x0b", "ts": timestamp(EPOCH_2020),
            "m": {"k": "v", "nul": None, "inner": {"deep": 1}, "x y": 2},
            "l": [1, None, [10, 20], {"k": "w"}],
            "arr": undescribed_array(Data.INT, int32(1), int32(2), int32(3)),
            "desc": Described(symbol("d"), [7, 8]),
            "nl": "a\nb", "astral": "\U0001d538", "pct": "100%", "under": "a_b",
            "iso": "2020-01-01T00:00:00Z", "dur": "PT1H", "date": "2020-01-01",
            "zero": 0, "one": ubyte(1), "two": 2,
        },
        "message_annotations": {
            symbol("x-opt-jms-type"): "mytype", symbol("x-opt-list"): [1, 2],
            symbol("x-opt-null"): None, symbol("x-opt-sym"): symbol("text/plain"),
        },
        "delivery_annotations": {symbol("x-opt-d"): 1},
        "footer": {symbol("x-opt-f"): "sig"},
    }


def row(
    section: str, text: str, expected: bool | None, *, dialect: Any = A,
    msg: dict[str, Any] | None = None,
) -> Any:
    """One conformance row; ``section`` is the pytest id and starts with the spec section."""
    assert section.startswith(("§", "apache")), section
    return pytest.param(text, dialect, message() if msg is None else msg, expected, id=section)


def check(text: str, dialect: Any, msg: dict[str, Any], expected: bool | None) -> None:
    assert evaluate(text, dialect, **msg) is expected


ROW_ARGS = ("text", "dialect", "msg", "expected")


def app_field(name: str, *path: Any) -> ast.Field:
    """The AST of an application-properties field, as the parser builds it."""
    return ast.Field(Section.APPLICATION_PROPERTIES, name, tuple(path))
