"""Durable streams over real sockets (``--stream`` with ``--data-dir``): a restart keeps every
message and offset, a broker killed (SIGKILL) while producers send keeps everything it accepted
with its offset, retention deletes files, a reader of old segments with the cache bounded,
segment summaries still skip after a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import Described, symbol

from filtex_broker.streams import segment_file
from filtex_broker.streams.durable import CACHED_SEGMENTS, DurableStreamLog

from ..broker_clients import TIMEOUT, BrokerFactory, RunningBroker, connect
from ..fault_clients import BrokerProcess, client, first_lines, numbers
from .stream_clients import (
    consumer,
    offset_spec,
    publish,
    read_all,
    read_everything,
    restart,
    stream_broker,
    stream_of,
)
from .stream_helpers import number_of, offset_of

FIRST = offset_spec("first")


def _segments(data_dir: Path, name: str) -> list[Path]:
    return sorted((data_dir / "streams" / name).glob("*" + segment_file.SUFFIX))


def test_a_restart_keeps_the_messages_and_their_offsets(
        broker_factory: BrokerFactory, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    running = _published(broker_factory, data_dir, "events.d", range(50))
    before = read_all(running.url, "events.d", o=FIRST)
    assert before == [(n, n) for n in range(50)]
    running = restart(broker_factory, running, data_dir=data_dir, stream_max_bytes=512 * 1024)
    assert read_all(running.url, "events.d", o=FIRST) == before
    connection = connect(running.url)
    try:
        publish(connection, "events.d", [50])
    finally:
        connection.close()
    assert read_all(running.url, "events.d", o=offset_spec("last")) == [(50, 50)]
    assert len(_segments(data_dir, "events.d")) == len(stream_of(running, "events.d").log.segments)


def _published(broker_factory: BrokerFactory, data_dir: Path, address: str, numbers: range,
               **overrides: Any) -> RunningBroker:
    """A broker with streams on ``data_dir`` whose ``address`` holds ``numbers`` (4 KiB each,
    ``overrides`` the broker's settings and the messages' annotations)."""
    max_bytes = overrides.pop("stream_max_bytes", 512 * 1024)
    running = stream_broker(broker_factory, data_dir=data_dir, stream_max_bytes=max_bytes)
    connection = connect(running.url)
    try:
        publish(connection, address, numbers, padding=4096, **overrides)
    finally:
        connection.close()
    return running


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path, "--data-dir", str(tmp_path / "data"),
                            "--stream", "events.*", "--stream-max-bytes", "512KiB")
    yield process
    process.kill()


def test_a_broker_killed_mid_stream_keeps_every_accepted_message_and_offset(
        broker_process: BrokerProcess) -> None:
    url = broker_process.start()
    total = 20_000
    producer = client("produce", url, "events.k", str(total))
    connection = connect(url)
    receiver, handler = consumer(connection, "events.k", o=FIRST)
    receiver.link.flow(total)
    early = first_lines(producer, 2000)  # mid-stream: the producer has more in flight
    connection.wait(lambda: len(handler.received) >= 500, timeout=TIMEOUT,
                    msg="the reader reads as the producer sends")
    seen = [(number_of(data), offset_of(data)) for data, _ in handler.received]
    broker_process.kill()
    rest, _ = producer.communicate(timeout=TIMEOUT)
    accepted = set(numbers(early + rest.splitlines(), "A"))
    assert 2000 <= len(accepted) < total, "the broker was not killed mid-stream"

    url = broker_process.start()
    after = read_everything(url, "events.k", o=FIRST)
    offsets = [offset for _, offset in after]
    oldest = offsets[0]  # (retention may have dropped the first segments)
    assert offsets == list(range(oldest, oldest + len(after))), "gaps or duplicates in offsets"
    assert all(n == offset for n, offset in after), "one producer: offset n holds message n"
    assert len(_segments(broker_process.tmp_path / "data", "events.k")) > 1
    lost = {n for n in accepted if n >= oldest} - {n for n, _ in after}
    assert not lost, f"{len(lost)} accepted message(s) lost, e.g. {sorted(lost)[:5]}"
    assert {p for p in seen if p[1] >= oldest} <= set(after), "a reader saw an offset renumbered"
    assert "stream 'events.k': recovered" in broker_process.log()
    assert broker_process.stop() == 0


def test_retention_by_bytes_deletes_segment_files(
        broker_factory: BrokerFactory, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    running = _published(broker_factory, data_dir, "events.r", range(80),
                         stream_max_bytes=128 * 1024)
    log = stream_of(running, "events.r").log
    oldest = log.first_offset
    assert oldest > 0 and log.dropped_segments > 0
    files = _segments(data_dir, "events.r")
    assert [segment_file.first_of(path) for path in files] == [s.first for s in log.segments]
    running = restart(broker_factory, running, data_dir=data_dir, stream_max_bytes=128 * 1024)
    assert read_all(running.url, "events.r", o=FIRST) == [(n, n) for n in range(oldest, 80)]


def test_a_reader_of_old_segments_while_the_cache_is_bounded(
        broker_factory: BrokerFactory, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    running = _published(broker_factory, data_dir, "events.c", range(110))  # 8 segments
    log = stream_of(running, "events.c").log
    assert isinstance(log, DurableStreamLog)
    assert len(log.segments) > CACHED_SEGMENTS + 1 and log.first_offset == 0
    assert read_everything(running.url, "events.c", o=FIRST) == [(n, n) for n in range(110)]
    assert len(log.cache) <= CACHED_SEGMENTS
    assert log.loads > 0, "old segments were read back from disk"


def test_segment_summaries_still_skip_after_a_restart(
        broker_factory: BrokerFactory, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    running = _published(broker_factory, data_dir, "events.s", range(60),
                         x_stream_filter_value="us")
    connection = connect(running.url)
    try:
        publish(connection, "events.s", [60], x_stream_filter_value="eu")
    finally:
        connection.close()
    running = restart(broker_factory, running, data_dir=data_dir, stream_max_bytes=512 * 1024)
    eu = Described(symbol("rabbitmq:stream-filter"), "eu")
    assert read_all(running.url, "events.s", o=FIRST, f=eu) == [(60, 60)]
    stream = stream_of(running, "events.s")
    assert stream.skipped >= 60 - len(stream.log.segments[-1].datas), "sealed segments skipped"
