"""Stand-ins for a queue's consumers and their filters: what ``Queue`` uses, nothing more."""

from __future__ import annotations

from typing import Any

from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.queue import Queue
from filtex_proton.plugin import FilterMessage


class Stats:
    budget_exceeded = 0


class FakeFilterSet:
    """Indexes nothing (no filters the node matcher knows), so every message is a candidate."""

    def __init__(self, owner: FakeFilter) -> None:
        self.stats = owner.stats

    def items(self) -> list[tuple[str, object]]:
        return [("fake", object())]  # a filter of no type the matcher indexes: a residue

    def __len__(self) -> int:
        return 1


class FakeFilter:
    is_trivial = False

    def __init__(self, wanted: set[int]) -> None:
        self.wanted = wanted
        self.evaluated: list[int] = []
        self.stats = Stats()

    @property
    def filter_set(self) -> FakeFilterSet:
        return FakeFilterSet(self)

    def matches(self, message: FilterMessage) -> bool:
        n = int(message.data)
        self.evaluated.append(n)
        return n in self.wanted


class FakeConsumer:
    """Has what Queue uses: credit, cursor, filter, browse, send."""

    def __init__(self, queue: Queue, credit: int = 0, wanted: set[int] | None = None,
                 *, browse: bool = False, settle: bool = False) -> None:
        self.queue = queue
        self.credit = credit
        self.cursor = 0
        self.order = 0
        self.closed = False
        self.filter: Any = FakeFilter(wanted) if wanted is not None else None
        self.filter_stats: Any = None
        self.browse = browse
        self.settle = settle
        self.got: list[int] = []
        self.held: list[Entry] = []
        queue.add_consumer(self)  # type: ignore[arg-type]

    def send(self, entry: Entry) -> None:
        self.credit -= 1
        self.got.append(int(entry.data))
        if self.browse:
            return
        if self.settle:
            self.queue.remove(entry)
        else:
            entry.owner = self  # type: ignore[assignment]
            self.held.append(entry)
