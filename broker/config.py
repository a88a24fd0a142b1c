"""Broker configuration: defaults < TOML file < environment (FILTEX_*) < command-line flags.

One frozen :class:`BrokerConfig` is built once at start-up and handed to every
part of the broker, so that nothing reads the environment behind the
operator's back. The filter limits (:class:`filtex_proton.limits.Limits`) are
exposed under their own names in all three sources.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final

from filtex_proton.limits import DEFAULT_LIMITS, Limits

__all__ = ["BrokerConfig", "ConfigError", "build_parser", "load_config", "parse_listen"]

DEFAULT_LISTEN: Final = ("127.0.0.1", 5672)
ENV_PREFIX: Final = "FILTEX_"

EXAMPLE: Final = """\
example:
  filtex-broker --listen 127.0.0.1:5672 --listen 0.0.0.0:5673 \\
      --max-queue-messages 50000 --max-sql-length 4096 --disable amqp:sql-filter

  # every flag also reads FILTEX_<NAME> from the environment, e.g.
  FILTEX_LISTEN=127.0.0.1:0 FILTEX_READY_FILE=/tmp/ready filtex-broker

  # and a TOML file (--config or FILTEX_CONFIG):
  #   [broker]
  #   listen = ["127.0.0.1:5672"]
  #   max_queue_messages = 50000
  #   [limits]
  #   max_sql_length = 4096

precedence: flags > environment > TOML file > defaults.
"""


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message says which and why."""


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Everything an operator may set. Defaults suit a development machine."""

    listen: tuple[tuple[str, int], ...] = (DEFAULT_LISTEN,)
    """Addresses to accept AMQP connections on; port 0 picks a free port."""
    ready_file: Path | None = None
    """Written (atomically) with one ``host:port`` line per listener once all are bound."""
    container_id: str = "filtex-broker"
    """The container-id sent in the open frame."""
    log_level: str = "INFO"
    credit_window: int = 1000
    """Credit given to each producer link; topped up when half is used."""
    max_queue_messages: int = 100_000
    """Per node: messages held (queued or delivered but unsettled) before producers stall."""
    max_queue_bytes: int = 256 * 1024 * 1024
    """Per node: bytes held before producers stall."""
    max_message_size: int = 64 * 1024 * 1024
    """Advertised on producer links; larger messages are rejected."""
    dead_letter_address: str = "DLQ"
    """Where rejected messages go; empty disables it (they are then logged and dropped)."""
    shutdown_grace: float = 5.0
    """Seconds to wait for peers to answer our close on SIGINT/SIGTERM."""
    disabled: tuple[str, ...] = ()
    """Filter types (``amqp:sql-filter``) or families (``AMQP_FILTEX_SQL_V1_0``) switched off."""
    limits: Limits = field(default_factory=lambda: DEFAULT_LIMITS)
    """Filter complexity limits (spec §7.1)."""
    upstream: str = ""
    """Relay mode: ``amqp://host:port`` of the broker the nodes live on ('' = serve nodes here)."""
    upstream_user: str = ""
    upstream_password: str = ""
    upstream_selector: str = "auto"
    """Push JMS selectors upstream: auto (if it offers APACHE.ORG:SELECTOR), always, never."""
    upstream_held: int = 1000
    """Relay mode: non-matching queue messages held (unsettled) per consumer link."""


