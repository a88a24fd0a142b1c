"""Data <-> Python without recursion: the same values as proton's own, bounded depth."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from proton import (
    UNDESCRIBED,
    Array,
    Data,
    Described,
    char,
    decimal64,
    float32,
    int32,
    symbol,
    timestamp,
    ubyte,
    ulong,
)

from filtex_proton.errors import FilterError
from filtex_proton.filters.wire import check_value, read_data, summarise, write_data

VALUES: list[Any] = [
    None, True, ubyte(1), int32(-5), 2**40, ulong(2**64 - 1), 1.5, float32(2.5),
    decimal64(12345), timestamp(1700000000000), char("x"), uuid.UUID(int=7), b"\x00\xff",
    "text", symbol("sym"), [], {}, [1, [2, [3, []]]], {symbol("k"): {"n": [None, {}]}},
    Described(symbol("ex:d"), Described(ulong(1), [1, 2])),
    Array(UNDESCRIBED, Data.INT, int32(1), int32(2)),
    Array(UNDESCRIBED, Data.INT),
    Array(symbol("ex:arr"), Data.STRING, "a", "b"),
    Array(UNDESCRIBED, Data.LIST, [1], [2, 3], []),
    {symbol("f"): Described(symbol("amqp:all-filter"), [Described(ulong(0x110), True)])},
]


@pytest.mark.parametrize("value", VALUES, ids=[summarise(v) for v in VALUES])
def test_read_matches_get_object_and_write_matches_put_object(value: Any) -> None:
    expected = Data()
    expected.put_object(value)
    expected.rewind()
    expected.next()
    assert read_data(expected, 50) == expected.get_object()

    written = Data()
    write_data(value, written)
    assert written.encode() == expected.encode()


def _deep_list(depth: int) -> Data:
    data = Data()
    for _ in range(depth):
        data.put_list()
        data.enter()
    data.put_null()
    data.rewind()
    data.next()
    return data


def test_read_refuses_too_deep_values_with_a_limit_error() -> None:
    assert read_data(_deep_list(10), 10) is not None
    with pytest.raises(FilterError) as caught:
        read_data(_deep_list(11), 10)
    assert caught.value.limit


def test_read_and_write_survive_30000_levels() -> None:
    value = read_data(_deep_list(30_000), 50_000)  # proton.Data holds ~64k nodes
    data = Data()
    write_data(value, data)  # proton's put_object would hit the recursion limit here
    assert len(data.encode()) > 30_000


def test_read_refuses_duplicate_map_keys() -> None:
    data = Data()
    data.put_map()
    data.enter()
    for _ in range(2):
        data.put_symbol(symbol("k"))
        data.put_bool(True)
    data.exit()
    data.rewind()
    data.next()
    with pytest.raises(FilterError, match="duplicate map key"):
        read_data(data, 5)


def test_read_refuses_unhashable_map_keys() -> None:
    data = Data()
    data.put_map()
    data.enter()
    data.put_list()
    data.put_bool(True)
    data.exit()
    data.rewind()
    data.next()
    with pytest.raises(FilterError, match="map key of type list"):
        read_data(data, 5)


@pytest.mark.parametrize(("value", "text"), [
    ({1, 2}, "Python set"),
    ((1,), "Python tuple"),
    ([object()], "Python object"),
    (ubyte(256), "out of the range of AMQP ubyte"),
    (2**63, "out of the range of AMQP long"),
    ({"k": [Described(symbol("x"), {b"k": frozenset()})]}, "Python frozenset"),
])
def test_check_value_refuses_what_is_no_amqp_value(value: Any, text: str) -> None:
    with pytest.raises(FilterError, match=text):
        check_value(value, 50)


def test_check_value_depth() -> None:
    value: Any = None
    for _ in range(20):
        value = [value]
    check_value(value, 20)
    with pytest.raises(FilterError) as caught:
        check_value([value], 20)
    assert caught.value.limit


def test_summarise_is_bounded() -> None:
    assert summarise("x" * 1000).endswith("...")
    assert len(summarise("x" * 1000)) == 60
    assert summarise([1, 2]) == "<list>"
