"""Readers waiting at the end of a stream share one pass of the node matcher per published
message (docs/BROKER.md, "Streams"): each still takes exactly what its own filter matches, in
offset order, whether it waits at the end, catches up from behind, or runs out of credit."""

from __future__ import annotations

from proton import Described, symbol

from filtex_broker.nodes.node import NodeLimits
from filtex_broker.streams.node import Stream
from filtex_proton.plugin import FilterMessage, LinkFilter
from tests.broker.streams.stream_helpers import PLUGIN, FakeReader, message, offset_of

LIMITS = NodeLimits(max_messages=10, max_bytes=1000)
FILTERS = {
    "eu": Described(symbol("amqp:sql-filter"), "region = 'EU'"),
    "n<5": Described(symbol("amqp:sql-filter"), "n < 5"),
    "n=7": Described(symbol("amqp:application-properties-filter"), {"n": 7}),
    "arith": Described(symbol("amqp:sql-filter"), "n * 2 > 20"),
    "no-local": Described(symbol("apache.org:no-local-filter:list"), []),
    "none": Described(symbol("amqp:false-filter"), False),
}


def _link(entry: Described) -> LinkFilter:
    return LinkFilter(PLUGIN.compile({symbol("f"): entry}), consumer="here")


def test_readers_at_the_end_take_what_their_own_filters_match() -> None:
    stream = Stream("s", LIMITS, max_bytes=1 << 30)
    readers = {name: FakeReader(credit=1000, filter=_link(entry))
               for name, entry in FILTERS.items()}
    readers["all"] = FakeReader(credit=1000)
    readers["two"] = FakeReader(credit=2, filter=_link(FILTERS["eu"]))  # runs out of credit
    for reader in readers.values():
        stream.add_reader(reader)
    published = [FilterMessage(message(n), origin="here" if n % 3 == 0 else "there")
                 for n in range(20)]
    late = FakeReader(credit=1000, filter=_link(FILTERS["eu"]))  # attaches half way, from 0
    for n, each in enumerate(published):
        if n == 10:
            stream.add_reader(late)
        stream.publish(each)
    for name, reader in readers.items():
        expected = [n for n, each in enumerate(published)
                    if reader.filter is None or reader.filter.matches(each)]
        if name == "two":
            expected = expected[:2]
        assert [offset_of(d) for d in reader.got] == expected, name
    assert [offset_of(d) for d in late.got] == [n for n in range(20) if n % 2], "caught up"
    assert [offset_of(d) for d in readers["no-local"].got] == [
        n for n in range(20) if n % 3], "its own connection's messages left out"
    readers["two"].credit = 100
    stream.dispatch_to(readers["two"])
    assert [offset_of(d) for d in readers["two"].got] == list(range(1, 20, 2))
