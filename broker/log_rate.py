"""When a repeated nuisance is worth a log line: the first ten times, then one in a thousand.

A hostile or broken peer can cause the same warning per message; the count
still says how many there were, the log stays readable. Imports nothing, so
the archive writer process can use it too.
"""

from __future__ import annotations

__all__ = ["due"]


def due(count: int) -> bool:
    """Whether occurrence number ``count`` (from 1) is logged."""
    return count <= 10 or count % 1000 == 0
