"""Micro-benchmark: the amqp package's hot paths, timed in one process against another tree's.

On a machine loaded by other jobs, runs of two trees one after the other differ by a fifth;
timed in one process, alternating case by case and round by round, they differ by the code.
``--before DIR`` names a checkout (``git worktree add /tmp/before HEAD~1``): its
``filtex_proton`` is copied into a temporary folder as ``filtex_before``, so both import side
by side. Times are process time per call, the median of the rounds (and the fastest).

Run: ``python bench/bench_amqp.py [--before DIR] [--iterations N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import importlib
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proton import Message, byte, symbol, ulong

import filtex_proton.amqp as current


def _typical() -> bytes:
    """bench_codec's message: header, two annotations, properties, five app props, a string."""
    msg = Message(body="x" * 60, durable=True, priority=6,
                  id=uuid.UUID("6f1c1f3e-35a4-4b8e-9d77-0f3a6b0f1d2e"), address="queue://orders",
                  subject="orders.created", content_type=symbol("application/json"),
                  creation_time=1_700_000_000.0,
                  properties={"region": "eu-west", "amount": 1234, "currency": "EUR",
                              "express": True, "weight": 2.5})
    msg.annotations = {symbol("x-opt-jms-msg-type"): byte(5), symbol("x-opt-jms-dest"): byte(0)}
    return bytes(msg.encode())


TYPICAL = _typical()
#: bench_broker's message: header list0, a message-id, two application properties, a data body.
SMALL = current.encode_message(header={}, properties={"message-id": ulong(7)},
                               application_properties={"k": 3, "region": "eu"},
                               body=b"x" * 100, body_kind="data")
#: A symbolic descriptor: the door check's general path.
SYMBOLIC = TYPICAL.replace(b"\x00\x53\x73", b"\x00\xa3\x14amqp:properties:list", 1)
VALUE = {"region": "eu-west", "amount": 1234, "list": [1, 2, "x", None], "n": None}
ENCODED = current.encode_value(VALUE)


def cases(amqp: Any) -> dict[str, Callable[[], object]]:
    """The calls timed, made with one tree's ``filtex_proton.amqp``."""
    section = amqp.Section

    def three_fields() -> object:
        view = amqp.RawMessageView(TYPICAL)
        return (view.field(section.PROPERTIES, "subject"), view.field(section.HEADER, "priority"),
                view.field(section.APPLICATION_PROPERTIES, "region"))

    return {
        "validate_message, typical": lambda: amqp.validate_message(TYPICAL),
        "validate_message, small": lambda: amqp.validate_message(SMALL),
        "validate_message, general path": lambda: amqp.validate_message(SYMBOLIC),
        "RawMessageView, scan only": lambda: amqp.RawMessageView(TYPICAL),
        "RawMessageView + 3 fields": three_fields,
        "decode_value, map": lambda: amqp.decode_value(ENCODED),
        "encode_value, map": lambda: amqp.encode_value(VALUE),
        "skip_value, typical": lambda: amqp.skip_value(TYPICAL, 0),
    }


def import_before(tree: Path, into: Path) -> ModuleType:
    """``tree``'s filtex_proton.amqp, copied into ``into`` as filtex_before and imported."""
    copy = into / "filtex_before"
    shutil.copytree(tree / "filtex_proton", copy)
    for path in copy.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        path.write_text(re.sub(r"\bfiltex_proton\b", "filtex_before", text), encoding="utf-8")
    sys.path.insert(0, str(into))
    return importlib.import_module("filtex_before.amqp")


def per_call(action: Callable[[], object], iterations: int) -> float:
    start = time.process_time()
    for _ in range(iterations):
        action()
    return (time.process_time() - start) / iterations * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--before", type=Path, help="a checkout to time against this tree")
    parser.add_argument("--iterations", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        trees = {"after": cases(current)}
        if args.before:
            trees = {"before": cases(import_before(args.before, Path(scratch))), **trees}
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for name in trees["after"]:
                for tree, calls in trees.items():
                    took = per_call(calls[name], args.iterations)
                    times.setdefault((tree, name), []).append(took)
    print(f"us per call, median of {args.rounds} rounds of {args.iterations} (fastest)")
    for name in trees["after"]:
        row = "  ".join(f"{tree} {statistics.median(times[tree, name]):7.3f} "
                        f"({min(times[tree, name]):.3f})" for tree in trees)
        ratio = ""
        if "before" in trees:
            after, before = (statistics.median(times[t, name]) for t in ("after", "before"))
            ratio = f"  ratio {after / before:.2f}"
        print(f"  {name:32s} {row}{ratio}")


if __name__ == "__main__":
    main()
