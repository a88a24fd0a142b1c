"""What a message in a stream costs, against what the memory budget charges for it.

tracemalloc counts every Python allocation of publishing a message as received (its bytes
included), through the door check and into the stream's segment and block summary; the budget's
model (``PER_RECORD`` + ``bytes_cost``) must stay within a margin of it, as the queue's does
(tests/broker/nodes/test_memory.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from proton import Message

from filtex_broker.nodes.budget import MemoryBudget
from filtex_broker.nodes.node import NodeLimits
from filtex_broker.streams.node import Stream

from ..traced import traced_per_message


@pytest.mark.parametrize(("body", "properties"), [
    (None, {}), ("x" * 60, {"n": 1, "color": "red"}), (b"y" * 1000, {"n": 1}),
    (b"z" * 10_000, {"region": "eu", "n": 1}),
], ids=["bare", "150B", "1KiB", "10KiB"])
def test_cost_model_against_tracemalloc(body: Any, properties: dict[str, Any]) -> None:
    encoded = Message(body=body, properties=properties or None, durable=True,
                      address="s", id=7).encode()
    count = 10_000
    budget = MemoryBudget()
    stream = Stream("s", NodeLimits(1 << 30, 1 << 40), budget, max_bytes=1 << 40)
    measured = traced_per_message(stream.publish, [encoded], count)
    accounted = budget.accounted / count
    print(f"{len(encoded)} bytes: measured {measured:.0f}, accounted {accounted:.0f}")
    assert 0.85 * measured <= accounted <= 1.3 * measured
