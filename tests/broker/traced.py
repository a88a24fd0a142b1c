"""What publishing messages really costs in memory, for the tests of the budget's cost models."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable, Sequence

from filtex_proton.plugin import FilterMessage, FiltexPlugin


def traced_per_message(publish: Callable[[FilterMessage], None], encoded: Sequence[bytes],
                       count: int) -> float:
    """The bytes tracemalloc counts per message for ``count`` publishes of ``encoded`` in turn,
    each as received (fresh bytes, checked at the door), every Python allocation included."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(count):
            message = FiltexPlugin.message(bytes(bytearray(encoded[n % len(encoded)])), origin=1)
            message.validate()
            publish(message)
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / count
    finally:
        tracemalloc.stop()
