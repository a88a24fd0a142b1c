"""Password checks off the event loop: a small thread pool, bounded per peer and in total.

A scrypt check costs ~40 ms of CPU on purpose. Run on the event loop, a
flood of wrong passwords would stall every connection; here the checks run
on a few worker threads instead. Threads are enough: ``hashlib.scrypt``
releases the GIL while OpenSSL hashes (measured: the event loop thread keeps
running while a worker hashes). The result comes back on the reactor thread:
the worker queues it and wakes the reactor through the broker's waker pipe,
and :meth:`PasswordVerifier.complete` (called on wake-up) delivers it.

The bounds (documented in docs/BROKER.md, "Security"):

* at most ``per_peer`` checks per client IP address and ``total`` overall are
  queued, running, or waiting out a back-off; beyond that an attempt is not
  checked at all and the caller fails it at once with SASL ``sys-temp`` (a
  flood then costs the broker almost nothing, and a client may retry);
* after ``free_failures`` failed checks from one address within ``window``
  seconds, each further failure's outcome is held back, doubling from
  ``base_delay`` up to ``max_delay``, while it keeps its slot: one address
  can then try about ``per_peer`` passwords per ``max_delay``.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from filtex_broker.security.users import verify_password

__all__ = ["Limits", "PasswordVerifier"]

log = logging.getLogger("filtex.broker.auth")


@dataclass(frozen=True, slots=True)
class Limits:
    """How much password checking the broker does at once, and how it slows down guessers."""

    workers: int = 2
    per_peer: int = 2
    total: int = 64
    free_failures: int = 5
    window: float = 60.0
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_tracked: int = 10_000
    """Addresses whose failures are remembered (older ones are forgotten first)."""


class Cancellable(Protocol):
    def cancel(self) -> None: ...


Schedule = Callable[[float, Callable[[], None]], Cancellable]
"""(delay in seconds, function) -> a task: run the function later on the reactor thread."""


class _Check:
    __slots__ = ("done", "ok", "peer", "timer")

    def __init__(self, peer: str, done: Callable[[bool], None]) -> None:
        self.peer = peer
        self.done = done
        self.ok = False
        self.timer: Cancellable | None = None


class PasswordVerifier:
    """Runs password checks on worker threads; results are delivered on the reactor thread."""

    def __init__(self, wake: Callable[[], None], schedule: Schedule,
                 limits: Limits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or Limits()
        self._wake = wake
        self._schedule = schedule
        self._clock = clock
        self._pool: ThreadPoolExecutor | None = None  # started by the first check
        self._busy: dict[str, int] = {}
        """peer -> checks it holds (queued, running, or held back)."""
        self._total = 0
        self._finished: deque[_Check] = deque()
        """Filled by workers, emptied by :meth:`complete` (deque: thread-safe ends)."""
        self._held: set[_Check] = set()
        self._failures: dict[str, tuple[int, float]] = {}
        """peer -> (failures in the current window, when that window started)."""
        self._closed = False
        self.refused = 0
        """Attempts failed fast because a bound was reached (for the log and tests)."""

    def submit(self, peer: str, password: str, stored: str,
               done: Callable[[bool], None]) -> bool:
        """Check ``password`` against ``stored`` for a client at address ``peer``.

        ``done(ok)`` runs later on the reactor thread. False: over a bound, nothing
        will run (the caller answers ``sys-temp``).
        """
        limits = self.limits
        if self._closed or self._total >= limits.total or \
                self._busy.get(peer, 0) >= limits.per_peer:
            self.refused += 1
            return False
        if self._pool is None:
            self._pool = ThreadPoolExecutor(limits.workers, thread_name_prefix="filtex-auth")
        check = _Check(peer, done)
        self._busy[peer] = self._busy.get(peer, 0) + 1
        self._total += 1
        future = self._pool.submit(verify_password, password, stored)
        future.add_done_callback(lambda f: self._hashed(check, f))
        return True

    def _hashed(self, check: _Check, future: Future[bool]) -> None:
        """On a worker thread (or the caller's, if already done): queue, wake the reactor."""
        check.ok = not future.cancelled() and future.exception() is None and future.result()
        self._finished.append(check)
        self._wake()

    def complete(self) -> None:
        """On the reactor thread: deliver finished checks (failures after their back-off)."""
        while self._finished:
            check = self._finished.popleft()
            delay = 0.0 if check.ok else self._failed(check.peer)
            if delay > 0 and not self._closed:
                self._held.add(check)
                check.timer = self._schedule(delay, functools.partial(self._deliver, check))
            else:
                self._deliver(check)

    def _deliver(self, check: _Check) -> None:
        self._held.discard(check)
        left = self._busy.get(check.peer, 0) - 1
        if left > 0:
            self._busy[check.peer] = left
        else:
            self._busy.pop(check.peer, None)
        self._total -= 1
        check.done(check.ok)

    def _failed(self, peer: str) -> float:
        """Count a failure; the delay before its outcome goes out."""
        limits = self.limits
        now = self._clock()
        count, since = self._failures.pop(peer, (0, now))
        if now - since > limits.window:
            count, since = 0, now
        count += 1
        self._failures[peer] = (count, since)  # re-inserted: the dict stays oldest-first
        if len(self._failures) > limits.max_tracked:
            del self._failures[next(iter(self._failures))]
        excess = count - limits.free_failures
        if excess <= 0:
            return 0.0
        if excess == 1:
            log.warning("authentication: %d failures from %s within %g s: holding back "
                        "further failed outcomes", count, peer, limits.window)
        return float(min(limits.base_delay * 2 ** min(excess - 1, 30), limits.max_delay))

    def close(self) -> None:
        """The broker is stopping: no new checks, queued ones dropped, held ones answered."""
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        for check in list(self._held):
            if check.timer is not None:
                check.timer.cancel()
            self._deliver(check)
