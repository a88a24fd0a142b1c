"""Broker configuration: defaults < TOML file < environment (FILTEX_*) < command-line flags.

One frozen :class:`BrokerConfig` is built once at start-up and handed to every
part of the broker, so that nothing reads the environment behind the
operator's back. The filter limits (:class:`filtex_proton.limits.Limits`) are
exposed under their own names in all three sources.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Final

from filtex_broker.error_rate import ACTIONS
from filtex_broker.settings import (
    DEFAULT_LISTEN,
    BrokerConfig,
    ByteSize,
    ConfigError,
    parse_listen,
    split_list,
)
from filtex_proton.limits import DEFAULT_LIMITS, Limits
from filtex_proton.plugin import unknown_disabled

__all__ = [
    "DEFAULT_LISTEN", "BrokerConfig", "ConfigError", "build_parser", "load_config", "parse_listen",
]

ENV_PREFIX: Final = "FILTEX_"

EXAMPLE: Final = """\
example:
  filtex-broker --listen 127.0.0.1:5672 --listen 0.0.0.0:5673 --allow-anonymous \\
      --max-queue-messages 50000 --max-sql-length 4096 --disable amqp:sql-filter

  # TLS, SASL PLAIN/EXTERNAL and per-user permissions (see filtex-broker-users --help)
  filtex-broker --listen-tls 0.0.0.0:5671 --tls-cert server.pem --tls-key server.key \\
      --users users.toml

  # relay mode: filter in front of the broker you run (RabbitMQ, Artemis, ActiveMQ, Qpid)
  filtex-broker --upstream amqp://rabbit.internal:5672 --upstream-user app \
      --upstream-password secret --listen 0.0.0.0:5672 --users users.toml

  # durable queues and subscriptions, kept across restarts in fsync'ed logs
  filtex-broker --data-dir /var/lib/filtex-broker

  # the management console and Prometheus metrics, on loopback
  filtex-broker --console 127.0.0.1:8162 --metrics 127.0.0.1:9108

  # archive every accepted message as Parquet, for filtex-spark
  filtex-broker --archive /var/lib/filtex/archive --archive-index region

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


# name -> (type converter, help) for the scalar broker settings; the flags,
# the environment variables and the TOML keys are all derived from this table.
_SCALARS: Final[dict[str, tuple[type, str]]] = {
    "container_id": (str, "container-id sent in the open frame"),
    "log_level": (str, "DEBUG, INFO, WARNING or ERROR"),
    "credit_window": (int, "credit granted to each producer link"),
    "max_queue_messages": (int, "per-node message limit (producers stall when reached)"),
    "max_queue_bytes": (ByteSize, "per-node byte limit (producers stall when reached)"),
    "max_message_size": (ByteSize, "largest message accepted, in bytes"),
    "max_memory": (ByteSize, "broker-wide: bytes the held messages may cost before no producer "
                   "gets credit, e.g. 512MiB or 2GiB (0: 40%% of the machine's or the cgroup's "
                   "memory)"),
    "dead_letter_address": (str, "node for rejected messages ('' disables)"),
    "shutdown_grace": (float, "seconds to wait for peers on shutdown"),
    "idle_timeout": (float, "close a client connection that sends nothing (not even a "
                     "heartbeat) for this many seconds; what it held goes to other consumers "
                     "(0: never)"),
    "upstream_idle_timeout": (float, "relay mode: give up an upstream that sends nothing for "
                              "this many seconds and reconnect (0: never)"),
    "upstream": (str, "relay mode: amqp://HOST:PORT of the broker holding the nodes"),
    "upstream_user": (str, "relay mode: SASL PLAIN user for the upstream"),
    "upstream_password": (str, "relay mode: SASL PLAIN password for the upstream"),
    "upstream_selector": (str, "relay mode: push JMS selectors upstream: auto, always, never"),
    "upstream_held": (int, "relay mode: non-matching messages held per queue consumer"),
    "upstream_non_match": (str, "relay mode: a queue consumer's non-matches: auto, modified "
                           "(undeliverable-here, at once) or hold (while the link lives)"),
    "archive": (str, "archive every message a node accepts, as Parquet, in this directory"),
    "archive_max_pending_bytes": (ByteSize, "bytes queued for the archive writer before producers "
                                  "stall"),
    "archive_index_fields": (bool, "index subject, to, group-id and creation-time in the "
                             "archive's segments (sorted, Bloom filters, page index)"),
    "archive_index_buckets": (int, "split each archive segment into this many files by the "
                              "first --archive-index key, so that Spark opens one in N for an "
                              "equality on it (0: one file)"),
    "upstream_ca": (str, "relay mode, amqps://: PEM file of CAs trusted for the upstream"),
    "upstream_cert": (str, "relay mode, amqps://: PEM client certificate for the upstream"),
    "upstream_key": (str, "relay mode, amqps://: PEM private key of --upstream-cert"),
    "upstream_verify_hostname": (bool, "relay mode, amqps://: check the upstream's "
                                 "certificate names its host"),
    "max_evaluation_errors_per_second": (
        float, "filter evaluation errors a producing connection may cause per second (0: off)"),
    "evaluation_error_action": (str, "above that rate: log, or close the connection"),
    "evaluation_error_interval": (float, "seconds per evaluation error window and log line"),
    "metrics": (str, "serve Prometheus metrics on HOST:PORT ('' = off)"),
    "console": (str, "serve the management console (a web page and its JSON API) on "
                "HOST:PORT ('' = off); beyond loopback it needs --tls-cert, --tls-key and "
                "--users with an admin user (docs/CONSOLE.md)"),
    "console_sample_interval": (float, "seconds between two points of the console's charts "
                                "(it keeps 15 minutes)"),
    "listen_tls": (str, "TLS listeners: HOST:PORT[,HOST:PORT...] (needs --tls-cert/--tls-key)"),
    "tls_cert": (str, "PEM server certificate (chain) for the TLS listeners"),
    "tls_key": (str, "PEM private key of --tls-cert"),
    "tls_ca": (str, "PEM CAs that client certificates are verified against"),
    "tls_verify_client": (str, "client certificates: none, optional or required"),
    "users": (str, "users file (TOML; see filtex-broker-users --help): enables SASL PLAIN, "
              "EXTERNAL and per-user address permissions"),
    "allow_anonymous": (bool, "allow SASL ANONYMOUS (None: only when every listener is "
                        "loopback and no users file is given)"),
    "allow_plain_without_tls": (bool, "offer PLAIN on plaintext connections from non-loopback "
                                "peers (passwords in clear text)"),
    "auth_timeout": (float, "seconds a new connection has to finish TLS and SASL"),
    "event_loop": (str, "auto (the fast loop on a tested python-qpid-proton, else proton's "
                   "stock Container), fast or stock"),
}


