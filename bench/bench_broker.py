"""Throughput of a running filtex-broker on a one-queue workload, with and without filters.

    python bench/bench_broker.py [--messages 200000] [--runs 3] [--profile DIR]
        [--durable DIR] [--archive DIR] [--metrics] [--console]
                                                       # variants, each against "in memory"

Starts ``python -m filtex_broker`` on an ephemeral port, then for each scenario
attaches the consumers, sends the messages from one producer and measures the
delivered rate (messages / seconds from the first send to the last receive):

* ``unfiltered``: one consumer without filters (the baseline);
* ``1 filtered``: one consumer with an SQL filter that every message passes
  (``k < 10``): the full cost of evaluating, nothing skipped;
* ``10 filtered``: ten competing consumers, consumer *i* with ``k = i``
  (disjoint, together they cover every message).

Each message is 100 bytes of body with ``application-properties {k: 0..9, region: "r<k>"}``
(k drawn pseudo-randomly, the same sequence every run, so that the round robin
does not line up with the keys; ``Scenario.variants`` widens k, e.g. to 0..99 for
``bench/bench_relay.py``'s 100 consumers) and a ``message-id``; the producer sends
unsettled (at-least-once) and waits for every ``accepted``. The load generator
is a small Proton-C program (embedded below, compiled once with ``cc`` against
libqpid-proton; on Debian
``apt-get install libqpid-proton11-dev``) in separate processes, so that it is
not the bottleneck; the ratio column compares each scenario with the
unfiltered baseline measured in the same run. ``--profile DIR`` also records
the broker with py-spy (``pip install py-spy``) during each scenario. ``--console`` runs
the broker with the management console on and a client polling its overview the way the
open page does (every second; ``--console-poll``), to measure what an open page costs.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Final

LOADGEN_C: Final = r"""
/* filtex-broker load generator: send or receive COUNT raw, pre-encoded messages. */
#include <proton/connection.h>
#include <proton/condition.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/message.h>
#include <proton/proactor.h>
#include <proton/session.h>
#include <proton/transport.h>
#include <proton/codec.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define VARIANTS 100
typedef struct {
  int sending, variants; const char *host, *port, *address, *filter; int count, window;
  pn_proactor_t *proactor; char *msg[VARIANTS]; size_t len[VARIANTS];
  int sent, done, failed; double first, last; char buf[65536]; uint64_t seed;
} app_t;

static uint64_t next_random(app_t *app) {  /* xorshift64: the same sequence every run */
  app->seed ^= app->seed << 13; app->seed ^= app->seed >> 7; app->seed ^= app->seed << 17;
  return app->seed;
}

