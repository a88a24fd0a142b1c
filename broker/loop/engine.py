"""Direct access to the Proton-C engine that python-qpid-proton itself is built on.

The Python wrappers (``Delivery``, ``Link``, ``Event``) cost microseconds each:
every event builds five wrapper objects. On the per-message path the broker
calls the same C functions the wrappers call (``cproton_ffi.lib``, imported
and checked in :mod:`filtex_broker.loop.proton_internals`), with the raw ``pn_link_t *`` /
``pn_delivery_t *`` pointers; everything else keeps using the public Python API.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from proton import Delivery

from filtex_broker.loop.proton_internals import ffi as _ffi
from filtex_broker.loop.proton_internals import impl
from filtex_broker.loop.proton_internals import lib as _lib

__all__ = [
    "ACCEPTED", "MODIFIED", "NULL", "PN_DELIVERY", "PN_EOS", "PN_LINK_FLOW", "PN_TRANSPORT",
    "REJECTED", "RELEASED", "TERMINAL", "ReceiveBuffer", "TaggedSender", "ffi", "impl", "lib",
    "send_bytes", "send_tagged", "wrap_delivery",
]

ffi: Final[Any] = _ffi
lib: Final[Any] = _lib
NULL: Final[Any] = getattr(_ffi, "NULL", None)


def _constant(name: str) -> int:
    """A Proton-C constant; -1 if the bindings lack it (then the broker does not start:
    :func:`filtex_broker.loop.proton_internals.require_engine` names what is missing and the
    versions)."""
    return int(getattr(_lib, name, -1))


PN_DELIVERY: Final[int] = _constant("PN_DELIVERY")
PN_TRANSPORT: Final[int] = _constant("PN_TRANSPORT")
PN_LINK_FLOW: Final[int] = _constant("PN_LINK_FLOW")
PN_EOS: Final[int] = _constant("PN_EOS")

ACCEPTED: Final[int] = _constant("PN_ACCEPTED")
REJECTED: Final[int] = _constant("PN_REJECTED")
RELEASED: Final[int] = _constant("PN_RELEASED")
MODIFIED: Final[int] = _constant("PN_MODIFIED")
TERMINAL: Final = frozenset({ACCEPTED, REJECTED, RELEASED, MODIFIED})


def wrap_delivery(delivery: Any) -> Delivery:
    """The Python wrapper of a raw delivery, for the rare paths that want its API."""
    return Delivery.wrap(delivery)  # type: ignore[no-untyped-call,no-any-return]


def send_bytes(link: Any, tag: bytes, data: bytes) -> Any:
    """One complete delivery on a sending link: create, write, advance; returns the delivery."""
    delivery = _lib.pn_delivery(link, (len(tag), _ffi.from_buffer(tag)))
    _lib.pn_link_send(link, _ffi.from_buffer(data), len(data))
    _lib.pn_link_advance(link)
    return delivery


class TaggedSender(Protocol):
    """The broker's end of a link it sends on, as :func:`send_tagged` keeps it."""

    impl: Any
    """The ``pn_link_t *``."""
    tags: int
    """Deliveries tagged so far (the last tag, in hex)."""
    credit: int
    sent: int
    presettled: bool


def send_tagged(sender: TaggedSender, data: bytes) -> Any:
    """One message on ``sender``'s link under its next tag, one credit spent and one more sent;
    on a pre-settled link the delivery is settled at once and None returned, else the
    ``pn_delivery_t *`` for the caller to keep until the peer settles it."""
    sender.tags += 1
    delivery = send_bytes(sender.impl, b"%x" % sender.tags, data)
    sender.credit -= 1
    sender.sent += 1
    if sender.presettled:
        _lib.pn_delivery_settle(delivery)
        return None
    return delivery


class ReceiveBuffer:
    """Reads a delivery's bytes through one buffer per link, grown as needed: reading a
    message allocates only the ``bytes`` it returns."""

    __slots__ = ("_buffer", "_size")

    def __init__(self) -> None:
        self._size = 0
        self._buffer: Any = None

    def read(self, link: Any, delivery: Any) -> bytes:
        """All the bytes that have arrived for ``delivery`` on ``link`` (raw pointers)."""
        pending = _lib.pn_delivery_pending(delivery)
        if pending <= 0:
            return b""
        if pending > self._size:
            self._size = max(pending, 2 * self._size)
            self._buffer = _ffi.new("char[]", self._size)
        n = _lib.pn_link_recv(link, self._buffer, pending)
        return _ffi.buffer(self._buffer, n)[:] if n > 0 else b""
