"""Checks on a whole :class:`BrokerConfig`, once every source has been read: settings that
must go together, modes and numbers in range, and what a feature needs installed. Each check
raises :class:`ConfigError` with a message fit for the operator."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

from filtex_broker.console.rules import validate_console
from filtex_broker.error_rate import ACTIONS
from filtex_broker.security.setup import validate_security
from filtex_broker.settings import BrokerConfig, ConfigError, parse_listen
from filtex_proton.plugin import unknown_disabled

__all__ = ["validate"]


def validate(config: BrokerConfig) -> None:
    """Raise :class:`ConfigError` for the first problem :data:`_CHECKS` finds."""
    for check in _CHECKS:
        check(config)


_AT_LEAST_ONE: Final = ("credit_window", "max_queue_messages", "max_queue_bytes",
                        "archive_max_pending_bytes", "upstream_held", "stream_max_bytes")
_MODES: Final[dict[str, tuple[str, ...]]] = {
    "upstream_selector": ("auto", "always", "never"),
    "event_loop": ("auto", "fast", "stock"),
    "upstream_non_match": ("auto", "modified", "hold"),
}
"""Settings that name one of a few modes -> the modes."""
_IDLE_TIMEOUTS: Final = ("idle_timeout", "upstream_idle_timeout")


def _either(choices: Sequence[str]) -> str:
    """``("a", "b", "c")`` -> ``a, b or c``."""
    return f"{', '.join(choices[:-1])} or {choices[-1]}"


def _check_counts(config: BrokerConfig) -> None:
    """Something to listen on, and room for at least one of everything that is counted."""
    if not config.listen:
        raise ConfigError("at least one --listen address is needed")
    for name in _AT_LEAST_ONE:
        if getattr(config, name) < 1:
            raise ConfigError(f"{name} must be at least 1")


def _check_modes(config: BrokerConfig) -> None:
    for name, modes in _MODES.items():
        value = getattr(config, name)
        if value not in modes:
            raise ConfigError(f"{name} {value!r} is not {_either(modes)}")


def _check_upstream(config: BrokerConfig) -> None:
    """Relay mode: an AMQP url, and TLS files that fit it."""
    if config.upstream and not config.upstream.startswith(("amqp://", "amqps://")):
        raise ConfigError(f"upstream {config.upstream!r} is not an amqp://HOST:PORT url")
    _validate_upstream_tls(config)


def _check_disabled(config: BrokerConfig) -> None:
    """Only filter types and families the plugin knows can be switched off (a typo would
    leave on what the operator meant to switch off)."""
    why = unknown_disabled(config.disabled)
    if why is not None:
        raise ConfigError(f"disable: {why}")


def _check_evaluation_error_action(config: BrokerConfig) -> None:
    if config.evaluation_error_action not in ACTIONS:
        raise ConfigError(f"evaluation_error_action {config.evaluation_error_action!r} is not "
                          f"{_either(ACTIONS)}")


def _check_idle_timeouts(config: BrokerConfig) -> None:
    """Seconds that Proton can time (it counts in hundredths)."""
    for name in _IDLE_TIMEOUTS:
        seconds = getattr(config, name)
        if not 0 <= seconds < float("inf"):
            raise ConfigError(f"{name} must be a number of seconds, 0 or more (0: never), "
                              f"not {seconds!r}")
        if 0 < seconds < 0.01:
            raise ConfigError(f"{name} {seconds!r} is below Proton's resolution (0.01 s)")


def _check_evaluation_error_interval(config: BrokerConfig) -> None:
    if config.evaluation_error_interval <= 0:
        raise ConfigError("evaluation_error_interval must be positive")


def _check_upstream_attach_timeout(config: BrokerConfig) -> None:
    if not 0 < config.upstream_attach_timeout < float("inf"):
        raise ConfigError("upstream_attach_timeout must be a positive number of seconds, not "
                          f"{config.upstream_attach_timeout!r}")


def _check_services(config: BrokerConfig) -> None:
    """The metrics and the console: an address, and what they need installed or configured."""
    if config.metrics:
        parse_listen(config.metrics)
        if importlib.util.find_spec("prometheus_client") is None:
            raise ConfigError("metrics need prometheus-client: "
                              "pip install 'filtex-proton[metrics]'")
    if config.console:
        validate_console(config)


def _check_archive(config: BrokerConfig) -> None:
    """The archive needs pyarrow, and its other settings need the archive (and each other)."""
    if config.archive and importlib.util.find_spec("pyarrow") is None:
        raise ConfigError("archive needs pyarrow: pip install 'filtex-proton[spark]'")
    if config.archive_nodes and not config.archive:
        raise ConfigError("archive_nodes needs archive (the directory to archive to)")
    if config.archive_index and not config.archive:
        raise ConfigError("archive_index needs archive (the directory to archive to)")
    if config.archive_index_buckets and not config.archive_index:
        raise ConfigError("archive_index_buckets needs archive_index (the key to bucket by)")
    if "" in config.archive_index or len(set(config.archive_index)) != len(config.archive_index):
        raise ConfigError(f"archive_index: application property keys must be distinct and "
                          f"non-empty, not {list(config.archive_index)}")


def _check_data_dir(config: BrokerConfig) -> None:
    if config.data_dir is not None:
        _validate_data_dir(config.data_dir)


def _check_relay_keeps_nothing(config: BrokerConfig) -> None:
    """A relay holds no nodes: storing or archiving them is the upstream broker's job."""
    if config.data_dir is not None and config.upstream:
        raise ConfigError("data_dir: a relay (upstream) holds no nodes to store; use --data-dir "
                          "on the upstream broker")
    if config.streams and config.upstream:
        raise ConfigError("streams: a relay (upstream) holds no nodes, so no streams; declare "
                          "them on the upstream broker")
    if config.archive and config.upstream:
        raise ConfigError("archive: a relay (upstream) holds no nodes to archive; archive on "
                          "the upstream broker")


