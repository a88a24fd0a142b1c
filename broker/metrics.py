"""Prometheus metrics for one broker (opt-in: ``--metrics HOST:PORT``).

The hot path only bumps plain integers the broker keeps anyway (a producer's
stored messages per node, a consumer's ``sent``, the filter counters of each
link); this module turns them into metric families when Prometheus scrapes,
in the HTTP server's thread. The one thing measured on the hot path, the
evaluation latency, is sampled: one evaluation in ``sample_every`` per link is
timed. Each broker has a registry of its own, so several brokers in one
process (the tests) do not clash, and the HTTP server stops with the broker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from prometheus_client import CollectorRegistry, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from filtex_broker.nodes.registry import fold_deleted
from filtex_broker.settings import parse_listen
from filtex_proton.plugin import FilterMessage, FilterStats, LinkFilter

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from filtex_broker.archive.archiver import Archiver
    from filtex_broker.nodes.consumer import Consumer
    from filtex_broker.nodes.node import Node
    from filtex_broker.streams.consumer import StreamConsumer
    from filtex_broker.streams.node import StreamFigures

    AnyConsumer = Consumer | StreamConsumer

__all__ = ["BrokerMetrics"]

SAMPLE_EVERY: Final = 64
"""One evaluation in this many (per link) is timed for the latency histogram."""
LATENCY_BUCKETS: Final = (1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 1e-3, 5e-3,
                          0.01, 0.05, 0.1)


class _Tracked:
    """A consumer link the metrics know of: its node, its filter types, its counters."""

    __slots__ = ("consumer", "node", "stats", "types")

    def __init__(
        self, consumer: AnyConsumer, stats: FilterStats | None, types: tuple[str, ...]
    ) -> None:
        self.consumer = consumer
        self.node: str = consumer.node.name
        self.stats = stats
        self.types = types


def ruled_out(consumer: AnyConsumer) -> int:
    """Messages filtered out for the consumer without evaluation (``Consumer.ruled_out_now``)."""
    return consumer.ruled_out_now()


@dataclass(frozen=True, slots=True)
class BrokerSnapshot:
    """What the metrics read of the broker at scrape time (the broker builds it, so that the
    metrics know nothing else of it)."""

    refusals: dict[str, int]
    """Links refused, by reason (the plugin's and the broker's own)."""
    depths: dict[tuple[str, str], int]
    """(node kind, node name) -> messages held."""
    connections: int
    induced_errors: int
    connections_closed_for_errors: int
    archive: Archiver | None
    connections_closed_idle: int = 0
    memory_accounted: int = 0
    """``--max-memory``: what the held messages cost, as the broker accounts it."""
    memory_limit: int = 0
    producers_blocked: bool = False
    memory_blockings: int = 0
    expired: dict[str, int] | None = None
    """Messages expired, by node."""
    scheduled: dict[str, int] | None = None
    """Messages held until their scheduled delivery time, by node (nodes holding none left
    out)."""
    streams: dict[str, StreamFigures] | None = None
    """``--stream``: each stream's offsets, segments and skipping."""
    stream_consumers: dict[tuple[str, str, str], tuple[int, int]] | None = None
    """(stream, consumer link name, connection) -> the consumer's position (the next offset it
    reads) and its lag (offsets from there to the end); one entry per attached consumer."""


