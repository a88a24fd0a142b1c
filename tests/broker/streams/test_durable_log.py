"""A durable stream's log without sockets: offsets across a restart, torn tails, unreadable
files, summaries rebuilt and tracked fields restored, the cache bound, the memory budget,
retention deleting files, readers given only what is on disk."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Described, symbol

from filtex_broker.nodes.budget import MemoryBudget
from filtex_broker.store.records import parse
from filtex_broker.streams import segment_file
from filtex_broker.streams.durable import CACHED_SEGMENTS

from ..broker_clients import DiskFull
from .durable_helpers import SEGMENT, DurableStream
from .stream_helpers import FakeReader, link_filter, number_of, offset_of


@pytest.fixture
def opened(tmp_path: Path) -> Iterator[list[DurableStream]]:
    """The durable streams a test opens (closed at the end): append each one opened."""
    streams: list[DurableStream] = []
    yield streams
    for stream in streams:
        stream.close()


def _open(opened: list[DurableStream], directory: Path, **kwargs: object) -> DurableStream:
    stream = DurableStream(directory, **kwargs)  # type: ignore[arg-type]
    opened.append(stream)
    return stream


def _reopen(opened: list[DurableStream], stream: DurableStream) -> DurableStream:
    opened.remove(stream)
    again = stream.reopen()
    opened.append(again)
    return again


def _closed(opened: list[DurableStream], stream: DurableStream,
            numbers: range) -> list[Path]:
    """Publish ``numbers``, write them, close: the segment files, for a test to damage."""
    stream.publish(numbers)
    stream.commit()
    stream.close()
    opened.remove(stream)
    return stream.segment_files()


def _read(stream: DurableStream, **entries: Described) -> list[tuple[int, int]]:
    reader = FakeReader(position=stream.log.first_offset, credit=100_000,
                        filter=link_filter(**entries) if entries else None)
    stream.stream.add_reader(reader)
    stream.stream.dispatch_to(reader)
    stream.stream.remove_reader(reader)
    return [(number_of(data), offset_of(data)) for data in reader.got]


def test_a_restart_keeps_every_offset(tmp_path: Path, opened: list[DurableStream]) -> None:
    stream = _open(opened, tmp_path)
    stream.publish(range(300))
    sealed = len(stream.log.segments) - 1
    assert sealed >= 3
    stream = _reopen(opened, stream)
    assert len(stream.log.segments) == sealed + 1 and stream.log.next_offset == 300
    assert _read(stream) == [(n, n) for n in range(300)]
    stream.publish(range(300, 302))
    stream.commit()
    assert _read(stream)[-2:] == [(300, 300), (301, 301)]


def test_readers_get_only_what_is_on_disk(tmp_path: Path, opened: list[DurableStream]) -> None:
    stream = _open(opened, tmp_path)
    reader = FakeReader(credit=10)
    stream.stream.add_reader(reader)
    stream.publish(range(3))
    assert reader.got == [] and stream.log.committed == 0  # the writer has not answered yet
    stream.commit()  # the commit wakes the stream, which sends
    assert [offset_of(data) for data in reader.got] == [0, 1, 2]


def test_a_torn_tail_recovers_up_to_the_tear(
        tmp_path: Path, opened: list[DurableStream], caplog: pytest.LogCaptureFixture) -> None:
    last = _closed(opened, _open(opened, tmp_path), range(100))[-1]
    first = segment_file.first_of(last)
    assert first is not None
    data = last.read_bytes()
    last.write_bytes(data[:-50])  # the last message's record, cut short
    with caplog.at_level(logging.WARNING, "filtex.broker"):
        stream = _open(opened, tmp_path)
    assert "torn or corrupt record" in caplog.text
    assert last.with_suffix(".torn").read_bytes() == data[parse(data[:-50])[1] : -50]
    assert stream.log.next_offset == 99
    assert _read(stream) == [(n, n) for n in range(99)]
    stream.publish(range(99, 101))  # offset 99 again: it was never on disk whole
    stream.commit()
    assert _read(stream)[-2:] == [(99, 99), (100, 100)]


def test_an_unreadable_segment_is_set_aside(
        tmp_path: Path, opened: list[DurableStream], caplog: pytest.LogCaptureFixture) -> None:
    files = _closed(opened, _open(opened, tmp_path), range(300))
    files[1].write_bytes(b"\x00garbage" * 100)
    with caplog.at_level(logging.WARNING, "filtex.broker"):
        stream = _open(opened, tmp_path)
    assert "set aside" in caplog.text and "missing" in caplog.text
    assert files[1].with_suffix(".bad").exists() and not files[1].exists()
    second = segment_file.first_of(files[1])
    third = segment_file.first_of(files[2])
    assert second is not None and third is not None
    got = _read(stream)
    assert got == [(n, n) for n in range(300) if not second <= n < third]
    assert stream.log.next_offset == 300


def test_a_missing_summary_is_rebuilt_and_the_tracked_fields_restored(
        tmp_path: Path, opened: list[DurableStream]) -> None:
    stream = _open(opened, tmp_path)
    colour = Described(symbol("amqp:application-properties-filter"), {"colour": "red"})
    reader = FakeReader(filter=link_filter(p=colour))
    stream.stream.add_reader(reader)  # its field is summarised from the first segment on
    stream.stream.remove_reader(reader)
    tracked = stream.log.tracked
    assert len(tracked) == 2
    stream.publish(range(200), x_stream_filter_value="us")
    stream.commit()
    stream.close()
    opened.remove(stream)
    files = stream.segment_files()
    sealed = files[-2]
    data = sealed.read_bytes()
    records, _ = parse(data)
    assert records[-1][0] == segment_file.SUMMARY
    sealed.write_bytes(data[: _summary_start(data)])
    assert segment_file.tail(sealed) is None
    stream = _open(opened, tmp_path)
    assert stream.log.tracked == tracked
    stream.commit()
    assert segment_file.tail(sealed) is not None, "sealed again, with its summary"
    eu = Described(symbol("rabbitmq:stream-filter"), "eu")
    assert _read(stream, f=eu) == []
    assert stream.stream.skipped == 200  # every segment passed over unread
    assert _read(stream, p=colour) == [] and stream.stream.skipped == 400


def _summary_start(data: bytes) -> int:
    """Where a sealed segment file's summary record starts."""
    records, _ = parse(data)
    return len(data) - 8 - 9 - len(records[-1][2])