# name -> (type converter, help) for the scalar broker settings; the flags,
# the environment variables and the TOML keys are all derived from this table.
_SCALARS: Final[dict[str, tuple[type, str]]] = {
    "container_id": (str, "container-id sent in the open frame"),
    "log_level": (str, "DEBUG, INFO, WARNING or ERROR"),
    "credit_window": (int, "credit granted to each producer link"),
    "max_queue_messages": (int, "per-node message limit (producers stall when reached)"),
    "max_queue_bytes": (int, "per-node byte limit (producers stall when reached)"),
    "max_message_size": (int, "largest message accepted, in bytes"),
    "dead_letter_address": (str, "node for rejected messages ('' disables)"),
    "shutdown_grace": (float, "seconds to wait for peers on shutdown"),
    "upstream": (str, "relay mode: amqp://HOST:PORT of the broker holding the nodes"),
    "upstream_user": (str, "relay mode: SASL PLAIN user for the upstream"),
    "upstream_password": (str, "relay mode: SASL PLAIN password for the upstream"),
    "upstream_selector": (str, "relay mode: push JMS selectors upstream: auto, always, never"),
    "upstream_held": (int, "relay mode: non-matching messages held per queue consumer"),
}


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``:PORT``, or ``[v6]:PORT``) as a (host, port) pair."""
    host, sep, port = text.strip().rpartition(":")
    if not sep:
        raise ConfigError(f"listen address {text!r} is not HOST:PORT")
    host = host.strip("[]") or DEFAULT_LISTEN[0]
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"listen address {text!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise ConfigError(f"listen address {text!r}: port out of range")
    return host, number


def _convert(name: str, kind: type, value: Any, where: str) -> Any:
    try:
        if kind is int and isinstance(value, float):
            raise ValueError
        converted = kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {name} must be {kind.__name__}, not {value!r}") from None
    if kind in (int, float) and converted < 0:
        raise ConfigError(f"{where}: {name} must not be negative")
    return converted


def _limit_kind(name: str) -> type:
    return type(getattr(DEFAULT_LIMITS, name))


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _from_toml(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(broker settings, limits) from a TOML file; unknown keys are errors."""
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    broker = dict(document.pop("broker", {}))
    limits = dict(document.pop("limits", {}))
    if document:
        raise ConfigError(f"config file {path}: unknown tables {sorted(document)}")
    where = f"config file {path}"
    settings: dict[str, Any] = {}
    for key, value in broker.items():
        if key == "listen":
            items = [value] if isinstance(value, str) else list(value)
            settings["listen"] = tuple(parse_listen(str(v)) for v in items)
        elif key == "ready_file":
            settings["ready_file"] = Path(str(value))
        elif key == "disabled":
            settings["disabled"] = tuple(str(v) for v in value)
        elif key in _SCALARS:
            settings[key] = _convert(key, _SCALARS[key][0], value, where)
        else:
            raise ConfigError(f"{where}: unknown setting [broker] {key}")
    checked: dict[str, Any] = {}
    for key, value in limits.items():
        if key not in Limits.names():
            raise ConfigError(f"{where}: unknown limit [limits] {key}")
        checked[key] = _convert(key, _limit_kind(key), value, where)
    return settings, checked


