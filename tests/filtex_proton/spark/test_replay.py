"""Replay ordering with a window > 1: go-back-N against a real AMQP peer (no Spark needed).

The peer is a python-qpid-proton container on a real socket (``sink.Sink``)
that releases some deliveries or drops the connection; the replayer is fed
directly, so these tests run in well under a second each.
"""

from __future__ import annotations

from typing import Any

import pytest
from proton import Delivery

from filtex_proton.amqp.message import encode_message
from filtex_proton.spark.replay import Position, Replayer

from .sink import Sink, free_port, run_sink, stop_sink

MESSAGES = [encode_message(properties={"message-id": i}, body=f"m{i}") for i in range(120)]


def source() -> list[tuple[bytes, Position]]:
    return [(data, Position(1_700_000_000_000, i, "q")) for i, data in enumerate(MESSAGES)]


def last_copies(accepted: list[bytes]) -> list[bytes]:
    """The order of the last accepted copy of each message: what the peer ends up with."""
    last = {data: position for position, data in enumerate(accepted)}
    return sorted(last, key=last.__getitem__)


def replay(policy: Any, window: int) -> tuple[Sink, Any]:
    sink = Sink(free_port(), policy)
    container, thread = run_sink(sink)
    try:
        result = Replayer(f"amqp://{sink.url}/q", source(), window=window, retries=3).run()
    finally:
        stop_sink(container, thread, sink)
    return sink, result


@pytest.mark.parametrize("window", [2, 8, 50])
def test_released_messages_keep_archive_order_with_a_wide_window(window: int) -> None:
    released = {3, 4, 40, 41, 90}

    def policy(data: bytes, seen: int) -> Any:
        return Delivery.RELEASED if seen in released else Delivery.ACCEPTED

    sink, result = replay(policy, window)
    assert result.error is None and result.accepted == len(MESSAGES)
    assert set(sink.accepted) == set(MESSAGES)  # nothing skipped
    assert last_copies(sink.accepted) == MESSAGES  # in archive order
    assert result.resent >= len(released)
    assert result.last == Position(1_700_000_000_000, len(MESSAGES) - 1, "q")


def test_a_lost_connection_goes_back_to_the_first_unsettled_message() -> None:
    def policy(data: bytes, seen: int) -> Any:
        if seen == 10:
            return None  # left unsettled: later ones are accepted past it
        if seen == 20:  # within the window: 10 is still held, 11-19 accepted
            return "drop"
        return Delivery.ACCEPTED

    sink, result = replay(policy, 16)
    assert result.error is None and result.reconnects == 1
    assert result.accepted == len(MESSAGES)
    assert last_copies(sink.accepted) == MESSAGES
