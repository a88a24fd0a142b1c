"""Relay mode: nodes live on an upstream broker; this broker adds the filters.

With ``--upstream amqp://host:port`` the broker keeps no nodes of its own.

* A downstream **receiver** (a link the broker sends on) is first accepted or
  refused by the plugin (refusals stay local, the upstream never hears of
  them); then an upstream receiver is opened on the same address. Messages
  taken from the upstream are matched against the link's filter: matches go
  downstream, and the upstream delivery is settled with the downstream
  consumer's outcome only when that outcome arrives (accepted, rejected,
  released; ``modified`` goes upstream as ``modified`` with its fields where the
  upstream honours it, else as ``released``, because RabbitMQ ends the session on
  ``modified``, or held like a non-match if undeliverable-here). A relay crash
  therefore loses nothing: the upstream still holds every unsettled message
  (at-least-once).
* Non-matching messages on a **queue** are not consumed. Where the upstream
  honours ``modified`` with undeliverable-here (``upstream_non_match``; ``auto``
  asks :mod:`broker.relay.brokers`), they are settled so at once: the upstream
  offers them to its other consumers and never again to this link. Elsewhere they
  are held, unsettled, while the link lives (at most ``upstream_held`` per link; then the
  link takes no more from the upstream until it detaches) and released when it
  detaches. Releasing them at once would loop on RabbitMQ (a released message is
  redelivered at once to any link with credit, the releasing one included) and
  ``modified`` with undeliverable-here ends RabbitMQ's session. On a **topic**
  (source capability ``topic``) a subscriber's non-matches are simply accepted
  upstream (skipped): the subscription's copy is for this link alone. RabbitMQ's ``/topic/``
  and ``/exchange/`` addresses are treated as topics too.
* A **browser** (distribution-mode ``copy``) reads through an upstream link
  asking for ``copy``; its upstream deliveries are settled without an outcome.
  A **dynamic** source or target is answered with the upstream's dynamic node (closed
  with ``amqp:resource-deleted`` if the upstream connection goes, as the node
  does). Browse and dynamic links get no upstream credit until the upstream's
  attach grants what they asked; upstreams known not to do either
  (:mod:`broker.relay.brokers`: RabbitMQ echoes ``copy`` and consumes) are
  refused with ``amqp:not-implemented``.
* A downstream **sender**'s messages are forwarded, as the bytes that arrived
  plus one message annotation naming the relay connection (for no-local on the
  way back: :mod:`broker.relay.origin`), to an upstream sender on the same
  address (an anonymous one, for a producer without a target address, if the
  upstream offers ``ANONYMOUS-RELAY``); the downstream delivery is settled
  with the upstream's outcome. The downstream credit mirrors the upstream's.
* **TLS**: an ``amqps://`` upstream is reached with ``--upstream-ca``,
  ``--upstream-cert``/``--upstream-key`` and host name verification
  (``--no-upstream-verify-hostname`` to switch it off).
* **Pushdown**: when selectors are pushed (``upstream_selector`` ``always``, or
  ``auto`` and the upstream offers ``APACHE.ORG:SELECTOR`` or names a product
  known to evaluate selectors: :mod:`broker.relay.brokers`), the part of the
  downstream filter set that a JMS selector expresses (:mod:`filtex_proton.pushdown`:
  a client's own JMS selector as it is, plus the translatable SQL, property, group
  and constant filters) is put on the upstream source; the whole filter set is
  still evaluated here, and the selector is implied by it, so this is exact
  whatever the upstream does.
* **Reconnect**: when the upstream connection goes away the downstream links
  stay attached; the relay reconnects with exponential backoff (0.2 s to 5 s)
  and re-opens every upstream link. Deliveries in flight are redelivered by the
  upstream (duplicates possible, never losses); downstream outcomes for
  deliveries of the lost connection are settled locally only.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from typing import TYPE_CHECKING, Any, Final

from proton import (
    Condition,
    Connection,
    Described,
    Endpoint,
    Handler,
    Link,
    Receiver,
    Sender,
    Session,
    SSLDomain,
    SSLException,
    Terminus,
    symbol,
)

from broker.client import ClientConnection
from broker.loop.engine import (
    ACCEPTED,
    MODIFIED,
    REJECTED,
    RELEASED,
    TERMINAL,
    ReceiveBuffer,
    lib,
    send_bytes,
    wrap_delivery,
)
from broker.nodes.producer import Producer
from broker.nodes.registry import Registry
from broker.relay.brokers import KnownBroker, decide_non_match, decide_pushdown, identify
from broker.relay.origin import OriginStamp
from broker.settings import BrokerConfig
from broker.terminus import read_terminus, refuse
from filtex_proton.matcher import NodeMatcher
from filtex_proton.plugin import (
    DecodeError,
    FilterMessage,
    FiltexPlugin,
    InvalidMessageError,
    LinkFilter,
)
from filtex_proton.pushdown import client_selector, pushdown

if TYPE_CHECKING:

    from proton import Event

    from broker.loop.fast import FastContainer

__all__ = ["RelayConsumer", "RelayProducer", "Upstream"]

log = logging.getLogger("filtex.broker.relay")

SELECTOR_SYMBOL: Final = symbol("apache.org:selector-filter:string")
NOT_IMPLEMENTED: Final = "amqp:not-implemented"
ANONYMOUS_RELAY: Final = "ANONYMOUS-RELAY"
PER_LINK_PREFIXES: Final = ("/topic/", "/exchange/")
"""RabbitMQ addresses where every link reads a copy of its own (a topic, whatever the caps)."""
BACKOFF_MIN: Final = 0.2
BACKOFF_MAX: Final = 5.0
ATTACH_TIMEOUT: Final = 10.0
"""Seconds an upstream has to answer a dynamic attach before the downstream one is refused."""


class _AttachDeadline(Handler):
    """Refuses a dynamic attach the upstream has not answered in time (some never answer)."""

    def __init__(self, owner: RelayConsumer | RelayProducer) -> None:
        super().__init__()
        self.owner = owner

    def on_timer_task(self, event: Event) -> None:
        owner = self.owner
        if owner.link.state & Endpoint.LOCAL_UNINIT and not owner.closed:
            owner.upstream_closed(Condition(NOT_IMPLEMENTED, "relay mode: the upstream did not "
                                            f"answer a dynamic attach within {ATTACH_TIMEOUT} s"))


class _UpstreamSide:
    """The fast-path state of an upstream link: hands its events to the relay link."""

    __slots__ = ("owner",)

    def __init__(self, owner: RelayConsumer | RelayProducer) -> None:
        self.owner = owner

    def on_raw_delivery(self, delivery: Any) -> None:
        self.owner.on_upstream_delivery(delivery)

    def on_flow(self) -> None:
        self.owner.on_upstream_flow()


class RelayConsumer:
    """A downstream link the broker sends on, fed by an upstream receiver."""

    def __init__(
        self, link: Sender, upstream: Upstream, address: str, link_filter: LinkFilter | None,
        *, topic: bool, presettled: bool, selector: str | None, held_limit: int,
        browse: bool = False, dynamic: bool = False,
    ) -> None:
        self.link = link
        self.impl: Any = link._impl
        self.name: str = link.name
        self.upstream = upstream
        self.address = address
        self.filter = link_filter
        self.topic = topic
        self.browse = browse
        """Distribution-mode copy: upstream deliveries are settled without an outcome."""
        self.dynamic = dynamic
        """The upstream names the node; the downstream attach is answered once it has."""
        self.copies = topic or browse
        """The link reads a copy of its own: non-matches are skipped, never held."""
        self.confirmed = False
        """The upstream granted what a browse or dynamic attach asked for: credit may go."""
        self.presettled = presettled
        self.selector = selector
        self.held_limit = held_limit
        self.credit = 0
        self.closed = False
        self.node = None  # LinkManager.detach looks for a dynamic node owner
        self.up: Receiver | None = None
        self.up_impl: Any = None
        self.up_session: Session | None = None
        self._partial: bytearray | None = None
        self._receive = ReceiveBuffer()
        self.pending: deque[tuple[bytes, Any]] = deque()
        """Matching messages from the upstream not yet sent downstream (data, upstream delivery)."""
        self.held: dict[Any, bytes] = {}
        """Upstream delivery -> data of non-matching queue messages: released when the link
        goes, or handed to another of our consumers on the address that matches them."""
        self.lent: dict[Any, RelayConsumer] = {}
        """Our upstream deliveries handed to another consumer (it settles them)."""
        self.borrowed: dict[Any, RelayConsumer] = {}
        """Upstream deliveries of another consumer's link that we send (and settle)."""
        self.unacked: dict[Any, tuple[Any, bytes] | None] = {}
        """Downstream delivery -> (upstream delivery, data); None once that connection is gone."""
        self.sent = 0
        self.skipped = 0
        self._tags = 0

    # -- upstream link ---------------------------------------------------------------

    def open_upstream(self, connection: Connection, shared: Session, pushdown: bool) -> None:
        # A session of its own: ending it is the one way to make RabbitMQ give back
        # everything the link had taken (see detach).
        session = connection.session()
        session.open()
        self.up_session = session
        up = session.receiver(f"{self.name}@relay")
        if self.dynamic:
            up.source.dynamic = True
        else:
            up.source.address = self.address
        if self.browse:
            up.source.distribution_mode = Terminus.DIST_MODE_COPY
        self.confirmed = not (self.browse or self.dynamic)  # else: see upstream_attached
        if self.topic:
            up.source.capabilities.put_object(symbol("topic"))
        if pushdown and self.selector is not None:
            up.source.filter.put_map()
            up.source.filter.enter()
            up.source.filter.put_symbol(symbol("jms-selector"))
            up.source.filter.put_object(Described(SELECTOR_SYMBOL, self.selector))
            up.source.filter.exit()
        up.snd_settle_mode = Link.SND_SETTLED if self.presettled else Link.SND_UNSETTLED
        up.rcv_settle_mode = Link.RCV_FIRST
        up.open()
        self.up = up
        self.up_impl = up._impl
        self.upstream.register(up, _UpstreamSide(self))
        if self.dynamic:
            self.upstream.answer_by(self)
        self._top_up()

    def upstream_lost(self) -> None:
        """The upstream connection is gone: forget its deliveries (it redelivers them)."""
        self.up = None
        self.up_impl = None
        self.up_session = None
        self._partial = None
        self.pending.clear()
        self.held.clear()
        self.lent.clear()
        self.borrowed.clear()
        for key in self.unacked:
            self.unacked[key] = None

    def on_upstream_delivery(self, delivery: Any) -> None:
        if self.up_impl is None:
            return
        if not lib.pn_delivery_readable(delivery) or lib.pn_delivery_aborted(delivery):
            if lib.pn_delivery_aborted(delivery):
                self._partial = None
                lib.pn_delivery_settle(delivery)
            return
        chunk = self._receive.read(self.up_impl, delivery)
        if lib.pn_delivery_partial(delivery):
            if self._partial is None:
                self._partial = bytearray()
            self._partial += chunk
            return
        if self._partial is not None:
            data = bytes(self._partial + chunk)
            self._partial = None
        else:
            data = chunk
        lib.pn_link_advance(self.up_impl)
        link_filter = self.filter  # without one, no message object is built
        if link_filter is None or link_filter.matches(message := self.upstream.message(data)):
            self.pending.append((data, delivery))
            self._pump()
        else:
            self.skipped += 1
            if self.copies or lib.pn_delivery_settled(delivery):
                self._settle_up(delivery, ACCEPTED)
            elif self.upstream.non_match_modified:
                self._modify_up(delivery)  # the upstream offers it to its other consumers
            elif not self.upstream.hand_off(self, delivery, data, message):
                self.held[delivery] = data
                if len(self.held) == self.held_limit:
                    log.warning("relay consumer %r holds %d non-matching messages of %r "
                                "(upstream_held): it takes no more until some go", self.name,
                                self.held_limit, self.address)
            self._top_up()

    def on_upstream_flow(self) -> None:
        """The upstream's flow (drain answers) needs nothing from us."""

    def wants(self, message: FilterMessage) -> bool:
        """Whether this link would take a message another consumer does not match."""
        return not self.closed and self.up is not None and (
            self.filter is None or self.filter.matches(message))

    def borrow(self, owner: RelayConsumer, delivery: Any, data: bytes) -> None:
        """Send (and settle) a message taken by another of our links on the same queue."""
        owner.lent[delivery] = self
        self.borrowed[delivery] = owner
        self.pending.append((data, delivery))
        self._pump()

    def _returned(self, delivery: Any) -> None:
        """A borrowed delivery is settled: its owner no longer lends it."""
        owner = self.borrowed.pop(delivery, None)
        if owner is not None:
            owner.lent.pop(delivery, None)

    def recall(self, delivery: Any) -> None:
        """The owner's link is going and releases the delivery: forget it."""
        self.borrowed.pop(delivery, None)
        self.pending = deque(item for item in self.pending if item[1] != delivery)
        for key, value in self.unacked.items():
            if value is not None and value[0] == delivery:
                self.unacked[key] = None  # the outcome will be settled locally only

    def _hold_refused(self, up_delivery: Any, data: bytes) -> None:
        """Undeliverable-here from downstream, where ``modified`` cannot go upstream: released,
        RabbitMQ would offer it straight back to this link, so whoever took it upstream holds
        it like a non-match (released when that link goes)."""
        owner = self.borrowed.pop(up_delivery, None)
        if owner is None:
            self.held[up_delivery] = data
        else:
            owner.lent.pop(up_delivery, None)
            owner.held[up_delivery] = data

    def _settle_up(self, delivery: Any, outcome: int) -> None:
        # a browser's copies are settled without an outcome: nothing is consumed upstream
        if not self.browse and not lib.pn_delivery_settled(delivery):
            lib.pn_delivery_update(delivery, outcome)
        lib.pn_delivery_settle(delivery)

    def _modify_up(self, delivery: Any, outcome: Any = None) -> None:
        """Settle upstream as ``modified``: with the fields of a downstream consumer's
        ``outcome`` (its remote disposition), or, for a non-match, undeliverable-here and
        not delivery-failed (nothing is wrong with the message; this link is not its place)."""
        local = lib.pn_delivery_local(delivery)
        if outcome is None:
            lib.pn_disposition_set_undeliverable(local, True)
        else:
            lib.pn_disposition_set_failed(local, lib.pn_disposition_is_failed(outcome))
            lib.pn_disposition_set_undeliverable(local,
                                                 lib.pn_disposition_is_undeliverable(outcome))
            lib.pn_data_copy(lib.pn_disposition_annotations(local),
                             lib.pn_disposition_annotations(outcome))
        self._settle_up(delivery, MODIFIED)

    def _top_up(self) -> None:
        """Upstream credit: what downstream can take now, unless too much is held."""
        up = self.up_impl
        if up is None or self.closed or not self.confirmed:
            return
        want = self.credit - len(self.pending)
        if not self.copies and not self.upstream.non_match_modified:
            # credit cannot be taken back: never grant more than may still be held
            want = min(want, self.held_limit - len(self.held))
        have = lib.pn_link_credit(up)
        if want > have:
            lib.pn_link_flow(up, want - have)

    # -- downstream --------------------------------------------------------------------

    def _pump(self) -> None:
        while self.credit > 0 and self.pending and not self.closed:
            data, up_delivery = self.pending.popleft()
            self._tags += 1
            delivery = send_bytes(self.impl, b"%x" % self._tags, data)
            self.credit -= 1
            self.sent += 1
            if self.presettled:
                lib.pn_delivery_settle(delivery)
                self._settle_up(up_delivery, ACCEPTED)
                self._returned(up_delivery)
            else:
                self.unacked[delivery] = (up_delivery, data)
        self._top_up()

    def on_flow(self) -> None:
        impl = self.impl
        self.credit = lib.pn_link_credit(impl)
        self._pump()
        if lib.pn_link_get_drain(impl):
            lib.pn_link_drained(impl)
            self.credit = lib.pn_link_credit(impl)

    def on_raw_delivery(self, delivery: Any) -> None:
        """The downstream consumer's outcome: settle the upstream delivery the same way."""
        state = lib.pn_delivery_remote_state(delivery)
        if state not in TERMINAL and not lib.pn_delivery_settled(delivery):
            return
        sent = self.unacked.pop(delivery, None)
        if sent is not None:
            up_delivery, data = sent
            if state == REJECTED:
                condition = wrap_delivery(delivery).remote.condition
                wrapped = wrap_delivery(up_delivery)
                if condition is not None:
                    wrapped.local.condition = condition
                self._settle_up(up_delivery, REJECTED)
            elif state == MODIFIED and self.upstream.non_match_modified:
                self._modify_up(up_delivery, lib.pn_delivery_remote(delivery))
            elif state == MODIFIED and not self.copies and \
                    lib.pn_disposition_is_undeliverable(lib.pn_delivery_remote(delivery)):
                self._hold_refused(up_delivery, data)
            elif state in (RELEASED, MODIFIED):
                self._settle_up(up_delivery, RELEASED)
            else:  # accepted, or settled without an outcome
                self._settle_up(up_delivery, ACCEPTED)
            self._returned(up_delivery)
        lib.pn_delivery_settle(delivery)
        self._top_up()

    def detach(self) -> int:
        """The downstream link is gone: give back everything, then close the upstream link."""
        if self.closed:
            return 0
        self.closed = True
        returned = 0
        if self.up is not None:
            # Released messages go back, but RabbitMQ redelivers a released message at once
            # to any link with credit, this one included, and a detached link's unsettled
            # messages stay taken until the session ends: so the link's own session ends too.
            for sent in self.unacked.values():
                if sent is not None:
                    self._settle_up(sent[0], RELEASED)
                    self._returned(sent[0])
                    returned += 1
            for _, up_delivery in self.pending:
                self._settle_up(up_delivery, RELEASED)
                self._returned(up_delivery)
            for up_delivery in self.held:
                self._settle_up(up_delivery, RELEASED)
            for up_delivery, borrower in self.lent.items():
                borrower.recall(up_delivery)
                self._settle_up(up_delivery, RELEASED)
            self.upstream.unregister(self.up)
            if self.up.state & Endpoint.LOCAL_ACTIVE:
                self.up.close()
            if self.up_session is not None:
                self.upstream.end_session(self.up_session)
        self.unacked.clear()
        self.pending.clear()
        self.held.clear()
        self.lent.clear()
        self.borrowed.clear()
        self.up = None
        self.up_impl = None
        self.up_session = None
        self.upstream.forget(self)
        return returned

    def upstream_closed(self, condition: Condition | None) -> None:
        """The upstream refused or closed our link: so does the downstream link."""
        self.detach()
        _close_downstream(self.link, condition)

    def upstream_attached(self, up: Link) -> None:
        """The upstream answered our attach: check it granted what browse or dynamic asked."""
        if self.up_impl is None or up._impl != self.up_impl or self.confirmed:
            return
        source = up.remote_source
        if source.type == Terminus.UNSPECIFIED:
            return  # refused: its detach follows (see Upstream._upstream_link_closed)
        if self.browse and source.distribution_mode != Terminus.DIST_MODE_COPY:
            self.upstream_closed(Condition(NOT_IMPLEMENTED, f"relay mode: the upstream does not "
                                           f"browse {self.address!r} (no distribution-mode copy)"))
            return
        if self.dynamic:
            if not source.address:
                self.upstream_closed(Condition(NOT_IMPLEMENTED, "relay mode: the upstream "
                                               "answered a dynamic source without an address"))
                return
            self.address = source.address
            self.link.source.address = source.address
            self.link.source.dynamic = True
            self.link.open()
            log.info("relay consumer %r: dynamic upstream node %r", self.name, self.address)
        self.confirmed = True
        self._top_up()

    def __repr__(self) -> str:
        return f"<RelayConsumer {self.name!r} on {self.address!r}>"


