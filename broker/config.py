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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Final, NamedTuple

from filtex_broker.config_checks import validate
from filtex_broker.settings import (
    DEFAULT_LISTEN,
    BrokerConfig,
    ByteSize,
    ConfigError,
    parse_age,
    parse_listen,
    split_list,
)
from filtex_proton.limits import DEFAULT_LIMITS, Limits

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

  # streams: append-only logs read from any offset, kept for a week or 10 GiB each
  filtex-broker --stream 'events.*' --stream audit --stream-max-bytes 10GiB --stream-max-age 7D

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
    "stream_max_bytes": (ByteSize, "per stream: message bytes kept before its oldest segments "
                         "are dropped, e.g. 10GiB"),
    "dead_letter_address": (str, "node for rejected messages ('' disables)"),
    "shutdown_grace": (float, "seconds to wait for peers on shutdown"),
    "idle_timeout": (float, "close a client connection that sends nothing (not even a "
                     "heartbeat) for this many seconds; what it held goes to other consumers "
                     "(0: never)"),
    "upstream_idle_timeout": (float, "relay mode: give up an upstream that sends nothing for "
                              "this many seconds and reconnect (0: never)"),
    "upstream_attach_timeout": (float, "relay mode: seconds the upstream has to answer a "
                                "dynamic attach (a temporary queue) before the client's is "
                                "refused"),
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


def _addresses(texts: Iterable[Any]) -> tuple[tuple[str, int], ...]:
    return tuple(parse_listen(str(text)) for text in texts)


def _text_addresses(text: str) -> tuple[tuple[str, int], ...]:
    return _addresses(split_list(text))


def _path(value: Any) -> Path:
    return Path(str(value))


def _optional_path(value: Any) -> Path | None:
    """A path, or None for an empty one (``--data-dir ''``: in memory after all)."""
    return Path(str(value)) if value else None


def _names(values: Iterable[Any]) -> tuple[str, ...]:
    return tuple(str(value) for value in values)


def _text_names(text: str) -> tuple[str, ...]:
    return tuple(split_list(text))


def _age(value: Any) -> float | None:
    try:
        return parse_age(value)
    except ConfigError as exc:
        raise ConfigError(f"stream_max_age: {exc}") from None


class _Structured(NamedTuple):
    """A setting that is not one scalar value, and how each source gives it."""

    setting: str
    """Its :class:`BrokerConfig` field, which is also its TOML key."""
    from_toml: Callable[[Any], Any]
    from_env: Callable[[str], Any]
    from_flag: Callable[[Any], Any]
    """The flag's value: a list for a repeatable flag."""
    toml_list: bool
    """Whether its TOML value is a list of strings (one string is a list of one, so that
    ``disabled = "amqp:sql-filter"`` is not read letter by letter) or one string."""
    toml_shape: str | None
    """What its TOML value must be, as a config error says it; None when its reader checks
    any TOML value itself (an age is a number or a string)."""


# flag (argparse dest) and FILTEX_ variable (upper case) -> the setting and how each source
# gives it: the sources differ (a TOML list, a comma-separated variable, a repeated flag; an
# empty FILTEX_READY_FILE is none), which is why these are not scalars.
_STRUCTURED: Final[dict[str, _Structured]] = {
    "listen": _Structured("listen", _addresses, _text_addresses, _addresses,
                          True, "a HOST:PORT string or a list of them"),
    "ready_file": _Structured("ready_file", _path, _optional_path, _path,
                              False, "a path (a string)"),
    "data_dir": _Structured("data_dir", _optional_path, _optional_path, _optional_path,
                            False, "a path (a string)"),
    "disable": _Structured("disabled", _names, _text_names, _names,
                           True, "a list of filter type or capability names"),
    "archive_nodes": _Structured("archive_nodes", _names, _text_names, _names,
                                 True, "a list of address patterns"),
    "archive_index": _Structured("archive_index", _names, _text_names, _names,
                                 True, "a list of application property keys"),
    "streams": _Structured("streams", _names, _text_names, _names,
                           True, "a list of address patterns"),
    "stream_max_age": _Structured("stream_max_age", _age, _age, _age, False, None),
}
_TOML_STRUCTURED: Final = {entry.setting: entry for entry in _STRUCTURED.values()}


