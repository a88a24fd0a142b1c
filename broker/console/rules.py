"""Who may reach the console, checked at start-up (no HTTP library needed to say no).

On loopback the console is open to the machine's users, like ``--metrics``. Beyond
loopback it shows every address, filter and (on request) message body of the broker,
so it needs TLS and a users-file user with ``admin = true``: the same certificate and
users file as the AMQP listeners. It is secured on loopback too when both are given.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from filtex_broker.security.auth import is_loopback
from filtex_broker.security.users import UsersError, load_users
from filtex_broker.settings import BrokerConfig, ConfigError, parse_listen

__all__ = ["console_secured", "validate_console"]


def console_secured(config: BrokerConfig) -> bool:
    """Whether the console asks for TLS and an admin user (see the module docstring)."""
    host, _ = parse_listen(config.console)
    has_security = bool(config.tls_cert and config.tls_key and config.users)
    return has_security or not is_loopback(host)


def validate_console(config: BrokerConfig) -> None:
    """Raise :class:`ConfigError` for a console that could not start or would be open."""
    host, port = parse_listen(config.console)
    if importlib.util.find_spec("aiohttp") is None:
        raise ConfigError("the console needs aiohttp: pip install 'filtex-proton[console]'")
    if not 0.1 <= config.console_sample_interval <= 60:
        raise ConfigError("console_sample_interval must be from 0.1 to 60 seconds, not "
                          f"{config.console_sample_interval!r}")
    if not is_loopback(host):
        missing = [flag for flag, value in (("--tls-cert", config.tls_cert),
                                            ("--tls-key", config.tls_key),
                                            ("--users", config.users)) if not value]
        if missing:
            raise ConfigError(
                f"console on {host}:{port} is beyond loopback: it needs TLS and a users file "
                f"with an admin user (missing {', '.join(missing)}); see docs/CONSOLE.md")
    if console_secured(config):
        try:
            users = load_users(Path(config.users))
        except UsersError as exc:
            raise ConfigError(str(exc)) from None
        if not any(user.admin and user.password_hash for user in users.by_name.values()):
            raise ConfigError(f"console: users file {config.users} has no admin user with a "
                              "password (filtex-broker-users add FILE NAME --admin)")
