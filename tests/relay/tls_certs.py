"""The relay's TLS tests' certificates: a CA, a server and a client certificate, and a CA that
signed nothing.

Both certificates name ``localhost`` only (no IP address), so connecting to
``127.0.0.1`` with host name verification on must fail, and to ``localhost``
must succeed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..tls_material import make_ca, make_signed, openssl_missing

__all__ = ["Certs", "make_certs", "openssl_missing"]

_LEAF = "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n"


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    """A CA that signed nothing here: trusting only it must fail the handshake."""


def make_certs(directory: Path) -> Certs:
    """Generate everything under ``directory``; raises CalledProcessError if openssl fails."""
    ca = make_ca(directory, "ca")
    other = make_ca(directory, "other-ca")
    server = make_signed(directory, "server", "/CN=localhost", ca, _LEAF)
    client = make_signed(directory, "client", "/CN=localhost", ca, _LEAF)
    return Certs(ca.cert, server.cert, server.key, client.cert, client.key, other.cert)
