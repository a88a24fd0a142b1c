"""The plugin: AMQP filter expressions for any Proton container.

A container that already routes messages wires this in with a few calls and
gets source filters on its sending links, without adopting our broker::

    plugin = FiltexPlugin()
    plugin.offer_capabilities(connection)          # before the local open
    link_filter = plugin.attach_sender(link)       # an incoming link we send on
    if link_filter is not None:                    # None: refused on the wire already
        link.source.address = ...; link.open()
    message = plugin.message(raw_bytes, origin=plugin.connection_identity(conn))
    if link_filter.matches(message): ...           # per candidate delivery

No sockets here: it adapts proton objects. Everything that decodes filter sets
or evaluates filters lives behind this module, so ``broker/`` is just its first
user. See docs/PLUGIN.md.
"""

from __future__ import annotations

import difflib
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, cast

from proton import Condition, Connection, Data, Endpoint, Handler, Link, Terminus, symbol, ulong

from filtex_proton.amqp import DecodeError
from filtex_proton.amqp.message import RawMessageView
from filtex_proton.amqp.validate import InvalidMessageError, validate_message, validate_view
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import EvaluationContext
from filtex_proton.filters.options import OffsetSpec, StreamOptions, parse_interval
from filtex_proton.filters.registry import (
    ALL_CAPABILITIES,
    FILTER_TYPES,
    FILTEX_ALL,
    GROUP,
    PROP,
    display_descriptor,
)
from filtex_proton.filters.registry import SQL as SQL_CAPABILITY
from filtex_proton.filterset import FilterSet, FilterStats, decode_filter_set
from filtex_proton.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "RECENT_REFUSALS",
    "DecodeError",
    "FilterMessage",
    "FilterSet",
    "FilterStats",
    "FiltexPlugin",
    "InvalidMessageError",
    "LinkFilter",
    "OffsetSpec",
    "PluginStats",
    "Refusal",
    "StreamOptions",
    "parse_interval",
    "unknown_disabled",
    "validate_message",
]

INVALID_FIELD: Final = "amqp:invalid-field"
_FILTER_INFO: Final = {symbol("field"): symbol("filter")}
_KNOWN_NAMES: Final = frozenset(
    {t.name for t in FILTER_TYPES} | {a for t in FILTER_TYPES for a in t.aliases}
    | set(ALL_CAPABILITIES)
)
#: What refusals are counted by: the filter types, so that clients cannot add entries.
_REFUSAL_KINDS: Final = _KNOWN_NAMES | {
    display_descriptor(ulong(t.code)) for t in FILTER_TYPES if t.code is not None}
_identities = itertools.count(1)


def unknown_disabled(names: Iterable[str]) -> str | None:
    """Why ``names`` cannot all be switched off (``disabled=``): the first unknown one and the
    nearest known name, for a one-line error; None when every name is known."""
    unknown = sorted(set(names) - _KNOWN_NAMES)
    if not unknown:
        return None
    near = difflib.get_close_matches(unknown[0], sorted(_KNOWN_NAMES), n=1)
    hint = f"; did you mean {near[0]!r}?" if near else (
        "; known: filter types such as 'amqp:sql-filter' and families such as "
        "'AMQP_FILTEX_SQL_V1_0'")
    return f"unknown filter type or capability {unknown[0]!r}{hint}"


class FilterMessage:
    """One message as every link's filters see it: the bytes that arrived, where
    they came from, and a view whose sections are decoded once, on first use,
    and then shared by all the links that evaluate it."""

    __slots__ = ("_view", "data", "origin")

    def __init__(self, data: bytes, origin: Hashable | None = None) -> None:
        self.data = data
        self.origin = origin
        self._view: RawMessageView | None = None

    @property
    def view(self) -> RawMessageView:
        if self._view is None:
            self._view = RawMessageView(self.data)
        return self._view

    def validate(self) -> RawMessageView:
        """The door check (:func:`validate_message`): raises :class:`InvalidMessageError`.

        The sections it decodes stay in the view, so the filters reading them
        later decode nothing again; ``view`` is this view afterwards.
        """
        view = self._view
        if view is None:
            view = self._view = validate_message(self.data)
            return view
        return validate_view(view)


