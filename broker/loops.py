"""The event loop, chosen at start-up: the fast one when it is safe, else proton's stock one.

Like uvicorn's ``loops/auto.py``: ``--event-loop auto`` (the default) runs the
fast loop (:class:`broker.reactor.FastContainer`) only when the installed
python-qpid-proton is one it is tested with (:data:`TESTED_VERSIONS`) and
:func:`broker.proton_internals.check` finds every private name it uses; otherwise
it logs a warning saying why and runs :class:`StockContainer`, proton's own
``Container`` plus the two calls the broker makes of any loop. ``fast`` insists
(an untested version only warns; a failed check is an error); ``stock`` never
tries.

Both loops give the broker the same small interface (:class:`BrokerContainer`).
"""

from __future__ import annotations

import logging
from typing import Any, Final, Protocol

from proton import Condition, Endpoint, Handler, Link
from proton.reactor import Container

from broker import proton_internals
from broker.engine import impl

__all__ = ["EVENT_LOOPS", "BrokerContainer", "EventLoopError", "FastLink", "StockContainer",
           "choose_loop", "make_container"]

log = logging.getLogger("filtex.broker")

EVENT_LOOPS: Final = ("auto", "fast", "stock")


class EventLoopError(RuntimeError):
    """The configuration needs what the chosen event loop cannot do (TLS on the stock loop)."""


class FastLink(Protocol):
    """What a registered link's state answers, with raw ``pn_delivery_t *`` pointers."""

    def on_raw_delivery(self, delivery: Any) -> None: ...

    def on_flow(self) -> None: ...


class BrokerContainer(Protocol):
    """What the broker asks of its event loop beyond proton's ``Container``."""

    fast: bool
    buffered: set[Any]

    def register(self, link: Link, state: FastLink) -> None: ...

    def unregister(self, link: Link) -> None: ...


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


def choose_loop(mode: str = "auto") -> tuple[str, str]:
    """``("fast" | "stock", why)`` for ``mode``; raises InternalsError if ``fast`` cannot run,
    or if neither can (the C bindings both need are missing)."""
    if mode not in EVENT_LOOPS:
        raise ValueError(f"event loop {mode!r} is not one of {', '.join(EVENT_LOOPS)}")
    proton_internals.require_engine()
    if mode == "stock":
        return "stock", "--event-loop stock"
    version = proton_internals.installed_version()
    problems = proton_internals.check()
    if mode == "fast":
        if problems:
            raise proton_internals.InternalsError(
                f"--event-loop fast cannot run: {problems[0]}")
        if not proton_internals.tested(version):
            return "fast", (f"--event-loop fast on python-qpid-proton {version}, which it is "
                            f"not tested with (tested: "
                            f"{', '.join(proton_internals.TESTED_VERSIONS)})")
        return "fast", "--event-loop fast"
    if problems:
        return "stock", f"the fast event loop's start-up check failed: {problems[0]}"
    if not proton_internals.tested(version):
        return "stock", (f"python-qpid-proton {version} is not a version the fast event loop "
                         f"is tested with ({', '.join(proton_internals.TESTED_VERSIONS)})")
    return "fast", f"python-qpid-proton {version} (tested)"


def make_container(mode: str, *handlers: Any, **kwargs: Any) -> Any:
    """The container for ``mode`` (see :func:`choose_loop`), with a log line saying which."""
    loop, why = choose_loop(mode)
    if loop == "fast":
        from broker.reactor import FastContainer  # only imported when it can work
        if why.startswith("--event-loop fast on"):
            log.warning("%s", why)
        log.info("event loop: fast (%s)", why)
        return FastContainer(*handlers, **kwargs)
    if mode == "stock":
        log.info("event loop: stock (%s)", why)
    else:
        log.warning("event loop: proton's stock Container, several times slower: %s; "
                    "--event-loop stock silences this", why)
    return StockContainer(*handlers, **kwargs)
