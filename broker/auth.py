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
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
from collections.abc import Iterable
from typing import Final

from broker.permissions import Grants, Principal
from broker.sasl import Outcome
from broker.users import ANONYMOUS, Users, verify_password

__all__ = ["AccessPolicy", "ConnectionFacts", "anonymous_default", "is_loopback"]

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
                     response: bytes | None) -> Outcome:
        """The SASL verdict (the mechanism was offered to this connection)."""
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

    def _plain(self, response: bytes) -> Outcome:
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
            verify_password(password, _DUMMY_HASH)  # same cost: do not reveal who exists
            return Outcome(None, f"user {name!r}: unknown or has no password")
        keyed = hmac.new(self._secret, f"{user.password_hash}\0{password}".encode(),
                         hashlib.sha256).digest()
        cached = self._verified.get(name)
        if cached is not None and hmac.compare_digest(cached, keyed):
            return Outcome(name)
        if not verify_password(password, user.password_hash):
            return Outcome(None, f"user {name!r}: wrong password")
        if len(self._verified) >= _CACHE_SIZE:
            self._verified.clear()
        self._verified[name] = keyed
        return Outcome(name)

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
