"""One client connection as the broker tracks it: its identity and its links.

The identity (``origin``) comes from the plugin and is stamped on every
message that arrives on the connection, so a no-local consumer can skip its
own connection's messages. The link lists let the broker give back every
unsettled message when the connection drops without detaching its links.
"""

from __future__ import annotations

from typing import Final, Protocol

from proton import Condition, Connection, Link

__all__ = ["Attached", "ClientConnection", "is_idle_timeout"]

RESOURCE_LIMIT: Final = "amqp:resource-limit-exceeded"


def is_idle_timeout(condition: Condition) -> bool:
    """Proton's own transport condition when nothing arrived for the local idle-timeout
    (``--idle-timeout``, ``--upstream-idle-timeout``)."""
    return condition.name == RESOURCE_LIMIT and "idle-timeout" in (condition.description or "")


class Attached(Protocol):
    """A link the connection holds: a consumer or a producer, on our nodes or relayed (the
    connection needs nothing of it but its proton link; ``filtex_broker.links`` knows the kinds)."""

    @property
    def link(self) -> Link: ...


class ClientConnection:
    """The broker's record of one accepted, opened connection."""

    __slots__ = ("closed", "connection", "consumers", "container", "label", "origin", "producers")

    def __init__(self, connection: Connection, origin: int, label: str) -> None:
        self.connection: Connection | None = connection
        self.origin = origin
        """The plugin's connection identity (no-local compares it)."""
        self.container: str = connection.remote_container or ""
        self.label = label
        self.consumers: list[Attached] = []
        self.producers: list[Attached] = []
        self.closed = False

    def __repr__(self) -> str:
        return f"<ClientConnection {self.origin} {self.label}>"
