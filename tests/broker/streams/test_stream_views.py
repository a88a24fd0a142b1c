"""A stream as operators see it, on a running broker: the console's JSON (docs/CONSOLE.md), the
Prometheus metrics (docs/BROKER.md, "Metrics") and the archive (``--archive-node``).

Most tests read a stream holding offsets 0-9 whose consumer has read four of them and waits with
no credit (``four_read``), so its position is 4 and its lag 6: the numbers are checked exactly.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from ..archive.archive_support import order, send_all, stop
from ..broker_clients import BrokerFactory, RunningBroker, connect, wait_for
from .stream_clients import (
    consumer,
    four_read,
    offset_spec,
    publish,
    read_all,
    received,
    stream_broker,
    stream_of,
)

# -- the console -------------------------------------------------------------------------


def test_the_console_shows_offsets_segments_and_each_consumers_position_as_it_reads(
        broker_factory: BrokerFactory) -> None:
    pytest.importorskip("aiohttp")
    from ..console.console_clients import api, node_of

    running = stream_broker(broker_factory, console="127.0.0.1:0")
    kept, reader, got = four_read(running)

    def reader_link() -> tuple[int, int, int, int]:
        """The consumer's position, lag, credit and messages sent, as the console has them."""
        (link,) = node_of(api(running, "/api/overview"), "events.v")["links"]
        return link["position"], link["lag"], link["credit"], link["sent"]

    overview = api(running, "/api/overview")
    node = node_of(overview, "events.v")
    assert (node["kind"], node["depth"]) == ("stream", 10)
    assert node["stream"] == {"first_offset": 0, "last_offset": 9, "next_offset": 10,
                              "segments": 1, "segments_dropped": 0, "skipped": 0}
    assert node["bytes"] == stream_of(running, "events.v").log.size > 0
    (link,) = node["links"]
    assert (link["name"], link["position"], link["lag"], link["sent"]) == ("reader", 4, 6, 4)
    peeked = api(running, "/api/messages?node=events.v&limit=3")
    assert [m["position"] for m in peeked["messages"]] == [7, 8, 9]
    tested = api(running, "/api/test", data={"text": "region = 'EU'", "kind": "sql",
                                              "node": "events.v", "limit": 4})
    assert [(m["position"], m["result"]) for m in tested["messages"]] == [
        (6, "FALSE"), (7, "TRUE"), (8, "FALSE"), (9, "TRUE")]
    assert reader_link() == (4, 6, 0, 4), "peeked and tested: the reader has not moved"

    publish(kept, "events.v", range(10, 13))
    assert reader_link() == (4, 9, 0, 4)
    reader.flow(20)
    assert [offset for _, offset in received(kept, got, 13)] == list(range(13))
    wait_for(lambda: reader_link() == (13, 0, 11, 13), "the reader at the end, 11 credits left")
    kept.close()


def test_the_console_shows_an_empty_stream_and_the_segments_retention_dropped(
        broker_factory: BrokerFactory) -> None:
    """An empty stream has no first or last offset; a stream kept to 128 KiB (in segments of
    64 KiB) that took 40 messages of 10 KB has dropped its oldest segments, and a consumer
    still at offset 0 is shown at the oldest offset held, the one it reads next. A queue has
    none of a stream's figures."""
    pytest.importorskip("aiohttp")
    from ..console.console_clients import api, node_of

    running = stream_broker(broker_factory, console="127.0.0.1:0", stream_max_bytes=128 * 1024)
    connection = connect(running.url)
    consumer(connection, "events.empty", credit=5, name="waiting")
    _, stuck = consumer(connection, "events.big", name="stuck", o=offset_spec("first"))
    connection.create_receiver("plain", name="plain-reader", credit=0)  # a queue: no figures
    publish(connection, "events.big", range(40), padding=10_000)  # after both attaches: the
    # broker has their attaches and the waiting consumer's flow, which came before
    overview = api(running, "/api/overview")

    empty = node_of(overview, "events.empty")
    assert (empty["kind"], empty["depth"], empty["bytes"], empty["in"]) == ("stream", 0, 0, 0)
    assert empty["stream"] == {"first_offset": None, "last_offset": None, "next_offset": 0,
                               "segments": 0, "segments_dropped": 0, "skipped": 0}
    (waiting,) = empty["links"]
    assert (waiting["name"], waiting["position"], waiting["lag"], waiting["credit"]) == (
        "waiting", 0, 0, 5)

    log = stream_of(running, "events.big").log
    first, held = log.first_offset, len(log.segments)
    assert first > 0 and log.dropped_segments > 0 and log.next_offset == 40
    big = node_of(overview, "events.big")
    assert big["stream"] == {"first_offset": first, "last_offset": 39, "next_offset": 40,
                             "segments": held, "segments_dropped": log.dropped_segments,
                             "skipped": 0}
    assert (big["depth"], big["bytes"], big["in"]) == (40 - first, log.size, 40)
    (link,) = big["links"]
    assert (link["name"], link["position"], link["lag"], link["sent"]) == (
        "stuck", first, 40 - first, 0)
    assert stuck.received == []
    queue = node_of(overview, "plain")
    assert (queue["kind"], queue["stream"]) == ("queue", None)
    (link,) = queue["links"]
    assert (link["name"], link["position"], link["lag"]) == ("plain-reader", None, None)
    connection.close()


# -- the metrics -------------------------------------------------------------------------


