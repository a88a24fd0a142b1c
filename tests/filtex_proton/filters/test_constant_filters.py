"""Spec §5 constant filters."""

from __future__ import annotations

from typing import Any

import pytest

from filtex_proton.errors import FilterError

from .support import described, evaluate

CASES: list[tuple[str, str | int, Any, bool]] = [
    ("§5.1 true-filter is TRUE", "amqp:true-filter", True, True),
    ("§5.1 true-filter, numeric descriptor", 0x110, True, True),
    ("§5.1 true-filter carrying false is still TRUE (the descriptor decides)",
     "amqp:true-filter", False, True),
    ("§5.2 false-filter is FALSE", "amqp:false-filter", True, False),
    ("§5.2 false-filter, numeric descriptor", 0x111, False, False),
]


@pytest.mark.parametrize(("descriptor", "value", "expected"),
                         [pytest.param(d, v, e, id=i) for i, d, v, e in CASES])
def test_constant(descriptor: str | int, value: Any, expected: bool) -> None:
    assert evaluate(described(descriptor, value)) is expected


@pytest.mark.parametrize("value", ["true", 1, None, [], {}],
                         ids=lambda v: f"§5 the value is a boolean, not {v!r}")
def test_constant_needs_a_boolean(value: Any) -> None:
    for descriptor in ("amqp:true-filter", "amqp:false-filter"):
        with pytest.raises(FilterError, match="needs a boolean"):
            evaluate(described(descriptor, value))