static double now(void) {
  struct timespec ts; clock_gettime(CLOCK_REALTIME, &ts); return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void encode(app_t *app, int total, pn_millis_t ttl) {
  static char body[1 << 16]; memset(body, 'x', sizeof body);
  size_t body_size = 100;  /* or what makes the encoded message TOTAL bytes long */
  for (int i = 0; i < app->variants; i++) {
    pn_message_t *m = pn_message();
    pn_message_set_id(m, (pn_atom_t){.type = PN_ULONG, .u.as_ulong = (uint64_t)i});
    if (ttl > 0) pn_message_set_ttl(m, ttl);
    pn_data_t *props = pn_message_properties(m);
    pn_data_put_map(props); pn_data_enter(props);
    pn_data_put_string(props, pn_bytes(1, "k")); pn_data_put_int(props, i);
    char region[8]; snprintf(region, sizeof region, "r%d", i);
    pn_data_put_string(props, pn_bytes(6, "region"));
    pn_data_put_string(props, pn_bytes(strlen(region), region));
    pn_data_exit(props);
    pn_message_set_inferred(m, true);
    size_t size;
    for (int attempt = 0; attempt < 3; attempt++) {  /* the body's size field may grow */
      pn_data_clear(pn_message_body(m));
      pn_data_put_binary(pn_message_body(m), pn_bytes(body_size, body));
      size = sizeof body + 4096; app->msg[i] = realloc(app->msg[i], size);
      if (pn_message_encode(m, app->msg[i], &size)) { fprintf(stderr, "encode failed\n"); exit(1); }
      if (total <= 0 || (int)size == total) break;
      if ((int)(size - body_size) >= total) { fprintf(stderr, "size too small\n"); exit(1); }
      body_size = total - (size - body_size);
    }
    app->len[i] = size; pn_message_free(m);
  }
}

static void finish(app_t *app, pn_event_t *e) {
  app->last = now();
  printf("%s count=%d first=%.6f last=%.6f failed=%d size=%zu\n", app->sending ? "send" : "recv",
         app->done, app->first, app->last, app->failed, app->len[0]);
  fflush(stdout);
  pn_connection_close(pn_event_connection(e));
}

static int handle(app_t *app, pn_event_t *e) {
  switch (pn_event_type(e)) {
  case PN_CONNECTION_INIT: {
    pn_connection_t *c = pn_event_connection(e);
    char id[64]; snprintf(id, sizeof id, "loadgen-%d", (int)getpid());
    pn_connection_set_container(c, id);
    pn_connection_open(c);
    pn_session_t *s = pn_session(c); pn_session_open(s);
    pn_link_t *l;
    if (app->sending) {
      l = pn_sender(s, "loadgen-send");
      pn_terminus_set_address(pn_link_target(l), app->address);
    } else {
      l = pn_receiver(s, "loadgen-recv");
      pn_terminus_set_address(pn_link_source(l), app->address);
      if (app->filter && *app->filter) {
        pn_data_t *f = pn_terminus_filter(pn_link_source(l));
        pn_data_put_map(f); pn_data_enter(f);
        pn_data_put_symbol(f, pn_bytes(3, "sql"));
        pn_data_put_described(f); pn_data_enter(f);
        pn_data_put_symbol(f, pn_bytes(15, "amqp:sql-filter"));
        pn_data_put_string(f, pn_bytes(strlen(app->filter), app->filter));
        pn_data_exit(f); pn_data_exit(f);
      }
    }
    pn_link_open(l);
    if (!app->sending) pn_link_flow(l, app->window);
    break;
  }
  case PN_LINK_REMOTE_OPEN: {
    pn_link_t *l = pn_event_link(e);
    if (pn_terminus_get_type(pn_link_remote_source(l)) == PN_UNSPECIFIED && !app->sending) {
      fprintf(stderr, "link refused\n"); exit(3);
    }
    printf("ready\n"); fflush(stdout);
    break;
  }
  case PN_LINK_FLOW: {
    pn_link_t *l = pn_event_link(e);
    if (!app->sending) break;
    if (app->sent == 0 && pn_link_credit(l) > 0) app->first = now();
    while (pn_link_credit(l) > 0 && app->sent < app->count) {
      int i = app->sent++;
      int v = (int)(next_random(app) % app->variants);  /* k in random order, not round robin */
      pn_delivery(l, pn_dtag((const char *)&i, sizeof i));
      pn_link_send(l, app->msg[v], app->len[v]);
      pn_link_advance(l);
    }
    break;
  }
  case PN_DELIVERY: {
    pn_delivery_t *d = pn_event_delivery(e);
    pn_link_t *l = pn_delivery_link(d);
    if (app->sending) {
      if (!pn_delivery_updated(d)) break;
      if (pn_delivery_remote_state(d) != PN_ACCEPTED) app->failed++;
      pn_delivery_settle(d);
      if (++app->done == app->count) finish(app, e);
    } else {
      if (!pn_delivery_readable(d) || pn_delivery_partial(d)) break;
      while (pn_link_recv(l, app->buf, sizeof app->buf) > 0) {}
      pn_link_advance(l);
      if (app->done >= app->count) {  /* beyond its part (consumers sharing a queue): give back */
        pn_delivery_update(d, PN_RELEASED); pn_delivery_settle(d); break;
      }
      pn_delivery_update(d, PN_ACCEPTED); pn_delivery_settle(d);
      if (app->done++ == 0) app->first = now();
      if (pn_link_credit(l) < app->window / 2) pn_link_flow(l, app->window - pn_link_credit(l));
      if (app->done == app->count) finish(app, e);
    }
    break;
  }
  case PN_TRANSPORT_CLOSED: {
    pn_condition_t *c = pn_transport_condition(pn_event_transport(e));
    if (pn_condition_is_set(c) && app->done < app->count) {
      fprintf(stderr, "transport: %s: %s\n", pn_condition_get_name(c),
              pn_condition_get_description(c)); exit(2);
    }
    break;
  }
  case PN_PROACTOR_INACTIVE: return 0;
  default: break;
  }
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: loadgen send HOST PORT ADDRESS COUNT [KEYS [SIZE [TTL]]] | "
            "recv HOST PORT ADDRESS COUNT [SQL]\n"); return 2;
  }
  app_t app = {0};
  app.sending = !strcmp(argv[1], "send"); app.host = argv[2]; app.port = argv[3];
  app.address = argv[4]; app.count = atoi(argv[5]); app.filter = argc > 6 ? argv[6] : NULL;
  /* k in 0..KEYS-1 ("" or none: 10) */
  app.variants = app.sending && app.filter && *app.filter ? atoi(app.filter) : 10;
  if (app.variants < 1 || app.variants > VARIANTS) { fprintf(stderr, "bad KEYS\n"); return 2; }
  app.window = 1000; app.seed = 88172645463325252ULL;
  encode(&app, argc > 7 ? atoi(argv[7]) : 0, argc > 8 ? (pn_millis_t)atol(argv[8]) : 0);
  char addr[PN_MAX_ADDR];
  app.proactor = pn_proactor();
  pn_proactor_addr(addr, sizeof addr, app.host, app.port);
  pn_proactor_connect2(app.proactor, NULL, NULL, addr);
  for (int more = 1; more;) {
    pn_event_batch_t *events = pn_proactor_wait(app.proactor);
    for (pn_event_t *e; more && (e = pn_event_batch_next(events));) more = handle(&app, e);
    pn_proactor_done(app.proactor, events);
  }
  pn_proactor_free(app.proactor);
  return app.done == app.count && !app.failed ? 0 : 1;
}
"""

REPO: Final = Path(__file__).resolve().parent.parent


SEED: Final = 88172645463325252
MASK: Final = (1 << 64) - 1


def keys(count: int, variants: int = 10) -> list[int]:
    """How many of ``count`` messages carry each k in ``0..variants-1`` (the load generator's
    xorshift64)."""
    seed = SEED
    tally = [0] * variants
    for _ in range(count):
        seed ^= (seed << 13) & MASK
        seed ^= seed >> 7
        seed ^= (seed << 17) & MASK
        tally[seed % variants] += 1
    return tally


@dataclass(frozen=True)
class Scenario:
    name: str
    filters: tuple[str | None, ...]
    """One entry per consumer: its SQL filter, or None."""
    keyed: bool = False
    """Consumer i takes the messages with k = i (else each consumer takes them all)."""
    variants: int = 10
    """The messages' k runs over 0..variants-1 (region ``r<k>``)."""
    split: bool = False
    """The consumers share one queue's messages as the broker hands them out (each expects
    its part: ``count`` is rounded up to a multiple of the consumers)."""


