"""Re-publishing archived messages to a live AMQP address, at least once, in archive order.

The bytes sent are the archived bytes, untouched (a replayed message is the
message that arrived, annotations and all). Each one stays in flight until the
peer settles it: *accepted* counts as done, *released* or *modified* sends it
again, *rejected* is counted and reported (the peer will never take it). A
connection that drops is re-opened, with back-off, and whatever was in flight is
sent again. A checkpoint file records the last message of the contiguous prefix
the peer has taken, so that a later run resumes after it (at least once: what
was in flight when the run stopped is sent again).

Ordering: the peer receives the messages in archive order, whatever the
window. Sending again is go-back-N: when a message has to be sent again
(released, modified, or in flight on a lost connection), every later message
already sent is sent again after it, even one the peer had accepted. The peer
may so see duplicates (at least once), but the last copy of each message comes
after the last copy of the one before it; nothing is ever skipped.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NamedTuple

from proton import Delivery, Handler, Link, Url
from proton.handlers import MessagingHandler
from proton.reactor import Container

__all__ = ["Checkpoint", "Position", "ReplayResult", "Replayer", "parse_target"]

log = logging.getLogger("filtex.replay")

_TICK: Final = 0.1


class Position(NamedTuple):
    """Where a message is in archive order."""

    arrival_ms: int
    sequence: int
    address: str


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The replay's progress on disk: the last position of the accepted prefix."""

    path: Path
    identity: str
    """What was being replayed (filter, archive, target): a resume must match it."""

    def load(self) -> tuple[Position | None, int]:
        """The position to resume after (None: from the start) and how many were sent."""
        try:
            saved = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None, 0
        if saved.get("identity") != self.identity:
            raise ValueError(f"{self.path} is the checkpoint of another replay "
                             f"({saved.get('identity')!r}); remove it or choose another file")
        position = saved.get("position")
        return (Position(*position) if position else None), int(saved.get("sent", 0))

    def save(self, position: Position | None, sent: int) -> None:
        temporary = self.path.with_name(f".{self.path.name}.tmp")
        temporary.write_text(json.dumps({"identity": self.identity, "sent": sent,
                                         "position": list(position) if position else None}),
                             encoding="utf-8")
        os.replace(temporary, self.path)


def parse_target(url: str) -> tuple[str, str]:
    """``amqp://host:port/address`` -> (connection URL, address)."""
    parsed = Url(url)  # type: ignore[no-untyped-call]
    address = (parsed.path or "").lstrip("/")
    if not address:
        raise ValueError(f"{url}: no address (amqp://host:port/address)")
    return f"{parsed.scheme}://{parsed.host}:{parsed.port}", address


@dataclass
class ReplayResult:
    """What a replay did."""

    accepted: int = 0
    rejected: int = 0
    resent: int = 0
    reconnects: int = 0
    stopped: bool = False
    """A stop was asked for (a signal) before the end."""
    error: str | None = None
    last: Position | None = None


@dataclass
class _Item:
    index: int
    data: bytes
    position: Position
    outcome: str | None = None
    """``accepted`` or ``rejected`` once the peer settled the item's latest copy."""


@dataclass
class _State:
    window: dict[int, _Item] = field(default_factory=dict)
    """Every item taken from the source and not yet in the settled prefix, by index."""
    pending: deque[_Item] = field(default_factory=deque)
    """Items to send again, in index order; always sent before new ones."""
    in_flight: dict[Delivery, _Item] = field(default_factory=dict)
    """The latest copy of each item on the wire (older copies' outcomes are ignored)."""
    next_index: int = 0
    """Index of the first item not yet settled in the prefix."""
    exhausted: bool = False


_END: Final = object()


class _Feeder(threading.Thread):
    """Pulls (bytes, position) from the source (a Spark iterator that may block for a
    while) into a bounded queue, so that the AMQP reactor never waits on Spark."""

    def __init__(self, source: Iterable[tuple[bytes, Position]], size: int) -> None:
        super().__init__(name="filtex-replay-feed", daemon=True)
        self.source = source
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=size)
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            for item in self.source:
                while not self.stop.is_set():
                    try:
                        self.queue.put(item, timeout=_TICK)
                        break
                    except queue.Full:
                        continue
                if self.stop.is_set():
                    return
            self.queue.put(_END)
        except BaseException as exc:  # handed to the reactor thread, which reports it
            self.queue.put(exc)


