"""TLS for accepted connections: the server context, the socket the event loop reads, peer identity.

Python's :mod:`ssl` (the same OpenSSL Proton links) rather than Proton's
``SSLDomain``: Proton's TLS layer sits inside its transport, directly under
its own SASL layer, and that SASL cannot verify PLAIN passwords in this
wheel (no Cyrus). Our SASL exchange must run *on top of* TLS and *below*
the AMQP transport, so TLS has to end before the transport: on the socket.
See docs/BROKER.md, "Security".
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = ["TlsError", "TlsSettings", "TlsSocket", "peer_identity", "server_context"]

VERIFY_MODES: Final = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
                       "required": ssl.CERT_REQUIRED}

_SHORT_NAMES: Final = {
    "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
    "countryName": "C", "stateOrProvinceName": "ST", "localityName": "L",
    "domainComponent": "DC", "userId": "UID", "emailAddress": "emailAddress",
}


class TlsError(ValueError):
    """The TLS settings cannot be used (missing or unreadable files, bad key)."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    cert: Path
    key: Path
    ca: Path | None
    verify_client: str


def server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A TLS 1.2+ server context; client certificates checked against ``ca`` as configured."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(settings.cert), str(settings.key))
        if settings.ca is not None:
            context.load_verify_locations(cafile=str(settings.ca))
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"TLS: cannot load certificate/key/CA ({settings.cert}, {settings.key}, "
                       f"{settings.ca}): {exc}") from None
    context.verify_mode = VERIFY_MODES[settings.verify_client]
    return context


def peer_identity(sock: ssl.SSLSocket) -> tuple[str, str | None] | None:
    """(subject DN in RFC 4514 order, common name) of a *verified* client certificate."""
    cert: Any = sock.getpeercert()
    if not cert:
        return None  # no certificate, or not verified (verify-client none)
    rdns = []
    common_name: str | None = None
    for rdn in cert.get("subject", ()):
        for name, value in rdn:
            if name == "commonName" and common_name is None:
                common_name = value
            escaped = value.replace("\\", "\\\\").replace(",", "\\,")
            rdns.append(f"{_SHORT_NAMES.get(name, name)}={escaped}")
    return ",".join(reversed(rdns)), common_name


class TlsSocket:
    """An ``SSLSocket`` as the event loop sees a socket: "try again" is ``BlockingIOError``
    for a read and 0 bytes sent for a write.

    Decrypted bytes that OpenSSL already holds are invisible to ``select``; when a
    read leaves some behind, the selectable is put in ``buffered`` and the event
    loop reads it again without waiting (see ``filtex_broker.loop.fast``).
    """

    __slots__ = ("buffered", "selectable", "sock")

    def __init__(self, sock: ssl.SSLSocket, buffered: set[Any]) -> None:
        self.sock = sock
        self.buffered = buffered
        self.selectable: Any = None
        """Set once the connection is handed to the transport."""

    def fileno(self) -> int:
        return self.sock.fileno()

    def recv(self, size: int) -> bytes:
        try:
            data = self.sock.recv(size)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise BlockingIOError from None
        except ssl.SSLZeroReturnError:
            return b""  # the peer's close_notify: end of stream
        if self.selectable is not None and self.sock.pending():
            self.buffered.add(self.selectable)
        return data

    def send(self, data: Any) -> int:
        """Bytes sent; 0 when OpenSSL must wait (proton's IO handler treats errors as fatal)."""
        try:
            return self.sock.send(data)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return 0

    def close(self) -> None:
        self.buffered.discard(self.selectable)
        self.sock.close()
