"""The queue node: competing consumers, each given only what its filters match.

Messages sit in a list of slots in arrival order. A delivered-but-unsettled
message keeps its slot, so a message that comes back (released, modified, or
left unsettled when its consumer went away) is back exactly where it was, in
order. A settled message leaves a hole; holes are compacted away in bulk.

Many filtered consumers on one queue cost little more than a few: the queue's
node matcher (``filtex_proton.matcher``, docs/PLUGIN.md) says, when a message
arrives, which consumers may match it (its *arrival*, kept on the entry: the
candidates then, consumers attached since, less those that said no), and the
message is offered only to those, round robin from the consumer after the last
one served, each with credit evaluated until one matches. A consumer the
arrival rules out cannot match the message and never evaluates it.

Each consumer also has a cursor: the first slot it has not looked at. When a
consumer gets credit it scans from its cursor for the first queued message it
matches, skipping (without evaluating) those whose arrival rules it out, and
evaluating its filter on the others (the ones that arrived before it attached
among them). A message that no current consumer matches simply stays, for a
later consumer (whose cursor starts at the front). When a message comes back,
cursors past it are moved back to it and it is offered again. Browsers
(distribution-mode ``copy``) walk the same slots with their own cursor and take
nothing; with many filtered browsers, a browse matcher names the ones a new
message can interest, and the others skip it unevaluated.

Invariant: after every offer and every scan, a consumer with credit has no
queued message it matches (so a new or returned message is the only thing a
consumer with credit can be waiting for).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from typing import ClassVar, Final, Protocol

from filtex_broker.nodes.budget import MemoryBudget, entry_cost
from filtex_broker.nodes.deadlines import GONE, Deadlines
from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.holding import HELD, Expired, LifetimeKeeping, lapsed
from filtex_broker.nodes.lanes import COMPACT_MIN, Lane, compact
from filtex_broker.nodes.lifetime import COMMON, DEFAULT_PRIORITY, lifetime_of
from filtex_broker.nodes.node import Journal, Node, NodeLimits
from filtex_proton.matcher import Arrival, NodeMatcher, Verdict
from filtex_proton.plugin import FilterMessage, LinkFilter

__all__ = ["HELD", "Expired", "Outlet", "Queue"]


class Outlet(Protocol):
    """A consumer as its queue sees it (``filtex_broker.nodes.consumer.Consumer``; test stand-ins
    too): the queue decides what to send, the outlet puts it on the wire and keeps the credit."""

    credit: int
    cursor: int
    ruled_out: int
    closed: bool
    browse: bool
    filter: LinkFilter | None

    def send(self, entry: Entry) -> None: ...

    def __hash__(self) -> int: ...  # by identity: the node matcher's key

Scan = Callable[[Outlet, list[Entry | None], int], tuple[Entry | None, int]]
"""Looks through one priority's slots from a cursor: what it found, and where the cursor goes."""

MATCHER_FROM: Final = 4
"""Filtered consumers from which a queue offers messages through its node matcher: below, each
consumer's filter is simply evaluated in turn (the index costs more than it saves for a few
links; bench_broker's 1-filtered case), as with no matcher at all."""


