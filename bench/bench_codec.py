"""Micro-benchmark: RawMessageView against proton.Message for what a filter reads.

For a typical ~300-byte message, measures in one run (best of several repeats):

* RawMessageView construction + three field reads (properties subject, header
  priority, one application property): the broker's per-message hot path;
* the same with proton.Message().decode(...), and with one reused proton.Message;
* the scan alone, and the hot path over a message with a 64 KiB body (the body is
  skipped by its size field, so this should cost about the same).

Run: ``python bench/bench_codec.py [--iterations N] [--repeat R]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proton import Message, byte, symbol

from filtex_proton.amqp.message import RawMessageView
from filtex_proton.amqp.view import Section

HEADER = Section.HEADER
PROPERTIES = Section.PROPERTIES
APPLICATION = Section.APPLICATION_PROPERTIES


def typical_message(body: Any) -> bytes:
    """A message like an order event: header, two annotations, properties, five app props."""
    msg = Message(
        body=body,
        durable=True,
        priority=6,
        id=uuid.UUID("6f1c1f3e-35a4-4b8e-9d77-0f3a6b0f1d2e"),
        address="queue://orders",
        subject="orders.created",
        content_type=symbol("application/json"),
        creation_time=1_700_000_000.0,
        properties={
            "region": "eu-west",
            "amount": 1234,
            "currency": "EUR",
            "express": True,
            "weight": 2.5,
        },
    )
    msg.annotations = {
        symbol("x-opt-jms-msg-type"): byte(5),
        symbol("x-opt-jms-dest"): byte(0),
    }
    return bytes(msg.encode())


def _properties(msg: Message) -> dict[str, Any]:
    # proton's stubs type Message.properties as always None.
    return cast(dict[str, Any], msg.properties)


def ours(raw: bytes) -> tuple[Any, Any, Any]:
    view = RawMessageView(raw)
    return (
        view.field(PROPERTIES, "subject"),
        view.field(HEADER, "priority"),
        view.field(APPLICATION, "region"),
    )


def proton_fresh(raw: bytes) -> tuple[Any, Any, Any]:
    msg = Message()
    msg.decode(raw)
    return msg.subject, msg.priority, _properties(msg)["region"]


_REUSED = Message()


def proton_reused(raw: bytes) -> tuple[Any, Any, Any]:
    _REUSED.clear()
    _REUSED.decode(raw)
    return _REUSED.subject, _REUSED.priority, _properties(_REUSED)["region"]


def scan_only(raw: bytes) -> None:
    RawMessageView(raw)


def rate(fn: Callable[[bytes], object], raw: bytes, iterations: int, repeat: int) -> float:
    """Messages per second: the best of ``repeat`` timed loops of ``iterations`` calls."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(iterations):
            fn(raw)
        best = min(best, time.perf_counter() - start)
    return iterations / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    raw = typical_message("x" * 60)
    big = typical_message(b"\x00" * 65536)
    assert ours(raw) == proton_fresh(raw) == proton_reused(raw) == ours(big)

    n, r = args.iterations, args.repeat
    results = {
        "RawMessageView + 3 fields": rate(ours, raw, n, r),
        "proton.Message().decode + 3 fields": rate(proton_fresh, raw, n, r),
        "reused proton.Message decode + 3 fields": rate(proton_reused, raw, n, r),
        "RawMessageView scan only": rate(scan_only, raw, n, r),
        "RawMessageView + 3 fields, 64 KiB body": rate(ours, big, n, r),
    }
    print(f"python {sys.version.split()[0]}, message {len(raw)} bytes ({len(big)} with big body)")
    for label, per_second in results.items():
        print(f"  {label:42s} {per_second:>10,.0f} msg/s  {1e6 / per_second:6.2f} us/msg")
    ours_rate = results["RawMessageView + 3 fields"]
    print(
        f"  speed-up vs proton.Message: "
        f"{ours_rate / results['proton.Message().decode + 3 fields']:.1f}x fresh, "
        f"{ours_rate / results['reused proton.Message decode + 3 fields']:.1f}x reused"
    )


if __name__ == "__main__":
    main()
