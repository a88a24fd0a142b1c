"""What the broker's settings are: the frozen :class:`BrokerConfig` every part is handed, its
error, and the few value parsers that parts other than ``filtex_broker.config`` need.

``filtex_broker.config`` reads them (defaults < TOML < environment < flags) and validates them; this
module only defines them, so that the modules a setting concerns (security, say) can name the
type without importing the reader (which checks them, and so imports those modules).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from filtex_proton.limits import DEFAULT_LIMITS, Limits
from filtex_proton.plugin import parse_interval

__all__ = [
    "DEFAULT_LISTEN", "BrokerConfig", "ByteSize", "ConfigError", "parse_age", "parse_listen",
    "parse_size", "split_list",
]

DEFAULT_LISTEN: Final = ("127.0.0.1", 5672)


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message says which and why."""


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Everything an operator may set. Defaults suit a development machine."""

    listen: tuple[tuple[str, int], ...] = (DEFAULT_LISTEN,)
    """Addresses to accept AMQP connections on; port 0 picks a free port."""
    ready_file: Path | None = None
    """Written (atomically) with one ``host:port`` line per listener once all are bound."""
    data_dir: Path | None = None
    """The durable store's directory (``--data-dir``); None: messages are in memory only."""
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
    max_memory: int = 0
    """Broker-wide: bytes the held messages may cost (accounted as docs/BROKER.md says) before
    no producer gets credit; 0: a share of the machine's or the cgroup's memory
    (``filtex_broker.memory.default_max_memory``)."""
    dead_letter_address: str = "DLQ"
    """Where rejected messages go; empty disables it (they are then logged and dropped)."""
    shutdown_grace: float = 5.0
    """Seconds to wait for peers to answer our close on SIGINT/SIGTERM."""
    idle_timeout: float = 60.0
    """Seconds a client connection may send nothing (not even an empty frame) before it is
    closed with ``amqp:resource-limit-exceeded``, and what it held goes to other consumers
    (0: never). Declared in our open frame as half of it, as Proton does, so that a peer's
    heartbeats come at least twice per timeout."""
    upstream_idle_timeout: float = 30.0
    """Relay mode: the same for the upstream connection; a silent upstream is given up and
    reconnected to, as after a restart (0: never)."""
    upstream_attach_timeout: float = 10.0
    """Relay mode: seconds the upstream has to answer a dynamic attach (a temporary queue)
    before the client's attach is refused with ``amqp:not-implemented``; some upstreams never
    answer one."""
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
    upstream_non_match: str = "auto"
    """Relay mode, queue non-matches without pushdown: modified (undeliverable-here), hold,
    or auto (modified if the upstream's product is known to honour it)."""
    archive: str = ""
    """Directory of the Parquet message archive ('' = no archive); see docs/ARCHIVE.md."""
    archive_nodes: tuple[str, ...] = ()
    """Glob patterns of the addresses archived; empty: every node (with ``archive``)."""
    archive_max_pending_bytes: int = 64 * 1024 * 1024
    """Bytes queued for the archive writer before producers to archived nodes stall."""
    archive_index: tuple[str, ...] = ()
    """Application property keys the archive indexes (docs/ARCHIVE.md), the first sorting."""
    archive_index_fields: bool = True
    """Index subject, to, group-id and creation-time in the archive (sorted, Bloom filters)."""
    archive_index_buckets: int = 0
    """Split each segment into this many files by the first ``archive_index`` key (0: one)."""
    streams: tuple[str, ...] = ()
    """Glob patterns (``fnmatch``, as ``archive_nodes``) of the addresses that are streams."""
    stream_max_bytes: int = 1 << 30
    """Per stream: message bytes kept before the oldest segments are dropped."""
    stream_max_age: float | None = None
    """Per stream: seconds a segment is kept after its last message arrived (None: no limit)."""
    upstream_ca: str = ""
    """Relay mode, amqps://: PEM file of the CAs trusted for the upstream's certificate."""
    upstream_cert: str = ""
    """Relay mode, amqps://: PEM client certificate presented to the upstream (with the key)."""
    upstream_key: str = ""
    upstream_verify_hostname: bool = True
    """Relay mode, amqps://: the upstream's certificate must name the URL's host."""
    max_evaluation_errors_per_second: float = 0.0
    """Spec §7.2: filter evaluation errors a producing connection's messages may cause (0: off)."""
    evaluation_error_action: str = "log"
    """What happens above that rate: ``log`` (once per interval) or ``close`` the connection."""
    evaluation_error_interval: float = 10.0
    """Seconds per counting window, and between two log lines about one connection."""
    metrics: str = ""
    """``HOST:PORT`` to serve Prometheus metrics on ('' = off)."""
    console: str = ""
    """``HOST:PORT`` to serve the management console on ('' = off; docs/CONSOLE.md). Beyond
    loopback it needs ``tls_cert``/``tls_key`` and ``users`` (an ``admin`` user)."""
    console_sample_interval: float = 5.0
    """Seconds between two points of the console's 15-minute history (its charts)."""
    listen_tls: str = ""
    """TLS listeners, ``HOST:PORT[,HOST:PORT...]`` (docs/BROKER.md "Security")."""
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca: str = ""
    tls_verify_client: str = "none"
    users: str = ""
    """The users file: hashed passwords, certificate subjects, address grants."""
    allow_anonymous: bool | None = None
    """None: only if every listener is loopback and there is no users file."""
    allow_plain_without_tls: bool = False
    auth_timeout: float = 10.0
    event_loop: str = "auto"
    """``auto``: the fast loop on a tested python-qpid-proton, else proton's stock Container
    (with a warning); ``fast``; ``stock`` (docs/BROKER.md "Performance")."""


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


