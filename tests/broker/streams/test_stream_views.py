"""A stream as operators see it, on a running broker: the console's JSON (docs/CONSOLE.md), the
Prometheus metrics (docs/BROKER.md, "Metrics") and the archive (``--archive-node``).

The stream holds offsets 0-9; one consumer has read four of them and waits with no credit, so
its position is 4 and its lag 6: the numbers are checked exactly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from proton.utils import BlockingConnection

from ..archive.archive_support import stop
from ..broker_clients import BrokerFactory, RunningBroker, connect
from .stream_clients import consumer, offset_spec, publish, received, stream_broker, stream_of


def _four_read(running: RunningBroker) -> BlockingConnection:
    """Offsets 0-9 in ``events.v``; a consumer ``reader`` from ``first`` that took 0-3."""
    connection = connect(running.url)
    publish(connection, "events.v", range(10))
    _receiver, handler = consumer(connection, "events.v", credit=4, name="reader",
                                 o=offset_spec("first"))
    assert [offset for _, offset in received(connection, handler, 4)] == [0, 1, 2, 3]
    connection.wait(lambda: stream_of(running, "events.v").delivered == 4, timeout=10)
    return connection  # kept open: the consumer stays attached


def test_the_console_shows_offsets_segments_and_each_consumers_position(
        broker_factory: BrokerFactory) -> None:
    pytest.importorskip("aiohttp")
    from ..console.console_clients import api, node_of

    running = stream_broker(broker_factory, console="127.0.0.1:0")
    kept = _four_read(running)
    node = node_of(api(running, "/api/overview"), "events.v")
    assert (node["kind"], node["depth"]) == ("stream", 10)
    assert node["stream"] == {"first_offset": 0, "last_offset": 9, "next_offset": 10,
                              "segments": 1, "segments_dropped": 0, "skipped": 0}
    assert node["bytes"] == stream_of(running, "events.v").log.size > 0
    (link,) = node["links"]
    assert (link["name"], link["position"], link["lag"], link["sent"]) == ("reader", 4, 6, 4)
    peeked = api(running, "/api/messages?node=events.v&limit=3")
    assert [m["position"] for m in peeked["messages"]] == [7, 8, 9]
    kept.close()


def test_the_metrics_have_each_streams_figures_and_each_consumers_lag(
        broker_factory: BrokerFactory) -> None:
    pytest.importorskip("prometheus_client")
    from ..metrics_clients import scrape, value

    running = stream_broker(broker_factory, metrics="127.0.0.1:0")
    kept = _four_read(running)
    samples = scrape(running)
    figures = {name: value(samples, name, node="events.v") for name in (
        "filtex_stream_first_offset", "filtex_stream_next_offset", "filtex_stream_segments",
        "filtex_stream_segments_dropped_total", "filtex_stream_messages_skipped_total")}
    assert figures == {"filtex_stream_first_offset": 0, "filtex_stream_next_offset": 10,
                       "filtex_stream_segments": 1, "filtex_stream_segments_dropped_total": 0,
                       "filtex_stream_messages_skipped_total": 0}
    assert value(samples, "filtex_stream_bytes", node="events.v") == stream_of(
        running, "events.v").log.size
    assert value(samples, "filtex_stream_consumer_lag", node="events.v", link="reader") == 6
    assert value(samples, "filtex_node_depth", kind="stream", node="events.v") == 10
    kept.close()


def test_archive_node_archives_a_streams_messages_once(
        broker_factory: BrokerFactory, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from filtex_proton.archive import read_archive_table

    running = stream_broker(broker_factory, archive=str(tmp_path),
                            archive_nodes=("events.archived",))
    _four_read(running).close()  # events.v is a stream too, not archived
    connection = connect(running.url)
    publish(connection, "events.archived", range(5))
    connection.close()
    stop(running)
    table = read_archive_table(tmp_path, ["address"])
    assert table.column("address").to_pylist() == ["events.archived"] * 5