def _origin(running: RunningBroker, container: str) -> str:
    """The number the broker gave the connection of the client ``container`` (the one its log
    lines and the console show)."""
    (origin,) = (client.origin for client in list(running.broker.clients.values())
                 if client.container == container)
    return str(origin)


def _consumer_series(running: RunningBroker) -> dict[tuple[str, str, str, str], float]:
    """Each stream consumer's series on ``/metrics``: (family, node, link, connection) -> value
    (a series with other labels would not unpack)."""
    from ..metrics_clients import scrape

    series = {}
    for (name, labels), sample in scrape(running).items():
        if name.startswith("filtex_stream_consumer_"):
            (_, connection), (_, link), (_, node) = labels  # sorted by label name
            series[(name.removeprefix("filtex_stream_consumer_"), node, link, connection)] = sample
    return series


def test_the_metrics_have_each_streams_figures_and_each_consumers_position_and_lag(
        broker_factory: BrokerFactory) -> None:
    """Two clients read the stream under the same link name: their series differ by their
    connection. A consumer's series go when its link detaches, or its connection drops."""
    pytest.importorskip("prometheus_client")
    from ..metrics_clients import scrape, value

    running = stream_broker(broker_factory, metrics="127.0.0.1:0")
    kept, reader, _ = four_read(running, container_id="first-app")
    other = connect(running.url, container_id="second-app")
    consumer(other, "events.v", name="reader", o=offset_spec("first"))  # no credit: at 0
    wait_for(lambda: len(stream_of(running, "events.v").readers) == 2, "both readers")
    samples = scrape(running)
    figures = {name: value(samples, name, node="events.v") for name in (
        "filtex_stream_first_offset", "filtex_stream_next_offset", "filtex_stream_segments",
        "filtex_stream_segments_dropped_total", "filtex_stream_messages_skipped_total")}
    assert figures == {"filtex_stream_first_offset": 0, "filtex_stream_next_offset": 10,
                       "filtex_stream_segments": 1, "filtex_stream_segments_dropped_total": 0,
                       "filtex_stream_messages_skipped_total": 0}
    assert value(samples, "filtex_stream_bytes", node="events.v") == stream_of(
        running, "events.v").log.size
    assert value(samples, "filtex_node_depth", kind="stream", node="events.v") == 10
    first, second = _origin(running, "first-app"), _origin(running, "second-app")
    assert first != second
    assert _consumer_series(running) == {
        ("position", "events.v", "reader", first): 4, ("lag", "events.v", "reader", first): 6,
        ("position", "events.v", "reader", second): 0, ("lag", "events.v", "reader", second): 10}

    reader.close()
    wait_for(lambda: _consumer_series(running) == {
        ("position", "events.v", "reader", second): 0, ("lag", "events.v", "reader", second): 10},
        "the detached consumer's series gone, the other's kept")
    # Pull the plug: no detach, no close, just the TCP connection gone.
    dropped = other.conn
    assert dropped is not None and dropped.transport is not None
    dropped.transport._selectable._delegate.shutdown(socket.SHUT_RDWR)
    wait_for(lambda: _consumer_series(running) == {}, "the dropped connection's series gone")
    assert value(scrape(running), "filtex_stream_next_offset", node="events.v") == 10
    kept.close()


# -- the archive -------------------------------------------------------------------------


@pytest.mark.parametrize("durable", [False, True], ids=["in-memory", "data-dir"])
def test_archive_node_archives_each_message_appended_to_a_stream_once_on_arrival(
        broker_factory: BrokerFactory, tmp_path: Path, durable: bool) -> None:
    """From a producer on the stream and through the anonymous relay (``to`` set), with a
    consumer reading as they arrive and two more reading afterwards from offsets of their own:
    each message is archived when the broker accepts it (with ``--data-dir``: once written),
    and reading archives nothing more. ``audit``, a stream too, is not archived."""
    pytest.importorskip("pyarrow")
    from filtex_proton.archive import read_archive_table

    archive = tmp_path / "archive"
    running = stream_broker(broker_factory, archive=str(archive),
                            archive_nodes=("events.archived",),
                            data_dir=tmp_path / "data" if durable else None)
    offered = running.broker.archive
    assert offered is not None
    reading = connect(running.url)
    _, live = consumer(reading, "events.archived", credit=100, name="live")
    orders = [order(i, "EMEA") for i in range(3)]
    relayed = [order(3, "AMER", to="events.archived"), order(4, "AMER", to="audit")]
    send_all(running.url, "events.archived", orders)
    send_all(running.url, None, relayed)  # the anonymous terminus: each goes to its `to`
    send_all(running.url, "audit", [order(5, "APAC")])
    assert offered.stats.offered == 4  # on arrival, before anyone but `live` reads
    assert [offset for _, offset in received(reading, live, 4)] == [0, 1, 2, 3]
    assert [offset for _, offset in read_all(running.url, "events.archived",
                                             o=offset_spec("first"))] == [0, 1, 2, 3]
    assert [offset for _, offset in read_all(running.url, "events.archived",
                                             o=offset_spec(2))] == [2, 3]
    assert len(stream_of(running, "audit").log) == 2
    assert offered.stats.offered == 4
    reading.close()
    stop(running)
    table = read_archive_table(archive, ["address", "raw"])
    assert table.column("address").to_pylist() == ["events.archived"] * 4
    assert table.column("raw").to_pylist() == [*orders, relayed[0]]