class BrokerMetrics:
    """The counters of one broker, its registry and its HTTP endpoint."""

    def __init__(self, snapshot: Callable[[], BrokerSnapshot], *,
                 sample_every: int = SAMPLE_EVERY) -> None:
        self.snapshot = snapshot
        self.registry = CollectorRegistry(auto_describe=False)
        self.latency = Histogram(
            "filtex_evaluation_seconds",
            f"Time to evaluate a link's filter set on one message (1 in {sample_every} sampled)",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.registry.register(_Collector(self))
        self.link_filter_class = _sampling_link_filter(self.latency, sample_every)
        """The plugin builds these: a :class:`LinkFilter` that times a sample of evaluations."""
        self.messages_in: dict[str, int] = {}
        self._lock = threading.Lock()
        self._consumers: dict[int, _Tracked] = {}
        self._filters: dict[int, tuple[str, FilterStats, AnyConsumer]] = {}
        """Live filter counters by ``id`` (a durable subscription's outlive its links)."""
        self._retired_out: dict[str, int] = {}
        self._retired_filtered: dict[str, int] = {}
        self._retired_errors: dict[str, int] = {}
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.address: tuple[str, int] | None = None

    # -- the HTTP endpoint -------------------------------------------------------------

    def serve(self, where: str) -> tuple[str, int]:
        """Serve ``/metrics`` on ``HOST:PORT`` (port 0: any free port); returns the address."""
        host, port = parse_listen(where)
        self._server, self._thread = start_http_server(port, host, registry=self.registry)
        bound = self._server.server_address
        self.address = (str(bound[0]), int(bound[1]))
        return self.address

    def stop(self) -> None:
        """Stop the HTTP server (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    # -- hooks the broker calls in the reactor thread --------------------------------------

    def message_in(self, node: Node) -> None:
        """A producer stored a message in ``node`` (the hot path: one dict update)."""
        counts = self.messages_in
        name = node.name
        counts[name] = counts.get(name, 0) + 1

    def node_deleted(self, name: str) -> None:
        """A (dynamic) node is gone: its counts join :data:`DELETED_NODES`'."""
        with self._lock:
            for counts in (self.messages_in, self._retired_out, self._retired_filtered,
                           self._retired_errors):
                fold_deleted(counts, name)

    def consumer_attached(self, consumer: AnyConsumer, link_filter: LinkFilter | None) -> None:
        stats = link_filter.filter_set.stats if link_filter is not None else None
        types = (tuple(sorted({item.type_name for _, item in link_filter.filter_set.items()}))
                 if link_filter is not None else ())
        with self._lock:
            self._consumers[id(consumer)] = _Tracked(consumer, stats, types)
            if stats is not None:
                self._filters[id(stats)] = (consumer.node.name, stats, consumer)

    def consumer_detached(self, consumer: AnyConsumer, *, filter_kept: bool) -> None:
        """Fold the link's counts into its node's totals; ``filter_kept``: a durable
        subscription keeps filtering (and counting) without its link."""
        with self._lock:
            tracked = self._consumers.pop(id(consumer), None)
            if tracked is None:
                return
            _add(self._retired_out, tracked.node, consumer.sent)
            if tracked.stats is not None and not filter_kept:
                self._filters.pop(id(tracked.stats), None)
                _add(self._retired_filtered, tracked.node,
                     tracked.stats.evaluations - tracked.stats.matches + ruled_out(consumer))
                _add(self._retired_errors, tracked.node, tracked.stats.errors)

    # -- scraping (the HTTP server's thread) -------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            out = dict(self._retired_out)
            filtered = dict(self._retired_filtered)
            errors = dict(self._retired_errors)
            links: dict[str, int] = {}
            for tracked in self._consumers.values():
                _add(out, tracked.node, tracked.consumer.sent)
                for name in tracked.types or ("none",):
                    _add(links, name, 1)
            for node, stats, consumer in self._filters.values():
                _add(filtered, node, stats.evaluations - stats.matches + ruled_out(consumer))
                _add(errors, node, stats.errors)
        yield _counter("filtex_messages_in", "Messages stored in a node", "node",
                       dict(self.messages_in))
        yield _counter("filtex_messages_out", "Messages sent to consumers of a node", "node", out)
        yield _counter("filtex_messages_filtered_out",
                       "Filter verdicts that made a message ineligible for a link (false, "
                       "unknown, error or over budget)", "node", filtered)
        yield _counter("filtex_evaluation_errors",
                       "Filter evaluations that caught an error (spec §2.3)", "node", errors)
        yield _gauge("filtex_consumer_links",
                     "Consumer links attached, by the filter types in their filter set",
                     "filter_type", links)
        state = self.snapshot()
        yield _counter("filtex_link_refusals", "Links refused, by reason (the filter type, "
                       "'limit', or the broker's condition)", "reason", state.refusals)
        yield _depth_gauge(state.depths)
        yield _counter("filtex_messages_expired", "Messages whose ttl or absolute-expiry-time "
                       "passed before delivery (dead-lettered, or dropped)", "node",
                       state.expired or {})
        yield _gauge("filtex_messages_scheduled", "Messages held until their scheduled delivery "
                     "time (x-opt-delivery-time or -delay; counted in the depth too)", "node",
                     state.scheduled or {})
        yield _gauge("filtex_connections", "Client connections open", None,
                     {"": state.connections})
        yield _counter("filtex_induced_evaluation_errors",
                       "Evaluation errors charged to the producing connections (spec §7.2)",
                       None, {"": state.induced_errors})
        yield _counter("filtex_connections_closed_for_errors",
                       "Producing connections closed for inducing evaluation errors", None,
                       {"": state.connections_closed_for_errors})
        yield _counter("filtex_connections_closed_idle",
                       "Client connections closed because the peer sent nothing for "
                       "--idle-timeout", None, {"": state.connections_closed_idle})
        yield _gauge("filtex_memory_accounted_bytes", "What the messages held cost, as the "
                     "broker accounts it (bytes, entries and decoded sections)", None,
                     {"": state.memory_accounted})
        yield _gauge("filtex_memory_limit_bytes", "The broker-wide memory limit (--max-memory)",
                     None, {"": state.memory_limit})
        yield _gauge("filtex_producers_blocked", "1 while no producer gets credit because the "
                     "broker is over its memory limit", None, {"": int(state.producers_blocked)})
        yield _counter("filtex_memory_blockings", "Times the broker went over its memory limit "
                       "and blocked its producers", None, {"": state.memory_blockings})
        if state.archive is not None:
            yield from _archive_metrics(state.archive)
        if state.streams:
            yield from _stream_metrics(state.streams, state.stream_consumers or {})


class _Collector(Collector):
    """Registered in the broker's registry; asks :class:`BrokerMetrics` at scrape time."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        return self.metrics.collect()


def _sampling_link_filter(histogram: Histogram, every: int) -> type[LinkFilter]:
    """A :class:`LinkFilter` that times one evaluation in ``every`` into ``histogram``."""
    clock = time.perf_counter

    class SampledLinkFilter(LinkFilter):
        __slots__ = ("_countdown",)

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._countdown = every

        def matches(self, message: FilterMessage) -> bool:
            self._countdown -= 1
            if self._countdown:
                return LinkFilter.matches(self, message)
            self._countdown = every
            start = clock()
            result = LinkFilter.matches(self, message)
            histogram.observe(clock() - start)
            return result

    return SampledLinkFilter


def _archive_metrics(archive: Archiver) -> Iterator[Metric]:
    """``--archive``: the hand-off to the writer process (docs/ARCHIVE.md)."""
    stats = archive.stats
    for name, text, count in (
        ("offered", "Messages handed to the archive", stats.offered),
        ("appended", "Messages the archive writer turned into rows", stats.appended),
        ("errors", "Archive append and write failures (each logged)", stats.errors),
        ("dropped", "Archive rows lost because their segment could not be written",
         stats.dropped),
        ("stalls", "Times a producer waited for credit because the archive was behind",
         stats.stalls),
        ("writer_restarts", "Times the archive writer process died and was restarted",
         stats.restarts),
    ):
        yield _counter(f"filtex_archive_{name}", text, None, {"": count})
    yield _gauge("filtex_archive_pending_bytes", "Message bytes handed to the archive and not "
                 "yet turned into rows", None, {"": archive.pending_bytes()})


def _add(counts: dict[str, int], key: str, value: int) -> None:
    counts[key] = counts.get(key, 0) + value


def _family(kind: type[CounterMetricFamily | GaugeMetricFamily], name: str, text: str,
            labels: tuple[str, ...], values: Mapping[Any, int]) -> Metric:
    """One metric family: ``values`` keyed by the label value (a tuple for several labels)."""
    family = kind(name, text, labels=list(labels) or None)
    for key, value in sorted(values.items()):
        family.add_metric(list(key) if isinstance(key, tuple) else [key] if labels else [], value)
    return family


def _counter(name: str, text: str, label: str | None, values: dict[str, int]) -> Metric:
    return _family(CounterMetricFamily, name, text, (label,) if label else (), values)


def _gauge(name: str, text: str, label: str | None, values: dict[str, int]) -> Metric:
    return _family(GaugeMetricFamily, name, text, (label,) if label else (), values)


def _depth_gauge(depths: dict[tuple[str, str], int]) -> Metric:
    return _family(GaugeMetricFamily, "filtex_node_depth",
                   "Messages held by a node (queued or delivered and unsettled)",
                   ("kind", "node"), depths)


_STREAM_GAUGES: Final = (
    ("filtex_stream_bytes", "Message bytes a stream holds", "bytes"),
    ("filtex_stream_first_offset", "The oldest offset a stream holds (its next offset when "
     "empty)", "first_offset"),
    ("filtex_stream_next_offset", "The offset a stream's next message gets", "next_offset"),
    ("filtex_stream_segments", "Segments a stream holds", "segments"),
)
_STREAM_COUNTERS: Final = (
    ("filtex_stream_segments_dropped", "Segments retention dropped (by bytes, age or memory)",
     "dropped_segments"),
    ("filtex_stream_messages_skipped", "Messages stream readers passed over unread, in blocks "
     "whose summaries ruled their filters out", "skipped"),
)


_STREAM_CONSUMER_GAUGES: Final = (
    ("filtex_stream_consumer_position", "The next offset a stream consumer reads"),
    ("filtex_stream_consumer_lag", "Offsets from a stream consumer's position to the stream's "
     "end"),
)
_STREAM_CONSUMER_LABELS: Final = ("node", "link", "connection")
"""A link name is the client's choice: two connections can read one stream under the same
name, so a consumer's series also carry its connection (the number the log and console show)."""


def _stream_metrics(streams: Mapping[str, StreamFigures],
                    consumers: Mapping[tuple[str, str, str], tuple[int, int]],
                    ) -> Iterator[Metric]:
    """Per stream its figures; per attached stream consumer its position and lag."""
    for name, text, attribute in _STREAM_GAUGES:
        yield _gauge(name, text, "node", {node: getattr(figures, attribute)
                                          for node, figures in streams.items()})
    for name, text, attribute in _STREAM_COUNTERS:
        yield _counter(name, text, "node", {node: getattr(figures, attribute)
                                            for node, figures in streams.items()})
    for index, (name, text) in enumerate(_STREAM_CONSUMER_GAUGES):
        yield _family(GaugeMetricFamily, name, text, _STREAM_CONSUMER_LABELS,
                      {key: values[index] for key, values in consumers.items()})
