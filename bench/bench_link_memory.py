"""What links that come and go leave in a running broker: resident bytes per attach/detach cycle.

    python bench/bench_link_memory.py [--warmup 300] [--cycles 2000] [--kinds receiver,dynamic]
        [--before DIR] [--servers broker,relay,example]

For each kind of cycle (``bench/link_churn.py``: a connection, a session, a filtered receiver,
a sender with one message, a dynamic node, a browser, a durable subscription detached and
attached again, a refused link, a receiver in a session that is ended) a client process runs
``--warmup`` cycles on one long-lived connection, then ``--cycles`` more; what the server's
resident size (``/proc/PID/status``) gained over those is printed per cycle, for:

* ``broker``: ``python -m filtex_broker`` (with ``--metrics`` and ``--console``, which keep counters
  per node and per link);
* ``relay``: ``python -m filtex_broker --upstream`` in front of another one (the relay's memory);
* ``example``: ``examples/plugin_broker.py``, a python-qpid-proton container with the plugin.

``--before DIR`` measures the source tree in DIR too (``git archive <commit> | tar -x -C DIR``),
in the same run with the same client, and prints both side by side. The connection cycle is the
baseline: a connection that closes gives everything back in every version (0 bytes).
Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final, TypeAlias

from link_churn import KINDS, growth_per_cycle

REPO: Final = Path(__file__).resolve().parent.parent

SERVERS: Final = ("broker", "relay", "example")
EXAMPLE_KINDS: Final = frozenset({"connection", "session", "receiver", "sender", "refused",
                                  "in-session"})
"""What the plugin example serves (it has neither topics, nor dynamic nodes, nor browsing)."""
START_TIMEOUT: Final = 60.0


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _broker(tree: Path, workdir: Path, *flags: str) -> tuple[subprocess.Popen[bytes], str]:
    """``python -m filtex_broker`` of ``tree`` on a free port; (process, HOST:PORT)."""
    ready = workdir / f"ready-{time.monotonic_ns()}"
    process = subprocess.Popen(
        [sys.executable, "-m", "filtex_broker", "--listen", "127.0.0.1:0", "--ready-file",
         str(ready),
         "--log-level", "ERROR", *flags],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_TIMEOUT
    while not ready.exists() or not ready.read_text().strip():
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process)
            sys.exit(f"bench: the broker of {tree} did not start")
        time.sleep(0.05)
    return process, ready.read_text().split()[0]


def _example(tree: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"127.0.0.1:{probe.getsockname()[1]}"
    process = subprocess.Popen(
        [sys.executable, str(tree / "examples" / "plugin_broker.py"), "--listen", url],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), 1).close()
            return process, url
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                _stop(process)
                sys.exit(f"bench: the plugin example of {tree} did not start")
            time.sleep(0.05)


@contextmanager
def serving(server: str, tree: Path) -> Iterator[tuple[int, str]]:
    """One server of ``tree`` running: (the pid whose memory is read, the URL clients use)."""
    with tempfile.TemporaryDirectory() as tmp:
        started: list[subprocess.Popen[bytes]] = []
        try:
            if server == "broker":
                process, url = _broker(tree, Path(tmp), "--metrics", "127.0.0.1:0",
                                       "--console", "127.0.0.1:0")
                started.append(process)
            elif server == "relay":
                upstream, upstream_url = _broker(tree, Path(tmp))
                started.append(upstream)
                process, url = _broker(tree, Path(tmp), "--upstream", f"amqp://{upstream_url}")
                started.append(process)
            else:
                process, url = _example(tree)
                started.append(process)
            yield process.pid, url
        finally:
            for process in reversed(started):
                _stop(process)


def _arguments() -> argparse.Namespace:
    """The command line, checked: ``kinds`` and ``servers`` become lists of known names."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  python bench/bench_link_memory.py\n"
               "  git archive HEAD~3 | tar -x -C /tmp/before && "
               "python bench/bench_link_memory.py --before /tmp/before --kinds receiver,dynamic")
    parser.add_argument("--warmup", type=int, default=300, help="cycles before measuring")
    parser.add_argument("--cycles", type=int, default=2000, help="cycles measured")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help="comma-separated, from: " + ", ".join(KINDS))
    parser.add_argument("--servers", default=",".join(SERVERS),
                        help="comma-separated, from: " + ", ".join(SERVERS))
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="also measure the source tree in DIR, in the same run")
    args = parser.parse_args()
    args.kinds = [k for k in args.kinds.split(",") if k]
    args.servers = [s for s in args.servers.split(",") if s]
    for name, chosen, known in (("kind", args.kinds, KINDS), ("server", args.servers, SERVERS)):
        unknown = [c for c in chosen if c not in known]
        if unknown:
            parser.error(f"unknown {name} {unknown[0]!r}: choose from {', '.join(known)}")
    if args.before is not None and not (args.before / "broker").is_dir():
        parser.error(f"--before {args.before}: no broker/ there (a source tree of this project)")
    if args.warmup < 0 or args.cycles <= 0:
        parser.error("--warmup must be >= 0 and --cycles > 0")
    return args