SCENARIOS: Final = (
    Scenario("unfiltered", (None,)),
    Scenario("1 filtered", ("k < 10",)),
    Scenario("10 filtered", tuple(f"k = {i}" for i in range(10)), keyed=True),
)


def build_loadgen() -> Path:
    """Compile the load generator once (cached by source hash)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        sys.exit("bench: a C compiler is needed for the load generator (apt-get install gcc)")
    digest = hashlib.sha256(LOADGEN_C.encode()).hexdigest()[:12]
    cache = Path(tempfile.gettempdir()) / f"filtex-loadgen-{digest}"
    if cache.exists():
        return cache
    source = cache.with_suffix(".c")
    source.write_text(LOADGEN_C)
    for libs in (["-lqpid-proton"], ["-lqpid-proton-proactor", "-lqpid-proton-core"]):
        command = [cc, "-O2", "-o", str(cache), str(source), *libs]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode == 0:
            break
    if result.returncode != 0:
        sys.exit("bench: cannot build the load generator (apt-get install libqpid-proton11-dev):\n"
                 + result.stderr)
    return cache


def start_broker(workdir: Path, *extra: str, launcher: tuple[str, ...] = ("-m", "filtex_broker"),
                 tree: Path | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """A broker from this checkout, or from the source tree ``tree`` (``--baseline-tree``)."""
    ready = workdir / "ready"
    env = None if tree is None else {**os.environ, "PYTHONPATH": str(tree)}
    broker = subprocess.Popen(
        [sys.executable, *launcher, "--listen", "127.0.0.1:0", "--ready-file", str(ready),
         "--log-level", "WARNING", *extra],
        cwd=tree or REPO, env=env,
    )
    deadline = time.monotonic() + 30
    while not ready.exists():
        if broker.poll() is not None or time.monotonic() > deadline:
            sys.exit("bench: the broker did not start")
        time.sleep(0.05)
    port = int(ready.read_text().split()[0].rpartition(":")[2])
    return broker, port


def run_scenario(loadgen: Path, port: int, scenario: Scenario, count: int, queue: str,
                 profile: Path | None, broker_pid: int, ttl: int = 0) -> float:
    """Delivered messages per second for one scenario (every message with a header ttl of
    ``ttl`` ms, if not 0)."""
    consumers = len(scenario.filters)
    if scenario.split:  # a consumer that got its part releases what it is sent beyond, and leaves
        expected = [-(-count // consumers)] * consumers
        count = sum(expected)
    else:
        expected = keys(count, scenario.variants) if scenario.keyed else [count] * consumers
    receivers = []
    for sql, share in zip(scenario.filters, expected, strict=True):
        args = [str(loadgen), "recv", "127.0.0.1", str(port), queue, str(share)]
        if sql is not None:
            args.append(sql)
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            sys.exit(f"bench: a receiver could not attach ({scenario.name})")
        receivers.append(proc)
    spy = None
    if profile is not None:
        svg = profile / f"{scenario.name.replace(' ', '-')}.svg"
        spy = subprocess.Popen(["py-spy", "record", "-p", str(broker_pid), "-o", str(svg),
                                "--nonblocking"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    sender = subprocess.run(
        [str(loadgen), "send", "127.0.0.1", str(port), queue, str(count),
         str(scenario.variants), "0", str(ttl)],
        capture_output=True, text=True, check=False, timeout=600,
    )
    lasts = []
    for proc in receivers:
        out, _ = proc.communicate(timeout=600)
        fields = dict(part.split("=") for part in out.split()[1:] if "=" in part)
        lasts.append(float(fields["last"]))
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)
    if sender.returncode != 0:
        sys.exit(f"bench: the sender failed ({scenario.name}): {sender.stdout} {sender.stderr}")
    sent = dict(part.split("=") for part in sender.stdout.split()[2:] if "=" in part)
    return count / (max(lasts) - float(sent["first"]))


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process and its live children (the archive writer)
    so far (Linux ``/proc``): less disturbed by other load on a shared machine than the
    delivered rate is."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # a thread (or a child) that just ended
            for child in (task / "children").read_text().split():
                own += cpu_seconds(int(child))
    return own


@dataclass(frozen=True)
class Variant:
    """One way to run the broker; every variant is compared with ``in memory`` in the same run."""

    name: str
    flags: tuple[str, ...]
    console_poll: float = 0.0
    """``--console``: seconds between two polls of the console's overview (0: no console)."""
    launcher: tuple[str, ...] = ("-m", "filtex_broker")
    """How Python starts it (``--door-check``: a launcher in bench/ that swaps the check out)."""
    tree: Path | None = None
    """``--baseline-tree``: the source tree the broker runs from (None: this checkout)."""


