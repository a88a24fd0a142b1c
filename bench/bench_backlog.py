"""A filtered consumer draining a queued backlog, in process (evaluating queued messages).

    python bench/bench_backlog.py [--messages 100000] [--tree DIR]

Fills a queue (``filtex_broker.nodes.queue.Queue``, no network) with bench_broker's messages (a
``message-id``, application properties ``k`` and ``region``, a 100-byte data body), each checked
at the door as the producer does, with no consumer; then a consumer with a filter attaches with
credit for all of them and takes what it matches: ``k < 10`` (every message evaluated and taken)
and ``k = 3`` (every message evaluated, a tenth taken). Prints the CPU time per queued message
scanned, best of three. ``--tree DIR`` runs another source tree's broker (e.g. ``git archive
<commit> | tar -x -C DIR``) to compare: entries that keep the door check's decoded sections
evaluate faster, compact ones (the bytes and a fixed entry) make a view from the bytes again.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--tree", type=Path, help="the source tree whose broker to measure")
    args = parser.parse_args()
    tree = (args.tree or Path(__file__).resolve().parent.parent).resolve()
    sys.path.insert(0, str(tree))
    from proton import Described, int32, symbol, ulong

    from filtex_broker.nodes.node import NodeLimits
    from filtex_broker.nodes.queue import Queue
    from filtex_proton.amqp import encode_message
    from filtex_proton.plugin import FiltexPlugin, LinkFilter

    count = args.messages
    encoded = [encode_message(properties={"message-id": ulong(i)},
                              application_properties={"k": int32(i), "region": f"r{i}"},
                              body=b"x" * 100, body_kind="data") for i in range(10)]

    class Taker:
        """What a queue uses of a consumer (``filtex_broker.nodes.queue.Outlet``); settles
        nothing."""

        def __init__(self, sql: str) -> None:
            filter_set = FiltexPlugin().compile(
                {symbol("f"): Described(symbol("amqp:sql-filter"), sql)})
            self.filter = LinkFilter(filter_set, None)
            self.filter_stats = filter_set.stats
            self.credit = self.cursor = self.order = self.ruled_out = 0
            self.closed = self.browse = False
            self.got: list[Any] = []

        def send(self, entry: Any) -> None:
            self.credit -= 1
            entry.owner = self
            self.got.append(entry)

    best: dict[str, float] = {}
    for _ in range(3):
        queue = Queue("q", NodeLimits(1 << 30, 1 << 40))
        for i in range(count):
            message = FiltexPlugin.message(bytes(bytearray(encoded[i % 10])), origin=1)
            message.validate()
            queue.publish(message)
        for sql in ("k < 10", "k = 3"):
            taker = Taker(sql)
            queue.add_consumer(taker)  # type: ignore[arg-type]
            start = time.process_time()
            taker.credit = count
            queue.dispatch_to(taker)  # type: ignore[arg-type]
            per = (time.process_time() - start) / count * 1e6
            best[sql] = min(best.get(sql, float("inf")), per)
            queue.remove_consumer(taker)  # type: ignore[arg-type]
            for entry in taker.got:
                queue.requeue(entry)
            queue.dispatch_returned()
    for sql, per in best.items():
        print(f"{tree.name}: filter {sql!r}: {per:.2f} us per queued message scanned")
    return 0


if __name__ == "__main__":
    sys.exit(main())
