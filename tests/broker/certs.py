"""Throwaway certificates for the security tests, made with the ``openssl`` command line.

A CA, a server certificate for ``localhost``/127.0.0.1 signed by it, client
certificates signed by it, and a client certificate from a second CA the
broker does not trust.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Certs", "make_certs"]


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


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


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def _ca(directory: Path, name: str) -> Pair:
    pair = Pair(directory / f"{name}.pem", directory / f"{name}.key")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             f"/CN={name}", "-keyout", pair.key, "-out", pair.cert,
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return pair


def _signed(directory: Path, name: str, subject: str, ca: Pair, extensions: str) -> Pair:
    pair = Pair(directory / f"{name}.pem", directory / f"{name}.key")
    request = directory / f"{name}.csr"
    ext = directory / f"{name}.ext"
    ext.write_text(extensions)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", pair.key,
             "-out", request)
    _openssl("x509", "-req", "-in", request, "-CA", ca.cert, "-CAkey", ca.key,
             "-CAcreateserial", "-days", "2", "-out", pair.cert, "-extfile", ext)
    return pair


def make_certs(directory: Path) -> Certs:
    ca = _ca(directory, "ca")
    other = _ca(directory, "other-ca")
    client_ext = "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"
    return Certs(
        ca=ca.cert,
        server=_signed(directory, "server", "/CN=localhost", ca,
                       "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
                       "subjectAltName=DNS:localhost,IP:127.0.0.1\n"),
        billing=_signed(directory, "billing", "/O=Example/CN=billing", ca, client_ext),
        bob=_signed(directory, "bob", "/CN=bob", ca, client_ext),
        stranger=_signed(directory, "stranger", "/CN=bob", other, client_ext),
    )