_Results: TypeAlias = dict[tuple[str, str, str], float]
"""Resident bytes per cycle by (server, tree name, kind)."""


def _measure(args: argparse.Namespace, trees: list[tuple[str, Path]]) -> _Results:
    """Each server of each tree started once, every kind it serves cycled against it; what
    was measured when a SIGTERM or ^C stops the run."""
    results: _Results = {}
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop the servers, print the table
    try:
        for server in args.servers:
            for tree_name, tree in trees:
                with serving(server, tree) as (pid, url):
                    for kind in args.kinds:
                        if server == "example" and kind not in EXAMPLE_KINDS:
                            continue
                        grown = growth_per_cycle(
                            [pid], url, kind, warmup=args.warmup, cycles=args.cycles)[0]
                        results[(server, tree_name, kind)] = grown
                        print(f"  {server:8s} {tree_name:6s} {kind:11s} {grown:8.0f} B/cycle",
                              flush=True)
    except KeyboardInterrupt:
        print("bench: stopped; the table has what was measured", file=sys.stderr)
    return results


def _print_table(args: argparse.Namespace, trees: list[tuple[str, Path]],
                 results: _Results) -> None:
    """One row per kind: bytes per cycle per server and tree, then after/before ratios."""
    servers = args.servers
    before = len(trees) > 1
    header = f"{'kind':11s}" + "".join(
        f" {s + ' ' + t:>15s}" for s in servers for t, _ in trees) + "".join(
        f" {s + ' after/before':>20s}" for s in servers if before)
    print(f"\nresident bytes per cycle after {args.warmup} warm-up cycles, over {args.cycles} "
          f"cycles (python {sys.version.split()[0]})\n{header}")
    for kind in args.kinds:
        cells = []
        for server in servers:
            for tree_name, _ in trees:
                value = results.get((server, tree_name, kind))
                cells.append(f" {'-':>15s}" if value is None else f" {value:15.0f}")
        for server in servers if before else ():
            after_value = results.get((server, "after", kind))
            before_value = results.get((server, "before", kind))
            cells.append(f" {after_value / before_value:19.2f}x" if after_value is not None
                         and before_value is not None and before_value >= 1 else f" {'-':>20s}")
        print(f"{kind:11s}{''.join(cells)}")


def main() -> int:
    args = _arguments()
    if not sys.platform.startswith("linux"):
        print("bench: reads /proc (Linux only)", file=sys.stderr)
        return 2
    trees = [("after", REPO)] + ([("before", args.before.resolve())] if args.before else [])
    _print_table(args, trees, _measure(args, trees))
    return 0


if __name__ == "__main__":
    sys.exit(main())
