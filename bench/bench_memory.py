"""What a queued message costs a running filtex-broker: resident size growth per message.

    python bench/bench_memory.py [--messages 1000000] [--queues 10] [--sizes 150,1024]
        [--before DIR] [--durable DIR]

Starts ``python -m filtex_broker`` (per-node limits and ``--max-memory`` out of the way), reads its
resident size (``/proc/PID/status``), has one Proton-C producer per queue (bench_broker's load
generator) send ``--messages`` messages of each encoded size into ``--queues`` queues with no
consumer, waits for every ``accepted`` and reads the resident size again: the growth divided by
the messages is what one queued message costs, everything included (its bytes, the broker's
bookkeeping, the allocator's rounding). Also printed: what the broker's memory budget accounted
per message (``--metrics``; docs/BROKER.md), to compare the model with the measurement.

``--before DIR`` also measures the broker of another source tree (e.g. ``git archive <commit> |
tar -x -C DIR``), driven by the same load generator in the same run, and prints the ratios.
``--durable DIR`` measures with ``--data-dir`` too (a fresh directory under DIR per broker).
Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_broker", Path(__file__).with_name(
    "bench_broker.py"))
assert _spec is not None and _spec.loader is not None
bench_broker = importlib.util.module_from_spec(_spec)
sys.modules["bench_broker"] = bench_broker  # its dataclasses look their module up
_spec.loader.exec_module(bench_broker)


def resident(pid: int) -> int:
    """The process's resident size in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def accounted(metrics_port: int) -> float | None:
    """The budget's accounted bytes (``filtex_memory_accounted_bytes``), if exported."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("filtex_memory_accounted_bytes "):
            return float(line.split()[1])
    return None


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def measure(tree: Path, loadgen: Path, size: int, args: argparse.Namespace,
            data_dir: Path | None) -> tuple[float, float | None, int]:
    """(resident bytes per queued message, accounted bytes per message, encoded size)."""
    with tempfile.TemporaryDirectory() as tmp:
        ready = Path(tmp) / "ready"
        metrics_port = free_port()
        flags = ["--listen", "127.0.0.1:0", "--ready-file", str(ready), "--log-level", "WARNING",
                 "--max-queue-messages", str(args.messages), "--max-queue-bytes", str(1 << 40),
                 "--max-memory", str(1 << 40), "--metrics", f"127.0.0.1:{metrics_port}"]
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)
            flags += ["--data-dir", str(data_dir)]
        env = {**os.environ, "PYTHONPATH": str(tree)}
        broker = subprocess.Popen([sys.executable, "-m", "filtex_broker", *flags], cwd=tree,
                                  env=env)
        try:
            deadline = time.monotonic() + 30
            while not ready.exists():
                if broker.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"bench: the broker of {tree} did not start")
                time.sleep(0.05)
            port = ready.read_text().split()[0].rpartition(":")[2]
            time.sleep(0.5)
            base = resident(broker.pid)
            per_queue = args.messages // args.queues
            senders = [subprocess.Popen(
                [str(loadgen), "send", "127.0.0.1", port, f"mem-{n}", str(per_queue), "",
                 str(size)], stdout=subprocess.PIPE, text=True) for n in range(args.queues)]
            encoded = 0
            for sender in senders:
                out, _ = sender.communicate(timeout=3600)
                if sender.returncode != 0:
                    sys.exit(f"bench: a producer failed: {out}")
                encoded = int(dict(p.split("=") for p in out.split()[1:] if "=" in p)["size"])
            time.sleep(0.5)
            grown = resident(broker.pid) - base
            total = per_queue * args.queues
            charged = accounted(metrics_port)
            return grown / total, None if charged is None else charged / total, encoded
        finally:
            broker.send_signal(signal.SIGTERM)
            broker.wait(timeout=120)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python bench/bench_memory.py --messages 1000000 --before /tmp/before")
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--queues", type=int, default=10)
    parser.add_argument("--sizes", default="150,1024",
                        help="encoded message sizes in bytes, comma-separated")
    parser.add_argument("--before", type=Path, metavar="DIR",
                        help="also measure the broker of this source tree, in the same run")
    parser.add_argument("--durable", type=Path, metavar="DIR",
                        help="also measure with --data-dir (a fresh directory under DIR)")
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("bench: reads /proc (Linux only)")
    loadgen = bench_broker.build_loadgen()
    trees = [("after", REPO)] + ([("before", args.before.resolve())] if args.before else [])
    stores: list[tuple[str, Path | None]] = [("in memory", None)]
    if args.durable is not None:
        stores.append(("--data-dir", args.durable))
    rows: dict[tuple[str, str, int], tuple[float, float | None, int]] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        for store, directory in stores:
            for name, tree in trees:
                data_dir = None if directory is None else directory / f"{name}-{size}"
                rows[(store, name, size)] = result = measure(tree, loadgen, size, args, data_dir)
                print(f"  {store:9s} {name:6s} {result[2]:5d} bytes: {result[0]:7.0f} bytes per "
                      "message resident", flush=True)
    print(f"\n{'broker':9s} {'message':>8s} {'tree':6s} {'resident/msg':>12s} "
          f"{'overhead':>9s} {'accounted/msg':>14s} {'vs before':>10s}")
    for (store, name, size), (per, charged, encoded) in rows.items():
        before = rows.get((store, "before", size))
        ratio = f"{per / before[0]:9.2f}x" if before is not None else ""
        shown = f"{charged:14.0f}" if charged is not None else f"{'-':>14s}"
        print(f"{store:9s} {encoded:8d} {name:6s} {per:12.0f} {per - encoded:9.0f} {shown} "
              f"{ratio:>10s}")
    print(f"\n{args.messages} messages into {args.queues} queues per measurement, "
          f"python {sys.version.split()[0]}; resident = growth of VmRSS / messages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
