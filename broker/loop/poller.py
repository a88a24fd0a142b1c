"""Proton's selector on poll(2): a broker must watch more than 1023 sockets.

python-qpid-proton's ``IO.Selector`` waits with ``select.select``, which
cannot take a file descriptor above ``FD_SETSIZE`` - 1 (1023): with about a
thousand connections open, or a thousand files, the next wait raises
``ValueError: filedescriptor out of range`` and the event loop ends. This
subclass keeps proton's bookkeeping (the reading and writing sets, the
deadlines of timers) and only waits differently. That bookkeeping is proton's
private state: its names are listed and checked in :mod:`broker.loop.proton_internals`.
"""

from __future__ import annotations

import select
import time
from typing import Any, Final

from broker.loop.proton_internals import IO, set_selector

__all__ = ["PollSelector", "install"]

_IN: Final = select.POLLIN | select.POLLPRI
_OUT: Final = select.POLLOUT
_TROUBLE: Final = select.POLLERR | select.POLLHUP | select.POLLNVAL
"""Reported as ready for whatever the selectable waits for, so that its own read or write
meets the error (what select(2) does for a socket in error)."""


class PollSelector(IO.Selector):
    """``IO.Selector`` with ``poll`` instead of ``select``; same results, no descriptor limit."""

    def select(self, timeout: float | None) -> tuple[list[Any], list[Any], list[Any]]:
        wait = self._wait_seconds(timeout)
        watched: dict[int, list[Any]] = {}
        masks: dict[int, int] = {}
        for selectable in self._reading | self._writing:
            fd = selectable.fileno()
            if fd >= 0:
                watched.setdefault(fd, []).append(selectable)
                masks[fd] = masks.get(fd, 0) | (_IN if selectable in self._reading else 0) | (
                    _OUT if selectable in self._writing else 0)
        readable: list[Any] = []
        writable: list[Any] = []
        if masks:
            poller = select.poll()
            for fd, mask in masks.items():
                poller.register(fd, mask)
            for fd, events in poller.poll(None if wait is None else wait * 1000.0):
                for selectable in watched.get(fd, ()):
                    if events & (_IN | _TROUBLE) and selectable in self._reading:
                        readable.append(selectable)
                    if events & (_OUT | _TROUBLE) and selectable in self._writing:
                        writable.append(selectable)
        elif wait is None or wait > 0:
            time.sleep(wait if wait is not None else 3600.0)  # nothing to watch: a timer's wait
        now = time.time()
        expired = [s for s in self._selectables if s.deadline and now > s.deadline]
        self._deadline = None
        self.update_deadline()
        return readable, writable, expired

    def _wait_seconds(self, timeout: float | None) -> float | None:
        """How long to wait: the caller's timeout, or less if a timer falls due first."""
        deadline = self._deadline
        if deadline is None:
            return timeout
        until = max(0.0, deadline - time.time())
        return until if timeout is None else max(0.0, min(timeout, until))


def install(io_handler: Any) -> PollSelector:
    """Put a :class:`PollSelector` in proton's IO handler, keeping what it already watches."""
    selector: PollSelector = set_selector(io_handler, PollSelector)
    return selector
