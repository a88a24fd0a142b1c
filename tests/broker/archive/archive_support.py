"""What the archive's tests share: a typed order message, sending a batch, stopping a
threaded broker so that its archive is flushed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proton import Delivery, symbol, ubyte, uint

from filtex_proton.amqp.message import encode_message

from ..broker_clients import (
    TIMEOUT,
    RunningBroker,
    connect,
    send_raw,
)

REPO = Path(__file__).resolve().parents[3]
LONG_ADDRESS = "archive/" + "ü" * 140 + "/end?x=1"  # > 240 bytes escaped, unsafe characters


def order(i: int, region: str, *, to: str | None = None) -> bytes:
    """A message with typed fields the archive must keep apart (uint vs long, symbol)."""
    properties: dict[str, Any] = {"subject": f"order.{i % 3}", "message-id": i}
    if to is not None:
        properties["to"] = to
    return encode_message(
        header={"priority": ubyte(i % 10), "durable": i % 2 == 0},
        properties=properties,
        message_annotations={symbol("x-opt-seq"): uint(i)},
        application_properties={"region": region, "n": i, "u": uint(i)},
        body=f"body {i}",
    )


def send_all(url: str, address: str | None, messages: list[bytes]) -> None:
    conn = connect(url)
    sender = conn.create_sender(address)
    for data in messages:
        assert send_raw(conn, sender, data).remote_state == Delivery.ACCEPTED
    conn.close()


def stop(running: RunningBroker) -> None:
    """Stop a threaded broker: its archive is flushed and closed when ``run`` returns."""
    running.broker.stop()
    running.thread.join(TIMEOUT)
    assert not running.thread.is_alive()