def free_port() -> int:
    """A port nobody listens on now (the console's, so that the poller knows where to go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ConsolePoller:
    """Polls ``/api/overview`` like the open console page, until stopped; counts its polls."""

    def __init__(self, url: str, every: float) -> None:
        self.url = url
        self.every = every
        self.polls = 0
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ConsolePoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    json.load(response)
                self.polls += 1
            except (OSError, ValueError):
                self.failures += 1
            self._stop.wait(self.every)


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    """The scenarios chosen with ``--scenario`` (all by default)."""
    return [s for s in SCENARIOS if not args.scenario or s.name in args.scenario]


def variants(args: argparse.Namespace) -> list[Variant]:
    chosen = [Variant("in memory", ())]
    if args.durable is not None:
        chosen.append(Variant("--data-dir", ("--data-dir", str(args.durable))))
    if args.archive is not None:
        chosen.append(Variant("--archive", ("--archive", str(args.archive),
                                            "--archive-max-pending-bytes",
                                            str(args.archive_pending))))
    if args.metrics:
        chosen.append(Variant("--metrics", ("--metrics", "127.0.0.1:0")))
    if args.console:
        chosen.append(Variant("--console", ("--console", "127.0.0.1:{port}"),
                              console_poll=args.console_poll))
    if args.baseline_tree is not None:
        chosen.append(Variant(f"baseline {args.baseline_tree.name}", (), tree=args.baseline_tree))
    if args.door_check:
        chosen.append(Variant("scan only", (), launcher=(str(Path(__file__).with_name(
            "scan_only_broker.py")),)))
    return chosen


def measure(loadgen: Path, variant: Variant, run: int, args: argparse.Namespace,
            results: dict[tuple[str, str], list[float]],
            cpu: dict[tuple[str, str], list[float]]) -> None:
    """One run of every scenario against a fresh broker started with the variant's flags."""
    flags = variant.flags
    if variant.name == "--data-dir":  # a fresh log per run: recovery is not what is measured
        directory = Path(flags[1]) / f"run{run}"
        shutil.rmtree(directory, ignore_errors=True)
        flags = ("--data-dir", str(directory))
    console_port = free_port() if variant.console_poll else 0
    flags = tuple(flag.format(port=console_port) for flag in flags)
    with tempfile.TemporaryDirectory() as tmp:
        broker, port = start_broker(Path(tmp), *flags, launcher=variant.launcher,
                                    tree=variant.tree)
        try:
            for scenario in scenarios(args):
                queue = f"bench-{run}-{scenario.name.replace(' ', '-')}"
                profile = args.profile if run == 0 and variant.name == "in memory" else None
                before = cpu_seconds(broker.pid)
                poller = (ConsolePoller(f"http://127.0.0.1:{console_port}/api/overview",
                                        variant.console_poll)
                          if variant.console_poll else contextlib.nullcontext())
                with poller:
                    rate = run_scenario(loadgen, port, scenario, args.messages, queue,
                                        profile, broker.pid, args.ttl)
                if isinstance(poller, ConsolePoller) and not poller.polls:
                    sys.exit(f"bench: the console was never polled ({poller.failures} "
                             "failures)")
                key = (variant.name, scenario.name)
                cpu[key].append((cpu_seconds(broker.pid) - before) / args.messages * 1e6)
                results[key].append(rate)
                print(f"  run {run + 1} {variant.name:10s} {scenario.name:12s} {rate:9.0f} msg/s "
                      f"{cpu[key][-1]:6.2f} us/msg", flush=True)
        finally:
            broker.send_signal(signal.SIGTERM)
            broker.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python bench/bench_broker.py --messages 100000 --runs 3 "
        "--durable /var/tmp/bench-store --archive /var/tmp/bench-archive --metrics --console",
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3, help="runs per scenario (median reported)")
    parser.add_argument("--profile", type=Path, help="record py-spy flame graphs here")
    parser.add_argument("--durable", type=Path, metavar="DIR",
                        help="also run the broker with --data-dir under DIR (on the disk to "
                        "measure): every accepted message is fsync'ed first")
    parser.add_argument("--archive", type=Path, metavar="DIR",
                        help="also run the broker with --archive DIR: every accepted message is "
                        "also archived as Parquet (docs/ARCHIVE.md)")
    parser.add_argument("--archive-pending", type=int, default=4 * 2**20, metavar="BYTES",
                        help="with --archive: the broker's --archive-max-pending-bytes (small, "
                        "so that the rate measured is what the archive sustains; default 4 MiB)")
    parser.add_argument("--metrics", action="store_true",
                        help="also run the broker with --metrics 127.0.0.1:0 (Prometheus "
                        "counters, sampled evaluation latency) to measure what they cost")
    parser.add_argument("--console", action="store_true",
                        help="also run the broker with --console and a client polling its "
                        "overview as the open page does, to measure what an open page costs")
    parser.add_argument("--console-poll", type=float, default=1.0, metavar="SECONDS",
                        help="with --console: seconds between two polls (the page: 1)")
    parser.add_argument("--scenario", action="append", choices=[s.name for s in SCENARIOS],
                        help="run only this scenario (repeatable; default: all)")
    parser.add_argument("--door-check", action="store_true",
                        help="also run the broker with the door check replaced by the layout "
                        "scan alone (bench/scan_only_broker.py), to measure what the check costs")
    parser.add_argument("--ttl", type=int, default=0, metavar="MS",
                        help="every message carries a header ttl of MS (long enough not to "
                        "expire during the run): what expiry and the ttl left on delivery cost")
    parser.add_argument("--baseline-tree", type=Path, metavar="DIR",
                        help="also run the broker from another source tree (a checkout of the "
                        "commit to compare with, e.g. `git worktree add /tmp/before main`), "
                        "interleaved run by run, to measure a change")
    args = parser.parse_args()
    if not 0 <= args.ttl <= 0xFFFFFFFF:
        parser.error(f"--ttl {args.ttl}: a header ttl is 0..2^32-1 ms")
    if args.baseline_tree is not None and not (args.baseline_tree / "broker").is_dir():
        parser.error(f"--baseline-tree {args.baseline_tree}: not a filtex-proton source tree")
    loadgen = build_loadgen()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    chosen = variants(args)
    keys_ = [(v.name, s.name) for v in chosen for s in scenarios(args)]
    results: dict[tuple[str, str], list[float]] = {k: [] for k in keys_}
    cpu: dict[tuple[str, str], list[float]] = {k: [] for k in keys_}
    for run in range(args.runs):  # variants interleaved, so drifting load hits them alike
        for variant in chosen:
            measure(loadgen, variant, run, args, results, cpu)
    baseline = statistics.median(results[("in memory", scenarios(args)[0].name)])
    print(f"\n{'broker':10s} {'scenario':12s} {'msg/s (median)':>15s} {'vs unfiltered':>14s} "
          f"{'vs in memory':>13s} {'CPU us/msg':>11s}")
    for variant_name, scenario_name in keys_:
        rate = statistics.median(results[(variant_name, scenario_name)])
        same = statistics.median(results[("in memory", scenario_name)])
        print(f"{variant_name:10s} {scenario_name:12s} {rate:15.0f} {rate / baseline:13.2f}x "
              f"{rate / same:12.2f}x {statistics.median(cpu[(variant_name, scenario_name)]):11.2f}")
    if args.baseline_tree is not None:
        before_name = f"baseline {args.baseline_tree.name}"
        print(f"\nthis checkout against {args.baseline_tree} (same run; medians):")
        for scenario in scenarios(args):
            now_cpu = statistics.median(cpu[("in memory", scenario.name)])
            then_cpu = statistics.median(cpu[(before_name, scenario.name)])
            now_rate = statistics.median(results[("in memory", scenario.name)])
            then_rate = statistics.median(results[(before_name, scenario.name)])
            print(f"  {scenario.name:12s} CPU {then_cpu:6.2f} -> {now_cpu:6.2f} us/msg "
                  f"({now_cpu / then_cpu - 1:+6.1%}), rate {then_rate:7.0f} -> {now_rate:7.0f} "
                  f"msg/s ({now_rate / then_rate - 1:+6.1%})")
    if args.door_check:
        print("\nthe door check against the scan alone (same run; medians):")
        for scenario in scenarios(args):
            checked = statistics.median(cpu[("in memory", scenario.name)])
            scanned = statistics.median(cpu[("scan only", scenario.name)])
            rate = statistics.median(results[("in memory", scenario.name)])
            scan_rate = statistics.median(results[("scan only", scenario.name)])
            print(f"  {scenario.name:12s} CPU {scanned:6.2f} -> {checked:6.2f} us/msg "
                  f"({checked / scanned - 1:+6.1%}), rate {scan_rate:7.0f} -> {rate:7.0f} msg/s "
                  f"({rate / scan_rate:.2f}x)")
    print(f"\n{args.messages} messages per scenario{f' (ttl {args.ttl} ms)' if args.ttl else ''}, "
          f"{args.runs} runs, "
          f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}; CPU = broker process and its "
          "children (the archive writer)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