class Queue(Node, LifetimeKeeping):
    """Messages kept until consumed; see the module docstring for the dispatch rules."""

    kind: ClassVar[str] = "queue"

    def __init__(self, name: str, limits: NodeLimits, *, owner: Node | None = None,
                 budget: MemoryBudget | None = None, deadlines: Deadlines | None = None) -> None:
        super().__init__(name, limits)
        self._keep_lifetimes(deadlines if deadlines is not None else Deadlines())
        self._lanes: dict[int, Lane] = {}
        """The priorities other than the default that have entries (``filtex_broker.nodes.lanes``;
        the default priority's entries are in ``_slots``)."""
        self._ordered: list[Lane | None] = []
        """With lanes: every priority held, highest first (None: ``_slots``)."""
        self._elsewhere = 0
        """Entries held back or in a lane: ``count`` less these are in ``_slots``."""
        self.budget = budget
        """The broker-wide memory budget its entries are charged to (``--max-memory``)."""
        self._slots: list[Entry | None] = []
        self.count = 0
        """Messages held: queued plus delivered-unsettled."""
        self.ready = 0
        """Messages queued and not delivered (dispatch stops when there are none)."""
        self.bytes = 0
        self.consumers: list[Outlet] = []
        self.browsers: list[Outlet] = []
        self._next = 0
        """Round-robin position among consumers (index into ``consumers``)."""
        self._served = 0
        """When the consumer served last by an offer registered (``NodeMatcher.order``):
        round robin, the next one served is the first that may match registered after it."""
        self.matcher: NodeMatcher[Outlet] = NodeMatcher()
        """The (non-browsing) consumers' filter sets, indexed."""
        self._returned: list[Entry] = []
        """Entries requeued and not yet offered again."""
        self.browse_matcher: NodeMatcher[Outlet] = NodeMatcher()
        """The browsers' filter sets, indexed (browsers take nothing: each candidate looks)."""
        self._browsers_filtered = 0
        """Browsers with filters: below :data:`MATCHER_FROM`, every browser scans."""
        self._filtered = 0
        """Consumers with filters: below :data:`MATCHER_FROM`, messages skip the matcher."""
        self._dispatching = False
        self._again = False
        self._owner: Node | None = owner
        """Whose stalled producers to wake when room appears: a subscription's topic (None:
        the queue's own; not ``self``, a reference cycle only a full collection would free)."""
        self.journal: Journal | None = None
        """The node's log in the durable store (``--data-dir``), if it has one."""

    # -- storage ---------------------------------------------------------------

    def publish(self, message: FilterMessage) -> None:
        self.put(Entry.of(message, lifetime=lifetime_of(message)))

    def put(self, entry: Entry, *, log: bool = True) -> None:
        """Take an entry in and offer it to consumers (or hold it until its scheduled delivery
        time); then it keeps only its bytes (the plugin's message it arrived with is dropped).
        ``log=False``: already in the journal (recovery)."""
        journal = self.journal
        if journal is not None and log:
            journal.enqueue(entry)
        self.count += 1
        self.bytes += len(entry.data)
        budget = self.budget
        if budget is not None:
            budget.charge(entry_cost(entry, journal is not None))
        if entry.lifetime is not COMMON and self._held_back(entry):
            return
        self._place(entry)

    def _place(self, entry: Entry) -> None:
        """Append a visible entry to its priority's slots and offer it."""
        priority = entry.lifetime.priority
        if priority == DEFAULT_PRIORITY:
            entry.pos = len(self._slots)
            self._slots.append(entry)
        else:
            self._lane(priority).append(entry)
            self._elsewhere += 1
        self.ready += 1
        if self.consumers:
            if self._filtered < MATCHER_FROM:  # a few filters: evaluating each is cheaper
                self.dispatch(browsers=False)
            else:
                entry.arrival = self.matcher.arrival(entry.message)
                if self._returned:  # what came back is older: offered first
                    self.dispatch_returned()
                self._offer(entry)
        if self.browsers:
            self._offer_to_browsers(entry)
        entry.fresh = None  # compact from now on (docs/BROKER.md, "byte accounting")

    def put_back(self, entry: Entry) -> None:
        self.put(entry)

    def has_room(self) -> bool:
        limits = self.limits
        return self.count < limits.max_messages and self.bytes < limits.max_bytes

    def depth(self) -> int:
        return self.count

    def held_back(self) -> int:
        return len(self._held)

    def remove(self, entry: Entry) -> None:
        """The entry is settled (consumed, dead-lettered, dropped, expired): it leaves the
        queue (a queued entry is no longer ready; see :meth:`_expire`)."""
        pos = entry.pos
        if pos < 0:
            if pos != HELD:
                return
            del self._held[entry]
            self._elsewhere -= 1
        elif (lifetime := entry.lifetime) is COMMON or lifetime.priority == DEFAULT_PRIORITY:
            self._slots[pos] = None
        else:
            self._vacate(entry, pos)
        journal = self.journal
        if journal is not None:
            journal.ack(entry)
        entry.pos = GONE
        entry.owner = None
        self.count -= 1
        self.bytes -= len(entry.data)
        if self.budget is not None:
            self.budget.credit(entry_cost(entry, journal is not None))
        live = self.count - self._elsewhere
        holes = len(self._slots) - live
        if holes > COMPACT_MIN and holes > live:
            self._compact()
        owner = self._owner if self._owner is not None else self
        if owner.stalled:
            owner.room_available()

    def requeue(self, entry: Entry) -> None:
        """A delivered entry comes back, in its original place; then call
        :meth:`dispatch_returned` (or :meth:`dispatch`) to offer what came back."""
        entry.owner = None
        self.ready += 1
        if entry.lifetime is not COMMON and lapsed(entry, self.deadlines.clock()):
            self.deadlines.add(0, self, entry)  # expired while delivered: at the next tick
        pos = entry.pos
        if entry.lifetime.priority == DEFAULT_PRIORITY:
            for consumer in self.consumers:
                consumer.cursor = min(consumer.cursor, pos)
        else:
            self._lanes[entry.lifetime.priority].rewind(pos)
        self._returned.append(entry)

    def dispatch_returned(self) -> None:
        """Offer the entries that came back, in queue order (only to who may match them)."""
        returned, self._returned = self._returned, []
        returned.sort(key=_place_in_order)
        for entry in returned:
            self._offer(entry)

    def resize(self, entry: Entry, data: bytes, message: FilterMessage) -> None:
        """Replace an entry's bytes (a rewritten header; ``message`` is their plugin message,
        for the matchers), keeping the byte count and the memory budget right."""
        self.bytes += len(data) - len(entry.data)
        journal = self.journal
        if journal is not None:
            journal.replace(entry, data)
        budget = self.budget
        if budget is not None:
            budget.credit(entry_cost(entry, journal is not None))
        entry.data = data
        entry.shares = 1  # its own bytes now, no longer shared with other subscriptions
        if budget is not None:
            budget.charge(entry_cost(entry, journal is not None))
        # A filter may read what changed (delivery-count): index the new message again.
        if entry.arrival is not None:
            entry.arrival = entry.arrival.again(message)
        if entry.browse_arrival is not None:
            entry.browse_arrival = entry.browse_arrival.again(message)

    def entries(self) -> list[Entry]:
        """The entries in their slots, in delivery order: priority, then arrival (for tests and
        diagnostics; not those held until a scheduled time)."""
        return [e for slots in self._all_slots() for e in slots if e is not None]

    def _all_slots(self) -> list[list[Entry | None]]:
        """Every priority's slots, highest first."""
        if not self._lanes:
            return [self._slots]
        return [self._slots if lane is None else lane.slots for lane in self._ordered]

    def _compact(self) -> None:
        """Drop the holes; renumber entries and every cursor."""
        self._slots, old_positions = compact(self._slots)
        for consumer in (*self.consumers, *self.browsers):
            consumer.cursor = bisect_left(old_positions, consumer.cursor)

    def _lane(self, priority: int) -> Lane:
        lane = self._lanes.get(priority)
        if lane is None:
            lane = self._lanes[priority] = Lane(priority)
            self._order_lanes()
        return lane

    def _vacate(self, entry: Entry, pos: int) -> None:
        """An entry leaves its lane (the lane goes with its last entry)."""
        lane = self._lanes[entry.lifetime.priority]
        lane.vacate(pos)
        self._elsewhere -= 1
        if not lane.live:
            del self._lanes[lane.priority]
            self._order_lanes()

    def _order_lanes(self) -> None:
        lanes = self._lanes
        self._ordered = [lanes.get(p) for p in sorted({*lanes, DEFAULT_PRIORITY}, reverse=True)]

    # -- consumers ---------------------------------------------------------------

    def add_consumer(self, consumer: Outlet) -> None:
        consumer.cursor = 0
        if consumer.browse:
            self.browsers.append(consumer)
            self.browse_matcher.register(consumer, consumer.filter)
            self._browsers_filtered += consumer.filter is not None
        else:
            self.consumers.append(consumer)
            self.matcher.register(consumer, consumer.filter)
            self._filtered += consumer.filter is not None

    def remove_consumer(self, consumer: Outlet) -> None:
        group = self.browsers if consumer.browse else self.consumers
        if consumer in group:
            group.remove(consumer)
            if consumer.browse:
                self.browse_matcher.unregister(consumer)
                self._browsers_filtered -= consumer.filter is not None
            else:
                consumer.ruled_out = self.matcher.ruled_out(consumer)  # for its final counts
                self.matcher.unregister(consumer)
                self._filtered -= consumer.filter is not None
            for lane in self._lanes.values():
                lane.forget(consumer)

    def destroy(self) -> None:
        journaled = self.journal is not None
        held = [*self.entries(), *self._held]
        if self.budget is not None:
            self.budget.credit(sum(entry_cost(e, journaled) for e in held))
        if self.journal is not None:
            self.journal.drop()
            self.journal = None
        for entry in held:
            entry.pos = GONE  # its deadlines, if any, are void
        self._held = {}
        self._lanes = {}
        self._ordered = []
        self._elsewhere = 0
        self._slots = []
        self.count = self.ready = self.bytes = 0

    # -- dispatch ------------------------------------------------------------------

    def _offer(self, entry: Entry) -> None:
        """A message became ready (arrived, or came back): give it to the next consumer with
        credit that matches it, round robin among those that may; without one, it waits."""
        if entry.owner is not None or entry.pos < 0:
            return  # taken meanwhile (a full dispatch ran first)
        if entry.lifetime is not COMMON and lapsed(entry, self.deadlines.clock()):
            return  # expired: never delivered (the deadlines remove it)
        if self._dispatching:
            self._again = True  # the dispatch under way looks at it
            return
        arrival = entry.arrival
        if arrival is None:  # arrived before any consumer: every one may want it
            self.dispatch()
            return
        said_no, retry = self._offer_in_turn(entry, arrival.links(self._served))
        if said_no:  # each consumer evaluates each message once: its scans skip it now
            entry.arrival = arrival.without(said_no)
        for consumer in retry:
            if entry.owner is None:
                self.dispatch_to(consumer)

    def _offer_in_turn(self, entry: Entry,
                       turn: list[Outlet]) -> tuple[list[Outlet], list[Outlet]]:
        """Offer the entry to these consumers in turn until one with credit matches and takes
        it: the consumers that said no, and those whose filter ran out of budget (not a "no":
        their own scan tries again)."""
        said_no: list[Outlet] = []
        retry: list[Outlet] = []
        message = entry.message
        notes = entry.notes
        matcher = self.matcher
        for consumer in turn:
            if consumer.credit <= 0 or consumer.closed:
                continue
            if notes is not None and entry.refuses(consumer):
                continue
            answer = matcher.verdict(consumer, message)
            if answer is Verdict.MATCHED:
                self.ready -= 1
                self._served = matcher.order(consumer)
                consumer.send(entry)
                break
            (retry if answer is Verdict.OVER_BUDGET else said_no).append(consumer)
        return said_no, retry

    def dispatch_to(self, consumer: Outlet) -> None:
        """One consumer got credit: it takes the queued messages it matches, in order.

        Other consumers need nothing (by the invariant in the module docstring, a
        consumer with credit has already taken what it matches)."""
        if consumer.browse:
            self._browse([consumer])
            return
        if self._dispatching:
            self._again = True
            return
        self._dispatching = True
        try:
            while consumer.credit > 0 and self.ready and not consumer.closed:
                entry = self._next_for(consumer)
                if entry is None:
                    break
                self.ready -= 1
                consumer.send(entry)
        finally:
            self._dispatching = False
        if self._again:
            self.dispatch()

    def dispatch(self, *, browsers: bool = True) -> None:
        """Send what can be sent: each consumer gets its next matching message, round robin.

        Looks at every consumer: used when a consumer arrives or an offer was deferred;
        a message's arrival and one consumer's credit take the cheaper paths above."""
        if self._dispatching:
            self._again = True
            return
        self._dispatching = True
        self._returned = []  # a full dispatch looks at them too
        try:
            again = True
            while again:
                self._again = False
                if self.ready and self.consumers:
                    self._dispatch_consumers()
                if browsers and self.browsers:
                    self._dispatch_browsers(self.browsers)
                again = self._again
        finally:
            self._dispatching = False

    def _dispatch_consumers(self) -> None:
        consumers = self.consumers
        n = len(consumers)
        if n == 1:
            only = consumers[0]
            while only.credit > 0 and self.ready:
                entry = self._next_for(only)
                if entry is None:
                    return
                self.ready -= 1
                only.send(entry)
            return
        index = self._next % n
        idle = 0
        while idle < n and self.ready:
            consumer = consumers[index]
            index += 1
            if index == n:
                index = 0
            if consumer.credit > 0:
                entry = self._next_for(consumer)
                if entry is not None:
                    self.ready -= 1
                    consumer.send(entry)
                    self._next = index
                    idle = 0
                    if len(consumers) != n:  # the send closed a consumer: start over
                        n = len(consumers)
                        if n == 0:
                            return
                        index %= n
                    continue
            idle += 1

    def _next_for(self, consumer: Outlet) -> Entry | None:
        """The first queued entry past the consumer's cursor that its filters match: in the
        highest priority that has one (``filtex_broker.nodes.lanes``)."""
        if not self._lanes:
            entry, consumer.cursor = self._scan(consumer, self._slots, consumer.cursor)
            return entry
        return self._by_priority(consumer, self._scan, browse=False)

    def _by_priority(self, reader: Outlet, scan: Scan, *, browse: bool) -> Entry | None:
        """``scan`` each priority's slots, highest first, from the reader's cursor there."""
        for lane in self._ordered:
            if lane is None:
                entry, reader.cursor = scan(reader, self._slots, reader.cursor)
            else:
                cursors = lane.browse_cursors if browse else lane.cursors
                entry, cursors[reader] = scan(reader, lane.slots, cursors.get(reader, 0))
            if entry is not None:
                return entry
        return None

    def _scan(self, consumer: Outlet, slots: list[Entry | None],
              i: int) -> tuple[Entry | None, int]:
        """The first queued entry of ``slots`` from ``i`` that the consumer's filters match, and
        where its cursor goes.

        A filter that ran out of its evaluation budget (a garbage-collection
        pause, a busy machine) has not said no: such an entry is looked at
        again, a few times, before the consumer's cursor leaves it behind.
        """
        n = len(slots)
        link_filter = consumer.filter
        stats = link_filter.filter_set.stats if link_filter is not None else None
        misses = stats.budget_exceeded if stats is not None else 0
        rewind = -1
        answers: Mapping[Arrival[Outlet], bool] | None = None
        while True:
            while i < n:
                entry = slots[i]
                i += 1
                if entry is None or entry.owner is not None:
                    continue
                if entry.lifetime is not COMMON and lapsed(entry, self.deadlines.clock()):
                    continue  # expired: never delivered (the deadlines remove it)
                arrival = entry.arrival
                if arrival is not None:
                    if answers is None:  # a lookup per entry, not a call: 38 against 102 ns
                        answers = self.matcher.answers(consumer)  # (docs/PERFORMANCE.md)
                    if not answers[arrival]:
                        continue  # the matcher ruled it out, or the consumer said no
                if entry.notes is not None and entry.refuses(consumer):
                    continue
                # The matcher's verdict(), inlined (a call per evaluation cost about 0.3 µs:
                # bench_matcher's residue sets, docs/PERFORMANCE.md): out of budget is not a no.
                if link_filter is not None and not link_filter.matches(entry.message):
                    if stats is not None and stats.budget_exceeded != misses:
                        misses = stats.budget_exceeded
                        if rewind < 0 and entry.retry(consumer):
                            rewind = i - 1
                    continue
                return entry, (i if rewind < 0 else rewind)  # come back for the retry
            if rewind < 0:
                return None, n
            i, rewind = rewind, -1

    def _offer_to_browsers(self, entry: Entry) -> None:
        """A new message for the browsers: with many filtered ones, only the candidates the
        browse matcher names look (the others skip it, unevaluated, when they next scan)."""
        if self._browsers_filtered < MATCHER_FROM:
            self._browse(self.browsers)  # the consumers have had their turn in put()
            return
        arrival = entry.browse_arrival = self.browse_matcher.arrival(entry.message)
        self._browse([b for b in arrival.links() if b.credit > 0])

    def _browse(self, browsers: list[Outlet]) -> None:
        """Let these browsers scan, unless a dispatch is under way (it will look again)."""
        if self._dispatching:
            self._again = True
            return
        self._dispatching = True
        try:
            self._dispatch_browsers(browsers)
        finally:
            self._dispatching = False

    def _dispatch_browsers(self, browsers: list[Outlet]) -> None:
        for browser in browsers:
            while browser.credit > 0:
                found = self._next_browsed(browser)
                if found is None:
                    break
                browser.send(found)

    def _next_browsed(self, browser: Outlet) -> Entry | None:
        """The first entry past the browser's cursor that it matches (browsing takes nothing,
        delivered entries included), highest priority first."""
        if not self._lanes:
            entry, browser.cursor = self._browse_scan(browser, self._slots, browser.cursor)
            return entry
        return self._by_priority(browser, self._browse_scan, browse=True)

    def _browse_scan(self, browser: Outlet, slots: list[Entry | None],
                     i: int) -> tuple[Entry | None, int]:
        n = len(slots)
        link_filter = browser.filter
        answers = self.browse_matcher.answers(browser)  # as in _next_for
        while i < n:
            entry = slots[i]
            i += 1
            if entry is None:
                continue
            if entry.lifetime is not COMMON and lapsed(entry, self.deadlines.clock()):
                continue  # expired: browsers do not see it either
            arrival = entry.browse_arrival
            if arrival is not None and not answers[arrival]:
                continue  # the browse matcher ruled it out when the message arrived
            if link_filter is None or link_filter.matches(entry.message):
                return entry, i
        return None, n


def _place_in_order(entry: Entry) -> tuple[int, int]:
    return -entry.lifetime.priority, entry.pos
