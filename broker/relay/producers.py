"""Relay producers: downstream links the broker receives on, forwarded to upstream senders; the
producer is answered only with the upstream's outcome (docs/BROKER.md, Relay mode)."""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from proton import (
    Condition,
    Connection,
    Endpoint,
    Link,
    Receiver,
    Sender,
    Session,
    Terminus,
)

from filtex_broker.loop.engine import (
    ACCEPTED,
    MODIFIED,
    REJECTED,
    RELEASED,
    TERMINAL,
    impl,
    lib,
    send_bytes,
    wrap_delivery,
)
from filtex_broker.nodes.producer import Producer
from filtex_broker.nodes.registry import Registry
from filtex_broker.relay.common import (
    NOT_IMPLEMENTED,
    UpstreamPort,
    UpstreamSide,
    close_downstream,
    put_capabilities,
)
from filtex_proton.plugin import (
    DecodeError,
    FilterMessage,
    InvalidMessageError,
)

__all__ = ["RelayProducer"]

log = logging.getLogger("filtex.broker.relay")


class RelayProducer(Producer):
    """A downstream link the broker receives on, forwarded to an upstream sender."""

    __slots__ = ("address", "capabilities", "client_origin", "dynamic", "inflight", "outbox",
                 "up", "up_impl", "up_tags", "upstream")

    def __init__(self, link: Receiver, upstream: UpstreamPort, address: str | None, *, origin: int,
                 registry: Registry, window: int, max_size: int, dynamic: bool = False,
                 capabilities: tuple[str, ...] = ()) -> None:
        super().__init__(link, None, origin=origin, registry=registry,
                         make_message=lambda data, origin: upstream.plugin.message(
                             data, origin=origin),
                         window=window, max_size=max_size)
        self._low = window * 3 // 4
        """Topped up after a quarter of the window, not half: the producer's next credit
        crosses the relay while it still has three quarters to send with (the upstream's own
        credit, not this window, bounds what is in flight upstream)."""
        self.upstream = upstream
        self.client_origin = origin
        """``origin`` as the ``int`` the origin stamp takes (``Producer.origin`` is any object)."""
        self.address = address
        """None: anonymous relay (each message goes to its ``to``), or dynamic, not named yet."""
        self.dynamic = dynamic
        """The upstream names the node; the downstream attach is answered once it has."""
        self.capabilities = capabilities
        """The client's ``queue``/``topic`` target capabilities, passed upstream (and with
        ``topic``, the address prefixed where the upstream announces a topic-prefix)."""
        self.up: Sender | None = None
        self.up_impl: Any = None
        self.up_tags = 0
        self.outbox: deque[tuple[bytes, Any]] = deque()
        """(data, downstream delivery) waiting for upstream credit."""
        self.inflight: dict[Any, tuple[bytes, Any]] = {}
        """Upstream delivery -> (data, downstream delivery), awaiting the upstream's outcome."""

    def open_upstream(self, connection: Connection, session: Session, pushdown: bool,
                      name: str) -> None:
        up = session.sender(name)
        if self.dynamic:
            up.target.dynamic = True
        elif self.address is not None:  # else anonymous: each message goes to its own ``to``
            up.target.address = (self.upstream.topic_address(self.address)
                                 if "topic" in self.capabilities else self.address)
        put_capabilities(up.target.capabilities, self.capabilities)
        up.snd_settle_mode = Link.SND_UNSETTLED
        up.open()
        self.up = up
        self.up_impl = impl(up)
        self.upstream.register(up, UpstreamSide(self))
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
        # no top-up: an outcome does not change the upstream's credit (its flow does)

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
        close_downstream(self.link, condition)

    def upstream_attached(self, up: Link) -> None:
        """The upstream answered our attach: a dynamic target now has its address."""
        link = self.link
        if not self.dynamic or impl(up) != self.up_impl or not link.state & Endpoint.LOCAL_UNINIT:
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
