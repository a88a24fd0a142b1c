"""A producer: one link the broker receives on, with its credit window.

A delivery is read as raw bytes (``recv`` until it is no longer partial),
checked at the door (the plugin's ``FilterMessage.validate``: the layout and
every section but the body, decoded once and kept for the filters that evaluate
it on arrival; a queued entry keeps only the bytes, ``filtex_broker.nodes.entry``), stored
in its node, and only then accepted and settled: at-least-once for senders that
wait for the outcome. A malformed message is rejected with ``amqp:decode-error``
naming the section and the problem, and never stored; the link and the
connection go on.

Credit is granted in a window and topped up when half is used, but only while
the node has room and the broker is below its memory limit (``filtex_broker.nodes.budget``); a
producer to a full node, or to any node while the broker is over its limit, is stalled until
the node (or the budget) wakes it.
A link with no target address is an anonymous relay: each message goes to the
address in its ``properties.to``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, Final

from proton import Condition, Receiver

from filtex_broker.log_rate import due
from filtex_broker.loop.engine import (
    ACCEPTED,
    REJECTED,
    RELEASED,
    ReceiveBuffer,
    impl,
    lib,
    wrap_delivery,
)
from filtex_broker.nodes.node import ArchiveSink, MessageRefusedError, Node
from filtex_broker.nodes.registry import Registry
from filtex_proton.amqp import MISSING, Section
from filtex_proton.plugin import FilterMessage, InvalidMessageError

__all__ = ["Producer", "malformed"]

log = logging.getLogger("filtex.broker")

DECODE_ERROR: Final = "amqp:decode-error"
NOT_FOUND: Final = "amqp:not-found"
SIZE_EXCEEDED: Final = "amqp:link:message-size-exceeded"
INTERNAL_ERROR: Final = "amqp:internal-error"

MessageFactory = Callable[[bytes, object], FilterMessage]


class _Throttle:
    """Counts a nuisance; logs it as :func:`filtex_broker.log_rate.due` says (spec §7.2)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def due(self) -> bool:
        self.count += 1
        return due(self.count)


_malformed = _Throttle()


def malformed(exc: InvalidMessageError) -> str:
    """The ``amqp:decode-error`` description of a message refused at the door."""
    return f"malformed message: {exc}"


