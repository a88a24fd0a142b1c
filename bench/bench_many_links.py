"""Throughput of one node as idle filtered links multiply (the node matcher at work).

    python bench/bench_many_links.py [--messages 50000] [--idle 0,1000,10000] [--runs 1]

For a queue and for a topic, and for three shapes of filters, ten matching consumers (the
load generator of bench_broker.py, consumer *i* taking the messages whose ``k`` is *i*) share
one node with 0, 1,000 and 10,000 further receivers whose filters never match, each with
credit (one Python process holding them over a few connections). The delivered rate is
compared with the same shape and node without idle links, measured in the same run:

* ``equality``: ``k = i``; idle links ``k = 1000+j``;
* ``mixed``: ``region IN (...)``, ``region LIKE 'ri%'``, ``k BETWEEN``, ``k >= .. AND k < ..``;
  idle links a mix of IN, prefix LIKE, ranges and property filters (exact and ``&p:``);
* ``residue``: ``k + 0 = i``, arithmetic, which no index serves; idle ``k + 0 = 1000+j``
  (every idle link is evaluated on every message: this one is expected to collapse; it sends
  fewer messages with many idle links, see ``messages_for``).

Also reported: attaches per second of the idle links and the broker's resident memory per idle
link (RSS after attaching minus before, divided by their number).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from bench_broker import Scenario, build_loadgen, run_scenario, start_broker

SHAPES: Final = ("equality", "mixed", "residue")
PER_CONNECTION: Final = 500


def matching_filter(shape: str, i: int) -> str:
    if shape == "equality":
        return f"k = {i}"
    if shape == "residue":
        return f"k + 0 = {i}"
    return (f"region IN ('r{i}', 'x{i}')", f"region LIKE 'r{i}%'", f"k BETWEEN {i} AND {i}",
            f"k >= {i} AND k < {i + 1}")[i % 4]


def idle_filter(shape: str, j: int) -> dict[str, Any]:
    """One idle link's filter set as typed JSON-ish (descriptor, value)."""
    if shape == "equality":
        return {"descriptor": "amqp:sql-filter", "value": f"k = {1000 + j}"}
    if shape == "residue":
        return {"descriptor": "amqp:sql-filter", "value": f"k + 0 = {1000 + j}"}
    kind = j % 5
    if kind == 0:
        return {"descriptor": "amqp:sql-filter", "value": f"region IN ('n{j}', 'm{j}')"}
    if kind == 1:
        return {"descriptor": "amqp:sql-filter", "value": f"region LIKE 'never-{j}%'"}
    if kind == 2:
        return {"descriptor": "amqp:sql-filter", "value": f"k BETWEEN {100 + j} AND {101 + j}"}
    if kind == 3:
        return {"descriptor": "amqp:application-properties-filter",
                "value": {"region": f"never-{j}"}}
    return {"descriptor": "amqp:application-properties-filter",
            "value": {"region": f"&p:never-{j}"}}


# ------------------------------------------------------------------------ the idle links


def idle_main(port: int, address: str, topic: bool, shape: str, count: int) -> None:
    """Attach ``count`` idle filtered receivers, print ``ready SECONDS``, wait for SIGTERM."""
    from proton import Described, symbol
    from proton.handlers import MessagingHandler
    from proton.reactor import Container, Filter, LinkOption

    class Topic(LinkOption):
        def apply(self, link: Any) -> None:
            link.source.capabilities.put_array(False, 3)  # Data.SYMBOL
            link.source.capabilities.enter()
            link.source.capabilities.put_symbol("topic")
            link.source.capabilities.exit()

    class Idler(MessagingHandler):
        def __init__(self) -> None:
            super().__init__(prefetch=10)
            self.opened = 0
            self.started = 0.0

        def on_start(self, event: Any) -> None:
            self.started = time.monotonic()
            connection = None
            for j in range(count):
                if j % PER_CONNECTION == 0:
                    connection = event.container.connect(f"127.0.0.1:{port}")
                spec = idle_filter(shape, j)
                described = Described(symbol(spec["descriptor"]), spec["value"])
                options = [Filter({symbol("f"): described})] + ([Topic()] if topic else [])
                event.container.create_receiver(connection, address, name=f"idle-{j}",
                                                options=options)
            if count == 0:
                self.ready()

        def on_link_opened(self, event: Any) -> None:
            if event.link.remote_source.type == 0:  # a refusal (null source)
                sys.exit(f"idle link refused: {event.link.remote_condition}")
            self.opened += 1
            if self.opened == count:
                self.ready()

        def on_message(self, event: Any) -> None:
            sys.exit("an idle link received a message: its filter never matches")

        def ready(self) -> None:
            print(f"ready {time.monotonic() - self.started:.3f}", flush=True)

    Container(Idler()).run()