def _convert(name: str, kind: type, value: Any, where: str) -> Any:
    if kind is ByteSize:
        try:
            return int(ByteSize(value))
        except ValueError as exc:
            raise ConfigError(f"{where}: {name}: {exc}") from None
    try:
        if kind is int and isinstance(value, float):
            raise ValueError
        if kind is bool and not isinstance(value, bool):
            value = _BOOLEANS[str(value).strip().lower()]  # bool("false") would be True
        converted = kind(value)
    except (TypeError, ValueError, KeyError):
        raise ConfigError(f"{where}: {name} must be {kind.__name__}, not {value!r}") from None
    if kind in (int, float) and converted < 0:
        raise ConfigError(f"{where}: {name} must not be negative")
    return converted


_BOOLEANS: Final = {"true": True, "yes": True, "on": True, "1": True,
                    "false": False, "no": False, "off": False, "0": False}


def _limit_kind(name: str) -> type:
    return type(getattr(DEFAULT_LIMITS, name))


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
        elif key == "data_dir":
            settings["data_dir"] = Path(str(value)) if value else None
        elif key == "disabled":
            settings["disabled"] = tuple(str(v) for v in value)
        elif key in ("archive_nodes", "archive_index"):
            settings[key] = tuple(str(v) for v in value)
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
        settings["listen"] = tuple(parse_listen(part) for part in split_list(text))
    if (text := env.get(ENV_PREFIX + "READY_FILE")) is not None:
        settings["ready_file"] = Path(text) if text else None
    if (text := env.get(ENV_PREFIX + "DATA_DIR")) is not None:
        settings["data_dir"] = Path(text) if text else None
    if (text := env.get(ENV_PREFIX + "DISABLE")) is not None:
        settings["disabled"] = tuple(split_list(text))
    if (text := env.get(ENV_PREFIX + "ARCHIVE_NODES")) is not None:
        settings["archive_nodes"] = tuple(split_list(text))
    if (text := env.get(ENV_PREFIX + "ARCHIVE_INDEX")) is not None:
        settings["archive_index"] = tuple(split_list(text))
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
        "--data-dir", metavar="DIR",
        help="keep queues and durable subscriptions in fsync'ed logs in DIR, replayed on start "
        "(default: in memory only)",
    )
    parser.add_argument(
        "--disable", action="append", metavar="TYPE",
        help="switch off a filter type (amqp:sql-filter) or family (AMQP_FILTEX_SQL_V1_0); "
        "repeatable",
    )
    parser.add_argument(
        "--archive-node", action="append", metavar="PATTERN", dest="archive_nodes",
        help="with --archive: archive only addresses matching this glob (repeatable; "
        "default: every node)",
    )
    parser.add_argument(
        "--archive-index", action="append", metavar="KEY", dest="archive_index",
        help="with --archive: index this application property in the archive's segments, so "
        "that Spark reads little for an equality on it (repeatable; the first sorts them)",
    )
    group = parser.add_argument_group("broker settings")
    for name, (kind, text) in _SCALARS.items():
        if kind is bool:
            group.add_argument("--" + name.replace("_", "-"), dest=name,
                               action=argparse.BooleanOptionalAction, default=None,
                               help=f"{text} (default {getattr(BrokerConfig(), name)!r})")
            continue
        group.add_argument(
            "--" + name.replace("_", "-"), dest=name,
            metavar="BYTES" if kind is ByteSize else kind.__name__.upper(),
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
    if args.data_dir is not None:
        settings["data_dir"] = Path(args.data_dir) if args.data_dir else None
    if args.disable:
        settings["disabled"] = tuple(args.disable)
    if args.archive_nodes:
        settings["archive_nodes"] = tuple(args.archive_nodes)
    if args.archive_index:
        settings["archive_index"] = tuple(args.archive_index)
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
    for name in ("credit_window", "max_queue_messages", "max_queue_bytes",
                 "archive_max_pending_bytes", "upstream_held"):
        if getattr(config, name) < 1:
            raise ConfigError(f"{name} must be at least 1")
    if config.upstream_selector not in ("auto", "always", "never"):
        raise ConfigError(f"upstream_selector {config.upstream_selector!r} is not auto, always "
                          "or never")
    if config.event_loop not in ("auto", "fast", "stock"):
        raise ConfigError(f"event_loop {config.event_loop!r} is not auto, fast or stock")
    if config.upstream_non_match not in ("auto", "modified", "hold"):
        raise ConfigError(f"upstream_non_match {config.upstream_non_match!r} is not auto, "
                          "modified or hold")
    if config.upstream and not config.upstream.startswith(("amqp://", "amqps://")):
        raise ConfigError(f"upstream {config.upstream!r} is not an amqp://HOST:PORT url")
    _validate_upstream_tls(config)
    why = unknown_disabled(config.disabled)
    if why is not None:
        raise ConfigError(f"disable: {why}")
    if config.evaluation_error_action not in ACTIONS:
        raise ConfigError(f"evaluation_error_action {config.evaluation_error_action!r} is not "
                          "log or close")
    for name in ("idle_timeout", "upstream_idle_timeout"):
        seconds = getattr(config, name)
        if not 0 <= seconds < float("inf"):
            raise ConfigError(f"{name} must be a number of seconds, 0 or more (0: never), "
                              f"not {seconds!r}")
        if 0 < seconds < 0.01:
            raise ConfigError(f"{name} {seconds!r} is below Proton's resolution (0.01 s)")
    if config.evaluation_error_interval <= 0:
        raise ConfigError("evaluation_error_interval must be positive")
    if config.metrics:
        parse_listen(config.metrics)
        if importlib.util.find_spec("prometheus_client") is None:
            raise ConfigError("metrics need prometheus-client: "
                              "pip install 'filtex-proton[metrics]'")
    if config.console:
        from filtex_broker.console.rules import validate_console

        validate_console(config)
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
    if config.data_dir is not None:
        _validate_data_dir(config.data_dir)
    if config.data_dir is not None and config.upstream:
        raise ConfigError("data_dir: a relay (upstream) holds no nodes to store; use --data-dir "
                          "on the upstream broker")
    if config.archive and config.upstream:
        raise ConfigError("archive: a relay (upstream) holds no nodes to archive; archive on "
                          "the upstream broker")
    if config.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ConfigError(f"log_level {config.log_level!r} is not a logging level")
    from filtex_broker.security.setup import validate_security  # imports this module

    validate_security(config)


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


def describe(config: BrokerConfig) -> str:
    """The settings that differ from the defaults, in one line for the start-up log (the
    defaults are in ``--help`` and docs/BROKER.md; the password is never shown)."""
    defaults = BrokerConfig()
    parts: list[str] = []
    for f in fields(config):
        value = getattr(config, f.name)
        if f.name == "limits":
            parts.extend(f"{name}={getattr(value, name)!r}" for name in Limits.names()
                         if getattr(value, name) != getattr(DEFAULT_LIMITS, name))
        elif value != getattr(defaults, f.name):
            shown = "(set)" if f.name == "upstream_password" else repr(value)
            if f.name == "listen":
                shown = ", ".join(f"{host}:{port}" for host, port in value)
            parts.append(f"{f.name}={shown}")
    return ", ".join(parts) or "all defaults"
