"""Throwaway TLS material for the tests: a CA, a server and a client certificate (openssl CLI).

Both certificates name ``localhost`` only (no IP address), so connecting to
``127.0.0.1`` with host name verification on must fail, and to ``localhost``
must succeed.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Certs", "make_certs", "openssl_missing"]


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path
    """A CA that signed nothing here: trusting only it must fail the handshake."""


def openssl_missing() -> str | None:
    return None if shutil.which("openssl") else "the openssl command is not installed"


def _openssl(*args: str | Path, cwd: Path) -> None:
    subprocess.run(["openssl", *map(str, args)], cwd=cwd, check=True, capture_output=True,
                   timeout=60)


def _ca(directory: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN=filtex {name}", cwd=directory)


def _leaf(directory: Path, name: str) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
             f"{name}.csr", "-subj", "/CN=localhost", cwd=directory)
    (directory / f"{name}.ext").write_text(
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
             cwd=directory)


def make_certs(directory: Path) -> Certs:
    """Generate everything under ``directory``; raises CalledProcessError if openssl fails."""
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "ca")
    _ca(directory, "other-ca")
    _leaf(directory, "server")
    _leaf(directory, "client")
    for key in directory.glob("*.key"):
        key.chmod(0o644)  # the broker process reads them
    return Certs(directory / "ca.pem", directory / "server.pem", directory / "server.key",
                 directory / "client.pem", directory / "client.key", directory / "other-ca.pem")