class LinkFilter:
    """The compiled filter set of one sending link, with the consumer's identity.

    Evaluation errors are counted in ``filter_set.stats`` and reported to
    ``logger`` tersely: at most one line per ``log_interval`` seconds per link,
    saying how many there were (spec §7.2: keep logs terse).
    """

    __slots__ = ("_context", "_errors_logged", "_logged_at", "consumer", "filter_set",
                 "is_trivial", "label", "log_interval", "logger", "on_error")

    def __init__(
        self,
        filter_set: FilterSet,
        consumer: Hashable | None,
        *,
        label: str = "link",
        logger: logging.Logger | None = None,
        log_interval: float = 10.0,
        on_error: Callable[[Hashable | None], None] | None = None,
    ) -> None:
        self.filter_set = filter_set
        self.on_error = on_error
        """Told the origin of each message whose evaluation caught an error (spec §7.2)."""
        self.consumer = consumer
        self.is_trivial = len(filter_set) == 0
        self.label = label
        self.logger = logger or logging.getLogger("filtex_proton")
        self.log_interval = log_interval
        self._context = EvaluationContext(consumer=consumer)
        self._errors_logged = 0
        self._logged_at = -float("inf")

    def matches(self, message: FilterMessage) -> bool:
        """Whether the message is eligible for this link; never raises (spec §2.3)."""
        if self.is_trivial:
            return True
        try:
            view = message.view
        except DecodeError:  # bytes that are not a message match no filter
            stats = self.filter_set.stats
            stats.evaluations += 1
            stats.nulls += 1
            stats.errors += 1
            self._errors_from(message.origin)
            return False
        context = self._context
        context.origin = message.origin
        stats = self.filter_set.stats
        errors = stats.errors
        if self.filter_set.matches(view, context):
            return True
        if stats.errors != errors:
            self._errors_from(message.origin)
        return False

    def _errors_from(self, origin: Hashable | None) -> None:
        """An evaluation caught an error: blame the message's sender, then log tersely."""
        if self.on_error is not None:
            self.on_error(origin)
        self._report_errors()

    def _report_errors(self) -> None:
        now = time.monotonic()
        if now - self._logged_at < self.log_interval:
            return
        errors = self.filter_set.stats.errors
        self.logger.warning(
            "%s: %d filter evaluation error(s) since the last report (%d in all); "
            "those messages were not eligible for it; event=evaluation-errors errors=%d total=%d",
            self.label, errors - self._errors_logged, errors, errors - self._errors_logged,
            errors)
        self._errors_logged, self._logged_at = errors, now


@dataclass
class PluginStats:
    """What an operator wants counted (spec §7.2): attaches, refusals by reason."""

    accepted: int = 0
    refused: int = 0
    refused_by_limit: int = 0
    refusals: dict[str, int] = field(default_factory=dict)
    recent: deque[Refusal] = field(default_factory=lambda: deque(maxlen=RECENT_REFUSALS))
    """The last refusals, newest last, for a management page (docs/CONSOLE.md)."""


