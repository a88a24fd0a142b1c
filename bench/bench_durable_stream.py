"""Append throughput with ``--data-dir``: a durable stream against a durable queue.

    python bench/bench_durable_stream.py [--messages 100000] [--runs 3] [--dir DIR]

For each run, a fresh data directory and a fresh broker (``python -m filtex_broker --data-dir
DIR --stream 'stream.*'``, the queue's limits raised so that it never stalls the producer); one
producer (``bench_broker.py``'s Proton-C load generator, about 100 bytes of body per message,
unsettled) sends the messages to ``queue.q`` and to ``stream.s`` in turn, nobody consuming, and
waits for every ``accepted``: an accept waits for the fsync of the batch holding the message's
record (group commit) on both kinds of node. The rate is messages over the seconds from the
first send to the last accept; the median of the runs is printed for each node kind.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_broker import build_loadgen, start_broker


def send_rate(loadgen: Path, port: int, address: str, count: int) -> float:
    """Messages per second, first send to last accept, for ``count`` to ``address``."""
    sender = subprocess.run([str(loadgen), "send", "127.0.0.1", str(port), address, str(count)],
                            capture_output=True, text=True, check=False, timeout=600)
    if sender.returncode != 0:
        sys.exit(f"bench: the sender failed: {sender.stdout} {sender.stderr}")
    fields = dict(part.split("=") for part in sender.stdout.split()[1:] if "=" in part)
    if int(fields["failed"]):
        sys.exit(f"bench: {fields['failed']} message(s) not accepted")
    return count / (float(fields["last"]) - float(fields["first"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None,
                        help="where the data directories go (default: a temporary folder)")
    args = parser.parse_args()
    if args.messages < 1 or args.runs < 1:
        parser.error("--messages and --runs must be at least 1")
    if args.dir is not None:
        try:
            args.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"--dir {args.dir}: {exc.strerror}")
    loadgen = build_loadgen()
    rates: dict[str, list[float]] = {"queue.q": [], "stream.s": []}
    root = Path(tempfile.mkdtemp(prefix="bench-durable-", dir=args.dir))
    try:
        for run in range(args.runs):
            for address, got in rates.items():
                workdir = root / f"{run}-{address}"
                workdir.mkdir()
                broker, port = start_broker(
                    workdir, "--data-dir", str(workdir / "data"), "--stream", "stream.*",
                    "--max-queue-messages", str(args.messages + 1),
                    "--max-queue-bytes", "4GiB")
                try:
                    got.append(send_rate(loadgen, port, address, args.messages))
                finally:
                    broker.terminate()
                    broker.wait(60)
                print(f"run {run + 1} {address}: {got[-1]:,.0f} msg/s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    queue, stream = (statistics.median(rates[a]) for a in ("queue.q", "stream.s"))
    print(f"durable queue {queue:,.0f} msg/s, durable stream {stream:,.0f} msg/s "
          f"({stream / queue:.2f}x), {args.messages:,} messages, median of {args.runs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
