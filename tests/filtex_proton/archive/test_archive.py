"""The archive rows and the writer (pyarrow only: these run without Spark)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[spark]')")
pq = pytest.importorskip("pyarrow.parquet")

from proton import (  # noqa: E402
    UNDESCRIBED,
    Array,
    Data,
    Described,
    byte,
    char,
    decimal32,
    decimal64,
    float32,
    int32,
    short,
    symbol,
    timestamp,
    ubyte,
    uint,
    ulong,
    ushort,
)

from filtex_proton.amqp import decode_value  # noqa: E402
from filtex_proton.amqp.bid import encode_decimal32, encode_decimal64  # noqa: E402
from filtex_proton.amqp.message import encode_message  # noqa: E402
from filtex_proton.archive import (  # noqa: E402
    ARCHIVE_SCHEMA,
    MAX_DIRECTORY_BYTES,
    SCHEMA_VERSION,
    ArchiveVersionError,
    ArchiveWriter,
    address_directory,
    address_partition,
    archive_dataset,
    check_segments,
    describe_typed,
    message_row,
    read_archive_table,
    rows_to_table,
)

ARRIVAL = 1_700_000_000_000  # 2023-11-14T22:13:20Z


def row_of(**sections: Any) -> dict[str, Any]:
    return message_row(encode_message(**sections), address="q", arrival_ms=ARRIVAL)


def entries(row: dict[str, Any], column: str) -> dict[str, dict[str, Any]]:
    return dict(row[column])


def test_every_amqp_type_keeps_its_type_in_application_properties() -> None:
    values: dict[str, Any] = {
        "null": None, "true": True, "ubyte": ubyte(5), "ushort": ushort(5), "uint": uint(5),
        "ulong": ulong(5), "big": ulong(2**64 - 1), "byte": byte(5), "short": short(5),
        "int": int32(5), "long": 5, "float": float32(1.5), "double": 1.5,
        "nan": float("nan"), "inf": float("-inf"),
        "d32": decimal32(encode_decimal32(Decimal("1.5"))),
        "d64": decimal64(encode_decimal64(Decimal("1.5"))), "d128": Decimal("1.5"),
        "ts": timestamp(ARRIVAL), "char": char("😀"), "uuid": uuid.UUID(int=7),
        "binary": b"\x00\xff", "string": "x", "symbol": symbol("x"),
        "map": {"k": [1, 2]}, "list": [1, "two"], "array": Array(UNDESCRIBED, Data.INT, int32(1)),
    }
    row = row_of(application_properties=values)
    typed = entries(row, "application_properties")
    assert list(typed) == [f"string:{name}" for name in values]
    names = {k.split(":", 1)[1]: v["type"] for k, v in typed.items()}
    assert names == {
        "null": "null", "true": "boolean", "ubyte": "ubyte", "ushort": "ushort",
        "uint": "uint", "ulong": "ulong", "big": "ulong", "byte": "byte", "short": "short",
        "int": "int", "long": "long", "float": "float", "double": "double", "nan": "double",
        "inf": "double", "d32": "decimal32", "d64": "decimal64", "d128": "decimal128",
        "ts": "timestamp", "char": "char", "uuid": "uuid", "binary": "binary",
        "string": "string", "symbol": "symbol", "map": "map", "list": "list", "array": "array",
    }
    assert typed["string:uint"]["long"] == 5 and typed["string:long"]["long"] == 5
    assert typed["string:big"]["long"] is None
    assert typed["string:big"]["decimal"] == Decimal(2**64 - 1)
    assert math.isnan(typed["string:nan"]["double"])
    assert typed["string:d32"]["decimal"] == Decimal("1.5")
    assert typed["string:d32"]["string"] == "1.5"
    assert typed["string:char"]["long"] == ord("😀")
    assert typed["string:uuid"]["binary"] == uuid.UUID(int=7).bytes
    # Compounds keep their exact encoding: decoding it gives the value back.
    assert decode_value(typed["string:map"]["binary"])[0] == {"k": [1, 2]}
    assert row["regular"] is True
    for name, value in values.items():
        again = describe_typed(typed[f"string:{name}"])
        assert type(again) is type(value) or name.startswith("d"), name
        if name not in ("nan",):
            assert again == value or (name.startswith("d") and Decimal(again) == Decimal("1.5"))


def test_strings_hold_their_iso_8601_reading() -> None:
    typed = entries(row_of(application_properties={
        "when": "2023-11-14T22:13:20Z", "for": "PT1H", "plain": "x"}), "application_properties")
    assert typed["string:when"]["long"] == ARRIVAL
    assert typed["string:for"]["long"] == 3_600_000
    assert typed["string:plain"]["long"] is None


@pytest.mark.parametrize(("sections", "why"), [
    ({"application_properties": {"d": Described(symbol("x"), 1)}}, "a described value"),
    ({"application_properties": {"d": Decimal("1E-30")}}, "a decimal beyond decimal(38,18)"),
    ({"application_properties": {"d": Decimal("NaN")}}, "a decimal NaN"),
    ({"message_annotations": {"x": 1}, "application_properties": {symbol("s"): 1}},
     "a symbol key in application-properties"),
    ({"message_annotations": {"str-key": 1}}, "a string key in an annotation map (by str)"),
    ({"header": {"priority": uint(5)}}, "a header field of the wrong type"),
    ({"properties": {"subject": symbol("x")}}, "a properties field of the wrong type"),
    ({"properties": {"message-id": Described(symbol("x"), 1)}}, "a described message-id"),
    ({"application_properties": {"s": "P99999999999999999999W"}}, "an ISO reading past a long"),
])
def test_irregular_rows(sections: dict[str, Any], why: str) -> None:
    if "message_annotations" in sections and "str-key" in sections["message_annotations"]:
        data = encode_message(message_annotations={symbol("a"): 1})
        data = data.replace(b"\xa3\x01a", b"\xa1\x01a")  # the key as a str8 string
        row = message_row(data, address="q", arrival_ms=ARRIVAL)
    else:
        row = row_of(**sections)
    assert row["regular"] is False, why
    assert row["decode_error"] is None


def test_header_and_properties_columns() -> None:
    row = row_of(
        header={"durable": True, "priority": 9, "ttl": 1000, "delivery-count": None},
        properties={"message-id": ulong(2**63 + 5), "user-id": b"bob", "subject": "s",
                    "content-type": "application/json", "creation-time": ARRIVAL,
                    "group-sequence": 7, "correlation-id": uuid.UUID(int=1)},
    )
    assert (row["durable"], row["priority"], row["ttl"], row["first_acquirer"],
            row["delivery_count"]) == (True, 9, 1000, None, None)
    assert row["message_id"]["type"] == "ulong" and row["message_id"]["long"] is None
    assert row["message_id"]["decimal"] == Decimal(2**63 + 5)
    assert row["correlation_id"]["type"] == "uuid"
    assert (row["user_id"], row["subject"], row["content_type"], row["creation_time"],
            row["group_sequence"], row["to"]) == (b"bob", "s", "application/json", ARRIVAL, 7,
                                                  None)
    assert row["regular"] is True and row["nonconforming"] is None


def test_a_nonconforming_field_is_kept_typed() -> None:
    row = row_of(header={"priority": "high"})
    assert row["priority"] is None
    assert dict(row["nonconforming"])["priority"]["type"] == "string"
    assert row["regular"] is False


def test_bytes_that_do_not_decode_are_archived_with_the_reason() -> None:
    row = message_row(b"\x00\x53\x70\xc0\xff", address="q", arrival_ms=ARRIVAL)
    assert row["decode_error"] and row["regular"] is False and row["raw"] == b"\x00\x53\x70\xc0\xff"
    bad = encode_message(application_properties={"a": "x"}).replace(b"\xa1\x01x", b"\xa1\x01\xff")
    row = message_row(bad, address="q", arrival_ms=ARRIVAL)
    assert "UTF-8" in row["decode_error"]


def test_duplicate_keys_collapse_as_the_view_sees_them() -> None:
    # A map with the same key twice: the decoder keeps the first key, the last value.
    data = encode_message(message_annotations={symbol("a"): 1, symbol("b"): 2})
    data = data.replace(b"\xa3\x01b", b"\xa3\x01a")
    typed = entries(message_row(data, address="q", arrival_ms=ARRIVAL), "message_annotations")
    assert list(typed) == ["symbol:a"] and typed["symbol:a"]["long"] == 2


def test_rows_fit_the_schema_and_partition_columns() -> None:
    row = row_of(application_properties={"a": 1})
    assert row["address"] == "q" and row["date"] == "2023-11-14" and row["regular"] is True
    table = rows_to_table([row])
    assert table.schema.metadata[b"filtex.archive.schema_version"] == str(SCHEMA_VERSION).encode()
    assert table.num_rows == 1


@pytest.mark.parametrize("address", ["orders", "a/b", "x:y=z%", "ü😀 space", "123", "tab\there",
                                     "[weird]^{}#?*'\"\\"])
def test_address_directories_read_back(tmp_path: Path, address: str) -> None:
    assert "/" not in address_directory(address)[len("address="):]
    with ArchiveWriter(tmp_path, flush_interval=None, fsync=False, handle_sigterm=False) as w:
        w.append(address, encode_message(properties={"subject": "s"}), ARRIVAL)
    table = read_archive_table(tmp_path, ["address", "date", "subject"])
    assert table.column("address").to_pylist() == [address]
    assert table.column("date").to_pylist() == ["2023-11-14"]


LONG = "orders/" + "é" * 150 + "/x:y"  # 312 UTF-8 bytes, 3 escaped characters
LONG_TWIN = LONG[:-1] + "z"  # the same shortened prefix: told apart by the hash


@pytest.mark.parametrize("address", [LONG, LONG_TWIN, "%" * 100, "a" * 1000, "~" * 90,
                                     "~" * 200])
def test_long_addresses_get_safe_unique_directories(tmp_path: Path, address: str) -> None:
    directory = address_directory(address)
    assert len(directory.encode()) <= MAX_DIRECTORY_BYTES
    assert "/" not in directory and directory.count("~") <= 1
    others = {address_directory(a) for a in (LONG, LONG_TWIN, "%" * 100, "a" * 1000, "~" * 90,
                                              "~" * 200) if a != address}
    assert directory not in others
    with ArchiveWriter(tmp_path, flush_interval=None, fsync=False, handle_sigterm=False) as w:
        w.append(address, encode_message(properties={"subject": "s"}), ARRIVAL)
        w.append("short", encode_message(properties={"subject": "t"}), ARRIVAL + 1)
    table = read_archive_table(tmp_path, ["address", "subject"])
    assert table.column("address").to_pylist() == [address, "short"]
    assert table.column_names == ["address", "subject", "arrival_ms", "sequence"]
    shortened = address_partition(address) != address
    assert (address_directory(address)[len("address="):].endswith(
        address_partition(address).rpartition("~")[2])) == shortened
    stored = read_archive_table(tmp_path).column("long_address").to_pylist()
    assert stored == [address if shortened else None, None]


def test_a_short_address_that_looks_shortened_stays_apart(tmp_path: Path) -> None:
    lookalike = address_partition(LONG)  # a legal address in its own right
    assert lookalike != LONG and address_directory(lookalike) != address_directory(LONG)
    with ArchiveWriter(tmp_path, flush_interval=None, fsync=False, handle_sigterm=False) as w:
        w.append(LONG, encode_message(properties={"subject": "long"}), ARRIVAL)
        w.append(lookalike, encode_message(properties={"subject": "lookalike"}), ARRIVAL + 1)
    table = read_archive_table(tmp_path, ["address", "subject"])
    assert table.to_pydict()["address"] == [LONG, lookalike]
    assert table.to_pydict()["subject"] == ["long", "lookalike"]


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


def test_writer_segments_partitions_and_order(tmp_path: Path) -> None:
    writer = ArchiveWriter(tmp_path, segment_rows=3, flush_interval=None, fsync=False,
                           handle_sigterm=False)
    for i in range(10):
        writer.append("a" if i % 2 else "b", encode_message(properties={"subject": str(i)}),
                      ARRIVAL + i * 3_600_000)  # an hour apart: across midnight UTC
    assert writer.stats.segments >= 2  # full partitions were written as they filled
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        writer.append("a", b"", ARRIVAL)
    files = _files(tmp_path)
    assert all(f.suffix == ".parquet" and not f.name.startswith(".") for f in files)
    assert {f.parent.parent.parent.name for f in files} == {"address=a", "address=b"}
    assert {f.parent.parent.name for f in files} == {"date=2023-11-14", "date=2023-11-15"}
    assert {f.parent.name for f in files} == {"regular=true"}
    table = read_archive_table(tmp_path, ["subject"])
    assert table.column("subject").to_pylist() == [str(i) for i in range(10)]
    assert writer.stats.written == 10 and writer.stats.appended == 10
    metadata = pq.read_schema(files[0]).metadata
    assert metadata[b"filtex.archive.schema_version"] == str(SCHEMA_VERSION).encode()
    assert pq.read_schema(files[0]).remove_metadata().equals(ARCHIVE_SCHEMA.remove_metadata())


def test_a_footer_is_read_once_while_its_file_stays_the_same(
        tmp_path: Path, monkeypatch: Any) -> None:
    """check_segments remembers a file's checked footer by its identity: asked again, it reads
    nothing; a file rewritten in place (here with a newer schema version) is read and refused."""
    writer = ArchiveWriter(tmp_path, flush_interval=None, fsync=False, handle_sigterm=False)
    writer.append("a", encode_message(properties={"subject": "s"}), ARRIVAL)
    writer.close()
    (segment,) = [str(f) for f in _files(tmp_path)]
    reads: list[str] = []
    read_schema = pq.read_schema

    def counted(path: str) -> Any:
        reads.append(path)
        return read_schema(path)

    monkeypatch.setattr(pq, "read_schema", counted)
    first = check_segments([segment])
    assert check_segments([segment]) == first
    assert first[0][1] == SCHEMA_VERSION and reads == [segment]  # one footer read for two
    table = pq.read_table(segment)
    newer = {b"filtex.archive.schema_version": str(SCHEMA_VERSION + 1).encode()}
    pq.write_table(table.replace_schema_metadata(newer), segment)
    os.utime(segment, ns=(time.time_ns(), time.time_ns() + 1_000_000_000))  # a new mtime
    with pytest.raises(ArchiveVersionError, match="version"):
        check_segments([segment])
    assert reads == [segment, segment]


def test_writer_bounds_its_buffer(tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path, max_buffer_bytes=10_000, flush_interval=None, fsync=False,
                       handle_sigterm=False) as writer:
        for i in range(20):
            writer.append("q", encode_message(body=b"x" * 2000), ARRIVAL + i)
            assert writer._buffered <= 10_000
        assert writer.stats.segments >= 3


def test_writer_flushes_in_the_background(tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path, flush_interval=0.2, fsync=False, handle_sigterm=False) as w:
        w.append("q", encode_message(properties={"subject": "s"}), ARRIVAL)
        deadline = time.monotonic() + 10
        while not _files(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_files(tmp_path)) == 1


def test_a_failed_write_leaves_no_partial_file(tmp_path: Path, monkeypatch: Any) -> None:
    from filtex_proton.archive import writer as archive

    def broken(table: Any, where: Any, **kwargs: Any) -> None:
        Path(where).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(archive.pq, "write_table", broken)
    writer = ArchiveWriter(tmp_path, segment_rows=1, flush_interval=None, fsync=False,
                           handle_sigterm=False)
    writer.append("q", encode_message(), ARRIVAL)  # the automatic flush fails: logged, counted
    assert writer.stats.dropped == 1
    writer.append("q", encode_message(), ARRIVAL)
    assert _files(tmp_path) == []
    monkeypatch.undo()
    writer.close()


def test_sigterm_flushes_then_terminates(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, signal, time
        from filtex_proton.amqp.message import encode_message
        from filtex_proton.archive import ArchiveWriter
        writer = ArchiveWriter({str(tmp_path)!r}, flush_interval=None)
        for i in range(5):
            writer.append("q", encode_message(properties={{"subject": str(i)}}), {ARRIVAL} + i)
        print("ready", flush=True)
        time.sleep(60)
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "ready"
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == -signal.SIGTERM
    assert read_archive_table(tmp_path, ["subject"]).column("subject").to_pylist() == [
        str(i) for i in range(5)]


def test_irregular_rows_have_their_own_directories(tmp_path: Path) -> None:
    with ArchiveWriter(tmp_path, flush_interval=None, fsync=False, handle_sigterm=False) as w:
        w.append("q", encode_message(properties={"subject": "s"}), ARRIVAL)
        w.append("q", b"not a message", ARRIVAL + 1)
        assert w.stats.irregular == 1
    assert {f.parent.name for f in _files(tmp_path)} == {"regular=true", "regular=false"}
    table = read_archive_table(tmp_path, ["regular", "decode_error"])
    assert table.column("regular").to_pylist() == [True, False]
    assert table.column("decode_error").to_pylist()[0] is None


def test_the_dataset_reads_an_empty_archive(tmp_path: Path) -> None:
    assert archive_dataset(tmp_path).to_table().num_rows == 0
    assert os.listdir(tmp_path) == []
