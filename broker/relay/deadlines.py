"""Relay mode: how long the upstream has to answer a dynamic attach.

A downstream attach with a dynamic source or target is answered only with the upstream's
node, and some upstreams never answer a dynamic attach at all: after
``--upstream-attach-timeout`` seconds (10 by default) the downstream one is refused
(``amqp:not-implemented``) instead of waiting forever.
One timer serves every waiting link, in arrival order (so deadline order): an answered or
detached link is forgotten at once, not held by a timer of its own until it fires.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from proton import Condition, Endpoint, Handler

from filtex_broker.relay.common import NOT_IMPLEMENTED, RelayEnd

if TYPE_CHECKING:

    from proton import Event

__all__ = ["AttachDeadlines"]


class AttachDeadlines(Handler):
    """The dynamic attaches sent upstream and not answered yet; the handler of their timer."""

    def __init__(self, schedule: Callable[[float, Handler], bool], timeout: float) -> None:
        super().__init__()
        self.schedule = schedule
        """Calls a handler's ``on_timer_task`` after a delay (False: not started, no timer)."""
        self.timeout = timeout
        """Seconds an upstream has to answer a dynamic attach."""
        self.awaiting: dict[RelayEnd, float] = {}
        """Each waiting link with its deadline (``time.monotonic()``), in deadline order."""
        self.pending = False
        """Whether the timer is set."""

    def answer_by(self, relay_link: RelayEnd) -> None:
        """Give the upstream ``timeout`` seconds to answer this link's dynamic attach."""
        if self.pending or self._set_timer(self.timeout):
            self.awaiting[relay_link] = time.monotonic() + self.timeout

    def answered(self, relay_link: RelayEnd) -> None:
        """The upstream answered the link's attach, or the link is gone: no deadline."""
        self.awaiting.pop(relay_link, None)

    def on_timer_task(self, event: Event) -> None:
        self.expire()

    def expire(self) -> None:
        """Refuse the dynamic attaches the upstream has not answered in time."""
        self.pending = False
        now = time.monotonic()
        while self.awaiting:
            relay_link, deadline = next(iter(self.awaiting.items()))
            if deadline > now:
                self._set_timer(deadline - now)
                return
            del self.awaiting[relay_link]
            if relay_link.link.state & Endpoint.LOCAL_UNINIT and not relay_link.closed:
                relay_link.upstream_closed(Condition(
                    NOT_IMPLEMENTED, "relay mode: the upstream did not answer a dynamic attach "
                    f"within {self.timeout:g} s"))

    def _set_timer(self, delay: float) -> bool:
        self.pending = self.schedule(delay, self)
        return self.pending
