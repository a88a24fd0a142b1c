"""The archive and message lifetime (AMQP 1.0 part 3 §3.2.1 ttl, §3.2.4 absolute-expiry-time):
the archive records what was accepted, once, when it was accepted; a message that expires later,
unread, or was already expired when it arrived, is archived all the same, and its dead letter
(a copy the broker makes, not a producer's message) is not archived again."""

from __future__ import annotations

from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")

from proton import timestamp, uint  # noqa: E402

from filtex_proton.amqp.message import encode_message  # noqa: E402
from filtex_proton.archive import read_archive_table  # noqa: E402

from ..broker_clients import BrokerFactory, wait_for  # noqa: E402
from .archive_support import send_all, stop  # noqa: E402


def _message(i: int, **lifetime: object) -> bytes:
    header = {"ttl": lifetime["ttl"]} if "ttl" in lifetime else None
    properties: dict[str, object] = {"message-id": i}
    if "expires" in lifetime:
        properties["absolute-expiry-time"] = lifetime["expires"]
    return encode_message(header=header, properties=properties, body=f"body {i}")


def test_expired_messages_stay_archived_once_and_their_dead_letters_are_not_archived(
    broker_factory: BrokerFactory, tmp_path: Path,
) -> None:
    running = broker_factory(archive=str(tmp_path))
    send_all(running.url, "orders", [
        _message(1, ttl=uint(200)),  # expires unread
        _message(2, expires=timestamp(1_000)),  # expired when it arrived (1970)
        _message(3),
    ])
    registry = running.broker.registry
    wait_for(lambda: registry.expired.get("orders") == 2, "both messages to expire")
    wait_for(lambda: "DLQ" in registry.nodes and registry.nodes["DLQ"].depth() == 2,
             "their dead letters")
    stop(running)
    table = read_archive_table(tmp_path, ["address", "message_id"])
    assert table.column("address").to_pylist() == ["orders"] * 3
    assert [v["long"] for v in table.column("message_id").to_pylist()] == [1, 2, 3]