# ------------------------------------------------------------------------------ the bench


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass
class Result:
    rate: list[float]
    attach_rate: float = 0.0
    bytes_per_link: float = 0.0


def messages_for(shape: str, idle: int, messages: int) -> int:
    """Fewer messages where every idle link is evaluated on every message (the residue
    shape): the rate is what is reported, and 10,000 evaluations a message would take
    minutes per cell."""
    if shape != "residue" or idle <= 100:
        return messages
    return max(2_000, messages * 100 // idle)


def one(loadgen: Path, node: str, shape: str, idle: int, messages: int, run: int) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        broker, port = start_broker(Path(tmp), "--max-queue-messages", str(10 * messages))
        try:
            address = f"bench-{node}-{shape}-{idle}-{run}"
            before = rss(broker.pid)
            idler = subprocess.Popen(
                [sys.executable, __file__, "--idle-child", json.dumps(
                    [port, address, node == "topic", shape, idle])],
                stdout=subprocess.PIPE, text=True)
            assert idler.stdout is not None
            line = idler.stdout.readline().split()
            if not line or line[0] != "ready":
                sys.exit(f"bench: the idle links did not attach ({node} {shape} {idle})")
            seconds = float(line[1])
            time.sleep(0.5)
            grown = rss(broker.pid) - before
            scenario = Scenario(f"{node}-{shape}", tuple(matching_filter(shape, i)
                                                         for i in range(10)), keyed=True)
            count = messages_for(shape, idle, messages)
            rate = run_scenario(loadgen, port, scenario, count, address, None, broker.pid)
            idler.send_signal(signal.SIGTERM)
            idler.wait(timeout=60)
            return Result([rate], idle / seconds if idle and seconds else 0.0,
                          grown / idle if idle else 0.0)
        finally:
            broker.send_signal(signal.SIGTERM)
            broker.wait(timeout=120)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--idle-child":
        port, address, topic, shape, count = json.loads(sys.argv[2])
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        idle_main(port, address, topic, shape, count)
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python bench/bench_many_links.py --messages 50000 --idle 0,1000,10000")
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--idle", default="0,1000,10000",
                        help="numbers of idle filtered links, comma-separated (0 first)")
    parser.add_argument("--runs", type=int, default=1, help="runs per cell (median reported)")
    parser.add_argument("--nodes", default="queue,topic")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    args = parser.parse_args()
    idles = [int(x) for x in args.idle.split(",")]
    loadgen = build_loadgen()
    table: dict[tuple[str, str, int], Result] = {}
    for run in range(args.runs):
        for node in args.nodes.split(","):
            for shape in args.shapes.split(","):
                for idle in idles:
                    result = one(loadgen, node, shape, idle, args.messages, run)
                    key = (node, shape, idle)
                    if key in table:
                        table[key].rate += result.rate
                    else:
                        table[key] = result
                    print(f"  run {run + 1} {node:5s} {shape:8s} {idle:6d} idle "
                          f"{result.rate[0]:9.0f} msg/s", flush=True)
    print(f"\n{'node':5s} {'filters':8s} {'idle links':>10s} {'msg/s':>9s} {'vs 0 idle':>10s} "
          f"{'attaches/s':>11s} {'bytes/link':>11s}")
    for (node, shape, idle), result in table.items():
        rate = statistics.median(result.rate)
        base = statistics.median(table[(node, shape, idles[0])].rate)
        print(f"{node:5s} {shape:8s} {idle:10d} {rate:9.0f} {rate / base:9.2f}x "
              f"{result.attach_rate:11.0f} {result.bytes_per_link:11.0f}")
    print(f"\n{args.messages} messages per cell, 10 matching consumers, {args.runs} run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
