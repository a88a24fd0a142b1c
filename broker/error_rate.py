"""Induced errors (spec §7.2): which producing connection makes filters fail, and how often.

Every filter evaluation that catches an error is charged to the connection the
message arrived on (the plugin's ``origin``). Counts are kept per connection
for the metrics; when a connection causes more than ``max_per_second`` errors
per second, measured over windows of ``interval`` seconds, it is named in the
log at most once per interval and, with ``action="close"``, its connection is
closed with ``amqp:resource-limit-exceeded``. One message evaluated by five
failing links counts five errors: that is the work the sender made us waste.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from typing import Final

__all__ = ["ACTIONS", "InducedErrors"]

log = logging.getLogger("filtex.broker")

ACTIONS: Final = ("log", "close")


class _Window:
    """One connection's errors in the current window, and when it was last reported."""

    __slots__ = ("count", "reported", "start", "total")

    def __init__(self, now: float) -> None:
        self.start = now
        self.count = 0
        self.total = 0
        self.reported = -float("inf")


class InducedErrors:
    """Counts evaluation errors per producing connection; acts above the configured rate.

    ``close(origin, description)`` is called (in the reactor thread) to close an
    offending connection; it must be harmless for a connection already gone.
    ``max_per_second`` 0 counts without ever acting.
    """

    def __init__(
        self,
        *,
        max_per_second: float,
        interval: float,
        action: str,
        close: Callable[[Hashable, str], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if action not in ACTIONS:
            raise ValueError(f"evaluation error action {action!r} is not log or close")
        if interval <= 0:
            raise ValueError("the evaluation error interval must be positive")
        self.max_per_second = max_per_second
        self.interval = interval
        self.action = action
        self._close = close
        self._clock = clock
        self._threshold = max_per_second * interval
        self._windows: dict[Hashable, _Window] = {}
        self.closed = 0
        """Connections closed for inducing errors."""
        self._forgotten = 0

    def __call__(self, origin: Hashable | None) -> None:
        """One evaluation caught an error on a message from ``origin`` (None: unknown)."""
        if origin is None:
            return
        now = self._clock()
        window = self._windows.get(origin)
        if window is None:
            window = self._windows[origin] = _Window(now)
        elif now - window.start >= self.interval:
            window.start, window.count = now, 0
        window.count += 1
        window.total += 1
        if self._threshold and window.count > self._threshold \
                and now - window.reported >= self.interval:
            window.reported = now
            self._act(origin, window)

    def _act(self, origin: Hashable, window: _Window) -> None:
        rate = f"{window.count} in {self.interval:g}s, limit {self.max_per_second:g}/s"
        log.warning("event=induced-errors connection=%s errors=%d interval=%g limit=%g "
                    "action=%s total=%d", origin, window.count, self.interval,
                    self.max_per_second, self.action, window.total)
        if self.action == "close":
            self.closed += 1
            self._close(origin, f"this connection's messages caused too many filter "
                                f"evaluation errors ({rate})")

    def errors_of(self, origin: Hashable) -> int:
        """Errors charged to a connection still remembered (0 once forgotten)."""
        window = self._windows.get(origin)
        return window.total if window is not None else 0

    def total(self) -> int:
        """Errors charged to any connection so far (never decreases: for the metrics)."""
        return self._forgotten + sum(w.total for w in list(self._windows.values()))

    def forget(self, origin: Hashable) -> None:
        """The connection is gone: drop its window (messages it left may open a new one)."""
        window = self._windows.pop(origin, None)
        if window is not None:
            self._forgotten += window.total
