"""Proton's selector on poll(2): a broker must watch more than 1023 sockets.

python-qpid-proton's ``IO.Selector`` waits with ``select.select``, which
cannot take a file descriptor above ``FD_SETSIZE`` - 1 (1023): with about a
thousand connections open, or a thousand files, the next wait raises
``ValueError: filedescriptor out of range`` and the event loop ends. This
subclass keeps proton's bookkeeping (the reading and writing sets, the
deadlines of timers) and waits differently, on a poll set kept up to date as
selectables change. That bookkeeping is proton's
private state: its names are listed and checked in :mod:`filtex_broker.loop.proton_internals`.
"""

from __future__ import annotations

import select
import time
from typing import Any, Final

from filtex_broker.loop.proton_internals import IO, set_selector

__all__ = ["PollSelector", "install"]

_IN: Final = select.POLLIN | select.POLLPRI
_OUT: Final = select.POLLOUT
_TROUBLE: Final = select.POLLERR | select.POLLHUP | select.POLLNVAL
"""Reported as ready for whatever the selectable waits for, so that its own read or write
meets the error (what select(2) does for a socket in error)."""


class PollSelector(IO.Selector):
    """``IO.Selector`` with ``poll`` instead of ``select``; same results, no descriptor limit.

    The poll set is kept between waits and changed only for the selectable that changed, and
    the timers' earliest deadline is kept as it changes: a wait then costs what is ready, not
    what is open (proton's selector walks every selectable on each change and each wait, which
    a relay with a hundred consumers' connections pays per message)."""

    def __init__(self) -> None:
        super().__init__()
        self._poll = select.poll()
        self._masks: dict[int, int] = {}
        """fd -> the events registered for it."""
        self._owners: dict[int, Any] = {}
        """fd -> the selectable registered with it."""
        self._fds: dict[Any, int] = {}
        """selectable -> its registered fd (it may have closed its socket since)."""

    def add(self, selectable: Any) -> None:
        super().add(selectable)
        self._register(selectable)

    def remove(self, selectable: Any) -> None:
        super().remove(selectable)
        fd = self._fds.pop(selectable, None)
        if fd is not None and self._owners.get(fd) is selectable:
            self._forget(fd)

    def update(self, selectable: Any) -> None:
        """What proton's ``update`` does, without walking every selectable for the deadline:
        only this one's changed (the earliest is recomputed once a wait finds it passed)."""
        reading, writing = self._reading, self._writing
        reading.discard(selectable)
        writing.discard(selectable)
        if selectable.reading:
            reading.add(selectable)
        if selectable.writing:
            writing.add(selectable)
        deadline = selectable.deadline
        if deadline and (self._deadline is None or deadline < self._deadline):
            self._deadline = deadline
        self._register(selectable)

    def _register(self, selectable: Any) -> None:
        fd = selectable.fileno()
        old = self._fds.get(selectable)
        if old is not None and old != fd and self._owners.get(old) is selectable:
            self._forget(old)
        mask = (_IN if selectable in self._reading else 0) | (
            _OUT if selectable in self._writing else 0)
        if fd < 0 or not mask:
            self._fds.pop(selectable, None)
            if fd >= 0 and self._owners.get(fd) is selectable:
                self._forget(fd)
            return
        self._fds[selectable] = fd
        if self._owners.get(fd) is selectable and self._masks.get(fd) == mask:
            return
        self._owners[fd] = selectable  # a closed socket's number may be reused: the newest wins
        if fd in self._masks:
            self._poll.modify(fd, mask)
        else:
            self._poll.register(fd, mask)
        self._masks[fd] = mask

    def _forget(self, fd: int) -> None:
        del self._owners[fd]
        if self._masks.pop(fd, None) is not None:
            self._poll.unregister(fd)

    def select(self, timeout: float | None) -> tuple[list[Any], list[Any], list[Any]]:
        wait = self._wait_seconds(timeout)
        readable: list[Any] = []
        writable: list[Any] = []
        if self._masks:
            owners, reading, writing = self._owners, self._reading, self._writing
            for fd, events in self._poll.poll(None if wait is None else wait * 1000.0):
                selectable = owners.get(fd)
                if selectable is None:
                    continue
                if events & (_IN | _TROUBLE) and selectable in reading:
                    readable.append(selectable)
                if events & (_OUT | _TROUBLE) and selectable in writing:
                    writable.append(selectable)
        elif wait is None or wait > 0:
            time.sleep(wait if wait is not None else 3600.0)  # nothing to watch: a timer's wait
        now = time.time()
        expired: list[Any] = []
        if self._deadline is not None and now > self._deadline:
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
