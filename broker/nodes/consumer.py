"""A consumer: one link the broker sends on, with its credit and its unsettled deliveries.

The consumer mirrors the link's credit in a Python int (set from the link on
every flow, decremented on every send) so that dispatch never has to ask
Proton. Messages go out as the bytes that arrived; only a message with a ttl that expires
here has its header rewritten, with the ttl left (``rewrites.with_ttl_left``). Outcomes
decide a message's fate: accepted → gone; rejected → dead-letter node; released → back in
place; modified → back in place, delivery-count incremented if delivery-failed, never
again to this consumer if undeliverable-here. Whatever is still unsettled when
the link or its connection goes away comes back as if modified(delivery-failed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from proton import Sender

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
from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.node import Node
from filtex_broker.nodes.queue import Queue
from filtex_broker.nodes.rewrites import bump_delivery_count, with_ttl_left
from filtex_proton.plugin import FilterMessage, FilterStats, LinkFilter

if TYPE_CHECKING:
    from filtex_broker.nodes.topic import Subscription

__all__ = ["Consumer"]

log = logging.getLogger("filtex.broker")

MessageFactory = Callable[[bytes, object], FilterMessage]
DeadLetter = Callable[[Entry, str, str], None]
"""Dead-letters a rejected message: why (the consumer's error condition), and the queue it left."""


class Consumer:
    """The broker's end of a link whose peer receives (the broker sends)."""

    __slots__ = (
        "_tags",
        "browse",
        "closed",
        "credit",
        "cursor",
        "dead_letter",
        "filter",
        "filter_stats",
        "impl",
        "link",
        "make_message",
        "name",
        "node",
        "presettled",
        "queue",
        "ruled_out",
        "sent",
        "subscription",
        "unacked",
    )

    def __init__(
        self,
        link: Sender,
        node: Node,
        queue: Queue,
        link_filter: LinkFilter | None,
        *,
        browse: bool,
        presettled: bool,
        make_message: MessageFactory,
        dead_letter: DeadLetter,
        subscription: Subscription | None = None,
    ) -> None:
        self.link = link
        self.impl: Any = impl(link)
        """The ``pn_link_t *`` the hot path talks to."""
        self.name: str = link.name
        self.node = node
        """The node the link is attached to (a queue, or the topic of a subscription)."""
        self.queue = queue
        """The queue messages are taken from (the node, or the subscription's queue)."""
        trivial = link_filter is None or link_filter.is_trivial
        self.filter = None if trivial else link_filter
        self.filter_stats: FilterStats | None = getattr(
            getattr(self.filter, "filter_set", None), "stats", None
        )
        """The filter's counters: a budget-exceeded verdict is not a "no" (see Queue._next_for)."""
        """None when the link has no filters: every message matches, nothing is evaluated."""
        self.browse = browse
        self.presettled = presettled
        self.make_message = make_message
        self.dead_letter = dead_letter
        self.subscription = subscription
        self.credit = 0
        self.cursor = 0
        self.ruled_out = 0
        """Set when it leaves its queue: messages the queue's matcher ruled out for it."""
        self.sent = 0
        """Messages put on the wire (for the metrics)."""
        self.closed = False
        self.unacked: dict[Any, Entry] = {}
        """``pn_delivery_t *`` -> entry, in delivery order, for deliveries not yet settled."""
        self._tags = 0

    # -- sending -----------------------------------------------------------------

    def send(self, entry: Entry) -> None:
        """Put one message on the wire (the queue has checked credit and filters)."""
        self._tags += 1
        data = entry.data
        expires = entry.lifetime.expires_ms
        if expires is not None:  # a ttl goes out reduced by the time spent here (§3.2.1)
            data = with_ttl_left(data, expires, self.queue.deadlines.clock())
        delivery = send_bytes(self.impl, b"%x" % self._tags, data)
        self.credit -= 1
        self.sent += 1
        if self.presettled:
            lib.pn_delivery_settle(delivery)
            if not self.browse:
                self.queue.remove(entry)
        elif not self.browse:
            entry.owner = self
            self.unacked[delivery] = entry

    def on_flow(self) -> None:
        """The peer changed credit (or asked to drain): send what we can, then drain."""
        impl = self.impl
        self.credit = lib.pn_link_credit(impl)
        if self.credit > 0:
            self.queue.dispatch_to(self)
        if lib.pn_link_get_drain(impl):
            lib.pn_link_drained(impl)
            self.credit = lib.pn_link_credit(impl)

    # -- outcomes ------------------------------------------------------------------

    def on_raw_delivery(self, delivery: Any) -> None:
        """The peer sent a disposition for one of our deliveries (a ``pn_delivery_t *``)."""
        state = lib.pn_delivery_remote_state(delivery)
        if state not in TERMINAL and not lib.pn_delivery_settled(delivery):
            return  # a non-terminal state (received): nothing to do yet
        entry = self.unacked.pop(delivery, None)
        if entry is None or entry.pos < 0 or self.browse:
            lib.pn_delivery_settle(delivery)
            return
        queue = self.queue
        if state == ACCEPTED:
            lib.pn_delivery_settle(delivery)
            queue.remove(entry)
        elif state == RELEASED:
            lib.pn_delivery_settle(delivery)
            queue.requeue(entry)
            queue.dispatch_returned()
        elif state == MODIFIED:
            remote = lib.pn_delivery_remote(delivery)
            failed = lib.pn_disposition_is_failed(remote)
            undeliverable = lib.pn_disposition_is_undeliverable(remote)
            lib.pn_delivery_settle(delivery)
            if failed:
                self._bump(entry)
            if undeliverable:
                entry.refuse(self)
            queue.requeue(entry)
            queue.dispatch_returned()
        elif state == REJECTED:
            condition = wrap_delivery(delivery).remote.condition
            lib.pn_delivery_settle(delivery)
            reason = f"{condition.name}: {condition.description}" if condition else "rejected"
            # first: with --data-dir, never only the removal
            self.dead_letter(entry, reason, queue.node_name)
            queue.remove(entry)
        else:  # settled without an outcome: the peer is done with it
            lib.pn_delivery_settle(delivery)
            queue.remove(entry)

    def _bump(self, entry: Entry) -> None:
        data = bump_delivery_count(entry.data)
        self.queue.resize(entry, data, self.make_message(data, entry.origin))

    def ruled_out_now(self) -> int:
        """Messages the node matcher ruled out for the consumer's filters without evaluating
        them (its node's index: the topic's for a subscription, else the queue's). They are
        filtered out as surely as the ones evaluated to FALSE (metrics and console count
        them so)."""
        subscription = self.subscription
        try:
            if subscription is not None:
                return subscription.topic.matcher.ruled_out(subscription)
            return self.queue.matcher.ruled_out(self)
        except KeyError:  # no longer indexed: what it had when it left
            return self.ruled_out

    # -- the end -----------------------------------------------------------------------

    def detach(self) -> int:
        """The link or its connection is gone: unsettled messages go back, in order.

        Returns how many came back. Idempotent.
        """
        if self.closed:
            return 0
        self.closed = True
        queue = self.queue
        queue.remove_consumer(self)
        returned = 0
        for entry in self.unacked.values():
            if entry.pos < 0 or entry.owner is not self:
                continue
            self._bump(entry)
            queue.requeue(entry)
            returned += 1
        self.unacked.clear()
        if returned:
            queue.dispatch_returned()
        return returned

    def __repr__(self) -> str:
        return f"<Consumer {self.name!r} on {self.queue.name!r} credit={self.credit}>"
