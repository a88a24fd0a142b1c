"""Relay mode: ending the upstream sessions of detached consumers, and when new ones may begin.

Each upstream consumer link has a session of its own (ending it is the one way to make
RabbitMQ give back everything the link had taken). A session is ended once the upstream has
begun it (ending one before the upstream's begin arrives makes Proton fail on the late
begin) and kept until the upstream's end arrives.

RabbitMQ 3.10 routes frames by channel number to a session process that may still be
ending: a begin on the number of a session the relay just ended can reach the old session
(rabbitmq-server pull request #14317 fixed this in 4.x); the upstream then detaches the new
links and the connection fails with "no such channel". Proton gives a new session the lowest
free number, the one just freed, so a consumer that leaves and another that comes at once
broke the upstream connection (seen in bench/bench_relay.py). For RabbitMQ 3.10 and any
upstream we do not know (:attr:`KnownBroker.ended_channels_safe
<filtex_broker.relay.brokers.KnownBroker.ended_channels_safe>`), a new consumer session
therefore waits until every session end is answered, plus ``SESSION_GRACE``, and at most
``SESSION_GRACE_MAX``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from proton import Endpoint, Handler, Session

from filtex_broker.loop.engine import impl
from filtex_broker.relay.brokers import KnownBroker
from filtex_broker.relay.consumers import RelayConsumer

if TYPE_CHECKING:

    from proton import Event

__all__ = ["SESSION_GRACE", "SESSION_GRACE_MAX", "SessionEnds", "SessionGrace"]

log = logging.getLogger("filtex.broker.relay")

SESSION_GRACE: Final = 0.1
"""Seconds after the upstream answered the last session end before new sessions begin (it
has to forget the old session's channel number first)."""
SESSION_GRACE_MAX: Final = 0.5
"""Seconds new consumers wait at most for session ends the upstream does not answer."""


class SessionEnds:
    """The upstream sessions being ended, and the consumers whose session waits for them."""

    def __init__(self, schedule: Callable[[float, Handler], bool],
                 reopen: Callable[[RelayConsumer], None]) -> None:
        self.schedule = schedule
        """Calls a handler's ``on_timer_task`` after a delay (False: not started, no timer)."""
        self.reopen = reopen
        """Opens the upstream side of a consumer that waited (if it still needs one)."""
        self.sessions: dict[Any, Session] = {}
        """Sessions of detached links, waiting for the upstream's begin or end."""
        self.waiting: dict[RelayConsumer, None] = {}
        """Consumers whose upstream session waits until the sessions being ended are gone."""
        self.grace: SessionGrace | None = None
        """The timer that opens the waiting consumers (an older one, when it fires, is
        ignored)."""

    def end(self, session: Session) -> None:
        """End a link's session, once the upstream has begun it."""
        self.sessions[impl(session)] = session  # kept until the upstream's end arrives
        if session.state & Endpoint.REMOTE_ACTIVE and session.state & Endpoint.LOCAL_ACTIVE:
            session.close()

    def begun(self, session: Session) -> None:
        """The upstream began a session: end it now if the relay is ending it."""
        if impl(session) in self.sessions and session.state & Endpoint.LOCAL_ACTIVE:
            session.close()

    def answered(self, session: Session) -> bool:
        """The upstream ended a session: whether the relay was ending it (else it still uses
        it, or the session is of a connection gone)."""
        return self.sessions.pop(impl(session), None) is not None

    def release_waiting(self) -> None:
        """If no session end is unanswered any more, open the waiting consumers after
        ``SESSION_GRACE``."""
        if not self.sessions and self.waiting:
            self._schedule(SESSION_GRACE)

    def hold(self, consumer: RelayConsumer, product: KnownBroker | None) -> bool:
        """Whether ``consumer``'s new session must wait for the session ends the upstream has
        not answered (``product``: the upstream, if known); if so it is opened later."""
        if (product is not None and product.ended_channels_safe) \
                or not (self.sessions or self.grace is not None):
            return False
        # A new session would take the channel number of one being ended, and RabbitMQ
        # 3.10 may hand its frames to the old session: wait until those ends are answered.
        self.waiting[consumer] = None
        if self.grace is None:
            self._schedule(SESSION_GRACE_MAX, force=True)
        return True

    def forget(self, consumer: RelayConsumer) -> None:
        self.waiting.pop(consumer, None)

    def clear(self) -> None:
        """The upstream connection is gone, and every session with it."""
        self.sessions.clear()
        self.waiting.clear()
        self.grace = None

    def open_waiting(self, grace: SessionGrace) -> None:
        """Open the upstream side of the consumers that waited for sessions to end."""
        if grace is not self.grace:
            return  # from before a reconnect
        self.grace = None
        if self.sessions and self.waiting and not grace.force:  # another end began meanwhile
            self._schedule(SESSION_GRACE_MAX, force=True)
            return
        waiting = list(self.waiting)
        self.waiting.clear()
        if self.sessions and waiting:
            # the upstream is slow to answer: a new session may take an ending one's channel;
            # say so, so that a reconnect that follows can be told apart
            log.warning("opening %d upstream consumer session(s) while %d session end(s) are "
                        "unanswered after %.1f s (RabbitMQ 3.10 may mix up their channels)",
                        len(waiting), len(self.sessions), SESSION_GRACE_MAX)
        for consumer in waiting:
            self.reopen(consumer)

    def _schedule(self, delay: float, *, force: bool = False) -> None:
        """Open the waiting consumers in ``delay`` seconds (``force``: even if some session end
        is still unanswered); an earlier timer still pending is then ignored when it fires."""
        grace = SessionGrace(self, force=force)
        if self.schedule(delay, grace):
            self.grace = grace


class SessionGrace(Handler):
    """The timer that opens the consumers that waited for ending sessions
    (:meth:`SessionEnds.open_waiting`)."""

    def __init__(self, ends: SessionEnds, *, force: bool) -> None:
        super().__init__()
        self.ends = ends
        self.force = force
        """Open them even if a session end is still unanswered (the longest wait is over)."""

    def on_timer_task(self, event: Event) -> None:
        self.ends.open_waiting(self)
