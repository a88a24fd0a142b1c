"""The broker process: a Proton reactor container, its listeners, and a clean shutdown.

``Broker.run()`` blocks in the calling thread (the console script's main
thread, or a test's background thread). ``Broker.stop()`` may be called from
any thread or from a signal handler: it only writes a byte to a pipe the
reactor watches, and the reactor thread then stops listening, closes every
connection (peers see ``amqp:connection:forced``) and exits once they are gone
or the grace period ends.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from proton import Condition, Connection, Endpoint, Handler, Link, symbol
from proton.reactor import Container

from filtex_broker.archive.archiver import Archiver
from filtex_broker.client import ClientConnection
from filtex_broker.config import BrokerConfig
from filtex_broker.error_rate import InducedErrors
from filtex_broker.handler import BrokerHandler, client_of
from filtex_broker.links import LinkManager
from filtex_broker.loop.auto import make_container
from filtex_broker.loop.contract import EventLoopError, FastLink
from filtex_broker.loop.proton_internals import Acceptor, listening_address, unbind_transport
from filtex_broker.memory import default_max_memory
from filtex_broker.nodes.budget import MemoryBudget
from filtex_broker.nodes.node import NodeLimits
from filtex_broker.nodes.registry import Registry, fold_deleted
from filtex_broker.security.gate import SecureAcceptor
from filtex_broker.security.setup import build_gate, reload_users, tls_listeners
from filtex_broker.streams.consumer import StreamConsumer
from filtex_broker.streams.node import Stream, StreamSettings
from filtex_proton import __version__
from filtex_proton.plugin import FiltexPlugin

if TYPE_CHECKING:
    from proton import Event

    from filtex_broker.console.server import ConsoleServer
    from filtex_broker.metrics import BrokerMetrics, BrokerSnapshot
    from filtex_broker.nodes.node import Node
    from filtex_broker.store.log import Store

__all__ = ["Broker"]

log = logging.getLogger("filtex.broker")

ANONYMOUS_RELAY: Final = symbol("ANONYMOUS-RELAY")
SHARED_SUBS: Final = symbol("SHARED-SUBS")
DELAYED_DELIVERY: Final = symbol("DELAYED_DELIVERY")
"""Offered as Artemis does: x-opt-delivery-time and x-opt-delivery-delay are honoured (Qpid JMS
sends a delivery delay only to a peer offering it)."""
FORCED: Final = "amqp:connection:forced"
RESOURCE_LIMIT_EXCEEDED: Final = "amqp:resource-limit-exceeded"
T = TypeVar("T")


class _Waker:
    """A pipe the reactor selects on: how other threads (and signals) reach it."""

    def __init__(self, on_wake: Any) -> None:
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._on_wake = on_wake
        unbind_transport(self)  # Proton's IO handler looks for a transport on every selectable
        self._selectable: Any = None
        self._closed = False

    def fileno(self) -> int:
        return self._read

    def wake(self) -> None:
        """Safe from any thread and from a signal handler."""
        with contextlib.suppress(OSError):  # already pending, or closed during shutdown
            os.write(self._write, b"!")

    def on_selectable_init(self, event: Event) -> None:
        self._selectable = event.context
        self._selectable.reading = True
        self._selectable.update()

    def on_selectable_readable(self, event: Event) -> None:
        try:
            while os.read(self._read, 512):
                pass
        except BlockingIOError:
            pass
        self._on_wake()

    def retire(self) -> None:
        """Stop watching the pipe (the reactor may then finish)."""
        if self._selectable is not None and not self._selectable.is_terminal:
            self._selectable.terminate()
            self._selectable.update()

    def close(self) -> None:
        """Called by Proton when the selectable is finalised."""
        if not self._closed:
            self._closed = True
            os.close(self._read)
            os.close(self._write)


class _Deadline(Handler):
    """A timer task: the grace period after which shutdown stops waiting for peers."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def on_timer_task(self, event: Event) -> None:
        self.broker.force_stop()


class _Tick(Handler):
    """A timer task: timed messages' moments (expiry, scheduled delivery) have come."""

    def __init__(self, run: Callable[[], object]) -> None:
        self.run = run

    def on_timer_task(self, event: Event) -> None:
        self.run()


def _stream_settings(config: BrokerConfig) -> StreamSettings | None:
    """``--stream``: which addresses are streams, and what each keeps (None: no stream)."""
    if not config.streams:
        return None
    return StreamSettings(config.streams, config.stream_max_bytes, config.stream_max_age)


