"""A filtered consumer draining a queued backlog, in process (evaluating queued messages).

    python bench/bench_backlog.py [--messages 100000] [--tree DIR]

Fills a queue (``filtex_broker.nodes.queue.Queue``, no network) with bench_broker's messages (a
``message-id``, application properties ``k`` and ``region``, a 100-byte data body), each checked
at the door as the producer does, with no consumer; then a consumer with a filter attaches with
credit for all of them and takes what it matches: ``k < 10`` (every message evaluated and taken)
and ``k = 3`` (every message evaluated, a tenth taken). Then through the node matcher: ten
consumers ``k = 0`` .. ``k = 9`` attach first, without credit, so that each message is kept with
the matcher's answer (who may match it), and ``k = 3`` gets credit for everything: it skips nine
in ten unevaluated and takes the tenth. Prints the CPU time per queued message scanned (and, for
the matcher's case, per message queued), best of three. ``--tree DIR`` runs another source
tree's broker (e.g. ``git archive <commit> | tar -x -C DIR``) to compare: entries that keep the
door check's decoded sections evaluate faster, compact ones (the bytes and a fixed entry) make a
view from the bytes again.
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

    count: int = args.messages
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

    def fill(queue: Queue) -> float:
        """Queue ``count`` messages; the CPU time per message."""
        start = time.process_time()
        for i in range(count):
            message = FiltexPlugin.message(bytes(bytearray(encoded[i % 10])), origin=1)
            message.validate()
            queue.publish(message)
        return (time.process_time() - start) / count * 1e6

    best: dict[str, float] = {}

    def keep(name: str, per: float) -> None:
        best[name] = min(best.get(name, float("inf")), per)

    for _ in range(3):
        queue = Queue("q", NodeLimits(1 << 30, 1 << 40))
        fill(queue)
        for sql in ("k < 10", "k = 3"):
            taker = Taker(sql)
            queue.add_consumer(taker)  # type: ignore[arg-type]
            start = time.process_time()
            taker.credit = count
            queue.dispatch_to(taker)  # type: ignore[arg-type]
            keep(f"filter {sql!r}", (time.process_time() - start) / count * 1e6)
            queue.remove_consumer(taker)  # type: ignore[arg-type]
            for entry in taker.got:
                queue.requeue(entry)
            queue.dispatch_returned()
        queue = Queue("q", NodeLimits(1 << 30, 1 << 40))
        takers = [Taker(f"k = {k}") for k in range(10)]
        for taker in takers:
            queue.add_consumer(taker)  # type: ignore[arg-type]
        keep("10 consumers: queued", fill(queue))
        start = time.process_time()
        takers[3].credit = count
        queue.dispatch_to(takers[3])  # type: ignore[arg-type]
        keep("10 consumers: 'k = 3' scanned", (time.process_time() - start) / count * 1e6)
        assert len(takers[3].got) == count // 10
    for name, per in best.items():
        print(f"{tree.name}: {name}: {per:.2f} us per message")
    return 0


if __name__ == "__main__":
    sys.exit(main())