def test_the_cache_is_bounded_and_only_it_is_charged(
        tmp_path: Path, opened: list[DurableStream]) -> None:
    budget = MemoryBudget()
    stream = _open(opened, tmp_path, max_bytes=64 * SEGMENT, budget=budget)
    stream.log.segment_bytes = SEGMENT
    stream.publish(range(1000))
    stream.commit()
    log = stream.log
    assert len(log.segments) > CACHED_SEGMENTS + 2
    assert len(log.cache) <= CACHED_SEGMENTS
    held = sum(s.cost for s in log.segments)
    assert held == sum(s.cost for s in log.segments if s.datas)
    assert budget.accounted == held  # the store's buffers are written: only messages held
    assert _read(stream) == [(n, n) for n in range(1000)]
    assert log.loads >= len(log.segments) - 1 - CACHED_SEGMENTS
    assert len(log.cache) <= CACHED_SEGMENTS
    assert budget.accounted == sum(s.cost for s in log.segments)


def test_a_blocked_budget_drops_cached_bytes_not_segments(
        tmp_path: Path, opened: list[DurableStream]) -> None:
    budget = MemoryBudget(limit=3 * SEGMENT)
    stream = _open(opened, tmp_path, max_bytes=64 * SEGMENT, budget=budget)
    stream.log.segment_bytes = SEGMENT
    stream.publish(range(1000))
    stream.commit()
    stream.publish(range(1000, 1001))
    stream.commit()
    assert stream.log.dropped_segments == 0 and stream.log.first_offset == 0
    assert budget.accounted < 3 * SEGMENT
    assert _read(stream) == [(n, n) for n in range(1001)]


def test_retention_deletes_files_oldest_first(
        tmp_path: Path, opened: list[DurableStream]) -> None:
    stream = _open(opened, tmp_path, max_bytes=4 * SEGMENT)
    stream.publish(range(600))
    stream.commit()
    log = stream.log
    assert log.dropped_segments > 0
    names = [path.name for path in stream.segment_files()]
    assert names == [segment_file.file_name(s.first) for s in log.segments]
    stream = _reopen(opened, stream)
    assert stream.log.first_offset == log.first_offset and stream.log.next_offset == 600


def test_age_retention_keeps_where_the_offsets_go_on(
        tmp_path: Path, opened: list[DurableStream]) -> None:
    stream = _open(opened, tmp_path, max_age_s=60)
    stream.publish(range(5))
    stream.log.clock = lambda: 10**15  # far later: everything is too old
    assert stream.log.retain() == 1 and len(stream.log) == 0
    stream = _reopen(opened, stream)
    assert stream.log.next_offset == 5 and len(stream.log) == 0
    stream.publish(range(5, 6))
    stream.commit()
    assert _read(stream) == [(5, 5)]


def test_a_failed_write_is_rewritten_from_memory(
        tmp_path: Path, opened: list[DurableStream], disk_full: DiskFull) -> None:
    """Disk full: nothing is readable (or accepted) until the segment is rewritten whole."""
    stream = _open(opened, tmp_path)
    disk_full.full = True
    stream.publish(range(3))
    stream.pump(until=lambda: stream.store.pending() and stream.log.committed == 0, rounds=5)
    assert stream.log.committed == 0
    disk_full.full = False
    stream.commit()
    contents = segment_file.read(parse(stream.segment_files()[-1].read_bytes())[0])
    assert [number_of(data) for data in contents.datas] == [0, 1, 2]
    assert _read(stream) == [(0, 0), (1, 1), (2, 2)]


def test_files_after_a_torn_segment_are_set_aside_and_no_offset_is_skipped(
        tmp_path: Path, opened: list[DurableStream]) -> None:
    """A crash mid-batch: a sealed segment's last records torn, the next file written in the
    same batch (so never accepted): the offsets go on from the tear, without a gap."""
    files = _closed(opened, _open(opened, tmp_path), range(300))
    torn = files[-2]
    data = torn.read_bytes()
    torn.write_bytes(data[: _summary_start(data) - 30])  # the summary and half a message gone
    stream = _open(opened, tmp_path)
    assert files[-1].with_suffix(".bad").exists()
    end = stream.log.next_offset
    assert end == (segment_file.first_of(files[-1]) or 0) - 1
    stream.publish(range(end, end + 2))
    stream.commit()
    assert _read(stream) == [(n, n) for n in range(end + 2)]
    stream = _reopen(opened, stream)
    assert _read(stream) == [(n, n) for n in range(end + 2)]


def test_an_unreadable_last_file_keeps_its_offsets(
        tmp_path: Path, opened: list[DurableStream]) -> None:
    files = _closed(opened, _open(opened, tmp_path), range(300))
    first = segment_file.first_of(files[-1])
    files[-1].write_bytes(b"junk")
    stream = _open(opened, tmp_path)
    assert stream.log.next_offset == first
    stream.publish(range(1000, 1001))
    stream = _reopen(opened, stream)
    assert _read(stream)[-1] == (1000, first)
