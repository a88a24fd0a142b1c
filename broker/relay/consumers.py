"""Relay consumers: downstream links the broker sends on, fed by upstream receivers; a message is
settled upstream only with the downstream consumer's outcome (docs/BROKER.md, Relay mode)."""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from proton import (
    Condition,
    Connection,
    Described,
    Endpoint,
    Link,
    Receiver,
    Sender,
    Session,
    Terminus,
    symbol,
)

from filtex_broker.loop.engine import (
    ACCEPTED,
    MODIFIED,
    REJECTED,
    RELEASED,
    TERMINAL,
    ReceiveBuffer,
    impl,
    lib,
    send_tagged,
    wrap_delivery,
)
from filtex_broker.relay.common import (
    NOT_IMPLEMENTED,
    SELECTOR_SYMBOL,
    UpstreamPort,
    UpstreamSide,
    close_downstream,
    put_capabilities,
)
from filtex_proton.plugin import (
    FilterMessage,
    LinkFilter,
)

__all__ = ["RelayConsumer"]

log = logging.getLogger("filtex.broker.relay")


class RelayConsumer:
    """A downstream link the broker sends on, fed by an upstream receiver."""

    def __init__(
        self, link: Sender, upstream: UpstreamPort, address: str, link_filter: LinkFilter | None,
        *, topic: bool, presettled: bool, selector: str | None, held_limit: int,
        browse: bool = False, dynamic: bool = False, capabilities: tuple[str, ...] = (),
        durable_as: str | None = None, lookup: bool = False,
    ) -> None:
        self.link = link
        self.impl: Any = impl(link)
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
        self.capabilities = capabilities
        """The client's node capabilities (Qpid JMS ``queue``, ``topic``...), sent upstream."""
        self.durable_as = durable_as
        """A durable subscription (or its look-up): the upstream link's name, which names it
        upstream (under the relay's container-id): the client's container-id and link name.
        Its source carries the client's durability and expiry policy; it is detached, not
        closed, when the client detaches without closing."""
        self.lookup = lookup
        """A source-less attach (Qpid JMS's unsubscribe): answered with the upstream's source."""
        self.presettled = presettled
        self.selector = selector
        self.held_limit = held_limit
        self._init_traffic()

    def _init_traffic(self) -> None:
        """What the link has been granted, holds and has counted: nothing yet (the upstream
        link opens in :meth:`open_upstream`)."""
        self.confirmed = False
        """The upstream granted what a browse or dynamic attach asked for, or attached a topic
        subscription: credit may go (and a topic's downstream attach is answered)."""
        self.credit = 0
        self.window = 0
        """The most credit the downstream consumer has granted: the relay keeps that many
        messages coming from the upstream (pending here or on their way), so that the upstream
        never waits for the downstream consumer's next flow to travel through the relay."""
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
        self.received = 0
        """Messages taken from the upstream on this link (with pushdown: only those the
        upstream's selector let through; shown by the console)."""
        self.tags = 0
        self.draining = False
        """A downstream drain is forwarded upstream: answered when the upstream's drain is."""

    # -- upstream link ---------------------------------------------------------------

    def open_upstream(self, connection: Connection, shared: Session, pushdown: bool,
                      name: str) -> None:
        # A session of its own: ending it is the one way to make RabbitMQ give back
        # everything the link had taken (see detach).
        session = connection.session()
        session.open()
        self.up_session = session
        up = session.receiver(name)
        if self.dynamic:
            up.source.dynamic = True
        elif self.lookup:
            up.source.type = Terminus.UNSPECIFIED  # a null source: look it up by link name
        elif self.topic and self.address:
            up.source.address = self.upstream.topic_address(self.address)
        else:
            up.source.address = self.address
        if self.durable_as is not None and not self.lookup:
            up.source.durability = self.link.remote_source.durability
            up.source.expiry_policy = self.link.remote_source.expiry_policy
        if self.browse:
            up.source.distribution_mode = Terminus.DIST_MODE_COPY
        self.confirmed = not (self.browse or self.dynamic or self.lookup)  # see upstream_attached
        capabilities = self.capabilities
        if self.topic and not self.lookup and "topic" not in capabilities:
            capabilities = (*capabilities, "topic")
        put_capabilities(up.source.capabilities, capabilities)
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
        self.up_impl = impl(up)
        self.upstream.register(up, UpstreamSide(self))
        if self.dynamic:
            self.upstream.answer_by(self)
        self.top_up()

    def upstream_lost(self) -> None:
        """The upstream connection is gone: forget its deliveries (it redelivers them); a
        link whose attach waited for the upstream's answer is attached now (its upstream
        side opens on reconnect, like every other link's)."""
        self._drained()
        if not (self.dynamic or self.lookup or self.closed) and \
                self.link.state & Endpoint.LOCAL_UNINIT:
            self.link.open()
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
        self.received += 1
        link_filter = self.filter  # without one, no message object is built
        candidates = None
        if link_filter is not None:
            message = self.upstream.message(data)
            # the queue's matcher first: a link it does not name does not match (nine in ten
            # with ten consumers on disjoint filters), and the one that does is named already
            candidates = None if self.copies else self.upstream.sharing.candidates(self, message)
        if link_filter is None or ((candidates is None or self in candidates)
                                   and link_filter.matches(message)):
            self.pending.append((data, delivery))
            self._pump()
        else:
            self._not_matched(delivery, data, message, candidates)

    def _not_matched(self, delivery: Any, data: bytes, message: FilterMessage,
                     candidates: tuple[RelayConsumer, ...] | None) -> None:
        """An upstream message this link's filter does not match: a copy is settled; a queue's
        is given back (``modified``), handed to another of our links that matches it, or held
        (released when the link goes)."""
        self.skipped += 1
        if self.copies or lib.pn_delivery_settled(delivery):
            self._settle_up(delivery, ACCEPTED)
        elif self.upstream.non_match_modified:
            self._modify_up(delivery)  # the upstream offers it to its other consumers
        elif not self.upstream.sharing.hand_off(self, delivery, data, message, candidates):
            self.held[delivery] = data
            if len(self.held) == self.held_limit:
                log.warning("relay consumer %r holds %d non-matching messages of %r "
                            "(upstream_held): it takes no more until some go", self.name,
                            self.held_limit, self.address)
        self.top_up()

    def on_upstream_flow(self) -> None:
        """The upstream's flow: the answer to a drain we forwarded, if we did."""
        up = self.up_impl
        if self.draining and (up is None or not lib.pn_link_draining(up)):
            self._drained()

    def _drain_upstream(self) -> bool:
        """Forward a downstream drain the relay cannot fill from what it holds: the upstream
        sends what it has (a QueueBrowser or a receiveNoWait must see what the upstream has,
        not only what already crossed the relay). False if there is no upstream link."""
        if self.up_impl is None or self.closed:
            return False
        self.draining = True
        if self.confirmed:  # else once the upstream has answered the attach
            self._issue_drain()
        return True

    def _issue_drain(self) -> None:
        up = self.up_impl
        have = lib.pn_link_credit(up)
        more = self.credit - have
        if not self.copies and not self.upstream.non_match_modified:
            more = min(more, self.held_limit - len(self.held) - have)  # as top_up
        lib.pn_link_drain(up, max(more, 0))

    def _drained(self) -> None:
        """The upstream answered (or went): send what came, answer the downstream drain."""
        if not self.draining:
            return
        self.draining = False
        if self.up_impl is not None:
            lib.pn_link_set_drain(self.up_impl, False)
        self._pump()
        if not self.closed and lib.pn_link_get_drain(self.impl):
            lib.pn_link_drained(self.impl)
            self.credit = lib.pn_link_credit(self.impl)
        self.top_up()

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

    def top_up(self) -> None:
        """Upstream credit: the downstream consumer's window, minus what waits here for it,
        unless too much is held."""
        up = self.up_impl
        if up is None or self.closed or not self.confirmed or self.draining:
            return
        want = self.window - len(self.pending)
        if not self.copies and not self.upstream.non_match_modified:
            # credit cannot be taken back: never grant more than may still be held
            want = min(want, self.held_limit - len(self.held))
        have = lib.pn_link_credit(up)
        # In halves: one flow frame per half window. Never to a credit of 0 or less: RabbitMQ
        # 3.10 sends beyond the credit it was given, so ours can be negative, and a flow frame
        # saying so (a huge unsigned link-credit) makes it end the session.
        if want > 0 and want > have and have <= want // 2:
            lib.pn_link_flow(up, want - have)

    # -- downstream --------------------------------------------------------------------

    def _pump(self) -> None:
        while self.credit > 0 and self.pending and not self.closed:
            data, up_delivery = self.pending.popleft()
            delivery = send_tagged(self, data)
            if delivery is None:  # pre-settled: taken, so settled upstream too
                self._settle_up(up_delivery, ACCEPTED)
                self._returned(up_delivery)
            else:
                self.unacked[delivery] = (up_delivery, data)
        self.top_up()

    def on_flow(self) -> None:
        impl = self.impl
        self.credit = credit = lib.pn_link_credit(impl)
        self.window = max(self.window, credit)
        self._pump()
        if lib.pn_link_get_drain(impl) and not self.draining:
            if self.credit > 0 and self._drain_upstream():
                return  # answered by _drained
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
        # no top-up: an outcome changes neither the window nor what waits or is held here

    def detach(self, *, closed: bool = True) -> int:
        """The downstream link is gone: give back everything, then close the upstream link
        (detach it only, for a durable subscription whose client did not close its link)."""
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
                if self.durable_as is not None and not closed:
                    self.up.detach()  # the upstream keeps the subscription
                else:
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

    def drop_selector(self) -> bool:
        """The upstream refused our attach over the selector pushed on it (its parser is not
        ours: Artemis refuses Java's ``1.5d``, which JMS allows): forget that upstream link so
        that it is attached again without a selector (the filters are evaluated here anyway).
        False when that does not apply: nothing was pushed, or the link had already taken
        messages (then the refusal is the upstream's last word, passed on to the client)."""
        if self.selector is None or self.received or self.up is None or self.closed:
            return False
        self.selector = None
        self.upstream.unregister(self.up)
        if self.up_session is not None:
            self.upstream.end_session(self.up_session)
        self.up = None
        self.up_impl = None
        self.up_session = None
        return True

    def upstream_closed(self, condition: Condition | None) -> None:
        """The upstream refused or closed our link: so does the downstream link."""
        self.detach()
        close_downstream(self.link, condition)

    def upstream_attached(self, up: Link) -> None:
        """The upstream answered our attach: answer the client's (a look-up's with the
        subscription found), once what browse or dynamic asked is checked to be granted."""
        if self.up_impl is None or impl(up) != self.up_impl:
            return
        source = up.remote_source
        if source.type == Terminus.UNSPECIFIED:
            return  # refused: its detach follows (see Upstream._upstream_link_closed)
        if self.browse and not self.confirmed and \
                source.distribution_mode != Terminus.DIST_MODE_COPY:
            self.upstream_closed(Condition(NOT_IMPLEMENTED, f"relay mode: the upstream does not "
                                           f"browse {self.address!r} (no distribution-mode copy)"))
            return
        if self.lookup and self.link.state & Endpoint.LOCAL_UNINIT:
            self.address = source.address or ""
            ours = self.link.source
            ours.address = self.address
            ours.durability = source.durability
            ours.expiry_policy = source.expiry_policy
        if not self.dynamic and not self.closed and self.link.state & Endpoint.LOCAL_UNINIT:
            self.link.open()
        if self.confirmed:
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
        if self.draining:
            self._issue_drain()
        self.top_up()

    def __repr__(self) -> str:
        return f"<RelayConsumer {self.name!r} on {self.address!r}>"