def _toml_shaped(entry: _Structured, value: Any, where: str) -> Any:
    """``value`` in the shape ``entry`` says its TOML value has, or a :class:`ConfigError`
    naming the setting and what it must be."""
    if entry.toml_shape is None:
        return value
    if isinstance(value, str):
        return [value] if entry.toml_list else value
    if entry.toml_list and isinstance(value, list) \
            and all(isinstance(item, str) for item in value):
        return value
    raise ConfigError(f"{where}: [broker] {entry.setting} must be {entry.toml_shape}, "
                      f"not {value!r}")


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
    settings = {key: _toml_setting(key, value, where) for key, value in broker.items()}
    checked: dict[str, Any] = {}
    for key, value in limits.items():
        if key not in Limits.names():
            raise ConfigError(f"{where}: unknown limit [limits] {key}")
        checked[key] = _convert(key, _limit_kind(key), value, where)
    return settings, checked


def _toml_setting(key: str, value: Any, where: str) -> Any:
    """The value of ``[broker] key`` in a TOML file."""
    if (entry := _TOML_STRUCTURED.get(key)) is not None:
        return entry.from_toml(_toml_shaped(entry, value, where))
    if key in _SCALARS:
        return _convert(key, _SCALARS[key][0], value, where)
    raise ConfigError(f"{where}: unknown setting [broker] {key}")


def _from_source(
    value_of: Callable[[str], Any], limit_of: Callable[[str], Any],
    structured: Callable[[_Structured], Callable[[Any], Any]], where: Callable[[str], str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(broker settings, limits) from the environment or the flags, read alike: ``value_of``
    and ``limit_of`` give a flag's or a variable's value (None: not given), ``structured`` the
    source's reader of a :data:`_STRUCTURED` setting, ``where`` how errors name the source."""
    settings: dict[str, Any] = {}
    for key, entry in _STRUCTURED.items():
        if (value := value_of(key)) is not None:
            settings[entry.setting] = structured(entry)(value)
    for name, (kind, _) in _SCALARS.items():
        if (value := value_of(name)) is not None:
            settings[name] = _convert(name, kind, value, where(name))
    limits: dict[str, Any] = {}
    for name in Limits.names():
        if (value := limit_of(name)) is not None:
            limits[name] = _convert(name, _limit_kind(name), value, where(name))
    return settings, limits


def _from_env(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(broker settings, limits) from the FILTEX_* variables."""
    def value_of(name: str) -> str | None:
        return env.get(ENV_PREFIX + name.upper())

    return _from_source(value_of, value_of, lambda entry: entry.from_env,
                        lambda name: f"environment {ENV_PREFIX}{name.upper()}")


def _from_flags(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """(broker settings, limits) from the command line's flags."""
    return _from_source(lambda name: getattr(args, name),
                        lambda name: getattr(args, "limit_" + name),
                        lambda entry: entry.from_flag,
                        lambda name: f"--{name.replace('_', '-')}")


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
        help="keep queues, durable subscriptions and streams in fsync'ed logs in DIR, replayed "
        "on start (default: in memory only)",
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
    parser.add_argument(
        "--stream", action="append", metavar="PATTERN", dest="streams",
        help="addresses matching this glob are streams: append-only, read from any offset "
        "(rabbitmq:stream-offset-spec), reading removes nothing (repeatable)",
    )
    parser.add_argument(
        "--stream-max-age", metavar="AGE", dest="stream_max_age",
        help="per stream: drop segments older than this, in seconds or as 1h, 7D (units Y M D "
        "h m s; default none: no age limit)",
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
    in_file: tuple[dict[str, Any], dict[str, Any]] = (
        _from_toml(Path(config_path)) if config_path else ({}, {}))
    for source_settings, source_limits in (in_file, _from_env(env), _from_flags(args)):
        settings.update(source_settings)  # a later source wins
        limits.update(source_limits)
    try:
        settings["limits"] = replace(DEFAULT_LIMITS, **limits)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    config = BrokerConfig(**settings)
    validate(config)
    return config


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
