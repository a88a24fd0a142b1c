"""A Proton reactor container whose event loop short-cuts the per-message events.

python-qpid-proton's ``Reactor.process`` turns every engine event into an
``Event`` (five wrapper objects) and dispatches it to two handler trees; its IO
handler is driven by events too. Per message that is about six events, and
each socket read or write costs two more. This subclass keeps that loop, its
handlers, timers and selectables, but:

* ``PN_DELIVERY`` and ``PN_LINK_FLOW`` on links the broker registered go
  straight to the link's state with the raw C pointers;
* ``PN_TRANSPORT`` only marks the transport; its selectable is updated once,
  when the batch of events is done;
* when the reactor is quiescent it selects and moves bytes between sockets and
  transports itself, instead of queueing readable/writable/updated events for
  the IO handler (other selectables - listeners, timers, our waker - still get
  their events).

The rules are the IO handler's (``proton._handlers.IOHandler``); only the
event round trips are gone. It reads and drives its base class's private state
and proton's selectables: every such name is listed and checked at start-up in
:mod:`filtex_broker.loop.proton_internals`, and :mod:`filtex_broker.loop.auto` runs this loop only
on the python-qpid-proton versions it is tested with.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from proton import Condition, Endpoint, Event, Link, Transport
from proton.reactor import Container

from filtex_broker.loop.contract import FastLink
from filtex_broker.loop.engine import NULL, PN_DELIVERY, PN_LINK_FLOW, PN_TRANSPORT, ffi, impl, lib
from filtex_broker.loop.poller import install as install_poll_selector
from filtex_broker.loop.proton_internals import (
    ConnectSelectable,
    delegate,
    detach_transport,
    io_base,
    transport_of,
)

__all__ = ["FastContainer", "FastLink"]

log = logging.getLogger("filtex.broker")

_FAST_KINDS: Final = frozenset({PN_DELIVERY, PN_LINK_FLOW})
_QUIESCED: Final[int] = Event.REACTOR_QUIESCED.number
_UPDATED: Final[int] = Event.SELECTABLE_UPDATED.number
_NO_EVENT: Any = None
_READ_BUDGET: Final = 256 * 1024
"""Bytes read from one socket per round at most (more per round: fewer writes per message)."""
_WRITE_EVERY: Final = 256
"""Per-message events handled before what they produced is written (without waiting for the
rest of the batch): a peer starts on the first messages of a large read while the broker works
through the others (a relay forwards a read of the upstream this way), and a producer gets its
credit and outcomes back while it still has credit to send with."""
_EARLY_ALL: Final = 8
"""Up to this many changed transports, each is written at such a point; beyond, only those
with :data:`_EARLY_BYTES` to send (a hundred consumers' connections with a few messages each
wait for the end of the batch: one write each instead of several)."""
_EARLY_BYTES: Final = 16 * 1024


def _plain(selectable: Any) -> bool:
    """A connection's socket whose IO we do ourselves (not a connect in progress: proton's
    ``ConnectSelectable`` must see its own writable event to finish an outgoing connect)."""
    return not isinstance(selectable, ConnectSelectable) and selectable.handler is None


class FastContainer(Container):
    """A :class:`proton.reactor.Container` with a fast path for registered links and IO."""

    fast = True

    def __init__(self, *handlers: Any, **kwargs: Any) -> None:
        super().__init__(*handlers, **kwargs)
        self._fast: dict[Any, tuple[FastLink, Link]] = {}
        self._dirty: dict[Any, None] = {}
        self._selector: Any = install_poll_selector(io_base(self))  # select(2) stops at fd 1023
        self._out_size = 65536
        self._out: Any = ffi.new("char[]", self._out_size)
        self.buffered: set[Any] = set()
        """Selectables whose socket holds bytes ``select`` cannot see (decrypted TLS records)."""
        self._events: Any = impl(self._collector)
        self._by_kind: dict[int, Callable[[Any], Any]] = {
            _UPDATED: self._on_selectable_updated,
            _QUIESCED: self._on_reactor_quiesced,
        }
        """The handler of each event kind ``process`` does not handle inline (the others:
        :meth:`_on_proton_event`)."""

    # -- registered links ---------------------------------------------------------

    def register(self, link: Link, state: FastLink) -> None:
        """Send this link's deliveries and flow straight to ``state``."""
        self._fast[impl(link)] = (state, link)
        link.broker_routed = True

    def unregister(self, link: Link) -> None:
        self._fast.pop(impl(link), None)
        link.broker_routed = False

    def _fail(self, link: Link, exc: Exception) -> None:
        log.exception("internal error on link %r", link.name)
        self.unregister(link)
        if not link.state & Endpoint.LOCAL_CLOSED:
            link.condition = Condition("amqp:internal-error", f"{type(exc).__name__}: {exc}"[:200])
            link.close()

    # -- IO (the rules of proton's IOHandler, without its events) ------------------------

    def _update(self, transport: Transport, selectable: Any) -> None:
        """Tell the selector what the transport wants now (IOHandler.update)."""
        raw = impl(transport)
        selectable.reading = lib.pn_transport_capacity(raw) > 0
        selectable.writing = lib.pn_transport_pending(raw) > 0
        if lib.pn_transport_closed(raw):
            selectable.terminate()
            detach_transport(selectable, transport)
        selectable.deadline = transport.tick(self.now)
        if selectable.is_terminal:
            selectable.update()  # queues the final event: the IO handler closes the socket
        else:
            self._selector.update(selectable)

    def _flush(self) -> None:
        """Write what every transport that changed has to send, as far as its socket takes it
        now (no wait for the next ``poll`` to say it is writable: it nearly always is), and
        update its selectable (once each)."""
        if not self._dirty:
            return
        dirty = list(self._dirty)
        self._dirty.clear()
        for raw in dirty:
            transport = Transport.wrap(raw)
            lib.pn_decref(raw)
            selectable = getattr(transport, "_selectable", None)
            if transport is None or selectable is None or selectable.is_terminal:
                continue
            if not (_plain(selectable) and lib.pn_transport_pending(raw) > 0
                    and self._write(selectable, transport)):
                self._update(transport, selectable)

    def _write_early(self) -> None:
        """Mid-batch: write the changed transports (all of a few, else those with much to
        send: see _WRITE_EVERY); the others stay marked for the end of the batch."""
        dirty = self._dirty
        if not dirty:
            return
        least = 1 if len(dirty) <= _EARLY_ALL else _EARLY_BYTES
        for raw in list(dirty):
            if lib.pn_transport_pending(raw) < least:
                continue
            transport = Transport.wrap(raw)
            selectable = getattr(transport, "_selectable", None)
            if (transport is None or selectable is None or selectable.is_terminal
                    or not _plain(selectable)):
                continue
            del dirty[raw]
            lib.pn_decref(raw)
            if not self._write(selectable, transport):
                self._update(transport, selectable)

    def _read(self, selectable: Any, transport: Transport) -> None:
        """Read what the socket has (up to a bound, so one busy peer cannot starve others)."""
        raw = impl(transport)
        sock = delegate(selectable)
        budget = _READ_BUDGET
        while budget > 0:
            capacity = lib.pn_transport_capacity(raw)
            if capacity <= 0:
                break
            try:
                data = sock.recv(capacity)
            except BlockingIOError:
                break
            except OSError as exc:
                log.info("socket read failed: %s", exc)
                transport.close_tail()
                break
            if not data:  # end of stream: the peer is gone
                transport.close_head()
                transport.close_tail()
                selectable.terminate()
                detach_transport(selectable, transport)
                selectable.update()
                return
            lib.pn_transport_push(raw, ffi.from_buffer(data), len(data))
            if len(data) < capacity:
                break  # the socket is drained
            budget -= len(data)
        self._update(transport, selectable)

    def _write(self, selectable: Any, transport: Transport) -> bool:
        """Send what the transport has (as much as the socket takes); whether the selectable
        was updated (it is when anything was sent)."""
        raw = impl(transport)
        pending = lib.pn_transport_pending(raw)
        if pending > 0:
            if pending > self._out_size:
                self._out_size = max(pending, 2 * self._out_size)
                self._out = ffi.new("char[]", self._out_size)
            out = self._out
            size = lib.pn_transport_peek(raw, out, pending)
            try:
                sent = delegate(selectable).send(ffi.buffer(out, pending if size >= 0 else 0))
                lib.pn_transport_pop(raw, sent)
            except BlockingIOError:
                pass
            except OSError as exc:
                log.info("socket write failed: %s", exc)
                transport.close_head()
        if lib.pn_transport_pending(raw) != pending:
            self._update(transport, selectable)
            return True
        return False

    def _io_round(self) -> None:
        """Wait for sockets (or timers), then read and write (IOHandler.on_reactor_quiesced)."""
        self.timer_deadline  # noqa: B018 - drops cancelled timers, as the IO handler does
        buffered = [s for s in self.buffered if s.reading] if self.buffered else None
        readable, writable, expired = self._selector.select(0 if buffered else self.timeout)
        if buffered:
            self.buffered.difference_update(buffered)
            readable = list({*readable, *buffered})
        self.mark()
        for selectable in readable:
            transport = transport_of(selectable)
            if transport is not None and _plain(selectable):
                self._read(selectable, transport)
            else:
                selectable.readable()
        for selectable in writable:
            transport = transport_of(selectable)
            if transport is not None and _plain(selectable):
                self._write(selectable, transport)
            else:
                selectable.writable()
        for selectable in expired:
            selectable.expired()
        self.yield_()

    # -- the loop ---------------------------------------------------------------------

    def process(self) -> bool:
        """One pass of the event loop (see proton's ``Reactor.process``).

        The per-message events are handled here, inline: ``PN_DELIVERY`` and ``PN_LINK_FLOW``
        of registered links, and ``PN_TRANSPORT`` (50,000 messages make 100,000 deliveries and
        3,000 transport events, 100,000 with ten filtered consumers; but some 130 quiesced
        reactors and a few dozen other events). The rare ones go to their handler in
        ``_by_kind``: this costs nothing measurable, where a table for every event cost 3-5%
        more instructions per message (docs/PERFORMANCE.md, the event loop's dispatch)."""
        self.mark()
        previous: Any = _NO_EVENT
        collector = self._events
        peek = lib.pn_collector_peek
        pop = lib.pn_collector_pop
        event_type = lib.pn_event_type
        event_link = lib.pn_event_link
        fast = self._fast
        dirty = self._dirty
        by_kind = self._by_kind
        handled = 0
        while True:
            if self._yield:
                self._yield = False
                self._flush()
                return True
            raw = peek(collector)
            if raw == NULL:
                if not self._on_no_event(previous):
                    return False
                continue
            kind = event_type(raw)
            registered = fast.get(event_link(raw)) if kind in _FAST_KINDS else None
            if registered is not None:
                state, link = registered
                try:
                    if kind == PN_DELIVERY:
                        state.on_raw_delivery(lib.pn_event_delivery(raw))
                    else:
                        state.on_flow()
                except Exception as exc:
                    self._fail(link, exc)
                pop(collector)
                previous = Event.DELIVERY
                handled += 1
                if handled >= _WRITE_EVERY:
                    handled = 0
                    self._write_early()
            elif kind == PN_TRANSPORT:  # bytes to send: written once the batch is done
                transport_raw = lib.pn_event_transport(raw)
                if transport_raw not in dirty:
                    lib.pn_incref(transport_raw)
                    dirty[transport_raw] = None
                pop(collector)
                previous = Event.TRANSPORT
            else:
                previous = by_kind.get(kind, self._on_proton_event)(raw)

    # Each handler below answers one kind of event, pops it from the collector when done with
    # it, and returns the event type that ``process`` remembers as the previous one.

    def _on_selectable_updated(self, raw: Any) -> Any:
        """``SELECTABLE_UPDATED``: tell the selector what the selectable waits for now."""
        self._selector.update(ffi.from_handle(lib.pn_event_context(raw)))
        lib.pn_collector_pop(self._events)
        return Event.SELECTABLE_UPDATED

    def _on_reactor_quiesced(self, raw: Any) -> Any:
        """``REACTOR_QUIESCED``: nothing left to do but IO; an IO round if no event follows."""
        alone = not lib.pn_collector_more(self._events)
        lib.pn_collector_pop(self._events)  # before the round, which queues events of its own
        self._previous = Event.REACTOR_QUIESCED
        if alone:
            self._io_round()
        return Event.REACTOR_QUIESCED

    def _on_proton_event(self, raw: Any) -> Any:
        """Any other event (and the per-message ones of links not registered): proton's own
        dispatch to the handler trees."""
        event: Any = Event.wrap(raw)  # type: ignore[no-untyped-call]
        event.dispatch(event.handler or self._handler)
        event.dispatch(self._global_handler)
        previous = event.type
        self._previous = previous
        lib.pn_collector_pop(self._events)
        return previous

    def _on_no_event(self, previous: Any) -> bool:
        """The collector is empty: write what changed, else ask for an IO round, else wind the
        reactor down; False once it is done (``REACTOR_FINAL`` queued)."""
        if self._dirty:
            self._flush()
        elif not self._stop and (self._timers > 0 or self._selectables > 1):
            if (previous is not Event.REACTOR_QUIESCED
                    and self._previous is not Event.REACTOR_FINAL):
                self.push_event(self, Event.REACTOR_QUIESCED)
            self.yield_()
        elif self._selectable:
            self._selectable.terminate()
            self._selectable.update()
            self._selectable = None
        else:
            if self._previous is not Event.REACTOR_FINAL:
                self.push_event(self, Event.REACTOR_FINAL)
            return False
        return True
