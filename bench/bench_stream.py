"""A selective consumer reading a stream from ``first``, in process, on RabbitMQ's workload.

    python bench/bench_stream.py [--messages 10000000] [--queue-messages 1000000] [--rounds 3]

The workload RabbitMQ published for its stream filters: events of several types, one in
100,000 an ``order.created``, and a compound SQL filter that matches ten of the 10 million::

    properties.subject = 'order.created' AND region IN ('EU', 'UK')
        AND (header.priority > 4 OR amount >= 1000 OR premium = TRUE)

Each event's type is its ``subject`` and, as RabbitMQ's stream clients set it, its
``x-stream-filter-value``. A stream node (``filtex_broker.streams.node.Stream``, no network)
takes ``--messages`` of them; a reader with credit for everything then reads from ``first``:

* ``stream: SQL, each evaluated``: the SQL filter only, attached after the events were
  written, so no summary tracks its fields, and without the byte search for the texts it
  requires: every event is decoded and evaluated (the scan rate no index helps);
* ``stream: SQL alone``: the same reader as a stream reads for it: an event whose bytes do not
  hold ``order.created`` is passed over without decoding (:func:`text_prefilter`);
* ``stream: stream filter + SQL``: ``rabbitmq:stream-filter 'order.created'`` beside the SQL
  filter, as a RabbitMQ client sends them: the blocks whose summary holds no
  ``order.created`` value are passed over unread;
* ``stream: SQL, fields summarised``: the SQL filter alone, on a stream where a reader with the
  same filter attached before the events were written (so ``subject`` is summarised too).

The baseline, measured in the same run: a queue (``filtex_broker.nodes.queue.Queue``) holding
``--queue-messages`` of the same events, drained by a consumer with the SQL filter (every event
evaluated; the queue keeps what it does not take). Rates are events passed over per second of
CPU time (``time.process_time``), best of ``--rounds``; each row prints its ratio to the
baseline. Every reader's matches are checked (ten per 10 million events).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proton import Described, int32, symbol, ubyte

from filtex_broker.nodes.node import NodeLimits
from filtex_broker.nodes.queue import Queue
from filtex_broker.streams.node import Stream
from filtex_proton.amqp import encode_message
from filtex_proton.plugin import FilterMessage, FiltexPlugin, LinkFilter

SQL = ("properties.subject = 'order.created' AND region IN ('EU', 'UK') "
       "AND (header.priority > 4 OR amount >= 1000 OR premium = TRUE)")
EVERY: int = 100_000
"""One event in this many is an ``order.created``."""
TYPES = ("order.paid", "order.shipped", "cart.updated", "user.login", "page.viewed",
         "order.cancelled", "payment.failed")
REGIONS = ("EU", "US", "UK", "APJ")
PLUGIN = FiltexPlugin()


def _event(kind: str, n: int) -> bytes:
    """One event: its kind as subject and stream filter value, and the fields the SQL reads."""
    return encode_message(
        header={"priority": ubyte(9 if n % 7 == 0 else 4)},
        message_annotations={symbol("x-stream-filter-value"): kind},
        properties={"subject": kind, "message-id": f"e{n}"},
        application_properties={"region": REGIONS[n % 4], "amount": int32(n % 1500),
                                "premium": n % 11 == 0, "customer": f"c{n % 9973}"},
        body=b"x" * 120, body_kind="data")


def _events(count: int) -> tuple[list[bytes], int]:
    """The events (ordinary ones shared by reference, as a stream holds them) and how many
    the SQL filter matches."""
    ordinary = [_event(TYPES[i % len(TYPES)], i) for i in range(997)]
    events: list[bytes] = []
    created = 0
    for i in range(count):
        if i % EVERY == EVERY - 1:
            # Ten in a hundred match: EU or UK and a priority, an amount or a premium customer.
            match = created % 10 == 3
            events.append(encode_message(
                header={"priority": ubyte(9 if match else 1)},
                message_annotations={symbol("x-stream-filter-value"): "order.created"},
                properties={"subject": "order.created", "message-id": f"e{i}"},
                application_properties={"region": "EU" if match else "US", "amount": int32(5),
                                        "premium": False, "customer": "c1"},
                body=b"x" * 120, body_kind="data"))
            created += 1
        else:
            events.append(ordinary[i % len(ordinary)])
    matching = sum(1 for k in range(created) if k % 10 == 3)
    return events, matching


def _filter(**entries: Any) -> LinkFilter:
    return LinkFilter(PLUGIN.compile({symbol(k): v for k, v in entries.items()}), None)


def _sql() -> Described:
    return Described(symbol("amqp:sql-filter"), SQL)


class Counter:
    """A stream reader or queue consumer that counts what it is given."""

    def __init__(self, link_filter: LinkFilter, credit: int) -> None:
        self.filter: LinkFilter | None = link_filter
        self.filter_stats = link_filter.filter_set.stats
        self.position = 0
        self.credit = credit
        self.cursor = self.order = self.ruled_out = 0
        self.closed = self.browse = False
        self.got = 0

    def deliver(self, data: bytes) -> None:
        self.credit -= 1
        self.got += 1

    def send(self, entry: Any) -> None:
        self.credit -= 1
        entry.owner = self
        self.got += 1


def _stream(events: list[bytes], summarised: bool) -> Stream:
    stream = Stream("events", NodeLimits(1 << 30, 1 << 40), max_bytes=1 << 40)
    if summarised:  # a reader with the same filter attached before: its fields summarised
        stream.add_reader(Counter(_filter(s=_sql()), 0))
    for data in events:
        stream.publish(FilterMessage(data))
    return stream


def _read(stream: Stream, link_filter: LinkFilter, matching: int,
          search_texts: bool = True) -> float:
    """Events passed over per CPU second by a reader from ``first``; without
    ``search_texts``, every event is evaluated (no byte search for the filter's texts)."""
    reader = Counter(link_filter, 1 << 62)
    stream.add_reader(reader)
    if not search_texts:
        plan = stream.readers[reader]
        matches = link_filter.matches
        stream.readers[reader] = plan._replace(
            admits=lambda data, origin: matches(FilterMessage(data, origin)))
    start = time.process_time()
    stream.dispatch_to(reader)
    seconds = time.process_time() - start
    stream.remove_reader(reader)
    assert reader.got == matching, (reader.got, matching)
    return stream.log.next_offset / seconds


def _drain_queue(events: list[bytes], matching: int) -> float:
    queue = Queue("q", NodeLimits(1 << 40, 1 << 50))
    for data in events:
        message = FilterMessage(data)
        message.validate()  # as the producer's door check does: the queue keeps the view
        queue.publish(message)
    taker = Counter(_filter(s=_sql()), len(events))
    queue.add_consumer(taker)
    start = time.process_time()
    queue.dispatch_to(taker)
    seconds = time.process_time() - start
    assert taker.got == matching, (taker.got, matching)
    return len(events) / seconds


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python bench/bench_stream.py --messages 1000000 --rounds 1")
    parser.add_argument("--messages", type=int, default=10_000_000)
    parser.add_argument("--queue-messages", type=int, default=1_000_000,
                        help="events in the baseline's queue (a queued event costs far more "
                             "memory than a stream's)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.messages < EVERY or args.queue_messages < EVERY or args.rounds < 1:
        parser.error(f"--messages and --queue-messages must be at least {EVERY:,} "
                     f"(one order.created), --rounds at least 1")
    events, matching = _events(args.messages)
    queue_events, queue_matching = _events(args.queue_messages)
    print(f"{args.messages:,} events, {matching} matching; queue baseline: "
          f"{args.queue_messages:,} events", flush=True)
    start = time.process_time()
    plain = _stream(events, summarised=False)
    print(f"stream written: {args.messages / (time.process_time() - start):,.0f} events/s "
          f"({len(plain.log.segments)} segments)", flush=True)
    summarised = _stream(events, summarised=True)
    rows: dict[str, Callable[[], float]] = {
        "queue: SQL (baseline)": lambda: _drain_queue(queue_events, queue_matching),
        "stream: SQL, each evaluated": lambda: _read(plain, _filter(s=_sql()), matching,
                                                     search_texts=False),
        "stream: SQL alone": lambda: _read(plain, _filter(s=_sql()), matching),
        "stream: stream filter + SQL": lambda: _read(plain, _filter(
            f=Described(symbol("rabbitmq:stream-filter"), "order.created"), s=_sql()),
            matching),
        "stream: SQL, fields summarised": lambda: _read(summarised, _filter(s=_sql()),
                                                        matching),
    }
    best: dict[str, float] = {name: max(measure() for _ in range(args.rounds))
                              for name, measure in rows.items()}
    baseline = best["queue: SQL (baseline)"]
    for name, rate in best.items():
        print(f"{name:32} {rate:>14,.0f} events/s  x{rate / baseline:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
