"""A stream segment's file format without a broker: records, CRC failures, short records, a bad
summary, the summary read from the file's end."""

from __future__ import annotations

from pathlib import Path

import pytest

from filtex_broker.store.records import parse, record
from filtex_broker.streams import segment_file
from filtex_broker.streams.summaries import SegmentSummary
from filtex_proton.matcher import STREAM_FILTER_FIELD
from filtex_proton.plugin import FilterMessage

from .stream_helpers import message


def _summary(*numbers: int) -> SegmentSummary:
    batch = SegmentSummary({STREAM_FILTER_FIELD})
    for n in numbers:
        batch.add(FilterMessage(message(n, x_stream_filter_value=f"v{n}")))
    return batch


def _sealed_file(first: int = 10) -> bytes:
    return b"".join([
        segment_file.header(first),
        segment_file.message(first, 1000, b"a"),
        segment_file.message(first + 1, 1001, b"bc"),
        segment_file.summary(first + 2, 1000, 1001, 3, _summary(1, 2)),
    ])


def test_a_sealed_segment_reads_back_with_its_summary() -> None:
    contents = segment_file.read(parse(_sealed_file())[0])
    assert (contents.first, list(contents.times), contents.datas) == (
        10, [1000, 1001], [b"a", b"bc"])
    sealed = contents.sealed
    assert sealed is not None and not contents.bad_summary
    assert (sealed.next, sealed.first_time, sealed.last_time, sealed.size) == (12, 1000, 1001, 3)
    assert sealed.summary.refs == {STREAM_FILTER_FIELD}
    assert sum(block.messages for block in sealed.summary.blocks) == 2


def test_a_crc_failure_ends_the_segment_where_it_is() -> None:
    data = bytearray(_sealed_file())
    second = len(segment_file.header(10)) + len(segment_file.message(10, 1000, b"a"))
    data[second + 20] ^= 0xFF  # inside the second message's payload
    records, intact = parse(bytes(data))
    assert intact == second
    contents = segment_file.read(records)
    assert contents.datas == [b"a"] and contents.sealed is None


def test_a_short_record_ends_the_segment() -> None:
    whole = segment_file.header(0) + segment_file.message(0, 5, b"xyz")
    torn = whole + segment_file.message(1, 6, b"more")[:-3]
    records, intact = parse(torn)
    assert intact == len(whole)
    assert segment_file.read(records).datas == [b"xyz"]


def test_a_bad_summary_is_reported_not_trusted() -> None:
    garbage = record(segment_file.SUMMARY, 2, b"\x00" * 24 + b"not amqp" + b"\x00" * 4)
    data = segment_file.header(0) + segment_file.message(0, 1, b"a") + \
        segment_file.message(1, 2, b"b") + garbage
    contents = segment_file.read(parse(data)[0])
    assert contents.sealed is None and contents.bad_summary
    assert contents.datas == [b"a", b"b"]


def test_no_header_is_an_unreadable_segment() -> None:
    with pytest.raises(ValueError, match="no segment header"):
        segment_file.read(parse(segment_file.message(0, 1, b"a"))[0])
    with pytest.raises(ValueError):
        segment_file.read([])


def test_a_message_out_of_place_ends_the_reading() -> None:
    data = segment_file.header(0) + segment_file.message(0, 1, b"a") + \
        segment_file.message(5, 2, b"b")
    assert segment_file.read(parse(data)[0]).datas == [b"a"]


def test_the_summary_is_read_from_the_end_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / segment_file.file_name(10)
    assert path.name == "00000000000000000010.seg" and segment_file.first_of(path) == 10
    assert segment_file.first_of(tmp_path / "x.seg") is None
    path.write_bytes(_sealed_file())
    sealed = segment_file.tail(path)
    assert sealed is not None and (sealed.next, sealed.size) == (12, 3)
    path.write_bytes(_sealed_file()[:-1])  # torn in the summary
    assert segment_file.tail(path) is None
    path.write_bytes(segment_file.header(0) + segment_file.message(0, 1, b"a" * 100))
    assert segment_file.tail(path) is None  # open: no summary
    path.write_bytes(b"")
    assert segment_file.tail(path) is None