class RelayProducer(Producer):
    """A downstream link the broker receives on, forwarded to an upstream sender."""

    __slots__ = ("address", "client_origin", "dynamic", "inflight", "outbox", "up",
                 "up_impl", "up_tags", "upstream")

    def __init__(self, link: Receiver, upstream: Upstream, address: str | None, *, origin: int,
                 registry: Registry, window: int, max_size: int, dynamic: bool = False) -> None:
        super().__init__(link, None, origin=origin, registry=registry,
                         make_message=lambda data, origin: upstream.plugin.message(
                             data, origin=origin),
                         window=window, max_size=max_size)
        self.upstream = upstream
        self.client_origin = origin
        """``origin`` as the ``int`` the origin stamp takes (``Producer.origin`` is any object)."""
        self.address = address
        """None: anonymous relay (each message goes to its ``to``), or dynamic, not named yet."""
        self.dynamic = dynamic
        """The upstream names the node; the downstream attach is answered once it has."""
        self.up: Sender | None = None
        self.up_impl: Any = None
        self.up_tags = 0
        self.outbox: deque[tuple[bytes, Any]] = deque()
        """(data, downstream delivery) waiting for upstream credit."""
        self.inflight: dict[Any, tuple[bytes, Any]] = {}
        """Upstream delivery -> (data, downstream delivery), awaiting the upstream's outcome."""

    def open_upstream(self, connection: Connection, session: Session, pushdown: bool) -> None:
        up = session.sender(f"{self.name}@relay")
        if self.dynamic:
            up.target.dynamic = True
        elif self.address is not None:  # else anonymous: each message goes to its own ``to``
            up.target.address = self.address
        up.snd_settle_mode = Link.SND_UNSETTLED
        up.open()
        self.up = up
        self.up_impl = up._impl
        self.upstream.register(up, _UpstreamSide(self))
        if self.dynamic:
            self.upstream.answer_by(self)

    def upstream_lost(self) -> None:
        """Resend what was in flight after reconnecting (duplicates possible, no losses)."""
        self.up = None
        self.up_impl = None
        self.outbox.extendleft(reversed(list(self.inflight.values())))
        self.inflight.clear()

    def top_up(self) -> None:
        """Downstream credit mirrors the upstream sender's (within the window)."""
        if self.closed:
            return
        up = self.up_impl
        available = (lib.pn_link_credit(up) if up is not None else 0) - len(self.outbox)
        available = min(available, self.window)
        have = lib.pn_link_credit(self.impl)
        if available > have:
            lib.pn_link_flow(self.impl, available - have)
        self.credit = max(available, have)

    def _after_delivery(self) -> None:
        self.credit -= 1
        if self.credit <= self._low:  # pre-settled messages get no upstream outcome to wait for
            self.top_up()

    def _store(self, delivery: Any, data: bytes) -> None:
        message: FilterMessage = self.make_message(data, self.origin)
        try:
            view = message.validate()  # the same door check as for our own nodes
        except InvalidMessageError as exc:
            self.refuse_malformed(delivery, exc)
            return
        try:
            # marked with this connection, so that its no-local consumers skip it on the way back
            data = self.upstream.origins.stamp(view, self.client_origin)
        except DecodeError as exc:  # cannot happen after the check; refused all the same
            self.refuse_malformed(delivery, InvalidMessageError("message-annotations", exc.reason,
                                                           exc.offset))
            return
        refused = self.guard(message) if self.guard is not None else None
        if refused is not None:
            self._settle(delivery, REJECTED, str(refused.name), refused.description or "")
            return
        self.outbox.append((data, delivery))
        self._flush()

    def _flush(self) -> None:
        up = self.up_impl
        while up is not None and self.outbox and lib.pn_link_credit(up) > 0:
            data, delivery = self.outbox.popleft()
            self.up_tags += 1
            up_delivery = send_bytes(up, b"%x" % self.up_tags, data)
            if lib.pn_delivery_settled(delivery):  # pre-settled downstream: fire and forget
                lib.pn_delivery_settle(up_delivery)
            else:
                self.inflight[up_delivery] = (data, delivery)

    def on_upstream_flow(self) -> None:
        self._flush()
        self.top_up()

    def on_upstream_delivery(self, delivery: Any) -> None:
        """The upstream's outcome for a forwarded message: the downstream gets the same."""
        state = lib.pn_delivery_remote_state(delivery)
        if state not in TERMINAL and not lib.pn_delivery_settled(delivery):
            return
        entry = self.inflight.pop(delivery, None)
        condition = wrap_delivery(delivery).remote.condition if state == REJECTED else None
        lib.pn_delivery_settle(delivery)
        if entry is None:
            return
        down = entry[1]
        if state == REJECTED:
            self._settle(down, REJECTED, condition.name if condition else None,
                         (condition.description or "") if condition else "")
        elif state in (RELEASED, MODIFIED):
            self._settle(down, RELEASED)
        else:
            if not lib.pn_delivery_settled(down):
                lib.pn_delivery_update(down, ACCEPTED)
            lib.pn_delivery_settle(down)
        self.top_up()

    def detach(self) -> None:
        super().detach()
        self.outbox.clear()
        self.inflight.clear()  # the upstream still answers; nobody downstream to tell
        if self.up is not None:
            self.upstream.unregister(self.up)
            if self.up.state & Endpoint.LOCAL_ACTIVE:
                self.up.close()
        self.up = None
        self.up_impl = None
        self.upstream.forget(self)

    def upstream_closed(self, condition: Condition | None) -> None:
        self.detach()
        _close_downstream(self.link, condition)

    def upstream_attached(self, up: Link) -> None:
        """The upstream answered our attach: a dynamic target now has its address."""
        link = self.link
        if not self.dynamic or up._impl != self.up_impl or not link.state & Endpoint.LOCAL_UNINIT:
            return
        if up.remote_target.type == Terminus.UNSPECIFIED:
            return  # refused: its detach follows
        address = up.remote_target.address
        if not address:
            self.upstream_closed(Condition(NOT_IMPLEMENTED, "relay mode: the upstream answered "
                                           "a dynamic target without an address"))
            return
        self.address = address
        link.target.address = address
        link.target.dynamic = True
        link.open()
        log.info("relay producer %r: dynamic upstream node %r", self.name, address)
        self.top_up()

    def __repr__(self) -> str:
        return f"<RelayProducer {self.name!r} to {self.address!r}>"


