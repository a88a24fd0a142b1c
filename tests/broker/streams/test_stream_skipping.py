"""Segments a reader's filter cannot match are passed over unread (docs/BROKER.md, "Streams").

Without sockets: skipping by ``x-stream-filter-value`` (always summarised) and by the fields a
reader's SQL or property filter pins (summarised from the segment after the first reader that
pins them); credit running out in the middle of skipped and read segments; the same messages as
reading everything. Over a socket: a RabbitMQ-style consumer (stream filter, match-unfiltered
and SQL) receives what it matches while the broker skips the segments that hold none of it.
"""

from __future__ import annotations

import pytest
from proton import Described, symbol

from filtex_broker.nodes.node import NodeLimits
from filtex_broker.streams.node import MAX_TRACKED, Stream
from filtex_broker.streams.summaries import BLOCK, SegmentSummary
from filtex_proton.matcher import decompose
from filtex_proton.plugin import FilterMessage
from tests.broker.streams.stream_helpers import FakeReader, link_filter, message, offset_of

from ..broker_clients import BrokerFactory, connect
from .stream_clients import (
    match_unfiltered,
    offset_spec,
    publish,
    read_all,
    stream_broker,
    stream_of,
)
from .stream_clients import stream_filter as rabbit_filter

LIMITS = NodeLimits(max_messages=10, max_bytes=1000)
SEGMENTED = 64 * 1024 * 8
"""--stream-max-bytes whose segments are the smallest, 64 KiB: a few hundred messages each
(the socket test's 1,503 messages of about 260 bytes fit without retention)."""


def _stream() -> Stream:
    """A stream that keeps everything, in segments of 64 KiB (a few hundred messages)."""
    stream = Stream("s", LIMITS, max_bytes=1 << 30)
    stream.log.segment_bytes = 64 * 1024
    return stream


def _publish(stream: Stream, numbers: range, **annotations: str) -> None:
    for n in numbers:
        stream.publish(FilterMessage(message(n, 200, **annotations)))


def _sql(text: str) -> Described:
    return Described(symbol("amqp:sql-filter"), text)


def _unread_segments(stream: Stream, holds: set[int]) -> int:
    """How many messages lie in the segments holding none of the offsets ``holds``."""
    return sum(len(s.datas) for s in stream.log.segments
               if not any(s.first <= offset < s.next for offset in holds))


def test_a_stream_filter_passes_over_segments_without_its_value() -> None:
    stream = _stream()
    _publish(stream, range(2000), x_stream_filter_value="us")
    _publish(stream, range(2000, 2002), x_stream_filter_value="eu")
    _publish(stream, range(2002, 3000), x_stream_filter_value="us")
    assert len(stream.log.segments) >= 5
    reader = FakeReader(credit=100, filter=link_filter(f=rabbit_filter("eu")))
    stream.add_reader(reader)
    stream.dispatch_to(reader)
    assert [offset_of(d) for d in reader.got] == [2000, 2001] and reader.position == 3000
    assert stream.skipped == _unread_segments(stream, {2000, 2001}) > 2000


def test_fields_a_reader_pins_are_summarised_from_the_next_segment() -> None:
    stream = _stream()
    _publish(stream, range(1000))
    early = FakeReader(filter=link_filter(f=_sql("n = 99999")))  # no credit: reads later
    stream.add_reader(early)  # n is tracked from the segment after the current one
    open_at_attach = stream.log.segments[-1].first
    _publish(stream, range(1000, 4000))
    early.credit = 1000
    stream.dispatch_to(early)
    assert early.got == [] and early.position == 4000
    tracked = [s for s in stream.log.segments if s.first > open_at_attach]
    assert stream.skipped == sum(len(s.datas) for s in tracked) > 2000
    late = FakeReader(credit=1000, filter=link_filter(f=_sql("n = 3500 OR n = 10")))
    stream.add_reader(late)
    stream.dispatch_to(late)
    assert sorted(offset_of(d) for d in late.got) == [10, 3500]


