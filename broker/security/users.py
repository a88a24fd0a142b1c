"""The users file: who may connect (hashed passwords, certificate subjects) and their grants.

A TOML file, so an operator can read and edit it by hand::

    [users.alice]
    password = "scrypt$16384$8$1$<salt, base64>$<hash, base64>"
    send = ["orders.#"]
    receive = ["orders.*", "replies.alice"]
    browse = ["#"]
    admin = true                         # may open the management console (docs/CONSOLE.md)

    [users.billing]                      # EXTERNAL: TLS client certificate
    subject = "CN=billing,O=Example Corp"
    receive = ["invoices.#"]

    [users.anonymous]                    # what ANONYMOUS connections may do
    receive = ["public.#"]

Passwords are stored as scrypt hashes with a per-user random salt and the
cost parameters in the string, so they can be raised later without breaking
old entries; they are compared in constant time. ``filtex-broker-users add``
writes entries (see :mod:`filtex_broker.security.users_cli`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from filtex_broker.security.permissions import Grants, PatternError

__all__ = ["ANONYMOUS", "User", "Users", "UsersError", "hash_password", "load_users",
           "verify_password"]

ANONYMOUS: Final = "anonymous"
"""The entry whose grants apply to ANONYMOUS connections (it has no password)."""

SCHEME: Final = "scrypt"
DEFAULT_N: Final = 2**14
DEFAULT_R: Final = 8
DEFAULT_P: Final = 1
_MAX_N: Final = 2**20
_KEYS: Final = frozenset({"password", "subject", "send", "receive", "browse", "admin"})


class UsersError(ValueError):
    """The users file cannot be used; the message names the file, the user and the reason."""


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int, dklen: int = 32) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p,
                          maxmem=2 * 128 * r * n + 1024 * 1024, dklen=dklen)


def hash_password(password: str, *, n: int = DEFAULT_N, r: int = DEFAULT_R,
                  p: int = DEFAULT_P) -> str:
    """``scrypt$N$r$p$salt$hash`` for a new password (a fresh 16-byte salt each time)."""
    salt = os.urandom(16)
    digest = _scrypt(password, salt, n, r, p)
    b64 = base64.b64encode
    return f"{SCHEME}${n}${r}${p}${b64(salt).decode()}${b64(digest).decode()}"


def _parse_hash(stored: str) -> tuple[int, int, int, bytes, bytes]:
    parts = stored.split("$")
    if len(parts) != 6 or parts[0] != SCHEME:
        raise ValueError(f"not a '{SCHEME}$N$r$p$salt$hash' string")
    n, r, p = (int(x) for x in parts[1:4])
    if n < 2 or n & (n - 1) or n > _MAX_N or not 1 <= r <= 64 or not 1 <= p <= 16:
        raise ValueError("scrypt parameters out of range")
    salt = base64.b64decode(parts[4], validate=True)
    digest = base64.b64decode(parts[5], validate=True)
    if len(salt) < 8 or len(digest) < 16:
        raise ValueError("salt or hash too short")
    return n, r, p, salt, digest


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches the stored hash (constant-time compare of the digests)."""
    try:
        n, r, p, salt, digest = _parse_hash(stored)
    except ValueError:
        return False
    candidate = _scrypt(password, salt, n, r, p, dklen=len(digest))
    return hmac.compare_digest(candidate, digest)


@dataclass(frozen=True, slots=True)
class User:
    """One entry of the users file."""

    name: str
    password_hash: str | None
    """None: this user cannot use PLAIN (certificate or anonymous only)."""
    subject: str | None
    """The TLS client certificate subject DN that authenticates as this user (EXTERNAL)."""
    grants: Grants
    admin: bool = False
    """May use the management console beyond loopback (``--console``, docs/CONSOLE.md)."""


@dataclass(frozen=True, slots=True)
class Users:
    """The loaded users file."""

    path: Path
    by_name: dict[str, User]
    by_subject: dict[str, User]

    def get(self, name: str) -> User | None:
        return self.by_name.get(name)

    def for_subject(self, subject: str, common_name: str | None) -> User | None:
        """EXTERNAL: the user whose ``subject`` is this DN, else the user named like its CN."""
        user = self.by_subject.get(normalise_dn(subject))
        if user is None and common_name:
            user = self.by_name.get(common_name)
            if user is not None and user.subject is not None:
                return None  # pinned to another DN: a same-named CN is not enough
        return user

    @property
    def anonymous(self) -> User | None:
        return self.by_name.get(ANONYMOUS)


def normalise_dn(dn: str) -> str:
    """A DN in the form certificates are compared in: no blanks around ``,`` and ``=``."""
    parts = [part.strip() for part in dn.split(",")]
    return ",".join("=".join(s.strip() for s in part.split("=", 1)) for part in parts if part)


def _strings(value: Any, where: str, key: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsersError(f"{where}: {key} must be a list of address patterns")
    return list(value)


def _user(name: str, entry: Any, where: str) -> User:
    if not isinstance(entry, dict):
        raise UsersError(f"{where}: must be a table")
    unknown = set(entry) - _KEYS
    if unknown:
        raise UsersError(f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(_KEYS)})")
    password = entry.get("password")
    if password is not None:
        if name == ANONYMOUS:
            raise UsersError(f"{where}: the anonymous entry cannot have a password")
        try:
            _parse_hash(str(password))
        except ValueError as exc:
            raise UsersError(f"{where}: password is not a hash made by filtex-broker-users "
                             f"({exc})") from None
    subject = entry.get("subject")
    try:
        grants = Grants(*(_strings(entry.get(key, []), where, key)
                          for key in ("send", "receive", "browse")))
    except PatternError as exc:
        raise UsersError(f"{where}: {exc}") from None
    admin = entry.get("admin", False)
    if not isinstance(admin, bool):
        raise UsersError(f"{where}: admin must be true or false")
    return User(name, str(password) if password is not None else None,
                normalise_dn(str(subject)) if subject is not None else None, grants, admin)


def load_users(path: Path) -> Users:
    """Read and check the whole file; raises :class:`UsersError` for anything unusable."""
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        raise UsersError(f"cannot read users file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsersError(f"users file {path}: {exc}") from None
    table = document.pop("users", {})
    if document or not isinstance(table, dict):
        raise UsersError(f"users file {path}: only [users.NAME] tables are allowed")
    by_name: dict[str, User] = {}
    by_subject: dict[str, User] = {}
    for name, entry in table.items():
        user = _user(name, entry, f"users file {path}: [users.{name}]")
        by_name[name] = user
        if user.subject is not None:
            if user.subject in by_subject:
                raise UsersError(f"users file {path}: subject {user.subject!r} is given to both "
                                 f"{by_subject[user.subject].name!r} and {name!r}")
            by_subject[user.subject] = user
    return Users(path, by_name, by_subject)