def split_list(text: str) -> list[str]:
    """A comma-separated list, blanks dropped."""
    return [part.strip() for part in text.split(",") if part.strip()]


class ByteSize(int):
    """A setting given in bytes, with or without a unit (:func:`parse_size`)."""

    def __new__(cls, value: object) -> ByteSize:
        return super().__new__(cls, parse_size(value))


_UNITS: Final = {
    "": 1, "b": 1,
    "k": 1 << 10, "ki": 1 << 10, "kib": 1 << 10, "kb": 1000,
    "m": 1 << 20, "mi": 1 << 20, "mib": 1 << 20, "mb": 1000**2,
    "g": 1 << 30, "gi": 1 << 30, "gib": 1 << 30, "gb": 1000**3,
    "t": 1 << 40, "ti": 1 << 40, "tib": 1 << 40, "tb": 1000**4,
}
"""As RabbitMQ reads them: ``KiB``/``K`` (and ``MiB``, ``GiB``, ``TiB``) are powers of 1024,
``kB``/``MB``/``GB``/``TB`` powers of 1000; case does not matter."""


def parse_size(value: object) -> int:
    """Bytes from ``536870912``, ``512MiB``, ``512M``, ``0.5 GiB``, ``500MB`` (see ``_UNITS``).

    Raises :class:`ConfigError` (a ``ValueError``) naming the value; a size is never negative,
    and a fraction of a byte is rounded down."""
    if isinstance(value, bool):
        raise ConfigError(f"{value!r} is not a size in bytes")
    if isinstance(value, int):
        number: float = value
        unit = ""
    elif isinstance(value, float):
        number, unit = value, ""
    else:
        text = str(value).strip()
        digits = text.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ").strip()
        unit = text[len(text.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")):]
        try:
            number = int(digits) if digits.isdigit() else float(digits)
        except ValueError:
            raise ConfigError(f"{value!r} is not a size in bytes (e.g. 536870912, 512MiB, "
                              "2GiB)") from None
    scale = _UNITS.get(unit.lower())
    if scale is None:
        raise ConfigError(f"{value!r}: unknown unit {unit!r} (B, KiB, MiB, GiB, TiB, or kB, "
                          "MB, GB, TB)")
    if not 0 <= number < float("inf"):  # NaN compares false too
        raise ConfigError(f"{value!r} is not a size in bytes (not negative, finite)")
    return int(number * scale) if isinstance(number, float) else number * scale


def parse_age(value: object) -> float | None:
    """Seconds from ``3600``, ``0.5``, or an age as RabbitMQ writes one (``1h``, ``7D``; units
    Y M D h m s); None (no limit) from ``0``, ``none`` or an empty value. Raises
    :class:`ConfigError` naming the value."""
    if value is None or isinstance(value, bool):
        seconds: float | None = None if value is None else -1.0
    elif isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip()
        if text.lower() in ("", "none"):
            return None
        interval = parse_interval(text)
        try:
            seconds = float(text) if interval is None else float(interval)
        except ValueError:
            seconds = -1.0
    if seconds is not None and not 0 <= seconds < float("inf"):
        raise ConfigError(f"{value!r} is not an age: seconds (0 or more) or a number and one of "
                          "the units Y M D h m s, such as 1h or 7D (0 or none: no limit)")
    return seconds or None
