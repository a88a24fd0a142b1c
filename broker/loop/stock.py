"""proton's stock ``Container`` as the broker's event loop: its own IO, plus a global handler
that hands registered links' deliveries and flow to their states (the fast loop does that
without building events). Several times slower; works on any python-qpid-proton."""

from __future__ import annotations

import logging
from typing import Any

from proton import Condition, Endpoint, Handler, Link
from proton.reactor import Container

from filtex_broker.loop.contract import FastLink
from filtex_broker.loop.engine import impl

__all__ = ["StockContainer"]

log = logging.getLogger("filtex.broker")


class _Router(Handler):
    """The stock loop's global handler: a registered link's deliveries and flow to its state,
    every event then to proton's own global handler (IO, connects)."""

    def __init__(self, routes: dict[Any, FastLink], base: Any) -> None:
        self.routes = routes
        self.handlers = [base]

    def on_delivery(self, event: Any) -> None:
        link = event.link
        state = self.routes.get(impl(link)) if link is not None else None
        if state is not None and event.delivery is not None:
            try:
                state.on_raw_delivery(impl(event.delivery))
            except Exception as exc:
                self._fail(link, exc)

    def on_link_flow(self, event: Any) -> None:
        link = event.link
        state = self.routes.get(impl(link)) if link is not None else None
        if state is not None:
            try:
                state.on_flow()
            except Exception as exc:
                self._fail(link, exc)

    def _fail(self, link: Link, exc: Exception) -> None:
        """What the fast loop does: log, stop routing, close the link with internal-error."""
        log.exception("internal error on link %r", link.name)
        self.routes.pop(impl(link), None)
        link.broker_routed = False
        if not link.state & Endpoint.LOCAL_CLOSED:
            link.condition = Condition("amqp:internal-error", f"{type(exc).__name__}: {exc}"[:200])
            link.close()


class StockContainer(Container):
    """proton's ``Container`` and its event loop, unchanged; registered links are served by a
    global handler (one ``Event`` and its wrappers per delivery: several times slower)."""

    fast = False

    def __init__(self, *handlers: Any, **kwargs: Any) -> None:
        super().__init__(*handlers, **kwargs)
        self._routes: dict[Any, FastLink] = {}
        self.buffered: set[Any] = set()
        self.global_handler = _Router(self._routes, self.global_handler)

    def register(self, link: Link, state: FastLink) -> None:
        self._routes[impl(link)] = state
        link.broker_routed = True

    def unregister(self, link: Link) -> None:
        self._routes.pop(impl(link), None)
        link.broker_routed = False
