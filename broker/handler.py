"""The Proton event handler: one short method per AMQP event the broker answers.

A plain :class:`proton.Handler`, not ``MessagingHandler``: no ``proton.Message``
is ever decoded, no endpoint is opened behind our back (the filter refusal
must not be re-opened: docs/SEMANTICS.md, Sources), and the hot path is
just ``on_delivery`` and ``on_link_flow``. Every method is guarded: an
unexpected exception is logged and costs the offending link or connection,
never the broker.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from proton import Condition, Endpoint, Handler

from filtex_broker.client import ClientConnection, is_idle_timeout
from filtex_broker.links import LinkManager, LinkState

if TYPE_CHECKING:
    from proton import Connection, Event, Link

__all__ = ["BrokerHandler", "Served"]


class Served(Protocol):
    """What the handler asks of the broker it serves (``filtex_broker.server.Broker``): the handler
    answers events, the broker owns connections, links and the process."""

    def started(self, container: Any) -> None: ...

    def open_connection(self, connection: Connection) -> None: ...

    def register(self, link: Link, state: LinkState) -> None: ...

    def unregister(self, link: Link) -> None: ...

    def connection_gone(self, connection: Connection | None) -> None: ...

    def idle_expired(self, connection: Connection | None) -> None:
        """The peer sent nothing for the idle-timeout: Proton closes the connection."""
        ...

    @property
    def links(self) -> LinkManager:
        """Attaches and detaches (``filtex_broker.links``)."""
        ...

log = logging.getLogger("filtex.broker")

INTERNAL_ERROR: Final = "amqp:internal-error"
_LOCAL_UNINIT: Final = Endpoint.LOCAL_UNINIT
_LOCAL_ACTIVE: Final = Endpoint.LOCAL_ACTIVE

_H = TypeVar("_H", bound=Callable[..., None])


def guarded(method: _H) -> _H:
    """Contain a handler's exception: log it, close what it happened on, carry on."""

    @functools.wraps(method)
    def wrapper(self: BrokerHandler, event: Event) -> None:
        try:
            method(self, event)
        except Exception as exc:
            log.exception("internal error in %s", method.__name__)
            _close_after_error(event, exc)

    return wrapper  # type: ignore[return-value]


def _close_after_error(event: Event, exc: Exception) -> None:
    condition = Condition(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"[:200])
    try:
        endpoint: Any = event.link or event.connection
        if endpoint is not None and not endpoint.state & Endpoint.LOCAL_CLOSED:
            endpoint.condition = condition
            endpoint.close()
    except Exception:
        log.exception("could not close after an internal error")


def link_state(link: Link) -> LinkState | None:
    """The broker's state for a link (kept in the link's attachment record)."""
    return getattr(link, "broker_state", None)


def client_of(connection: Connection | None) -> ClientConnection | None:
    if connection is None:
        return None
    return getattr(connection, "broker_client", None)


class BrokerHandler(Handler):
    """Routes Proton events to the broker; nothing here holds state of its own."""

    def __init__(self, broker: Served) -> None:
        self.broker = broker
        self.links = broker.links

    # -- lifecycle -----------------------------------------------------------------

    def on_reactor_init(self, event: Event) -> None:
        """Not guarded: a listener that cannot be bound must stop the broker."""
        self.broker.started(event.container)

    @guarded
    def on_connection_remote_open(self, event: Event) -> None:
        connection = event.connection
        if connection is not None and connection.state & _LOCAL_UNINIT:
            self.broker.open_connection(connection)

    @guarded
    def on_session_remote_open(self, event: Event) -> None:
        session = event.session
        if session is not None and session.state & _LOCAL_UNINIT:
            session.open()

    @guarded
    def on_link_remote_open(self, event: Event) -> None:
        link = event.link
        if link is None or not link.state & _LOCAL_UNINIT:
            return
        client = client_of(event.connection)
        if client is None or client.closed:
            link.close()
            return
        state = self.links.attach(link, client)
        if state is not None:
            link.broker_state = state
            self.broker.register(link, state)

    @guarded
    def on_link_remote_close(self, event: Event) -> None:
        if event.link is not None:
            self._link_gone(event.link, closed=True)

    @guarded
    def on_link_remote_detach(self, event: Event) -> None:
        if event.link is not None:
            self._link_gone(event.link, closed=False)

    def _link_gone(self, link: Link, *, closed: bool) -> None:
        state = link_state(link)
        if state is not None:
            self.broker.unregister(link)
            self.links.detach(state, client_of(link.connection), closed=closed)
        if link.state & _LOCAL_ACTIVE:
            if closed:
                link.close()
            else:
                link.detach()
        link.free()  # both ends are done: proton keeps the link in its session until freed

    @guarded
    def on_session_remote_close(self, event: Event) -> None:
        session = event.session
        connection = event.connection
        if session is None or connection is None:
            return
        client = client_of(connection)
        link = connection.link_head(0)
        while link is not None:
            if link.session == session:
                state = link_state(link)
                if state is not None:
                    self.broker.unregister(link)
                    self.links.detach(state, client, closed=False)
            link = link.next(0)
        if session.state & _LOCAL_ACTIVE:
            session.close()
        session.free()  # and with it the links it still had

    @guarded
    def on_connection_remote_close(self, event: Event) -> None:
        connection = event.connection
        if connection is None:
            return
        self.broker.connection_gone(connection)
        if connection.state & _LOCAL_ACTIVE:
            connection.close()

    @guarded
    def on_transport_closed(self, event: Event) -> None:
        self.broker.connection_gone(event.connection)

    @guarded
    def on_transport_error(self, event: Event) -> None:
        transport = event.transport
        condition = transport.condition if transport is not None else None
        if condition is None:
            return
        if is_idle_timeout(condition):
            self.broker.idle_expired(event.connection)
        elif condition.name != "amqp:connection:framing-error":
            log.info("transport error: %s: %s", condition.name, condition.description)

    # -- the hot path --------------------------------------------------------------------

    @guarded
    def on_delivery(self, event: Event) -> None:
        delivery = event.delivery
        link = event.link
        if delivery is None or link is None:
            return
        if getattr(link, "broker_routed", False):
            return  # the stock loop's router serves it (the fast loop never gets here)
        if delivery.readable or delivery.updated:
            delivery.settle()  # a late delivery on a link we have let go of (or that failed)

    @guarded
    def on_link_flow(self, event: Event) -> None:
        link = event.link
        if link is not None and link.is_sender and not getattr(link, "broker_routed", False):
            state = link_state(link)
            if state is not None:
                state.on_flow()
