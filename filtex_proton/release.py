"""Give links and sessions back once both ends are done with them.

Proton keeps every link in its session, and every session in its connection, until the
application frees it or the connection goes: on a long-lived connection where clients
attach and detach links (a JMS consumer per request, a temporary reply queue per call),
a container that never calls ``free()`` grows by a few kilobytes per link, for good.
:class:`EndpointReleaser` is the handler that frees them; a container adds it after its
own handlers and is told, once per link, when to drop what it keeps for that link.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from proton import Endpoint, Handler

__all__ = ["EndpointReleaser"]

_LOCAL_ACTIVE: Final = Endpoint.LOCAL_ACTIVE
_GONE: Final = "_filtex_gone"
"""Marks a link the peer has closed or detached (a detach leaves ``REMOTE_CLOSED`` unset)."""


class EndpointReleaser(Handler):
    """Frees each link and session once the peer has closed (or detached) it and we have too.

    Add it as the *last* handler (``handler.handlers.append(EndpointReleaser(...))`` on a
    ``MessagingHandler``): a freed endpoint must not be touched by a handler after it.
    It answers a close or detach in kind when nothing else has (``MessagingHandler`` does
    not answer a detach), then frees the endpoint; deliveries still unsettled on a freed
    link are settled by Proton, so settle or hand back what matters first, in
    ``on_link_gone``. Links of a session the peer ends are given to ``on_link_gone`` too.
    """

    def __init__(self, on_link_gone: Callable[[Any], None] | None = None) -> None:
        super().__init__()
        self.on_link_gone = on_link_gone
        """Called once per link, before it is freed: drop everything kept for it."""

    def on_link_remote_close(self, event: Any) -> None:
        self._release(event.link, closed=True)

    def on_link_remote_detach(self, event: Any) -> None:
        self._release(event.link, closed=False)

    def on_session_remote_close(self, event: Any) -> None:
        session = event.session
        link = session.connection.link_head(0)
        while link is not None:
            following = link.next(0)
            if link.session == session and not getattr(link, _GONE, False):
                self._forget(link)
            link = following
        if session.state & _LOCAL_ACTIVE:
            session.close()
        session.free()  # and the links still in it

    def _forget(self, link: Any) -> None:
        setattr(link, _GONE, True)
        if self.on_link_gone is not None:
            self.on_link_gone(link)

    def _release(self, link: Any, *, closed: bool) -> None:
        if getattr(link, _GONE, False):
            return
        self._forget(link)
        if link.state & _LOCAL_ACTIVE:
            if closed:
                link.close()
            else:
                link.detach()
        link.free()
