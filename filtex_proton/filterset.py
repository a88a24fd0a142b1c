"""A source's filter set: decoded once at attach, evaluated for every message.

The attach's ``source.filter`` maps a name (the client's choice) to a described
filter; the descriptor decides the type. A message is eligible when every
filter in the set is TRUE (the set is a conjunction); FALSE, NULL, an error
inside a filter or an exhausted evaluation budget all make it ineligible
(spec §2.3, §7.1), and :meth:`FilterSet.matches` never raises.

>>> from proton import Described, symbol
>>> from filtex_proton.amqp.view import DictMessageView
>>> fs = decode_filter_set({"prio": Described(symbol("amqp:header-filter"), {"priority": 4})})
>>> fs.matches(DictMessageView(header={}))          # absent priority is the default, 4
True
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from proton import Data, Described, symbol

from filtex_proton.amqp.types import Kind, amqp_type_name, kind_of
from filtex_proton.amqp.view import MessageView
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import EvaluationContext, Filter
from filtex_proton.filters.options import NO_OPTIONS, StreamOptions, decode_option, is_option
from filtex_proton.filters.registry import decode_filter, display_descriptor
from filtex_proton.filters.wire import max_nesting, read_data, summarise, write_data
from filtex_proton.limits import DEFAULT_LIMITS, Limits

__all__ = ["FilterSet", "FilterStats", "Outcome", "decode_filter_set"]


@dataclass(slots=True)
class FilterStats:
    """Counters since the set was decoded, for metrics and for spotting abuse (§7.2)."""

    evaluations: int = 0
    matches: int = 0
    nulls: int = 0
    """Messages refused because a filter was NULL (unknown, or an evaluation error)."""
    errors: int = 0
    """Messages during whose evaluation an exception was caught (subset of ``nulls``)."""
    budget_exceeded: int = 0
    """Messages refused because evaluating them took longer than the budget."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The verdict on one message, with who decided it and why (for the CLI, logs)."""

    result: bool | None
    key: str | None = None
    """The filter that made the result not TRUE."""
    reason: str | None = None
    budget_exceeded: bool = False
    error: bool = False

    @property
    def eligible(self) -> bool:
        return self.result is True


