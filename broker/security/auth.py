"""Who may come in: the mechanisms offered to a connection and the check of its credentials.

The policy (decided here, documented in docs/BROKER.md "Security"):

* PLAIN checks the users file; it is offered over TLS, or from a loopback peer,
  or anywhere when ``allow_plain_without_tls`` is set (passwords in clear text
  otherwise never cross a network).
* EXTERNAL is offered over TLS with a *verified* client certificate when a
  users file exists; the certificate's subject DN (or, failing that, its CN as
  a user name) picks the user.
* ANONYMOUS only when ``allow_anonymous`` (see :func:`anonymous_default`): with
  a users file it gets the ``anonymous`` entry's grants (none without one),
  without a users file it gets full access.

A password that is not in the cache of recent successes is not checked here:
:meth:`AccessPolicy.authenticate` returns a :class:`PlainCheck` that the gate
runs off the event loop (:mod:`filtex_broker.security.verifier`), and :meth:`AccessPolicy.checked`
turns its result into the outcome. Grants are looked up per attach
(:class:`Identity`), so a reloaded users file applies to new attaches of
existing connections.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from filtex_broker.security.permissions import Grants, Principal
from filtex_broker.security.sasl import Outcome
from filtex_broker.security.users import ANONYMOUS, Users, UsersError, load_users

__all__ = ["AccessPolicy", "ConnectionFacts", "Identity", "PlainCheck", "anonymous_default",
           "is_loopback"]

log = logging.getLogger("filtex.broker.auth")

_NO_GRANTS: Final = Grants()
_CACHE_SIZE: Final = 4096


def is_loopback(host: str) -> bool:
    """Whether an address (or ``localhost``) stays on this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def anonymous_default(listen_hosts: Iterable[str], users: Users | None) -> bool:
    """ANONYMOUS by default only on a development setup: loopback listeners, no users file."""
    return users is None and all(is_loopback(host) for host in listen_hosts)


class ConnectionFacts:
    """What the gate knows about a connection before SASL: TLS, peer, certificate."""

    __slots__ = ("common_name", "peer", "subject", "tls")

    def __init__(self, peer: str, tls: bool, subject: str | None = None,
                 common_name: str | None = None) -> None:
        self.peer = peer
        self.tls = tls
        self.subject = subject
        """The verified client certificate's DN, if any."""
        self.common_name = common_name


@dataclass(frozen=True, slots=True)
class PlainCheck:
    """A PLAIN password to check against a stored hash, off the event loop."""

    name: str
    password: str
    stored: str
    known: bool
    """False: an unknown user (or one without a password), checked against a dummy hash."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a connection authenticated as; its grants are looked up when a link attaches."""

    policy: AccessPolicy
    user: str | None
    mechanism: str

    def principal(self) -> Principal:
        return self.policy.principal(self.user, self.mechanism)


class AccessPolicy:
    """The mechanisms a connection is offered and the verdict on what it sends."""

    def __init__(self, users: Users | None, *, allow_anonymous: bool,
                 allow_plain_without_tls: bool) -> None:
        self.users = users
        self.allow_anonymous = allow_anonymous
        self.allow_plain_without_tls = allow_plain_without_tls
        self._secret = os.urandom(32)
        self._verified: dict[str, bytes] = {}
        """user -> keyed digest of the last password that verified (skips scrypt on reconnect)."""

    def mechanisms(self, facts: ConnectionFacts) -> list[str]:
        offered = []
        if self.users is not None and facts.tls and facts.subject is not None:
            offered.append("EXTERNAL")
        if self.users is not None and (facts.tls or self.allow_plain_without_tls
                                       or is_loopback(facts.peer)):
            offered.append("PLAIN")
        if self.allow_anonymous:
            offered.append("ANONYMOUS")
        return offered

    def authenticate(self, facts: ConnectionFacts, mechanism: str,
                     response: bytes | None) -> Outcome | PlainCheck:
        """The SASL verdict, or the password check it needs (the mechanism was offered)."""
        if mechanism == "PLAIN":
            return self._plain(response or b"")
        if mechanism == "EXTERNAL":
            return self._external(facts, response or b"")
        if mechanism == "ANONYMOUS":
            return Outcome(ANONYMOUS)
        return Outcome(None, f"mechanism {mechanism!r} is not supported")

    def principal(self, user: str | None, mechanism: str) -> Principal:
        """The grants of an authenticated user (``None``/ANONYMOUS: the anonymous ones)."""
        users = self.users
        if user is None or mechanism in ("ANONYMOUS", "none"):
            if users is None:
                return Principal(ANONYMOUS, mechanism, None)
            entry = users.anonymous
            return Principal(ANONYMOUS, mechanism, entry.grants if entry else _NO_GRANTS)
        assert users is not None
        entry = users.get(user)
        return Principal(user, mechanism, entry.grants if entry else _NO_GRANTS)

    def _plain(self, response: bytes) -> Outcome | PlainCheck:
        parts = response.split(b"\0")
        if len(parts) != 3:
            return Outcome(None, "malformed PLAIN response")
        try:
            authzid, name, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            return Outcome(None, "PLAIN response is not UTF-8")
        if authzid and authzid != name:
            return Outcome(None, f"user {name!r} may not act as {authzid!r}")
        user = self.users.get(name) if self.users is not None else None
        if user is None or user.password_hash is None:
            return PlainCheck(name, password, _DUMMY_HASH, known=False)  # same cost: who exists?
        cached = self._verified.get(name)
        if cached is not None and hmac.compare_digest(cached, self._keyed(user.password_hash,
                                                                          password)):
            return Outcome(name)
        return PlainCheck(name, password, user.password_hash, known=True)

    def _keyed(self, stored: str, password: str) -> bytes:
        return hmac.new(self._secret, f"{stored}\0{password}".encode(), hashlib.sha256).digest()

    def checked(self, check: PlainCheck, ok: bool) -> Outcome:
        """The outcome of a finished password check (a success is remembered)."""
        if not check.known:
            return Outcome(None, f"user {check.name!r}: unknown or has no password")
        if not ok:
            return Outcome(None, f"user {check.name!r}: wrong password")
        if len(self._verified) >= _CACHE_SIZE:
            self._verified.clear()
        self._verified[check.name] = self._keyed(check.stored, check.password)
        return Outcome(check.name)

    def reload(self) -> bool:
        """Re-read the users file (SIGHUP); a bad file is logged and the current one kept."""
        if self.users is None:
            log.warning("users file reload requested, but the broker has no users file")
            return False
        path: Path = self.users.path
        try:
            users = load_users(path)
        except UsersError as exc:
            log.error("users file NOT reloaded, the previous one stays in force: %s", exc)
            return False
        self.users = users  # one reference swap: checks and attaches see old or new, never a mix
        self._verified.clear()
        log.info("users file %s reloaded: %d user(s); new grants apply to new attaches",
                 path, len(users.by_name))
        return True

    def _external(self, facts: ConnectionFacts, response: bytes) -> Outcome:
        if self.users is None or facts.subject is None:
            return Outcome(None, "EXTERNAL without a verified client certificate")
        user = self.users.for_subject(facts.subject, facts.common_name)
        if user is None:
            return Outcome(None, f"no user for certificate subject {facts.subject!r}")
        authzid = response.decode(errors="replace")
        if authzid and authzid != user.name:
            return Outcome(None, f"certificate of {user.name!r} may not act as {authzid!r}")
        return Outcome(user.name)


_DUMMY_HASH: Final = ("scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA==$"
                      "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
