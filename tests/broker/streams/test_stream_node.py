"""The stream node without sockets: the log's offsets and retention, readers' positions,
filters, copies with x-stream-offset, the memory budget."""

from __future__ import annotations

from proton import Described, symbol, timestamp

from filtex_broker.nodes.budget import MemoryBudget
from filtex_broker.nodes.node import NodeLimits
from filtex_broker.streams.annotate import with_offset
from filtex_broker.streams.log import StreamLog
from filtex_broker.streams.node import Stream
from filtex_proton.amqp import RawMessageView, Section
from filtex_proton.plugin import FilterMessage, OffsetSpec
from tests.broker.streams.stream_helpers import (
    Clock,
    FakeReader,
    link_filter,
    message,
    number_of,
    offset_of,
)

LIMITS = NodeLimits(max_messages=10, max_bytes=1000)  # a stream is bound by its own settings


def _stream(n: int = 0, *, max_bytes: int = 1 << 30, budget: MemoryBudget | None = None,
            clock: Clock | None = None, max_age_s: float | None = None) -> Stream:
    stream = Stream("s", LIMITS, budget, max_bytes=max_bytes, max_age_s=max_age_s)
    if clock is not None:
        stream.log.clock = clock
    for i in range(n):
        stream.publish(FilterMessage(message(i)))
    return stream


def test_the_offset_is_added_and_every_other_byte_kept() -> None:
    data = message(3, x_stream_filter_value="a")
    copy = with_offset(data, 41)
    view = RawMessageView(copy)
    assert offset_of(copy) == 41 and number_of(copy) == 3
    assert view.field(Section.MESSAGE_ANNOTATIONS, "x-stream-filter-value") == "a"
    assert offset_of(with_offset(message(1), 7)) == 7  # a message without annotations gains them
    assert offset_of(with_offset(copy, 5)) == 5  # replaced, not repeated


def test_reading_removes_nothing_and_readers_are_independent() -> None:
    stream = _stream(20)  # more than the node limits: a stream is not bound by them
    one, two = FakeReader(credit=5), FakeReader(credit=100)
    for reader in (one, two):
        stream.add_reader(reader)
        stream.dispatch_to(reader)
    assert [offset_of(d) for d in one.got] == [0, 1, 2, 3, 4]
    assert [offset_of(d) for d in two.got] == list(range(20))
    assert stream.depth() == 20 and one.position == 5


def test_offset_specs() -> None:
    clock = Clock()
    stream = _stream(clock=clock)
    for i in range(10):
        clock.now += 1000
        stream.publish(FilterMessage(message(i)))
    start = stream.start
    assert (start(None), start(OffsetSpec("next")), start(OffsetSpec("first"))) == (10, 10, 0)
    assert start(OffsetSpec("last")) == 9
    assert start(OffsetSpec("offset", 4)) == 4 and start(OffsetSpec("offset", 99)) == 10
    assert start(OffsetSpec("timestamp", 1_003_000)) == 2
    assert start(OffsetSpec("timestamp", int(timestamp(0)))) == 0
    assert start(OffsetSpec("interval", 3)) == 6  # arrived 3 s before now or since


def test_a_reader_at_the_end_waits_and_a_publish_wakes_it() -> None:
    stream = _stream(2)
    reader = FakeReader(position=stream.start(None), credit=10)
    stream.add_reader(reader)
    assert stream.dispatch_to(reader) == 0
    stream.publish(FilterMessage(message(7)))
    assert [(offset_of(d), number_of(d)) for d in reader.got] == [(2, 7)]


def test_filters_skip_without_removing() -> None:
    stream = _stream(10)
    eu = FakeReader(credit=100, filter=link_filter(f=Described(symbol("amqp:sql-filter"),
                                                               "region = 'EU'")))
    stream.dispatch_to(eu)
    assert [number_of(d) for d in eu.got] == [1, 3, 5, 7, 9]
    assert eu.position == 10 and stream.depth() == 10


def test_credit_stops_a_filtered_reader_at_the_next_message_to_read() -> None:
    stream = _stream(10)
    reader = FakeReader(credit=2, filter=link_filter(f=Described(
        symbol("amqp:application-properties-filter"), {"region": "US"})))
    stream.dispatch_to(reader)
    assert [number_of(d) for d in reader.got] == [0, 2] and reader.position == 3


def test_retention_by_bytes_drops_whole_oldest_segments() -> None:
    budget = MemoryBudget()
    stream = _stream(budget=budget, max_bytes=64 * 1024 * 8)  # segments of 64 KiB
    for i in range(600):
        stream.publish(FilterMessage(message(i, 4000)))
    log = stream.log
    assert log.size <= log.max_bytes and log.dropped_segments > 0
    assert log.first_offset == log.segments[0].first > 0 and log.next_offset == 600
    assert budget.accounted == sum(s.cost for s in log.segments)
    reader = FakeReader(position=0, credit=1)  # its offset was dropped: the oldest held next
    stream.dispatch_to(reader)
    assert offset_of(reader.got[0]) == log.first_offset
    stream.destroy()
    assert budget.accounted == 0


def test_retention_by_age() -> None:
    clock = Clock()
    stream = _stream(clock=clock, max_age_s=60, max_bytes=64 * 1024 * 8)
    for i in range(3):
        stream.publish(FilterMessage(message(i)))
    clock.now += 61_000
    stream.publish(FilterMessage(message(3)))
    assert stream.log.first_offset == 0  # the old messages share the segment being written
    clock.now += 61_000
    assert stream.log.retain() == 1 and stream.depth() == 0 and stream.log.next_offset == 4


def test_a_budget_smaller_than_the_stream_never_stalls_its_producers() -> None:
    """--max-memory below --stream-max-bytes: retention gives back the oldest segments while
    the budget is blocked, so the stream keeps what the budget allows and producers go on."""
    budget = MemoryBudget(limit=300 * 1024)
    stream = _stream(budget=budget, max_bytes=1 << 30)
    log = StreamLog(1 << 30)
    assert log.segment_bytes == 8 * 1024 * 1024
    stream.log.segment_bytes = 64 * 1024
    for i in range(2000):
        stream.publish(FilterMessage(message(i, 1000)))
        assert stream.has_room()
    assert budget.accounted < 300 * 1024 + 64 * 1024 + 2000
    assert stream.log.next_offset == 2000 and stream.log.dropped_segments > 0