class Replayer(MessagingHandler):
    """Sends a stream of raw messages to one address with the guarantees above."""

    def __init__(
        self,
        url: str,
        source: Iterable[tuple[bytes, Position]],
        *,
        window: int = 100,
        retries: int = 10,
        checkpoint: Checkpoint | None = None,
        sent_before: int = 0,
        on_accepted: Callable[[int], None] | None = None,
        stop: threading.Event | None = None,
        drain_timeout: float = 30.0,
    ) -> None:
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.connection_url, self.address = parse_target(url)
        self.window = max(1, window)
        self.retries = retries
        self.checkpoint = checkpoint
        self.sent_before = sent_before
        self.progress = on_accepted or (lambda n: None)
        self.stop_event = stop or threading.Event()
        self.drain_timeout = drain_timeout
        self.result = ReplayResult()
        self._state = _State()
        self._feeder = _Feeder(source, self.window * 4)
        self._container: Container | None = None
        self._connection: Any = None
        self._sender: Any = None
        self._failures = 0
        self._stop_deadline: float | None = None
        self._last_save = 0.0
        self._indexes = itertools.count()

    # -- running ---------------------------------------------------------------

    def run(self) -> ReplayResult:
        """Replay everything (or until stopped); returns what happened."""
        self._feeder.start()
        self._container = Container(self)
        try:
            self._container.run()
        finally:
            self._feeder.stop.set()
            self._save(force=True)
        return self.result

    def on_start(self, event: Any) -> None:
        self._connect(event.container)
        event.container.schedule(_TICK, self)

    def _connect(self, container: Container) -> None:
        self._connection = container.connect(self.connection_url, reconnect=False)
        self._sender = container.create_sender(self._connection, self.address)

    def on_timer_task(self, event: Any) -> None:
        """Every tick: notice a stop request, a finished stream, or more to send."""
        if self._finished():
            return
        if self.stop_event.is_set() and self._stop_deadline is None:
            log.info("stopping: waiting for %d in flight", len(self._state.in_flight))
            self.result.stopped = True
            self._stop_deadline = time.monotonic() + self.drain_timeout
        if self._stop_deadline is not None and (
                not self._state.in_flight or time.monotonic() > self._stop_deadline):
            self._close()
            return
        self._send_more()
        event.container.schedule(_TICK, self)

    def on_sendable(self, event: Any) -> None:
        self._send_more()

    # -- sending ---------------------------------------------------------------

    def _next_item(self) -> _Item | None:
        state = self._state
        if state.pending:
            return state.pending.popleft()
        if state.exhausted:
            return None
        try:
            got = self._feeder.queue.get_nowait()
        except queue.Empty:
            return None
        if got is _END:
            state.exhausted = True
            return None
        if isinstance(got, BaseException):
            state.exhausted = True
            self.result.error = f"reading the archive failed: {got}"
            self.stop_event.set()
            return None
        data, position = got
        item = _Item(next(self._indexes), data, Position(*position))
        state.window[item.index] = item
        return item

    def _send_more(self) -> None:
        sender = self._sender
        if sender is None or self._stop_deadline is not None or sender.state & Link.LOCAL_CLOSED:
            return
        state = self._state
        while sender.credit > 0 and (state.pending or len(state.window) < self.window):
            item = self._next_item()
            if item is None:
                break
            delivery = sender.delivery(sender.delivery_tag())
            sender.stream(item.data)
            sender.advance()
            state.in_flight[delivery] = item
        if state.exhausted and not state.pending and not state.in_flight:
            self._close()

    # -- outcomes --------------------------------------------------------------

    def on_accepted(self, event: Any) -> None:
        item = self._state.in_flight.pop(event.delivery, None)
        if item is not None:
            self._failures = 0
            self._settled(item, "accepted")

    def on_rejected(self, event: Any) -> None:
        item = self._state.in_flight.pop(event.delivery, None)
        if item is not None:
            condition = event.delivery.remote.condition
            log.warning("message at %s rejected by the peer: %s", item.position, condition)
            self._settled(item, "rejected")

    def on_released(self, event: Any) -> None:  # released or modified: send it again
        item = self._state.in_flight.pop(event.delivery, None)
        if item is not None:
            self._send_again_from(item.index)
            self._send_more()

    def _send_again_from(self, first: int) -> int:
        """Go back: the item ``first`` and every later one already sent are sent again, in
        order (their copies on the wire no longer count); returns how many."""
        state = self._state
        for delivery, item in list(state.in_flight.items()):
            if item.index >= first:
                del state.in_flight[delivery]
        again = sorted((item for index, item in state.window.items() if index >= first),
                       key=lambda item: item.index)
        for item in again:
            item.outcome = None
        earlier = [item for item in state.pending if item.index < first]  # none, normally
        state.pending = deque(earlier + again)
        self.result.resent += len(again)
        return len(again)

    def _settled(self, item: _Item, outcome: str) -> None:
        state = self._state
        item.outcome = outcome
        while (head := state.window.get(state.next_index)) is not None and head.outcome:
            del state.window[state.next_index]
            if head.outcome == "accepted":
                self.result.accepted += 1
            else:
                self.result.rejected += 1
            self.result.last = head.position
            state.next_index += 1
            self.progress(1)
        self._save()
        if state.exhausted and not state.pending and not state.in_flight:
            self._close()
        else:
            self._send_more()  # room in the window again

    def _save(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if self.checkpoint is None or (not force and now - self._last_save < 1.0):
            return
        self._last_save = now
        done = self.result.accepted + self.result.rejected
        self.checkpoint.save(self.result.last, self.sent_before + done)

    # -- failures and the end ----------------------------------------------------

    def on_link_error(self, event: Any) -> None:
        self._lost(f"link error: {event.link.remote_condition}")

    def on_connection_error(self, event: Any) -> None:
        self._lost(f"connection error: {event.connection.remote_condition}")

    def on_transport_error(self, event: Any) -> None:
        self._lost(f"transport error: {event.transport.condition}")

    def on_disconnected(self, event: Any) -> None:
        self._lost("disconnected")

    def on_connection_closing(self, event: Any) -> None:
        self._lost("the peer closed the connection")

    def on_link_closing(self, event: Any) -> None:
        self._lost("the peer detached the link")

    def _lost(self, why: str) -> None:
        """Whatever was in flight may or may not have arrived: send it again, reconnecting."""
        if self._finished() or self._connection is None:
            return
        unsettled = self._send_again_from(self._state.next_index)
        connection, self._connection, self._sender = self._connection, None, None
        with contextlib.suppress(Exception):  # already gone
            connection.close()
        if self._stop_deadline is not None:
            self._done()
            return
        self._failures += 1
        if self._failures > self.retries:
            self.result.error = f"giving up after {self.retries} retries: {why}"
            self._done()
            return
        delay = min(30.0, 0.2 * 2 ** (self._failures - 1))
        log.warning("%s; reconnecting in %.1f s (%d unsettled to send again)", why, delay,
                    unsettled)
        self.result.reconnects += 1
        assert self._container is not None
        self._container.schedule(delay, _Reconnect(self))

    def _close(self) -> None:
        if self._connection is not None:
            connection, self._connection, self._sender = self._connection, None, None
            connection.close()
        self._done()

    def _done(self) -> None:
        self._state.exhausted = True
        self._stop_deadline = self._stop_deadline or time.monotonic()
        self._feeder.stop.set()

    def _finished(self) -> bool:
        return self._connection is None and self._state.exhausted and (
            self._stop_deadline is not None)

    def reconnect(self) -> None:
        if self._finished():
            return
        assert self._container is not None
        self._connect(self._container)


class _Reconnect(Handler):
    def __init__(self, replayer: Replayer) -> None:
        self.replayer = replayer

    def on_timer_task(self, event: Any) -> None:
        self.replayer.reconnect()