RECENT_REFUSALS: Final = 50
"""How many refusals :attr:`PluginStats.recent` keeps."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """One link refused: when (``time.time()``), which link, why (the kind counted in
    :attr:`PluginStats.refusals`) and the full text the log has."""

    at: float
    link: str
    address: str | None
    reason: str
    detail: str


class _RefusalEnforcer(Handler):
    """The handler of a refused link: re-closes it if anything re-opens it.

    MessagingHandler's EndpointStateHandler calls ``link.open()`` right after
    ``on_link_opening`` returns, which would undo a refusal made there; the
    resulting local-open event reaches this handler, which closes the link again,
    so the peer still sees the attach with a null source and then the detach.
    """

    @staticmethod
    def on_link_local_open(event: Any) -> None:
        link = event.link
        if link.state & Endpoint.LOCAL_ACTIVE:
            link.close()

    @staticmethod
    def on_link_remote_close(event: Any) -> None:
        """The peer has closed it too: free it (proton keeps a link in its session until
        freed, and these events never reach the container's own handler)."""
        event.link.free()

    on_link_remote_detach = on_link_remote_close

    def on_unhandled(self, method: str, *args: Any) -> None:
        """Other events of a refused link need nothing from us."""


_ENFORCER: Final = _RefusalEnforcer()


class FiltexPlugin:
    """Source filters for a Proton container: capabilities, attach, per-delivery matching.

    ``limits`` bound what a client may ask for (spec §7.1). ``disabled`` names
    filter types (``"amqp:sql-filter"``) or whole families by capability
    (``"AMQP_FILTEX_SQL_V1_0"``) an operator switches off: they are then neither
    offered nor accepted. Evaluation errors are logged per link at most once
    every ``error_log_interval`` seconds.
    """

    def __init__(
        self,
        *,
        limits: Limits = DEFAULT_LIMITS,
        disabled: Iterable[str] = (),
        logger: logging.Logger | None = None,
        error_log_interval: float = 10.0,
    ) -> None:
        self.limits = limits
        self.logger = logger or logging.getLogger("filtex_proton")
        self.error_log_interval = error_log_interval
        self.stats = PluginStats()
        self.on_evaluation_error: Callable[[Hashable | None], None] | None = None
        """Given to every :class:`LinkFilter` as ``on_error`` (per-sender counts, spec §7.2)."""
        self.link_filter_class: type[LinkFilter] = LinkFilter
        """What :meth:`attach_sender` builds (a container may time a sample of evaluations)."""
        off = set(disabled)
        why = unknown_disabled(off)
        if why is not None:
            raise ValueError(why)
        self.enabled_types: frozenset[str] = frozenset(
            t.name for t in FILTER_TYPES
            if t.name not in off and not off.intersection(t.aliases)
            and not off.intersection(t.capabilities)
        )
        offered = [
            c for c in ALL_CAPABILITIES
            if c != FILTEX_ALL and any(
                c in t.capabilities for t in FILTER_TYPES if t.name in self.enabled_types)
        ]
        if {SQL_CAPABILITY, PROP, GROUP} <= set(offered):
            offered.append(FILTEX_ALL)
        self.capabilities: tuple[symbol, ...] = tuple(symbol(c) for c in offered)

    # -- capabilities (spec §2.2) --------------------------------------------

    def offer_capabilities(self, connection: Connection) -> None:
        """Add the filter capabilities to the connection's open frame (keeps the others)."""
        connection.offered_capabilities = _merge(connection.offered_capabilities, self.capabilities)

    def add_source_capabilities(self, terminus: Terminus) -> None:
        """Add the filter capabilities to a source (the Apache registry asks for them there)."""
        present = terminus.capabilities.get_object() if terminus.capabilities.type() else None
        terminus.capabilities.clear()
        merged = _merge(present, self.capabilities)
        terminus.capabilities.put_array(False, Data.SYMBOL)
        terminus.capabilities.enter()
        for capability in merged:
            terminus.capabilities.put_symbol(capability)
        terminus.capabilities.exit()

    # -- identities and messages -----------------------------------------------

    @staticmethod
    def connection_identity(connection: Connection) -> int:
        """A number naming the connection for no-local, stable for its lifetime."""
        identity = getattr(connection, "_filtex_identity", None)
        if identity is None:
            identity = next(_identities)
            connection._filtex_identity = identity
        return int(identity)

    @staticmethod
    def message(data: bytes, *, origin: Hashable | None = None) -> FilterMessage:
        """Wrap the bytes of one message, once, for every link that will evaluate it."""
        return FilterMessage(data, origin)

    # -- attach (spec §2.3) ------------------------------------------------------

    def compile(self, source_filter: Data | Any) -> FilterSet:
        """Decode, validate and compile a filter set; raises :class:`FilterError`."""
        filter_set = decode_filter_set(source_filter, self.limits)
        for key, item in filter_set.items():
            for name in _types_in(item):
                if name not in self.enabled_types:
                    raise FilterError(
                        f"filter type {name} is not enabled on this server",
                        key=key, descriptor=name)
        return filter_set

    def attach_sender(self, link: Link, consumer: Hashable | None = None) -> LinkFilter | None:
        """Accept or refuse an incoming link we send on, by its source filter set.

        Call it when the peer's attach arrives, before ``link.open()``. On
        success the filter echo and the capabilities are in ``link.source`` and
        a :class:`LinkFilter` comes back; set the rest of the source and open
        the link. On a definitional error the link is refused on the wire (null
        source, then detach with ``amqp:invalid-field``) and ``None`` comes back:
        leave the link alone. ``consumer`` defaults to the link's connection.
        """
        remote_filter = link.remote_source.filter
        try:
            filter_set = self.compile(remote_filter)
        except FilterError as error:
            self.refuse(link, error)
            return None
        if len(filter_set) or filter_set.has_options:
            link.source.filter.copy(remote_filter)  # exactly the filters (and options) in place
        self.add_source_capabilities(link.source)
        self.stats.accepted += 1
        if consumer is None:
            consumer = self.connection_identity(link.connection)
        label = f"link {link.name!r} from {link.remote_source.address!r}"
        return self.link_filter_class(filter_set, consumer, label=label, logger=self.logger,
                                      log_interval=self.error_log_interval,
                                      on_error=self.on_evaluation_error)

    def refuse(self, link: Link, error: FilterError) -> None:
        """Refuse a link as Artemis, ActiveMQ and Qpid Broker-J do (spec §2.3)."""
        self.stats.refused += 1
        self.stats.refused_by_limit += error.limit
        kind = "limit" if error.limit else (error.descriptor or "filter set")
        if kind not in _REFUSAL_KINDS and kind not in ("limit", "filter set"):
            kind = "unknown filter type"
        self.stats.refusals[kind] = self.stats.refusals.get(kind, 0) + 1
        self.stats.recent.append(Refusal(time.time(), link.name, link.remote_source.address,
                                         kind, error.render()))
        self.logger.warning("refused link %r: event=refusal reason=%s link=%r connection=%s "
                            "address=%r detail=%r", link.name, kind.replace(" ", "-"), link.name,
                            getattr(link.connection, "_filtex_identity", "?"),
                            link.remote_source.address, error.render().replace("\n", " | "))
        link.source.type = Terminus.UNSPECIFIED  # encodes as a null source
        link.target.copy(link.remote_target)
        link.open()
        link.condition = Condition(INVALID_FIELD, error.client_text(), cast(Any, _FILTER_INFO))
        link.close()
        link.handler = _ENFORCER


def _types_in(item: Any) -> list[str]:
    """The type names of a filter and of every filter nested in it, without recursion."""
    names, stack = [], [item]
    while stack:
        current = stack.pop()
        names.append(current.type_name)
        stack.extend(getattr(current, "members", ()))
    return names


def _merge(present: Any, extra: Iterable[symbol]) -> list[symbol]:
    """Capabilities already set (a symbol, a list, or nothing) plus ours, without repeats."""
    if present is None:
        current: list[symbol] = []
    elif isinstance(present, str):
        current = [symbol(present)]
    else:
        current = [symbol(c) for c in present]
    return list(dict.fromkeys([*current, *extra]))