class FilterSet:
    """The compiled filters of one source; evaluate with :meth:`matches`.

    ``options`` are the entries that are options for the node rather than filters
    (RabbitMQ's stream offset and match-unfiltered): read once, never evaluated, not
    counted by ``len`` nor listed by ``items``, but echoed with the filters.
    """

    __slots__ = ("_budget_ms", "_filters", "_option_entries", "limits", "options", "stats")

    def __init__(self, filters: Mapping[str, Filter] | None = None,
                 limits: Limits = DEFAULT_LIMITS, *, options: StreamOptions = NO_OPTIONS,
                 option_entries: Mapping[str, Described] | None = None) -> None:
        self._filters: tuple[tuple[str, Filter], ...] = tuple((filters or {}).items())
        self._option_entries: tuple[tuple[str, Described], ...] = tuple(
            (option_entries or {}).items())
        self.options = options
        self.limits = limits
        self.stats = FilterStats()
        # The budget is checked between filters, between group members and inside
        # topic matching; a set with none of those never reads the clock.
        timed = len(self._filters) > 1 or any(_checks_budget(f) for _, f in self._filters)
        self._budget_ms: float | None = limits.eval_budget_ms if timed else None

    # -- evaluation --------------------------------------------------------

    def matches(self, view: MessageView, ctx: EvaluationContext | None = None) -> bool:
        """Whether the message is eligible for the link. Never raises.

        The per-delivery path: the same verdict and counters as :meth:`evaluate`,
        without building an :class:`Outcome` or the reasons.
        """
        stats = self.stats
        stats.evaluations += 1
        if ctx is None:
            ctx = EvaluationContext()
        ctx.begin(self._budget_ms)
        try:
            first = True
            for _key, item in self._filters:
                if first:
                    first = False
                elif ctx.over_budget():
                    stats.nulls += 1
                    stats.budget_exceeded += 1
                    return False
                answer = item.evaluate(view, ctx)
                if answer is not True:
                    if answer is not False:
                        stats.nulls += 1
                        stats.errors += ctx.error
                        stats.budget_exceeded += ctx.budget_exceeded
                    return False
        except Exception:  # a filter broke its never-raise promise: still not eligible
            stats.nulls += 1
            stats.errors += 1
            return False
        stats.matches += 1
        return True

    def evaluate(self, view: MessageView, ctx: EvaluationContext | None = None) -> Outcome:
        """The verdict on one message: TRUE only if every filter is TRUE.

        Filters run in set order and the first one that is not TRUE decides.
        ``ctx`` carries the connection identities for no-local; its
        per-message state is reset here. Never raises.
        """
        if ctx is None:
            ctx = EvaluationContext()
        ctx.begin(self._budget_ms)
        result: bool | None = True
        current: str | None = None
        try:
            for index, (key, item) in enumerate(self._filters):
                current = key
                if index and ctx.over_budget():
                    result = None
                else:
                    answer = item.evaluate(view, ctx)
                    result = answer if answer is True or answer is False else None
                if result is None:
                    ctx.null(f"filter {key!r} ({item.type_name}) evaluated to NULL")
                if result is not True:
                    break
            else:
                current = None
        except Exception as exc:  # a filter broke its never-raise promise: still not eligible
            ctx.fail(f"filter {current!r}", exc)
            result = None
        reason = f"filter {current!r} did not match" if result is False else ctx.reason
        return self._count(Outcome(result, current, reason, ctx.budget_exceeded, ctx.error))

    def _count(self, outcome: Outcome) -> Outcome:
        stats = self.stats
        stats.evaluations += 1
        if outcome.result is True:
            stats.matches += 1
        elif outcome.result is None:
            stats.nulls += 1
        stats.errors += outcome.error
        stats.budget_exceeded += outcome.budget_exceeded
        return outcome

    # -- the attach reply --------------------------------------------------

    def echo(self) -> dict[symbol, Described]:
        """The filters (and options) in place, exactly as received, for the attach reply's
        source."""
        echo = {symbol(key): item.described() for key, item in self._filters}
        echo.update((symbol(key), value) for key, value in self._option_entries)
        return echo

    @property
    def has_options(self) -> bool:
        """Whether the set holds option entries (then it is echoed even without filters)."""
        return bool(self._option_entries)

    def as_data(self) -> Data:
        """:meth:`echo` as a ``proton.Data`` (e.g. ``link.source.filter.copy(fs.as_data())``);
        empty for an empty set, so that no filter is echoed where none is in place."""
        data = Data()
        if self._filters or self._option_entries:
            write_data(self.echo(), data)
        return data

    def normalised(self) -> dict[symbol, Described]:
        """The filters in canonical form: symbolic descriptors, SQL printed back."""
        return {symbol(key): item.normalised() for key, item in self._filters}

    # -- a read-only mapping of key -> filter --------------------------------

    def __getitem__(self, key: str) -> Filter:
        for name, item in self._filters:
            if name == key:
                return item
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._filters)

    def __len__(self) -> int:
        return len(self._filters)

    def items(self) -> tuple[tuple[str, Filter], ...]:
        return self._filters

    def __repr__(self) -> str:
        inner = ", ".join(f"{key!r}: {item.type_name}" for key, item in self._filters)
        return f"FilterSet({{{inner}}})"


def _checks_budget(item: Filter) -> bool:
    """Whether a filter consults the evaluation budget itself (groups, topic matching)."""
    return hasattr(item, "members") or item.type_name.endswith("topic-binding:string")


