"""Relay mode: the names of the upstream links, and when a name may be attached again.

A link's name identifies it between two containers (AMQP 1.0 §2.6.1), and every upstream
link of the relay comes from one container over one connection pair. Two rules follow.

- **No two upstream links share a name.** Clients name their links as they like, and many
  instances of one application give theirs the same fixed names: a second ``orders@relay``
  on the connection is taken by ActiveMQ Artemis (Proton-J) for the first one, and never
  answered. A link whose name an upstream link already holds gets ``#2``, ``#3``... after it.
- **A durable subscription's link waits until its previous link is gone upstream.** Its
  upstream name names the subscription, so it cannot change. Artemis answers a detach at
  once but removes the link's consumer in a task it runs later, before it answers the end of
  the link's session: an attach sent meanwhile (a client coming back at once, or Qpid JMS's
  unsubscribe right after it closed the subscriber) found the subscription still consumed
  and was refused ("Maximum Consumer Limit Reached"). Every consumer link has a session of
  its own, which the relay ends with the link (:mod:`filtex_broker.relay.session_ends`); the
  new attach goes upstream once the upstream has answered that end, or after
  ``DETACH_WAIT_MAX`` seconds.

A consumer link's name is held from the attach until the upstream has ended its session, a
producer link's until the upstream has closed or detached it too (producers share one
session), every name until the connection is gone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from proton import Handler, Link, Session

from filtex_broker.loop.engine import impl
from filtex_broker.relay.consumers import RelayConsumer

if TYPE_CHECKING:

    from proton import Event

__all__ = ["DETACH_WAIT_MAX", "UpstreamLinkNames"]

log = logging.getLogger("filtex.broker.relay")

DETACH_WAIT_MAX: Final = 5.0
"""Seconds a durable subscription's attach waits at most for the upstream to end the session
of the subscription's previous link; then it goes anyway (the upstream decides)."""


class UpstreamLinkNames:
    """The upstream links by name, and the consumers waiting for a name to be let go."""

    def __init__(self, schedule: Callable[[float, Handler], bool],
                 reopen: Callable[[RelayConsumer], None]) -> None:
        self.schedule = schedule
        """Calls a handler's ``on_timer_task`` after a delay (False: not started, no timer)."""
        self.reopen = reopen
        """Opens the upstream side of a consumer that waited (if it still needs one)."""
        self.holders: dict[str, dict[Any, Link]] = {}
        """Each name held, with the links holding it (by their Proton ``impl``)."""
        self.sessions: dict[Any, dict[Any, Link]] = {}
        """The links held until their session ends, by session."""
        self.ending: set[Any] = set()
        """Those sessions the relay is ending (Proton's state does not tell a detached link)."""
        self.waiting: dict[str, dict[RelayConsumer, None]] = {}
        """The consumers waiting for the links closing under a name."""
        self.waits: dict[RelayConsumer, str] = {}
        """The name each waiting consumer waits for."""
        self.timers: dict[str, DetachWait] = {}
        """The timer that ends each name's wait (an older one, when it fires, is ignored)."""

    def free_name(self, wanted: str) -> str:
        """``wanted`` if no upstream link holds it, else the first of ``wanted#2``, ``#3``...
        that none holds."""
        if wanted not in self.holders:
            return wanted
        number = 2
        while f"{wanted}#{number}" in self.holders:
            number += 1
        return f"{wanted}#{number}"

    def hold(self, link: Link, *, until_session_ends: bool) -> None:
        """An upstream link is attached under its name (``until_session_ends``: its session
        is its own, and the name is held until the upstream has ended it)."""
        key = impl(link)
        self.holders.setdefault(link.name, {})[key] = link
        if until_session_ends:
            self.sessions.setdefault(impl(link.session), {})[key] = link

    def must_wait(self, consumer: RelayConsumer, name: str) -> bool:
        """Whether ``consumer``'s link, which must be named ``name``, has to wait for a link
        of that name whose session the relay is ending; if so it is opened once the upstream
        has ended it, or after ``DETACH_WAIT_MAX``."""
        if not self._going(name):
            return False
        waiters = self.waiting.setdefault(name, {})
        if not waiters:
            timer = DetachWait(self, name)
            if self.schedule(DETACH_WAIT_MAX, timer):
                self.timers[name] = timer
        waiters[consumer] = None
        self.waits[consumer] = name
        return True

    def link_closed(self, link: Link) -> None:
        """The upstream closed or detached ``link``: its name is free of it, unless held
        until its session ends."""
        if impl(link.session) not in self.sessions:
            self._let_go(link)

    def session_ending(self, session: Session) -> None:
        """The relay is ending ``session``, with the link it holds."""
        key = impl(session)
        if key in self.sessions:
            self.ending.add(key)

    def session_ended(self, session: Session) -> None:
        """The upstream ended ``session``: its links are gone, whatever they last said."""
        self.ending.discard(impl(session))
        for link in list(self.sessions.pop(impl(session), {}).values()):
            self._let_go(link)

    def _let_go(self, link: Link) -> None:
        name = link.name
        key = impl(link)
        holders = self.holders.get(name)
        if holders is None or holders.pop(key, None) is None:
            return
        if not holders:
            del self.holders[name]
        if name in self.waiting and not self._going(name):
            self._open_waiting(name)

    def _going(self, name: str) -> bool:
        """Whether a link holding ``name`` is in a session the relay is ending."""
        return any(impl(link.session) in self.ending
                   for link in self.holders.get(name, {}).values())

    def forget(self, consumer: RelayConsumer) -> None:
        """The consumer is gone: it waits for nothing any more."""
        name = self.waits.pop(consumer, None)
        if name is None:
            return
        waiters = self.waiting[name]
        del waiters[consumer]
        if not waiters:
            del self.waiting[name]
            self.timers.pop(name, None)

    def clear(self) -> None:
        """The upstream connection is gone, and every link with it (waiting consumers are
        opened with the others on reconnect)."""
        self.holders.clear()
        self.sessions.clear()
        self.ending.clear()
        self.waiting.clear()
        self.waits.clear()
        self.timers.clear()

    def waited_too_long(self, timer: DetachWait) -> None:
        """``DETACH_WAIT_MAX`` is over for the consumers waiting for ``timer.name``."""
        name = timer.name
        if self.timers.get(name) is timer:
            log.warning("upstream link %r: the upstream has not ended the session of the "
                        "previous link of that name after %.1f s; attaching anyway", name,
                        DETACH_WAIT_MAX)
            self._open_waiting(name)

    def _open_waiting(self, name: str) -> None:
        self.timers.pop(name, None)
        for consumer in self.waiting.pop(name, {}):
            del self.waits[consumer]
            self.reopen(consumer)


class DetachWait(Handler):
    """The timer that ends a wait for a name (:meth:`UpstreamLinkNames.waited_too_long`)."""

    def __init__(self, names: UpstreamLinkNames, name: str) -> None:
        super().__init__()
        self.names = names
        self.name = name

    def on_timer_task(self, event: Event) -> None:
        self.names.waited_too_long(self)
