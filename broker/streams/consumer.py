"""A stream consumer: one link the broker sends on, reading a stream from its own offset.

The sibling of :class:`filtex_broker.nodes.consumer.Consumer` for streams. Its deliveries come
from its place as a :class:`filtex_broker.streams.node.Reader` (the stream checks credit and the
filter, and hands it a copy carrying ``x-stream-offset``); the link's credit drives the reads.
Outcomes only settle: reading removed nothing, so there is nothing to put back, and nothing is
redelivered (as in RabbitMQ's streams, a client that wants a message again attaches again from
its offset). Released, modified and rejected are settled as accepted is; no dead letter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from proton import Sender

from filtex_broker.loop.engine import TERMINAL, impl, lib, send_tagged
from filtex_broker.streams.node import Stream
from filtex_proton.plugin import FilterStats, LinkFilter

if TYPE_CHECKING:
    from filtex_broker.nodes.topic import Subscription

__all__ = ["StreamConsumer"]


class StreamConsumer:
    """The broker's end of a link that reads a stream (the broker sends)."""

    __slots__ = ("closed", "credit", "filter", "filter_stats", "impl", "link", "name", "node",
                 "position", "presettled", "sent", "tags", "unacked")

    browse = False
    """A stream consumer takes nothing away, but it is not a browser of a queue."""
    subscription: Subscription | None = None
    """Never a topic's subscription (what the broker's detach asks of every consumer)."""

    def __init__(self, link: Sender, stream: Stream, link_filter: LinkFilter | None, *,
                 position: int, presettled: bool) -> None:
        self.link = link
        self.impl: Any = impl(link)
        """The ``pn_link_t *`` the hot path talks to."""
        self.name: str = link.name
        self.node = stream
        self.filter = None if link_filter is None or link_filter.is_trivial else link_filter
        self.filter_stats: FilterStats | None = (
            self.filter.filter_set.stats if self.filter is not None else None)
        self.position = position
        """The next offset it reads (:meth:`Stream.start` chose the first)."""
        self.presettled = presettled
        self.credit = 0
        self.sent = 0
        """Messages put on the wire (for the metrics)."""
        self.closed = False
        self.unacked: set[Any] = set()
        """The ``pn_delivery_t *`` the peer has not settled (their count, for the console)."""
        self.tags = 0

    # -- the stream's reader -------------------------------------------------------------

    def deliver(self, data: bytes) -> None:
        """Put one message on the wire (the stream has checked credit and the filter)."""
        delivery = send_tagged(self, data)
        if delivery is not None:
            self.unacked.add(delivery)

    # -- link events ---------------------------------------------------------------------

    def on_flow(self) -> None:
        """The peer changed credit (or asked to drain): read what it allows, then drain."""
        link = self.impl
        self.credit = lib.pn_link_credit(link)
        if self.credit > 0 and not self.closed:
            self.node.dispatch_to(self)
        if lib.pn_link_get_drain(link):
            lib.pn_link_drained(link)
            self.credit = lib.pn_link_credit(link)

    def on_raw_delivery(self, delivery: Any) -> None:
        """An outcome (or a settlement) for one of our deliveries: settle it, nothing more."""
        state = lib.pn_delivery_remote_state(delivery)
        if state not in TERMINAL and not lib.pn_delivery_settled(delivery):
            return  # a non-terminal state (received): nothing to do yet
        self.unacked.discard(delivery)
        lib.pn_delivery_settle(delivery)

    def ruled_out_now(self) -> int:
        """No node matcher rules messages out for a stream reader: each is evaluated."""
        return 0

    def detach(self) -> int:
        """The link or its connection is gone: it stops reading. Nothing comes back (nothing
        was taken); returns 0, as a queue consumer returns what it gave back. Idempotent."""
        if not self.closed:
            self.closed = True
            self.node.remove_reader(self)
            self.unacked.clear()
        return 0

    def __repr__(self) -> str:
        return (f"<StreamConsumer {self.name!r} on {self.node.name!r} at {self.position} "
                f"credit={self.credit}>")