def _entries_from_data(data: Data, limits: Limits) -> list[tuple[Any, Any]]:
    """The (key, described value) pairs of a filter set held in ``data``."""
    data.rewind()
    node_type = data.type() if data.next() is not None else None
    if node_type is None or node_type == Data.NULL:
        return []
    if node_type != Data.MAP:
        raise FilterError(
            "a filter set is a map of filter names to described filters, "
            f"not a {Data.type_name(node_type)}"
        )
    _check_count(data.get_map() // 2, limits)
    depth = max_nesting(limits)
    entries: list[tuple[Any, Any]] = []
    data.enter()
    try:
        while data.next() is not None:
            key = read_data(data, depth)
            if data.next() is None:
                break
            try:
                entries.append((key, read_data(data, depth)))
            except FilterError as exc:
                raise exc.located(key=_key_text(key), descriptor=None) from None
    finally:
        data.exit()
    return entries


def _check_count(count: int, limits: Limits) -> None:
    if count > limits.max_filters_per_set:
        raise FilterError(
            f"the filter set has {count} filters, more than {limits.max_filters_per_set} "
            "(limit max_filters_per_set)",
            limit=True,
        )


def _key_text(key: Any) -> str:
    try:
        if kind_of(key) in (Kind.STRING, Kind.SYMBOL):
            return str(key)
    except TypeError:
        pass
    return summarise(key)


def _named(key: Any, taken: Mapping[str, Any], other: Mapping[str, Any]) -> str:
    """The entry's name, checked: a symbol, ASCII, not used twice in the set."""
    name = _key_text(key)
    try:
        if kind_of(key) not in (Kind.STRING, Kind.SYMBOL):
            raise FilterError(f"a filter name is a symbol, not a {amqp_type_name(key)}")
    except TypeError:
        raise FilterError("a filter name is a symbol") from None
    if not name.isascii():
        raise FilterError("a filter name is a symbol, and symbols are ASCII")
    if name in taken or name in other:
        raise FilterError("the filter set names this filter twice")
    return name


def _read_options(entries: list[tuple[Any, Any]]) -> tuple[StreamOptions, dict[str, Described]]:
    """The option entries of a set, read before its filters (a filter may depend on them)."""
    options = NO_OPTIONS
    found: dict[str, Described] = {}
    seen: set[str] = set()
    for key, value in entries:
        if not is_option(value):
            continue
        try:
            name = _named(key, found, {})
            if str(value.descriptor) in seen:
                raise FilterError(f"the filter set gives {value.descriptor} twice")
            seen.add(str(value.descriptor))
            options = decode_option(value, options)
        except FilterError as exc:
            raise exc.located(key=_key_text(key), descriptor=str(value.descriptor)) from None
        found[name] = value
    return options, found


def _decode_entries(entries: list[tuple[Any, Any]], limits: Limits) -> FilterSet:
    _check_count(len(entries), limits)
    options, option_entries = _read_options(entries)
    filters: dict[str, Filter] = {}
    for key, value in entries:
        if is_option(value):
            continue
        name = _key_text(key)
        descriptor = (display_descriptor(value.descriptor)
                      if isinstance(value, Described) else None)
        try:
            _named(key, filters, option_entries)
            filters[name] = decode_filter(value, limits, options)
        except FilterError as exc:
            raise exc.located(key=name, descriptor=descriptor) from None
        except RecursionError:
            raise FilterError("filter nested too deeply", key=name, descriptor=descriptor,
                              limit=True) from None
        except Exception as exc:  # a decoder bug must still refuse the filter, not crash
            raise FilterError(f"cannot decode this filter ({type(exc).__name__}: {exc})",
                              key=name, descriptor=descriptor) from exc
    return FilterSet(filters, limits, options=options, option_entries=option_entries)


def decode_filter_set(source: Data | Mapping[Any, Any] | None,
                      limits: Limits = DEFAULT_LIMITS) -> FilterSet:
    """Decode and compile a source filter set; raises :class:`FilterError` when invalid.

    ``source`` is either the ``proton.Data`` of ``link.remote_source.filter``
    or a mapping of filter name to ``proton.Described`` (the library's own
    users). ``None`` or an empty map gives the empty set, which matches all.
    The error names the filter (key and descriptor) and what is wrong; limit
    refusals have ``limit=True`` so that ``client_text()`` masks them (§7.1).
    """
    if source is None:
        return FilterSet(limits=limits)
    if isinstance(source, Data):
        return _decode_entries(_entries_from_data(source, limits), limits)
    if not isinstance(source, Mapping):
        raise FilterError(
            f"a filter set is a map of filter names to described filters, "
            f"not a {amqp_type_name(source)}"
        )
    return _decode_entries(list(source.items()), limits)