class Producer:
    """The broker's end of a link whose peer sends."""

    __slots__ = (
        "_low",
        "_oversize",
        "_partial",
        "_receive",
        "archive",
        "closed",
        "counted",
        "credit",
        "guard",
        "impl",
        "link",
        "make_message",
        "max_size",
        "name",
        "node",
        "origin",
        "registry",
        "window",
    )

    def __init__(
        self,
        link: Receiver,
        node: Node | None,
        *,
        origin: object,
        registry: Registry,
        make_message: MessageFactory,
        window: int,
        max_size: int,
        archive: ArchiveSink | None = None,
    ) -> None:
        self.link = link
        self.impl: Any = impl(link)
        """The ``pn_link_t *`` the hot path talks to."""
        self.name: str = link.name
        self.node = node
        """None for an anonymous-relay link."""
        self.origin = origin
        self.registry = registry
        self.make_message = make_message
        self.window = window
        self._low = window // 2
        self.max_size = max_size
        self.credit = 0
        self.closed = False
        self._partial: bytearray | None = None
        self._oversize = False
        self._receive = ReceiveBuffer()
        self.archive = archive
        """Where accepted messages are also archived (``--archive``), if anywhere."""
        self.counted: Callable[[Node], None] | None = None
        """Told the node of every stored message (``--metrics``)."""
        self.guard: Callable[[FilterMessage], Condition | None] | None = None
        """Access control (:func:`filtex_broker.security.access.guard_relay`): why a message may
        not go."""

    # -- credit ------------------------------------------------------------------------

    def top_up(self) -> None:
        """Refill the window if the node and the broker (``--max-memory``) have room; otherwise
        wait for it."""
        node = self.node
        if node is not None and not node.has_room():
            node.stall(self)
            return
        budget = self.registry.budget
        if budget.blocked:
            budget.stall(self)  # over the broker's memory limit: every producer waits
            return
        archive = self.archive
        if archive is not None and not archive.has_room() and (
                node is None or archive.wants(node.name)):
            archive.stall(self)  # the archive writer is behind: wait for it, lose nothing
            return
        impl = self.impl
        credit = lib.pn_link_credit(impl)
        if credit < self.window:
            lib.pn_link_flow(impl, self.window - credit)
        self.credit = self.window

    def resume(self) -> None:
        if not self.closed:
            self.top_up()

    def on_flow(self) -> None:
        """The sending peer's flow (e.g. a drain answer) needs nothing from us."""

    # -- deliveries ----------------------------------------------------------------------

    def on_raw_delivery(self, delivery: Any) -> None:
        """Bytes arrived for the current delivery (a ``pn_delivery_t *``); store it when whole."""
        if lib.pn_delivery_aborted(delivery):
            self._partial = None
            self._oversize = False
            lib.pn_delivery_settle(delivery)
            self._after_delivery()
            return
        chunk = self._receive.read(self.impl, delivery)
        if lib.pn_delivery_partial(delivery):
            self._collect(chunk)
            return
        if self._partial is not None:
            self._collect(chunk)
            data = bytes(self._partial)
            self._partial = None
        else:
            data = chunk
        lib.pn_link_advance(self.impl)
        if self._oversize or (self.max_size and len(data) > self.max_size):
            self._oversize = False
            self._settle(delivery, REJECTED, SIZE_EXCEEDED,
                         f"message larger than {self.max_size} bytes")
        else:
            self._store(delivery, data)
        self._after_delivery()

    def _collect(self, chunk: bytes) -> None:
        if self._partial is None:
            self._partial = bytearray()
        if chunk and not self._oversize:
            self._partial += chunk
            if self.max_size and len(self._partial) > self.max_size:
                self._oversize = True
                self._partial = bytearray()

    def _store(self, delivery: Any, data: bytes) -> None:
        message = self.make_message(data, self.origin)
        try:
            view = message.validate()  # every section but the body, once; filters reuse it
        except InvalidMessageError as exc:
            self.refuse_malformed(delivery, exc)
            return
        if self.guard is not None and (refused := self.guard(message)) is not None:
            self._settle(delivery, REJECTED, str(refused.name), refused.description or "")
            return
        node = self.node
        if node is None:
            to = view.field(Section.PROPERTIES, "to")
            if to is MISSING or not isinstance(to, str) or not to:
                self._settle(delivery, REJECTED, NOT_FOUND,
                             "anonymous relay: the message has no properties.to address")
                return
            node = self.registry.node(to)  # the node there, or a new queue
            if not node.has_room():
                self._settle(delivery, RELEASED)  # try again later
                return
        try:
            node.publish(message)
        except MessageRefusedError as refused:
            self._settle(delivery, REJECTED, refused.condition, refused.description)
            return
        if self.counted is not None:
            self.counted(node)
        archive = self.archive
        if archive is not None and not archive.wants(node.name):
            archive = None
        if not lib.pn_delivery_settled(delivery):
            store = self.registry.store
            if store is not None and store.pending():  # accepted once it is on disk
                lib.pn_incref(delivery)  # kept alive until the store answers
                store.after_commit(functools.partial(
                    self._committed, delivery, None if archive is None else node.name, data))
                return
            lib.pn_delivery_update(delivery, ACCEPTED)
        if archive is not None:
            archive.offer(node.name, data)
        lib.pn_delivery_settle(delivery)

    def _committed(self, delivery: Any, archive_at: str | None, data: bytes,
                   written: bool) -> None:
        """The durable store has written the message (or failed to): answer the producer.

        ``delivery`` is a ``pn_delivery_t *`` we hold a reference on. If the link
        is gone meanwhile, the peer never saw ``accepted`` and resends. Only an
        accepted message is archived (at ``archive_at``, if archived at all).
        """
        try:
            if self.closed or lib.pn_delivery_settled(delivery):
                return
            if written:
                lib.pn_delivery_update(delivery, ACCEPTED)
                if archive_at is not None and self.archive is not None:
                    self.archive.offer(archive_at, data)
                lib.pn_delivery_settle(delivery)
            else:
                self._settle(delivery, REJECTED, INTERNAL_ERROR,
                             "the message could not be written to the durable store")
        finally:
            lib.pn_decref(delivery)

    def refuse_malformed(self, delivery: Any, exc: InvalidMessageError) -> None:
        """Reject a message that failed the door check; log it as log_rate says."""
        if _malformed.due():
            log.warning("link %r: malformed message rejected (%s) [%d so far]; "
                        "event=malformed-message section=%s", self.name, exc, _malformed.count,
                        exc.section.replace(" ", "-"))
        self._settle(delivery, REJECTED, DECODE_ERROR, malformed(exc))

    @staticmethod
    def _settle(delivery: Any, outcome: int, condition: str | None = None, text: str = "") -> None:
        """Settle with an outcome other than accepted (rare: the wrapper API is fine here)."""
        wrapped = wrap_delivery(delivery)
        if condition is not None:
            wrapped.local.condition = Condition(condition, text)
        if not wrapped.settled:
            wrapped.update(outcome)
        wrapped.settle()

    def _after_delivery(self) -> None:
        self.credit -= 1
        if self.credit <= self._low:
            self.top_up()

    def detach(self) -> None:
        """The link is gone: forget any half-received message, stop waiting for room."""
        self.closed = True
        self._partial = None
        if self.node is not None:
            self.node.unstall(self)
        self.registry.budget.unstall(self)
        if self.archive is not None:
            self.archive.unstall(self)

    def __repr__(self) -> str:
        target = self.node.name if self.node is not None else "(anonymous relay)"
        return f"<Producer {self.name!r} to {target!r}>"