RelayLink = RelayConsumer | RelayProducer


class Upstream(Handler):
    """The one connection to the upstream broker, with its reconnect loop."""

    def __init__(self, config: BrokerConfig, plugin: FiltexPlugin) -> None:
        super().__init__()
        self.config = config
        self.plugin = plugin
        self.container: FastContainer | None = None
        self.connection: Connection | None = None
        self.session: Session | None = None
        self.ready = False
        self.pushdown = False
        self.non_match_modified = False
        """A queue consumer's non-matches go back at once as modified (undeliverable-here),
        and a downstream modified goes up as modified; else they are held / released."""
        self.product: KnownBroker | None = None
        """The upstream broker, if its open frame names one we know."""
        self.origins = OriginStamp()
        """Marks forwarded messages with their connection, for no-local on the way back."""
        self.offered: frozenset[str] = frozenset()
        """The capabilities the upstream offered in its open frame."""
        self.links: dict[RelayLink, None] = {}
        self.queue_consumers: dict[str, NodeMatcher[RelayConsumer]] = {}
        """Our consumers of each upstream queue, indexed by their filters: a message one of
        them does not match is handed to a candidate, not offered to every link."""
        self.sessions: dict[Any, Session] = {}
        """Sessions of detached links, waiting for the upstream's begin or end."""
        self.backoff = BACKOFF_MIN
        self.stopping = False

    # -- the connection ---------------------------------------------------------------

    def start(self, container: FastContainer) -> None:
        self.container = container
        self._connect()

    def _connect(self) -> None:
        if self.stopping or self.container is None:
            return
        kwargs: dict[str, Any] = {"reconnect": False, "container_id":
                                  f"{self.config.container_id}-relay"}
        if self.config.upstream_user:
            kwargs.update(user=self.config.upstream_user,
                          password=self.config.upstream_password,
                          allowed_mechs="PLAIN", allow_insecure_mechs=True)
        else:
            kwargs.update(allowed_mechs="ANONYMOUS PLAIN")
        if self.config.upstream.startswith("amqps://"):
            try:
                kwargs["ssl_domain"] = upstream_ssl_domain(self.config)
            except SSLException as exc:  # e.g. a CA file that is not PEM: the operator fixes it
                log.error("upstream TLS settings unusable (%s); retrying in %.1f s", exc,
                          BACKOFF_MAX)
                self.container.schedule(BACKOFF_MAX, self)
                return
        log.info("connecting to upstream %s", self.config.upstream)
        self.connection = self.container.connect(self.config.upstream, handler=self, **kwargs)

    def on_connection_remote_open(self, event: Event) -> None:
        connection = event.connection
        if not self._current(connection):
            return
        assert connection is not None
        offered = connection.remote_offered_capabilities or []
        names = {str(c) for c in (offered if isinstance(offered, list | tuple) else [offered])}
        self.offered = frozenset(names)
        decision = decide_pushdown(self.config.upstream_selector, names,
                                   connection.remote_properties)
        self.pushdown = decision.pushdown
        self.product = identify(connection.remote_properties)
        log.info("upstream %s open (offers %s; selector pushdown %s: %s)", self.config.upstream,
                 sorted(names) or "nothing", "on" if self.pushdown else "off", decision.reason)
        non_match = decide_non_match(self.config.upstream_non_match, connection.remote_properties)
        self.non_match_modified = non_match.modified
        log.info("upstream %s: queue non-matches without pushdown are %s: %s",
                 self.config.upstream, "modified (undeliverable-here)" if non_match.modified
                 else "held while the link lives", non_match.reason)
        self.session = connection.session()
        self.session.open()
        self.ready = True
        self.backoff = BACKOFF_MIN
        for link in list(self.links):
            self._open(link)

    def on_link_remote_open(self, event: Event) -> None:
        link = event.link
        if link is not None:
            log.info("upstream link %r attached to %r", link.name,
                     (link.remote_source if link.is_receiver else link.remote_target).address)
            owner = self._owner_of(link)
            if owner is not None:
                owner.upstream_attached(link)

    def on_link_remote_close(self, event: Event) -> None:
        self._upstream_link_closed(event)

    def on_link_remote_detach(self, event: Event) -> None:
        self._upstream_link_closed(event)

    def _upstream_link_closed(self, event: Event) -> None:
        link = event.link
        if link is None:
            return
        owner = self._owner_of(link)
        condition = link.remote_condition
        if owner is not None:
            log.warning("upstream closed link %r: %s", link.name,
                        f"{condition.name}: {condition.description}" if condition else "no error")
            owner.upstream_closed(condition)
        if link.state & Endpoint.LOCAL_ACTIVE:
            link.close()

    def _owner_of(self, link: Link) -> RelayLink | None:
        for owner in self.links:
            if owner.up is not None and owner.up._impl == link._impl:
                return owner
        return None

    def on_connection_remote_close(self, event: Event) -> None:
        connection = event.connection
        condition = connection.remote_condition if connection is not None else None
        log.warning("upstream closed the connection%s",
                    f": {condition.name}: {condition.description}" if condition else "")
        if connection is not None and connection.state & Endpoint.LOCAL_ACTIVE:
            connection.close()
        self._lost(connection)

    def on_transport_closed(self, event: Event) -> None:
        self._lost(event.connection)

    def on_transport_error(self, event: Event) -> None:
        transport = event.transport
        condition = transport.condition if transport is not None else None
        if condition is not None:
            log.warning("upstream transport error: %s: %s", condition.name,
                        condition.description)

    def on_timer_task(self, event: Event) -> None:
        self._connect()

    def _lost(self, connection: Connection | None) -> None:
        if not self._current(connection):
            return
        self.connection = None
        self.session = None
        self.sessions.clear()
        self.ready = False
        for link in list(self.links):
            if link.up is not None:
                self.unregister(link.up)
            link.upstream_lost()
            if link.dynamic:
                link.upstream_closed(Condition("amqp:resource-deleted", "relay mode: the "
                                               "upstream's dynamic node went with its connection"))
        if self.stopping or self.container is None:
            return
        delay = self.backoff
        self.backoff = min(self.backoff * 2, BACKOFF_MAX)
        log.warning("upstream %s lost; reconnecting in %.1f s", self.config.upstream, delay)
        self.container.schedule(delay, self)

    def end_session(self, session: Session) -> None:
        """End a link's session, once the upstream has begun it (ending one before the
        upstream's begin arrives makes Proton fail on the late begin)."""
        self.sessions[session._impl] = session  # kept until the upstream's end arrives
        if session.state & Endpoint.REMOTE_ACTIVE and session.state & Endpoint.LOCAL_ACTIVE:
            session.close()

    def on_session_remote_open(self, event: Event) -> None:
        session = event.session
        if session is not None and session._impl in self.sessions \
                and session.state & Endpoint.LOCAL_ACTIVE:
            session.close()

    def on_session_remote_close(self, event: Event) -> None:
        session = event.session
        if session is None:
            return
        self.sessions.pop(session._impl, None)
        if session.state & Endpoint.LOCAL_ACTIVE:
            session.close()

    def _current(self, connection: Connection | None) -> bool:
        """Whether an event's connection is the one we use now (wrappers are not unique)."""
        return (connection is not None and self.connection is not None
                and connection._impl == self.connection._impl)

    def close(self) -> None:
        self.stopping = True
        if self.connection is not None and self.connection.state & Endpoint.LOCAL_ACTIVE:
            self.connection.close()

    # -- links ------------------------------------------------------------------------------

    def register(self, link: Link, side: _UpstreamSide) -> None:
        if self.container is not None:
            self.container.register(link, side)

    def unregister(self, link: Link) -> None:
        if self.container is not None:
            self.container.unregister(link)

    def track(self, relay_link: RelayLink) -> None:
        self.links[relay_link] = None
        if isinstance(relay_link, RelayConsumer) and not relay_link.copies:
            matcher = self.queue_consumers.setdefault(relay_link.address, NodeMatcher())
            matcher.register(relay_link, relay_link.filter)
        if self._open(relay_link) and isinstance(relay_link, RelayConsumer):
            self.offer_held(relay_link)

    def _open(self, relay_link: RelayLink) -> bool:
        """Open the upstream side of a link, unless the upstream cannot serve it."""
        if not self.ready or self.session is None or self.connection is None:
            return False
        if isinstance(relay_link, RelayConsumer):
            reason = self.unsupported(browse=relay_link.browse, dynamic=relay_link.dynamic)
        else:
            reason = self.unsupported(dynamic=relay_link.dynamic, anonymous=not relay_link.dynamic
                                      and relay_link.address is None)
        if reason is not None:
            relay_link.upstream_closed(Condition(NOT_IMPLEMENTED, reason))
            return False
        relay_link.open_upstream(self.connection, self.session, self.pushdown)
        return True

    def answer_by(self, relay_link: RelayLink) -> None:
        """Give the upstream ATTACH_TIMEOUT seconds to answer a dynamic attach."""
        if self.container is not None:
            self.container.schedule(ATTACH_TIMEOUT, _AttachDeadline(relay_link))

    def unsupported(self, *, browse: bool = False, dynamic: bool = False,
                    anonymous: bool = False) -> str | None:
        """Why the upstream cannot serve a link, as far as its open frame tells (None: try)."""
        if not self.ready:
            return None  # asked again once the upstream is open
        product = self.product
        if browse and product is not None and not product.browses:
            return (f"relay mode: the upstream ({product.label}) does not browse: it would "
                    "consume what a distribution-mode copy link reads")
        if dynamic and product is not None and not product.dynamic_nodes:
            return f"relay mode: the upstream ({product.label}) creates no dynamic nodes"
        if anonymous and ANONYMOUS_RELAY not in self.offered:
            return ("relay mode: the upstream does not offer ANONYMOUS-RELAY, which a producer "
                    "without a target address needs")
        return None

    def hand_off(self, owner: RelayConsumer, delivery: Any, data: bytes,
                 message: FilterMessage) -> bool:
        """Give a message one link does not match to another of our links on the queue (only
        the candidates the queue's matcher names are asked)."""
        matcher = self.queue_consumers.get(owner.address)
        if matcher is None:
            return False
        for other in matcher.candidates(message):
            if other is not owner and other.wants(message):
                other.borrow(owner, delivery, data)
                return True
        return False

    def offer_held(self, newcomer: RelayConsumer) -> None:
        """A new consumer on a queue: take what our other links hold and it matches."""
        if newcomer.copies:
            return
        for other in list(self.links):
            if (not isinstance(other, RelayConsumer) or other is newcomer
                    or other.address != newcomer.address or not other.held):
                continue
            for delivery, data in list(other.held.items()):
                if newcomer.wants(self.message(data)):
                    del other.held[delivery]
                    newcomer.borrow(other, delivery, data)
            other._top_up()

    def message(self, data: bytes) -> FilterMessage:
        """A message taken from the upstream, with the relay connection that published it."""
        message = self.plugin.message(data)
        with contextlib.suppress(DecodeError):  # not a message: it matches no filter anyway
            message.origin = self.origins.origin(message.view)
        return message

    def forget(self, relay_link: RelayLink) -> None:
        self.links.pop(relay_link, None)
        if isinstance(relay_link, RelayConsumer):
            matcher = self.queue_consumers.get(relay_link.address)
            if matcher is not None:
                matcher.unregister(relay_link)
                if not len(matcher):
                    del self.queue_consumers[relay_link.address]

    # -- attaching downstream links --------------------------------------------------------

    def attach_consumer(self, link: Sender, client: ClientConnection) -> RelayConsumer | None:
        request = read_terminus(link.remote_source)
        if request.address is None and not request.dynamic:
            refuse(link, NOT_IMPLEMENTED, "relay mode: a consumer needs a source address "
                    "(durable subscription look-ups by link name are not relayed)")
            return None
        reason = self.unsupported(browse=request.copy, dynamic=request.dynamic)
        if reason is not None:
            refuse(link, NOT_IMPLEMENTED, reason)
            return None
        link_filter = self.plugin.attach_sender(link)
        if link_filter is None:
            return None  # refused on the wire by the plugin, which logged why
        plan = pushdown(link_filter.filter_set)
        selector = plan.selector or client_selector(link_filter.filter_set)
        log.info("link %r: pushdown selector %r; kept local: %s", link.name, selector,
                  "; ".join(plan.reasons) or "nothing")
        source = link.source
        if request.address is not None:
            source.address = request.address
        remote = link.remote_source
        source.durability = remote.durability
        source.expiry_policy = remote.expiry_policy
        link.target.copy(link.remote_target)
        presettled = link.remote_snd_settle_mode == Link.SND_SETTLED
        link.snd_settle_mode = Link.SND_SETTLED if presettled else Link.SND_UNSETTLED
        link.rcv_settle_mode = link.remote_rcv_settle_mode
        if request.copy:
            source.distribution_mode = Terminus.DIST_MODE_COPY
        if not request.dynamic:  # a dynamic one is answered with the upstream's node
            link.open()
        address = request.address or ""
        consumer = RelayConsumer(
            link, self, address, None if link_filter.is_trivial else link_filter,
            topic=request.topic or address.startswith(PER_LINK_PREFIXES),
            presettled=presettled, selector=selector,
            held_limit=self.config.upstream_held, browse=request.copy, dynamic=request.dynamic,
        )
        client.consumers.append(consumer)
        self.track(consumer)
        log.info("connection %d: relay consumer %r on upstream %r%s", client.origin, link.name,
                 request.address, " (filtered)" if consumer.filter is not None else "")
        return consumer

    def attach_producer(self, link: Receiver, client: ClientConnection,
                        registry: Registry) -> RelayProducer | None:
        request = read_terminus(link.remote_target)
        if request.coordinator:
            refuse(link, NOT_IMPLEMENTED, "relay mode: transactions are not relayed")
            return None
        reason = self.unsupported(dynamic=request.dynamic,
                                  anonymous=request.address is None and not request.dynamic)
        if reason is not None:
            refuse(link, NOT_IMPLEMENTED, reason)
            return None
        link.target.copy(link.remote_target)
        link.source.copy(link.remote_source)
        link.rcv_settle_mode = Link.RCV_FIRST
        link.snd_settle_mode = link.remote_snd_settle_mode
        link.max_message_size = self.config.max_message_size
        if not request.dynamic:  # a dynamic one is answered with the upstream's node
            link.open()
        producer = RelayProducer(link, self, None if request.dynamic else request.address,
                                 origin=client.origin, registry=registry,
                                 window=self.config.credit_window,
                                 max_size=self.config.max_message_size, dynamic=request.dynamic)
        client.producers.append(producer)
        self.track(producer)
        log.info("connection %d: relay producer %r to upstream %r", client.origin, link.name,
                 "(dynamic)" if request.dynamic else request.address or "(anonymous relay)")
        return producer


def upstream_ssl_domain(config: BrokerConfig) -> SSLDomain:
    """The client TLS settings for an amqps:// upstream (without --upstream-ca: the
    system's default trust store)."""
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    if config.upstream_ca:
        domain.set_trusted_ca_db(config.upstream_ca)
    if config.upstream_cert:
        domain.set_credentials(config.upstream_cert, config.upstream_key, None)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME if config.upstream_verify_hostname
                                   else SSLDomain.VERIFY_PEER)
    return domain


def _close_downstream(link: Link, condition: Condition | None) -> None:
    """Close a relayed link because of its upstream side (refuse it if not answered yet)."""
    condition = condition or Condition("amqp:internal-error", "the upstream closed the link")
    if link.state & Endpoint.LOCAL_UNINIT:  # a dynamic attach not answered yet
        refuse(link, condition.name, condition.description or "")
    elif link.state & Endpoint.LOCAL_ACTIVE:
        link.condition = condition
        link.close()


