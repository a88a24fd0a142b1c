"""What the broker asks of an event loop, whichever runs: the two loops' common interface.

Both :class:`filtex_broker.loop.fast.FastContainer` and
:class:`filtex_broker.loop.stock.StockContainer` give it; :mod:`filtex_broker.loop.auto` chooses
between them at start-up.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from proton import Link

__all__ = ["EVENT_LOOPS", "BrokerContainer", "EventLoopError", "FastLink"]

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