def _check_log_level(config: BrokerConfig) -> None:
    if config.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ConfigError(f"log_level {config.log_level!r} is not a logging level")


def _check_security(config: BrokerConfig) -> None:
    validate_security(config)


_CHECKS: Final[tuple[Callable[[BrokerConfig], None], ...]] = (
    _check_counts, _check_modes, _check_upstream, _check_disabled,
    _check_evaluation_error_action, _check_idle_timeouts, _check_evaluation_error_interval,
    _check_upstream_attach_timeout,
    _check_services, _check_archive, _check_data_dir, _check_relay_keeps_nothing,
    _check_log_level, _check_security,
)
"""What :func:`validate` checks, in order: when several settings are wrong, the operator is
told of the first."""


def _validate_data_dir(path: Path) -> None:
    """The data directory, or the nearest existing folder above it, must be a directory this
    process can write in (the store creates what is missing)."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"data_dir {str(path)!r}: {str(existing)!r} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"data_dir {str(path)!r}: no permission to write in {str(existing)!r}")


def _validate_upstream_tls(config: BrokerConfig) -> None:
    """TLS files only make sense with amqps://, must be readable, and come as cert + key."""
    files = {name: getattr(config, name) for name in ("upstream_ca", "upstream_cert",
                                                      "upstream_key")}
    given = [name for name, path in files.items() if path]
    if given and not config.upstream.startswith("amqps://"):
        raise ConfigError(f"{', '.join(given)} need an amqps:// upstream, not "
                          f"{config.upstream or 'none'!r}")
    if bool(config.upstream_cert) != bool(config.upstream_key):
        raise ConfigError("upstream_cert and upstream_key go together (a client certificate "
                          "needs its private key)")
    for name in given:
        if not (os.path.isfile(files[name]) and os.access(files[name], os.R_OK)):
            raise ConfigError(f"{name} {files[name]!r} is not a readable file")
