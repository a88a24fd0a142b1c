"""Relay mode against its upstream: RabbitMQ direct, and the same through the relay.

    python bench/bench_relay.py [--messages 50000] [--runs 3] [--profile DIR]
        [--scenarios direct,unfiltered,10-filtered,100-filtered,direct-10,direct-100]
        [--upstream-cpus CPUS]

Starts a private RabbitMQ 3.10 with its AMQP 1.0 plugin (``bench/rabbit_node.py``, as
the relay tests do), then per run a fresh relay (``python -m filtex_broker --upstream``) in
front of it, and measures with the C load generator of ``bench/bench_broker.py``
(one producer sending unsettled and waiting for every outcome; consumers accepting
every message):

* ``direct``: RabbitMQ alone, one producer and one unfiltered consumer (the baseline);
* ``unfiltered``: the same through the relay;
* ``10 filtered``: through the relay, ten consumers on one queue, consumer K with
  ``region = 'rK'`` (the relay holds each consumer's non-matches and hands them to
  the consumer that matches: RabbitMQ filters nothing);
* ``100 filtered``: the same with 100 consumers and k in 0..99;
* ``direct-10``, ``direct-100`` (only when ``--scenarios`` names them): RabbitMQ alone with
  10 or 100 unfiltered consumers on the queue, each taking its share: the upstream links the
  relay opens for 10 or 100 consumers, without the relay.

The ratio column is the median of each run's ratio to ``direct`` measured in that run (the
machine's load drifts; ratios are what to compare). CPU is given per process (the relay,
RabbitMQ's ``beam.smp``, the load generator's processes together), per message and as a
share of one core while the scenario ran: on a small machine the three share the cores, and
where RabbitMQ and the load generator already fill them in ``direct``, every microsecond the
relay spends is taken from RabbitMQ. ``--upstream-cpus CPUS`` (a ``taskset`` list, e.g.
``0``) confines RabbitMQ to those CPUs (one Erlang scheduler each) and the relay and the
load generator to the others, for direct and relayed runs alike: the upstream on a host of
its own, as a relay is deployed. ``--profile DIR`` records the relay with py-spy
(``pip install py-spy``) in the first run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
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
from rabbit_node import Rabbit, cpu_list, rabbit_available, start_rabbit


@dataclass(frozen=True)
class Case:
    """One scenario, and whether it runs through the relay or straight to RabbitMQ."""

    key: str
    scenario: Scenario
    relayed: bool
    default: bool = True
    """Run unless ``--scenarios`` names others."""


SCENARIOS: Final = (
    Case("direct", Scenario("direct", (None,)), relayed=False),
    Case("unfiltered", Scenario("unfiltered", (None,)), relayed=True),
    Case("10-filtered", Scenario("10 filtered", tuple(f"region = 'r{i}'" for i in range(10)),
                                  keyed=True), relayed=True),
    Case("100-filtered", Scenario("100 filtered",
                                   tuple(f"region = 'r{i}'" for i in range(100)), keyed=True,
                                   variants=100), relayed=True),
    # RabbitMQ alone with as many consumer links on the queue as the relay opens for 10 or
    # 100 consumers (each takes its share, unfiltered): what those links cost the upstream
    Case("direct-10", Scenario("direct 10", (None,) * 10, split=True), relayed=False,
         default=False),
    Case("direct-100", Scenario("direct 100", (None,) * 100, split=True), relayed=False,
         default=False),
)


@dataclass(frozen=True)
class Usage:
    """CPU seconds of the three parties during one scenario, and how long it ran."""

    relay: float
    upstream: float
    loadgen: float
    seconds: float
    relay_waited: float
    upstream_waited: float
    """Seconds the threads of the relay (RabbitMQ) were runnable but waited for a CPU."""
    load: float
    """The one-minute load average when the scenario ended."""


def run_delay(pid: int) -> float:
    """Seconds the threads of a process and its live children (``rabbitmq-server`` is a
    shell waiting for ``beam.smp``) have waited, runnable, for a CPU so far (Linux
    ``/proc/PID/task/*/schedstat``): CPU contention, not the process's own waiting."""
    waited = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError, IndexError):  # a thread that just ended
            waited += int((task / "schedstat").read_text().split()[1]) / 1e9
            for child in (task / "children").read_text().split():
                waited += run_delay(int(child))
    return waited


def children_cpu() -> float:
    """CPU seconds of the waited-for children so far (the load generator's processes)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class StoppedError(Exception):
    """SIGTERM or SIGINT: stop the relay and RabbitMQ, report what was measured."""


def _stop(signum: int, frame: FrameType | None) -> None:
    raise StoppedError


def measure(loadgen: Path, rabbit: Rabbit, chosen: list[Case], run: int,
            args: argparse.Namespace, results: dict[str, list[float]],
            cpu: dict[str, list[Usage]]) -> None:
    """One run of every chosen scenario, against a fresh relay."""
    with tempfile.TemporaryDirectory() as tmp:
        relay, relay_port = start_broker(Path(tmp), "--upstream", rabbit.url)
        try:
            for path in chosen:
                queue = f"/queue/bench-{run}-{path.key}-{os.getpid()}"
                port = relay_port if path.relayed else rabbit.port
                profile = args.profile if run == 0 and path.relayed else None
                relay_before = cpu_seconds(relay.pid)
                rabbit_before = cpu_seconds(rabbit.process.pid)
                waited_before = run_delay(relay.pid), run_delay(rabbit.process.pid)
                loadgen_before, started = children_cpu(), time.monotonic()
                rate = run_scenario(loadgen, port, path.scenario, args.messages, queue, profile,
                                    relay.pid)
                usage = Usage(cpu_seconds(relay.pid) - relay_before,
                              cpu_seconds(rabbit.process.pid) - rabbit_before,
                              children_cpu() - loadgen_before, time.monotonic() - started,
                              run_delay(relay.pid) - waited_before[0],
                              run_delay(rabbit.process.pid) - waited_before[1],
                              os.getloadavg()[0])
                results[path.key].append(rate)
                cpu[path.key].append(usage)
                print(f"  run {run + 1} {path.scenario.name:13s} {rate:9.0f} msg/s  CPU % of a "
                      f"core: relay {usage.relay / usage.seconds * 100:3.0f}, RabbitMQ "
                      f"{usage.upstream / usage.seconds * 100:3.0f}, load generator "
                      f"{usage.loadgen / usage.seconds * 100:3.0f}; waited for a CPU: relay "
                      f"{usage.relay_waited / usage.seconds * 100:3.0f}%, RabbitMQ "
                      f"{usage.upstream_waited / usage.seconds * 100:3.0f}%; "
                      f"load {usage.load:.2f}",
                      flush=True)
        finally:
            relay.send_signal(signal.SIGTERM)
            relay.wait(timeout=60)


def report(chosen: list[Case], results: dict[str, list[float]],
           cpu: dict[str, list[Usage]], args: argparse.Namespace) -> None:
    done = [path for path in chosen if results[path.key]]
    if not done:
        return
    direct = results["direct"]
    print(f"\n{'path':13s} {'msg/s (median)':>15s} {'vs direct':>10s}   CPU us/msg (% of a core):"
          f" {'relay':>11s} {'RabbitMQ':>11s} {'load gen.':>11s}   waited for a CPU: relay "
          "RabbitMQ")
    for path in done:
        rate = statistics.median(results[path.key])
        # the median of each run's ratio: direct and relay measured minutes apart, not hours
        ratios = [r / d for r, d in zip(results[path.key], direct, strict=False)]
        ratio = f"{statistics.median(ratios):9.2f}x" if ratios else f"{'-':>10s}"
        used = cpu[path.key]
        columns = []
        for party in ("relay", "upstream", "loadgen"):
            if party == "relay" and not path.relayed:
                columns.append(f"{'-':>11s}")
                continue
            per_message = statistics.median(getattr(u, party) / args.messages * 1e6 for u in used)
            share = statistics.median(getattr(u, party) / u.seconds * 100 for u in used)
            columns.append(f"{per_message:6.1f} ({share:3.0f}%)")
        waited = [statistics.median(getattr(u, party) / u.seconds * 100 for u in used)
                  for party in ("relay_waited", "upstream_waited")]
        print(f"{path.scenario.name:13s} {rate:15.0f} {ratio} {' ' * 26}{' '.join(columns)}"
              f"{' ' * 19}{waited[0]:4.0f}% {waited[1]:7.0f}%")
    loads = [u.load for used in cpu.values() for u in used]
    print(f"\n{args.messages} messages per scenario, {len(results[done[0].key])} runs, "
          f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}; RabbitMQ 3.10 (AMQP 1.0 "
          "plugin) on the same machine"
          + (f", confined to CPUs {args.upstream_cpus} (relay and load generator on the others)"
             if args.upstream_cpus else "")
          + (f"; load average {min(loads):.2f}-{max(loads):.2f}" if loads else ""))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python bench/bench_relay.py --messages 50000 --runs 3",
    )
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario (median reported)")
    parser.add_argument("--profile", type=Path, help="record py-spy flame graphs of the relay here")
    parser.add_argument("--upstream-cpus", metavar="CPUS",
                        help="confine RabbitMQ to these CPUs (taskset list, e.g. 0; one Erlang "
                        "scheduler each) and the relay and load generator to the others")
    parser.add_argument("--scenarios", default=",".join(p.key for p in SCENARIOS if p.default),
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
    cpu: dict[str, list[Usage]] = {p.key: [] for p in chosen}
    if args.upstream_cpus:
        others = os.sched_getaffinity(0) - cpu_list(args.upstream_cpus)
        if not others:
            parser.error(f"--upstream-cpus {args.upstream_cpus} leaves no CPU for the relay")
        os.sched_setaffinity(0, others)  # the relay and the load generators inherit it
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    with tempfile.TemporaryDirectory() as tmp:
        rabbit = start_rabbit(Path(tmp) / "rabbit", cpus=args.upstream_cpus)
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
