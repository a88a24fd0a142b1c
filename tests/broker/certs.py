"""The security tests' certificates: a CA, a server certificate for ``localhost``/127.0.0.1,
client certificates it signs, and one from a second CA the broker does not trust."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..tls_material import CLIENT_EXTENSIONS, Pair, make_ca, make_signed

__all__ = ["Certs", "Pair", "make_certs"]


@dataclass(frozen=True)
class Certs:
    ca: Path
    server: Pair
    billing: Pair
    """Subject ``CN=billing,O=Example``: EXTERNAL maps it through a ``subject`` entry."""
    bob: Pair
    """Subject ``CN=bob``: EXTERNAL maps it to the user named ``bob``."""
    stranger: Pair
    """Signed by a CA the broker does not trust."""


def make_certs(directory: Path) -> Certs:
    ca = make_ca(directory, "ca")
    other = make_ca(directory, "other-ca")
    return Certs(
        ca=ca.cert,
        server=make_signed(directory, "server", "/CN=localhost", ca,
                           "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                           "subjectAltName=DNS:localhost,IP:127.0.0.1\n"),
        billing=make_signed(directory, "billing", "/O=Example/CN=billing", ca, CLIENT_EXTENSIONS),
        bob=make_signed(directory, "bob", "/CN=bob", ca, CLIENT_EXTENSIONS),
        stranger=make_signed(directory, "stranger", "/CN=bob", other, CLIENT_EXTENSIONS),
    )