class Broker:
    """An AMQP 1.0 broker serving filtered links through :class:`FiltexPlugin`."""

    def __init__(self, config: BrokerConfig, plugin: FiltexPlugin | None = None) -> None:
        self.config = config
        self.plugin = plugin or FiltexPlugin(
            limits=config.limits, disabled=config.disabled, logger=logging.getLogger("filtex")
        )
        self.budget = MemoryBudget(config.max_memory or default_max_memory())
        """``--max-memory``: what every node's messages cost, and the producers it blocks."""
        self.registry = Registry(
            NodeLimits(config.max_queue_messages, config.max_queue_bytes),
            config.dead_letter_address, self.budget, streams=_stream_settings(config),
        )
        self.links = LinkManager(config, self.registry, self.plugin)
        self.induced_errors = InducedErrors(
            max_per_second=config.max_evaluation_errors_per_second,
            interval=config.evaluation_error_interval, action=config.evaluation_error_action,
            close=self._close_for_errors)
        """Spec §7.2: evaluation errors per producing connection, and the limit on them."""
        self.plugin.on_evaluation_error = self.induced_errors
        self.metrics: BrokerMetrics | None = None
        """``--metrics``: the Prometheus registry and endpoint (served once listening)."""
        if config.metrics:
            from filtex_broker.metrics import (
                BrokerMetrics,  # prometheus-client: the 'metrics' extra
            )

            self.metrics = BrokerMetrics(self.metrics_snapshot)
            self.plugin.link_filter_class = self.metrics.link_filter_class
            self.links.metrics = self.metrics
        self.messages_in: dict[str, int] = self.metrics.messages_in if self.metrics else {}
        """Messages stored per node (``--metrics`` and ``--console``; empty without both)."""
        if self.metrics is not None:
            self.links.count_in = self.metrics.message_in
            self.registry.on_delete.append(self.metrics.node_deleted)
        elif config.console:
            self.links.count_in = self._count_in
            self.registry.on_delete.append(functools.partial(fold_deleted, self.messages_in))
        self.console: ConsoleServer | None = None
        """``--console``: the management page and its JSON API (served once listening)."""
        self._calls: deque[tuple[Callable[[], Any], Future[Any]]] = deque()
        """Work other threads asked the reactor thread to do (:meth:`submit`)."""
        self.clients: dict[int, ClientConnection] = {}
        self.idle_closes = 0
        """Connections closed because the peer sent nothing for ``--idle-timeout``."""
        self.addresses: list[tuple[str, int]] = []
        """The bound (host, port) of each listener, once :attr:`ready` is set."""
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.container: Any = None
        """The event loop (:mod:`filtex_broker.loop.auto`): ``FastContainer`` or
        ``StockContainer``."""
        self.archive: Archiver | None = None
        """``--archive``: opened by :meth:`run`, flushed and closed when it returns."""
        self.store: Store | None = None
        """``--data-dir``: the durable store, opened (and replayed) by :meth:`run`."""
        self._acceptors: list[Acceptor | SecureAcceptor] = []
        self._waker = _Waker(self._wakeup)
        self.gate = build_gate(config, self._waker.wake)
        """Secured listeners (TLS, SASL, users): None when nothing is secured."""
        self._stop_requested = False
        self._reload_requested = False
        self._stopping = False
        self._stopped = False

    # -- running ---------------------------------------------------------------------

    def _count_in(self, node: Node) -> None:
        """A producer stored a message in ``node`` (``--console`` without ``--metrics``)."""
        counts = self.messages_in
        counts[node.name] = counts.get(node.name, 0) + 1

    def submit(self, work: Callable[[], T]) -> Future[T]:
        """Run ``work`` on the reactor thread and hand back its result (any thread).

        The console reads nodes and links this way, so it never races the broker. The
        future fails with ``RuntimeError`` if the broker stops first.
        """
        future: Future[T] = Future()
        if self._stopped:
            future.set_exception(RuntimeError("the broker has stopped"))
            return future
        self._calls.append((work, future))  # deque.append is atomic
        self._waker.wake()
        return future

    def call_on_reactor(self, work: Callable[[], T], timeout: float = 10.0) -> T:
        """:meth:`submit` and wait (``TimeoutError`` after ``timeout`` seconds)."""
        return self.submit(work).result(timeout)

    def _run_calls(self) -> None:
        calls = self._calls
        while calls:
            work, future = calls.popleft()
            if not future.set_running_or_notify_cancel():
                continue  # the caller gave up
            try:
                future.set_result(work())
            except BaseException as exc:  # handed to the caller, never lost in the reactor
                future.set_exception(exc)

    def _fail_calls(self) -> None:
        while self._calls:
            _, future = self._calls.popleft()
            if future.set_running_or_notify_cancel():
                future.set_exception(RuntimeError("the broker has stopped"))

    def metrics_snapshot(self) -> BrokerSnapshot:
        """What ``--metrics`` reads at scrape time (from its HTTP thread: copies of counters)."""
        from filtex_broker.metrics import BrokerSnapshot

        refusals = dict(self.plugin.stats.refusals)
        for reason, count in list(self.links.refusals.items()):
            refusals[reason] = refusals.get(reason, 0) + count
        streams = {name: node.figures() for name, node in list(self.registry.nodes.items())
                   if isinstance(node, Stream)}
        stream_consumers: dict[tuple[str, str, str], tuple[int, int]] = {}
        for client in list(self.clients.values()):
            for consumer in list(client.consumers):  # a detached link has left the list
                if isinstance(consumer, StreamConsumer) and not consumer.closed and (
                        figures := streams.get(consumer.node.name)) is not None:
                    stream_consumers[(consumer.node.name, consumer.name, str(client.origin))] = (
                        figures.reader_at(consumer.position))
        return BrokerSnapshot(
            streams=streams, stream_consumers=stream_consumers,
            refusals=refusals,
            depths={(node.kind, name): node.depth()
                    for name, node in list(self.registry.nodes.items())},
            expired=dict(self.registry.expired),
            scheduled={name: held for name, node in list(self.registry.nodes.items())
                       if (held := node.held_back())},
            connections=len(self.clients),
            induced_errors=self.induced_errors.total(),
            connections_closed_for_errors=self.induced_errors.closed,
            connections_closed_idle=self.idle_closes,
            archive=self.archive,
            memory_accounted=self.budget.accounted,
            memory_limit=self.budget.limit or 0,
            producers_blocked=self.budget.blocked,
            memory_blockings=self.budget.blockings,
        )
    def run(self) -> None:
        """Serve until :meth:`stop`; raises if a listener cannot be bound."""
        self.container = make_container(self.config.event_loop, BrokerHandler(self))
        self.container.container_id = self.config.container_id
        try:
            self._open_archive()
            self._open_store()
            log.info("max-memory %d bytes (%.0f MiB%s): producers wait above it, get credit "
                     "again below %d bytes", self.budget.limit or 0, (self.budget.limit or 0) /
                     (1 << 20), "" if self.config.max_memory else ", the default share",
                     self.budget.low)
            self.container.run()
        except BaseException as exc:
            self.error = exc
            raise
        finally:
            self.ready.set()  # never leave a waiter hanging
            self._remove_ready_file()
            if self.store is not None:
                self.store.close()  # its last commits may still hand messages to the archive
            self._close_archive()
            if self.metrics is not None:
                self.metrics.stop()
            if self.console is not None:
                self.console.stop()
            self._stopped = True
            self._fail_calls()
            if self.error is None:  # else the error is what the operator reads last
                log.info("broker stopped")

    def _open_archive(self) -> None:
        if self.config.archive:
            self.archive = Archiver(
                Path(self.config.archive), self.config.archive_nodes,
                max_pending_bytes=self.config.archive_max_pending_bytes, wake=self._waker.wake,
                index=self.config.archive_index, index_fields=self.config.archive_index_fields,
                index_buckets=self.config.archive_index_buckets)
            self.links.archive = self.archive
            log.info("archiving %s to %s", ", ".join(self.config.archive_nodes) or "every node",
                     self.config.archive)

    def _open_store(self) -> None:
        """Replay the data directory into the registry before anyone can connect."""
        if self.config.data_dir is not None:
            from filtex_broker.store.recovery import open_store

            self.store = open_store(self.config.data_dir, self.registry, self.plugin,
                                    self._waker.wake)

    def _close_archive(self) -> None:
        """After the reactor stopped: nothing is offered any more, everything is written."""
        if self.archive is not None:
            self.links.archive = None
            self.archive.close()

    def start_in_thread(self, timeout: float = 30.0) -> threading.Thread:
        """Run in a daemon thread; returns once listening (raises if that failed)."""
        thread = threading.Thread(target=self._run_quietly, name="filtex-broker", daemon=True)
        thread.start()
        if not self.ready.wait(timeout):
            raise TimeoutError("the broker did not start listening in time")
        if self.error is not None:
            raise RuntimeError(f"the broker failed to start: {self.error}") from self.error
        return thread

    def _run_quietly(self) -> None:
        try:
            self.run()
        except BaseException:  # recorded in self.error, reported by start_in_thread
            log.exception("broker failed")

    def stop(self) -> None:
        """Ask the reactor thread to shut down (any thread, or a signal handler)."""
        self._stop_requested = True
        self._waker.wake()

    def reload_users(self) -> None:
        """SIGHUP: re-read the users file on the reactor thread (any thread, or a signal)."""
        self._reload_requested = True
        self._waker.wake()

    def _wakeup(self) -> None:
        if self.gate is not None:
            self.gate.complete()  # password checks finished by the worker threads
        if self._reload_requested:
            self._reload_requested = False
            reload_users(self.gate)
        if self.store is not None:
            self.store.complete()  # accept what the store has written
        if self.archive is not None:
            self.archive.resume_stalled()
        if self._calls:
            self._run_calls()
        if self._stop_requested and not self._stopping:
            self.shutdown()

    # -- reactor-thread callbacks ------------------------------------------------------------

    def started(self, container: Container) -> None:
        """Bind the listeners and announce them (called from ``on_reactor_init``)."""
        container.selectable(self._waker)  # type: ignore[arg-type]  # duck-typed like EventInjector
        deadlines = self.registry.deadlines
        tick = _Tick(deadlines.run)
        deadlines.arm = lambda delay: container.schedule(delay, tick)
        deadlines.run()  # what recovery restored may be due already
        listeners = [(address, False) for address in self.config.listen]
        listeners += [(address, True) for address in tls_listeners(self.config)]
        for (host, port), tls in listeners:
            acceptor: Acceptor | SecureAcceptor
            if self.gate is None:
                acceptor = container.acceptor(host, str(port))
            else:
                if tls and not getattr(container, "fast", False):
                    raise EventLoopError(
                        "TLS listeners need the fast event loop (the stock one cannot see "
                        "bytes Python's ssl has already decrypted); see --event-loop")
                acceptor = self.gate.listen(container, host, port, tls=tls)  # type: ignore[arg-type]
            self._acceptors.append(acceptor)
            # Proton keeps the listening socket behind the acceptor's selectable.
            bound = listening_address(acceptor)
            self.addresses.append((str(bound[0]), int(bound[1])))
            log.info("listening on %s:%d%s", bound[0], bound[1], " (TLS)" if tls else "")
        if self.links.upstream is not None:
            self.links.upstream.start(container)  # type: ignore[arg-type]
        if self.metrics is not None:
            metrics_at = self.metrics.serve(self.config.metrics)
            log.info("serving Prometheus metrics on http://%s:%d/metrics", *metrics_at)
        if self.config.console:
            from filtex_broker.console.server import ConsoleServer  # aiohttp: the 'console' extra

            self.console = ConsoleServer(self)
            self.console.start()
        self._write_ready_file()
        self.ready.set()
        if self._stop_requested:
            self.shutdown()

    def register(self, link: Link, state: FastLink) -> None:
        """Route the link's deliveries and flow through the container's fast path."""
        if self.container is not None:
            self.container.register(link, state)

    def unregister(self, link: Link) -> None:
        """Forget the link's state (it is kept in the link's record: a reference cycle)."""
        if self.container is not None:
            self.container.unregister(link)
        link.broker_state = None

    def open_connection(self, connection: Connection) -> None:
        """The peer's open arrived: offer our capabilities and open ours."""
        if self._stopping:
            connection.condition = Condition(FORCED, "the broker is shutting down")
            connection.open()
            connection.close()
            return
        origin = self.plugin.connection_identity(connection)
        url = getattr(connection, "url", None)
        peer = f"{url.host}:{url.port}" if url is not None else "?"
        client = ClientConnection(connection, origin, f"{connection.remote_container!r}@{peer}")
        connection.broker_client = client
        self.clients[origin] = client
        connection.container = self.config.container_id
        if self.config.idle_timeout and connection.transport is not None:
            connection.transport.idle_timeout = self.config.idle_timeout  # declared as half
        # SHARED-SUBS: Qpid JMS creates shared subscriptions only if offered (not relayed)
        # DELAYED_DELIVERY: the nodes here schedule; a relayed upstream decides for itself
        connection.offered_capabilities = [ANONYMOUS_RELAY] if self.links.upstream is not None \
            else [ANONYMOUS_RELAY, SHARED_SUBS, DELAYED_DELIVERY]
        # what we are, so that a relay in front of us knows it (broker/relay/brokers.py)
        connection.properties = {symbol("product"): "filtex-broker",
                                 symbol("version"): __version__}
        self.plugin.offer_capabilities(connection)
        connection.open()
        log.info("connection %d opened from %s", origin, client.label)

    def idle_expired(self, connection: Connection | None) -> None:
        """Nothing arrived from the peer for ``--idle-timeout`` (a hung or frozen process, a
        host behind a partition): Proton closes the connection with
        ``amqp:resource-limit-exceeded``. What its links held is given back now, not when the
        socket goes (Proton keeps it for another timeout, for the peer's close that a silent
        peer never sends)."""
        self.idle_closes += 1
        client = client_of(connection)
        log.warning("connection %s closed: nothing received from %s for %g s (idle-timeout); "
                    "what its links held goes back to their nodes",
                    client.origin if client is not None else "?",
                    client.label if client is not None else "the peer", self.config.idle_timeout)
        self.connection_gone(connection)

    def connection_gone(self, connection: Connection | None) -> None:
        """Closed by the peer or dropped: give back what its links held."""
        client = client_of(connection)
        if client is None or client.closed:
            return
        for consumer in client.consumers:
            self.unregister(consumer.link)
        for producer in client.producers:
            self.unregister(producer.link)
        self.links.connection_gone(client)
        self.clients.pop(client.origin, None)
        self.induced_errors.forget(client.origin)
        client.connection = None
        log.info("connection %d closed", client.origin)
        if self._stopping and not self.clients:
            self.force_stop()

    def shutdown(self) -> None:
        """Stop listening, close every connection, and finish when they are gone."""
        if self._stopping:
            return
        self._stopping = True
        held = sum(node.depth() for node in self.registry.nodes.values())
        log.info("shutting down: %d connection(s) open, %d message(s) held (%s)",
                 len(self.clients), held, "durable ones kept in the data directory"
                 if self.store is not None else "in memory only: they are discarded")
        for acceptor in self._acceptors:
            acceptor.close()
        if self.gate is not None:
            self.gate.shutdown()
        if self.links.upstream is not None:
            self.links.upstream.close()
        for client in list(self.clients.values()):
            connection = client.connection
            if connection is not None and connection.state & Endpoint.LOCAL_ACTIVE:
                connection.condition = Condition(FORCED, "the broker is shutting down")
                connection.close()
        self._waker.retire()
        if self.container is not None:
            self.container.schedule(self.config.shutdown_grace, _Deadline(self))
        if not self.clients:
            self.force_stop()

    def _close_for_errors(self, origin: Hashable, description: str) -> None:
        """Close a producing connection whose messages make filters fail (spec §7.2)."""
        client = self.clients.get(origin) if isinstance(origin, int) else None
        connection = client.connection if client is not None else None
        if connection is None or not connection.state & Endpoint.LOCAL_ACTIVE:
            return  # gone already (its messages outlive it)
        connection.condition = Condition(RESOURCE_LIMIT_EXCEEDED, description)
        connection.close()
        log.warning("event=connection-closed reason=induced-errors connection=%s peer=%s",
                    origin, client.label if client is not None else "?")

    def force_stop(self) -> None:
        if not self._stopped and self.container is not None:
            self._stopped = True
            self.container.stop()

    # -- the ready file ------------------------------------------------------------------------

    def _write_ready_file(self) -> None:
        path = self.config.ready_file
        if path is None:
            return
        tmp = Path(f"{path}.tmp{os.getpid()}")
        tmp.write_text("".join(f"{host}:{port}\n" for host, port in self.addresses))
        tmp.replace(path)

    def _remove_ready_file(self) -> None:
        path = self.config.ready_file
        if path is not None:
            path.unlink(missing_ok=True)