def test_credit_running_out_between_skips_loses_and_repeats_nothing() -> None:
    stream = _stream()
    stream.add_reader(FakeReader(filter=link_filter(f=_sql("n = 0"))))  # n tracked from now
    wanted = {700, 701, 1900, 2999}
    for n in range(3000):
        stream.publish(FilterMessage(message(n, 200, x_stream_filter_value=(
            "hit" if n in wanted else "miss"))))
    reader = FakeReader(credit=0, filter=link_filter(f=rabbit_filter("hit"),
                                                     s=_sql("n >= 700")))
    stream.add_reader(reader)
    got: list[int] = []
    while reader.position < 3000:
        reader.credit = 1
        before = len(reader.got)
        stream.dispatch_to(reader)
        got += [offset_of(d) for d in reader.got[before:]]
    assert got == sorted(wanted)
    everything = FakeReader(credit=3000)
    stream.dispatch_to(everything)
    assert len(everything.got) == 3000, "skipping removed nothing"


def test_blocks_of_a_segment_are_passed_over_one_by_one() -> None:
    stream = Stream("s", LIMITS, max_bytes=1 << 30)  # one segment of 8 MiB: three blocks here
    for n in range(3 * BLOCK):
        stream.publish(FilterMessage(message(n, x_stream_filter_value=(
            "hit" if n == BLOCK + 5 else "miss"))))
    assert len(stream.log.segments) == 1
    assert len(stream.log.segments[0].summary.blocks) == 3
    reader = FakeReader(credit=10, filter=link_filter(f=rabbit_filter("hit")))
    stream.add_reader(reader)
    stream.dispatch_to(reader)
    assert [offset_of(d) for d in reader.got] == [BLOCK + 5]
    assert stream.skipped == 2 * BLOCK and reader.position == 3 * BLOCK


def test_a_segment_summary_survives_its_encoding() -> None:
    stream = _stream()
    _publish(stream, range(300), x_stream_filter_value="us")
    summary = stream.log.segments[0].summary
    again = SegmentSummary.decode(summary.encode())
    assert again.refs == summary.refs and len(again.blocks) == len(summary.blocks)
    us, eu = (decompose(link_filter(f=rabbit_filter(v)).filter_set) for v in ("us", "eu"))
    assert (again.may_match(0, us), again.may_match(0, eu)) == (True, False)
    with pytest.raises(ValueError, match="not a segment summary"):
        SegmentSummary.decode(b"\xa1\x03abc")


def test_tracked_fields_are_bounded() -> None:
    stream = _stream()
    for i in range(MAX_TRACKED + 10):
        stream.add_reader(FakeReader(filter=link_filter(f=_sql(f"k{i} = 1"))))
    assert len(stream.log.tracked) == MAX_TRACKED
    _publish(stream, range(10))
    reader = FakeReader(credit=10, filter=link_filter(f=_sql(f"k{MAX_TRACKED + 5} = 1")))
    stream.dispatch_to(reader)  # an untracked field rules nothing out
    assert reader.got == [] and reader.position == 10 and stream.skipped == 0


def test_a_rabbitmq_style_consumer_skips_segments_over_a_socket(
        broker_factory: BrokerFactory) -> None:
    running = stream_broker(broker_factory, stream_max_bytes=SEGMENTED)
    connection = connect(running.url)
    try:
        publish(connection, "events.skip", range(1500), 200, x_stream_filter_value="other")
        publish(connection, "events.skip", [1500, 1501, 1502], 200,
                x_stream_filter_value="order.created")
    finally:
        connection.close()
    entries = {"f": rabbit_filter("order.created"), "u": match_unfiltered(False),
               "s": _sql("region = 'EU'")}
    got = read_all(running.url, "events.skip", o=offset_spec("first"), **entries)
    assert got == [(1501, 1501)]
    stream = stream_of(running, "events.skip")
    assert stream.skipped == _unread_segments(stream, {1500, 1501, 1502}) > 1000
