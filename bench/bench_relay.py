"""Relay mode against its upstream: RabbitMQ direct, and the same through the relay.

    python bench/bench_relay.py [--messages 50000] [--runs 3] [--profile DIR]
        [--scenarios direct,unfiltered,10-filtered,100-filtered]

Starts a private RabbitMQ 3.10 with its AMQP 1.0 plugin (``bench/rabbit_node.py``, as
the relay tests do), then per run a fresh relay (``python -m broker --upstream``) in
front of it, and measures with the C load generator of ``bench/bench_broker.py``
(one producer sending unsettled and waiting for every outcome; consumers accepting
every message):

* ``direct``: RabbitMQ alone, one producer and one unfiltered consumer (the baseline);
* ``unfiltered``: the same through the relay;
* ``10 filtered``: through the relay, ten consumers on one queue, consumer K with
  ``region = 'rK'`` (the relay holds each consumer's non-matches and hands them to
  the consumer that matches: RabbitMQ filters nothing);
* ``100 filtered``: the same with 100 consumers and k in 0..99.

The ratio column is the median of each run's ratio to ``direct`` measured in that run (the
machine's load drifts; ratios are what to compare). CPU is the relay process's, per
message and as a share of one core while the scenario ran. ``--profile DIR`` records the
relay with py-spy (``pip install py-spy``) in the first run.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Final

from bench_broker import Scenario, build_loadgen, cpu_seconds, run_scenario, start_broker
from rabbit_node import Rabbit, rabbit_available, start_rabbit


@dataclass(frozen=True)
class Case:
    """One scenario, and whether it runs through the relay or straight to RabbitMQ."""

    key: str
    scenario: Scenario
    relayed: bool


SCENARIOS: Final = (
    Case("direct", Scenario("direct", (None,)), relayed=False),
    Case("unfiltered", Scenario("unfiltered", (None,)), relayed=True),
    Case("10-filtered", Scenario("10 filtered", tuple(f"region = 'r{i}'" for i in range(10)),
                                  keyed=True), relayed=True),
    Case("100-filtered", Scenario("100 filtered",
                                   tuple(f"region = 'r{i}'" for i in range(100)), keyed=True,
                                   variants=100), relayed=True),
)


class StoppedError(Exception):
    """SIGTERM or SIGINT: stop the relay and RabbitMQ, report what was measured."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise StoppedError


def measure(loadgen: Path, rabbit: Rabbit, chosen: list[Case], run: int,
            args: argparse.Namespace, results: dict[str, list[float]],
            cpu: dict[str, list[tuple[float, float]]]) -> None:
    """One run of every chosen scenario, against a fresh relay."""
    with tempfile.TemporaryDirectory() as tmp:
        relay, relay_port = start_broker(Path(tmp), "--upstream", rabbit.url)
        try:
            for path in chosen:
                queue = f"/queue/bench-{run}-{path.key}-{os.getpid()}"
                port = relay_port if path.relayed else rabbit.port
                profile = args.profile if run == 0 and path.relayed else None
                before, started = cpu_seconds(relay.pid), time.monotonic()
                rate = run_scenario(loadgen, port, path.scenario, args.messages, queue, profile,
                                    relay.pid)
                used = cpu_seconds(relay.pid) - before
                results[path.key].append(rate)
                cpu[path.key].append((used / args.messages * 1e6,
                                      used / (time.monotonic() - started)))
                print(f"  run {run + 1} {path.scenario.name:13s} {rate:9.0f} msg/s", flush=True)
        finally:
            relay.send_signal(signal.SIGTERM)
            relay.wait(timeout=60)


def report(chosen: list[Case], results: dict[str, list[float]],
           cpu: dict[str, list[tuple[float, float]]], args: argparse.Namespace) -> None:
    done = [path for path in chosen if results[path.key]]
    if not done:
        return
    direct = results["direct"]
    print(f"\n{'path':13s} {'msg/s (median)':>15s} {'vs direct':>10s} {'relay CPU us/msg':>17s} "
          f"{'relay CPU %':>12s}")
    for path in done:
        rate = statistics.median(results[path.key])
        # the median of each run's ratio: direct and relay measured minutes apart, not hours
        ratios = [r / d for r, d in zip(results[path.key], direct, strict=False)]
        ratio = f"{statistics.median(ratios):9.2f}x" if ratios else f"{'-':>10s}"
        used = cpu[path.key]
        per_message = statistics.median(u for u, _ in used) if path.relayed else 0.0
        share = statistics.median(s for _, s in used) * 100 if path.relayed else 0.0
        print(f"{path.scenario.name:13s} {rate:15.0f} {ratio} {per_message:17.2f} "
              f"{share:11.0f}%")
    print(f"\n{args.messages} messages per scenario, {len(results[done[0].key])} runs, "
          f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}; RabbitMQ 3.10 (AMQP 1.0 "
          "plugin) on the same machine")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python bench/bench_relay.py --messages 50000 --runs 3",
    )
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario (median reported)")
    parser.add_argument("--profile", type=Path, help="record py-spy flame graphs of the relay here")
    parser.add_argument("--scenarios", default=",".join(p.key for p in SCENARIOS),
                        help="comma-separated subset of: "
                        + ", ".join(p.key for p in SCENARIOS) + " (direct always runs)")
    args = parser.parse_args()
    wanted = {"direct", *args.scenarios.split(",")}
    unknown = wanted - {p.key for p in SCENARIOS}
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    chosen = [p for p in SCENARIOS if p.key in wanted]
    reason = rabbit_available()
    if reason is not None:
        sys.exit(f"bench: {reason}")
    loadgen = build_loadgen()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[float]] = {p.key: [] for p in chosen}
    cpu: dict[str, list[tuple[float, float]]] = {p.key: [] for p in chosen}
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    with tempfile.TemporaryDirectory() as tmp:
        rabbit = start_rabbit(Path(tmp) / "rabbit")
        try:
            for run in range(args.runs):
                measure(loadgen, rabbit, chosen, run, args, results, cpu)
        except StoppedError:
            print("bench: stopped", flush=True)
        finally:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            rabbit.stop()
    report(chosen, results, cpu, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