def _from_env(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    settings: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    if (text := env.get(ENV_PREFIX + "LISTEN")) is not None:
        settings["listen"] = tuple(parse_listen(part) for part in _split(text))
    if (text := env.get(ENV_PREFIX + "READY_FILE")) is not None:
        settings["ready_file"] = Path(text) if text else None
    if (text := env.get(ENV_PREFIX + "DISABLE")) is not None:
        settings["disabled"] = tuple(_split(text))
    for name, (kind, _) in _SCALARS.items():
        var = ENV_PREFIX + name.upper()
        if (text := env.get(var)) is not None:
            settings[name] = _convert(name, kind, text, f"environment {var}")
    for name in Limits.names():
        var = ENV_PREFIX + name.upper()
        if (text := env.get(var)) is not None:
            limits[name] = _convert(name, _limit_kind(name), text, f"environment {var}")
    return settings, limits


def build_parser() -> argparse.ArgumentParser:
    """The ``filtex-broker`` command line (every flag has a FILTEX_* twin)."""
    parser = argparse.ArgumentParser(
        prog="filtex-broker",
        description="An AMQP 1.0 broker that serves OASIS AMQP Filter Expressions 1.0 "
        "(SQL, property, group, constant filters) and the Apache selector/no-local filters "
        "on its sending links.",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--listen", action="append", metavar="HOST:PORT",
        help=f"accept connections here (repeatable; default "
        f"{DEFAULT_LISTEN[0]}:{DEFAULT_LISTEN[1]}; port 0 = any free port)",
    )
    parser.add_argument("--config", metavar="FILE", help="TOML configuration file")
    parser.add_argument(
        "--ready-file", metavar="FILE",
        help="write the bound HOST:PORT lines here once listening (for scripts and tests)",
    )
    parser.add_argument(
        "--disable", action="append", metavar="TYPE",
        help="switch off a filter type (amqp:sql-filter) or family (AMQP_FILTEX_SQL_V1_0); "
        "repeatable",
    )
    group = parser.add_argument_group("broker settings")
    for name, (kind, text) in _SCALARS.items():
        group.add_argument(
            "--" + name.replace("_", "-"), dest=name, metavar=kind.__name__.upper(),
            help=f"{text} (default {getattr(BrokerConfig(), name)!r})",
        )
    limits = parser.add_argument_group("filter limits (spec §7.1)")
    for name in Limits.names():
        limits.add_argument(
            "--" + name.replace("_", "-"), dest="limit_" + name, metavar="N",
            help=f"default {getattr(DEFAULT_LIMITS, name)}",
        )
    return parser


def load_config(
    argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None
) -> BrokerConfig:
    """The configuration from flags, environment and an optional TOML file.

    Raises :class:`ConfigError` with a message fit for the operator; argparse
    itself exits on unknown flags and on ``--help``.
    """
    env = os.environ if env is None else env
    args = build_parser().parse_args(argv)
    settings: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    config_path = args.config or env.get(ENV_PREFIX + "CONFIG")
    if config_path:
        file_settings, file_limits = _from_toml(Path(config_path))
        settings.update(file_settings)
        limits.update(file_limits)
    env_settings, env_limits = _from_env(env)
    settings.update(env_settings)
    limits.update(env_limits)
    if args.listen:
        settings["listen"] = tuple(parse_listen(text) for text in args.listen)
    if args.ready_file is not None:
        settings["ready_file"] = Path(args.ready_file)
    if args.disable:
        settings["disabled"] = tuple(args.disable)
    for name, (kind, _) in _SCALARS.items():
        value = getattr(args, name)
        if value is not None:
            settings[name] = _convert(name, kind, value, f"--{name.replace('_', '-')}")
    for name in Limits.names():
        value = getattr(args, "limit_" + name)
        if value is not None:
            limits[name] = _convert(name, _limit_kind(name), value, f"--{name.replace('_', '-')}")
    try:
        settings["limits"] = replace(DEFAULT_LIMITS, **limits)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    config = BrokerConfig(**settings)
    _validate(config)
    return config


def _validate(config: BrokerConfig) -> None:
    if not config.listen:
        raise ConfigError("at least one --listen address is needed")
    for name in ("credit_window", "max_queue_messages", "max_queue_bytes"):
        if getattr(config, name) < 1:
            raise ConfigError(f"{name} must be at least 1")
    if config.upstream_selector not in ("auto", "always", "never"):
        raise ConfigError(f"upstream_selector {config.upstream_selector!r} is not auto, always "
                          "or never")
    if config.upstream and not config.upstream.startswith(("amqp://", "amqps://")):
        raise ConfigError(f"upstream {config.upstream!r} is not an amqp://HOST:PORT url")
    if config.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ConfigError(f"log_level {config.log_level!r} is not a logging level")


def describe(config: BrokerConfig) -> str:
    """A one-line summary of the settings for the start-up log."""
    parts = []
    for f in fields(config):
        if f.name in ("listen", "limits", "upstream_password"):
            continue
        parts.append(f"{f.name}={getattr(config, f.name)!r}")
    return ", ".join(parts)
