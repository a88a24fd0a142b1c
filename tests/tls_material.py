"""Throwaway TLS material for tests, made with the ``openssl`` command line.

The broker's security tests and the relay's TLS tests each compose their own
set (which subjects, which names the server certificate covers) from these
two steps: a self-signed CA, and a certificate it signs.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CLIENT_EXTENSIONS", "Pair", "make_ca", "make_signed", "openssl_missing"]

CLIENT_EXTENSIONS = "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


def openssl_missing() -> str | None:
    """Why the TLS tests cannot run here, or None."""
    return None if shutil.which("openssl") else "the openssl command is not installed"


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, timeout=60)


def make_ca(directory: Path, name: str) -> Pair:
    """A self-signed CA valid for two days; ``CN={name}``."""
    directory.mkdir(parents=True, exist_ok=True)
    pair = Pair(directory / f"{name}.pem", directory / f"{name}.key")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
             f"/CN={name}", "-keyout", pair.key, "-out", pair.cert,
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    pair.key.chmod(0o644)  # broker and RabbitMQ processes read them
    return pair


def make_signed(directory: Path, name: str, subject: str, ca: Pair, extensions: str) -> Pair:
    """A certificate for ``subject`` (``/CN=...``) signed by ``ca``, with these x509v3 lines."""
    pair = Pair(directory / f"{name}.pem", directory / f"{name}.key")
    request = directory / f"{name}.csr"
    ext = directory / f"{name}.ext"
    ext.write_text(extensions)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", pair.key,
             "-out", request)
    _openssl("x509", "-req", "-in", request, "-CA", ca.cert, "-CAkey", ca.key,
             "-CAcreateserial", "-days", "2", "-out", pair.cert, "-extfile", ext)
    pair.key.chmod(0o644)
    return pair
