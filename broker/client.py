"""One client connection as the broker tracks it: its identity and its links.

The identity (``origin``) comes from the plugin and is stamped on every
message that arrives on the connection, so a no-local consumer can skip its
own connection's messages. The link lists let the broker give back every
unsettled message when the connection drops without detaching its links.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proton import Connection

if TYPE_CHECKING:
    from broker.consumer import Consumer
    from broker.producer import Producer
    from broker.relay import RelayConsumer

__all__ = ["ClientConnection"]


class ClientConnection:
    """The broker's record of one accepted, opened connection."""

    __slots__ = ("closed", "connection", "consumers", "container", "label", "origin", "producers")

    def __init__(self, connection: Connection, origin: int, label: str) -> None:
        self.connection: Connection | None = connection
        self.origin = origin
        """The plugin's connection identity (no-local compares it)."""
        self.container: str = connection.remote_container or ""
        self.label = label
        self.consumers: list[Consumer | RelayConsumer] = []
        self.producers: list[Producer] = []
        self.closed = False

    def __repr__(self) -> str:
        return f"<ClientConnection {self.origin} {self.label}>"
