"""From the configuration to access control: the checks at start-up and the :class:`Gate`.

The rule for ANONYMOUS (docs/BROKER.md, "Security"): allowed by default only
when every listener is on loopback and there is no users file;
``allow_anonymous`` forces it either way. A broker listening beyond loopback
with neither a users file nor ``allow_anonymous`` refuses to start: an open
broker on a network must be a decision, not an accident.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from filtex_broker.security.auth import AccessPolicy, anonymous_default, is_loopback
from filtex_broker.security.gate import Gate
from filtex_broker.security.tls import VERIFY_MODES, TlsError, TlsSettings, server_context
from filtex_broker.security.users import Users, UsersError, load_users
from filtex_broker.settings import BrokerConfig, ConfigError, parse_listen, split_list

__all__ = ["build_gate", "reload_users", "tls_listeners", "validate_security"]

log = logging.getLogger("filtex.broker.auth")


def tls_listeners(config: BrokerConfig) -> tuple[tuple[str, int], ...]:
    """The ``listen_tls`` addresses (comma-separated ``HOST:PORT``)."""
    return tuple(parse_listen(part) for part in split_list(config.listen_tls))


def _users(config: BrokerConfig) -> Users | None:
    return load_users(Path(config.users)) if config.users else None


def _allow_anonymous(config: BrokerConfig, users: Users | None) -> bool:
    if config.allow_anonymous is not None:
        return config.allow_anonymous
    hosts = [host for host, _ in (*config.listen, *tls_listeners(config))]
    return anonymous_default(hosts, users)


def validate_security(config: BrokerConfig) -> None:
    """Raise :class:`ConfigError` for settings that cannot work or would open the broker."""
    tls = tls_listeners(config)
    if config.tls_verify_client not in VERIFY_MODES:
        raise ConfigError(f"tls_verify_client {config.tls_verify_client!r} is not none, "
                          "optional or required")
    if tls and not (config.tls_cert and config.tls_key):
        raise ConfigError("listen_tls needs tls_cert and tls_key (the server's certificate "
                          "and private key)")
    if config.tls_verify_client != "none" and not config.tls_ca:
        raise ConfigError("tls_verify_client needs tls_ca (the CAs client certificates are "
                          "checked against)")
    try:
        users = _users(config)
        if tls:
            server_context(_tls_settings(config))
    except (UsersError, TlsError) as exc:
        raise ConfigError(str(exc)) from None
    if users is None and not _allow_anonymous(config, users):
        if config.allow_anonymous is False:
            raise ConfigError("allow_anonymous is off and there is no users file: nobody "
                              "could connect")
        exposed = [f"{h}:{p}" for h, p in (*config.listen, *tls) if not is_loopback(h)]
        if exposed:
            raise ConfigError(
                f"listening beyond loopback ({', '.join(exposed)}) without authentication: "
                "give --users FILE (see filtex-broker-users --help), or --allow-anonymous to "
                "accept anyone on purpose")


def _tls_settings(config: BrokerConfig) -> TlsSettings:
    return TlsSettings(Path(config.tls_cert), Path(config.tls_key),
                       Path(config.tls_ca) if config.tls_ca else None, config.tls_verify_client)


def build_gate(config: BrokerConfig, wake: Callable[[], None]) -> Gate | None:
    """The gate for secured listeners; None when nothing is secured (Proton's own acceptor).

    ``wake`` wakes the reactor thread (password checks finish on worker threads).
    """
    users = _users(config)
    anonymous = _allow_anonymous(config, users)
    tls = tls_listeners(config)
    if users is None and not tls and anonymous:
        return None
    policy = AccessPolicy(users, allow_anonymous=anonymous,
                          allow_plain_without_tls=config.allow_plain_without_tls)
    context = server_context(_tls_settings(config)) if tls else None
    return Gate(policy, context, config.auth_timeout, wake)


def reload_users(gate: Gate | None) -> None:
    """SIGHUP, on the reactor thread: re-read the users file (kept as it was if invalid)."""
    if gate is None:
        log.warning("users file reload requested, but the broker has no users file")
        return
    gate.policy.reload()
