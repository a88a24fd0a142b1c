"""The index of a node's links by what their filter sets require, and the verdicts per message.

A queue or topic with thousands of filtered links cannot afford to evaluate every set for
every message. :class:`NodeMatcher` files each link's condition
(:func:`~filtex_proton.matcher.decompose.decompose`) under one atom per alternative and,
per message, reads each indexed field once, looks its value up (a dict lookup per field for
equality) and returns the links that could match: the *candidates*. Only candidates are
evaluated, by their own :class:`~filtex_proton.plugin.LinkFilter`, so the verdict is
exactly per-link evaluation's.
"""

from __future__ import annotations

import enum
import operator
import weakref
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, NamedTuple, TypeVar

from filtex_proton.amqp.view import MessageView, Section
from filtex_proton.matcher.arrival import Arrival
from filtex_proton.matcher.atoms import (
    ALWAYS,
    ANCHOR_RANK,
    Atom,
    Condition,
    FieldRange,
    holds,
    number_value,
    with_default,
)
from filtex_proton.matcher.decompose import decided_by_index, decompose
from filtex_proton.matcher.slots import (
    EMPTY_SLOT,
    NO_ENTRIES,
    IndexEntry,
    Registration,
    Slot,
)
from filtex_proton.plugin import FilterMessage, LinkFilter

__all__ = ["MatcherStats", "NodeMatch", "NodeMatcher", "Verdict", "verdict"]

K = TypeVar("K", bound=Hashable)


# ---------------------------------------------------------------------------------- verdicts


class Verdict(enum.Enum):
    """One link's answer for one message, as a node needs it."""

    MATCHED = "matched"
    NOT_MATCHED = "not-matched"
    """FALSE, NULL or an evaluation error; or ruled out by the index without evaluation."""
    OVER_BUDGET = "over-budget"
    """The per-message evaluation budget ran out: not a "no", worth retrying later."""


def verdict(link_filter: LinkFilter, message: FilterMessage) -> Verdict:
    """Evaluate one link (through its ``matches``, so subclasses still time or count)."""
    stats = link_filter.filter_set.stats
    before = stats.budget_exceeded
    if link_filter.matches(message):
        return Verdict.MATCHED
    return Verdict.OVER_BUDGET if stats.budget_exceeded != before else Verdict.NOT_MATCHED


# ----------------------------------------------------------------------------- the index


@dataclass(slots=True)
class MatcherStats:
    """What the matcher did, for metrics and for judging the index."""

    messages: int = 0
    candidates: int = 0
    """Sets returned as candidates (each evaluated, or offered to the caller)."""
    fallbacks: int = 0
    """Messages whose indexed fields could not be read: every set was a candidate."""


class NodeMatch(NamedTuple, Generic[K]):
    """The links one message goes to (a topic's answer), in registration order."""

    matched: tuple[K, ...]
    over_budget: tuple[K, ...]
    """Evaluated, but out of budget: not a "no" (a queue may try again later)."""
    evaluated: int
    """How many sets were candidates (evaluated, or matched exactly by the index)."""

    def verdict(self, key: K) -> Verdict:
        if key in self.matched:
            return Verdict.MATCHED
        return Verdict.OVER_BUDGET if key in self.over_budget else Verdict.NOT_MATCHED


class _Answers(dict[Arrival[K], bool]):
    """``arrival.may_match(key)`` for one key, worked out once per arrival (see
    :meth:`NodeMatcher.answers`)."""

    __slots__ = ("key",)

    def __init__(self, key: K) -> None:
        super().__init__()
        self.key = key

    def __missing__(self, arrival: Arrival[K]) -> bool:
        if len(self) >= _ANSWERS_KEPT:
            self.clear()  # bounded: the arrivals a link has seen come and go
        answer = self[arrival] = arrival.may_match(self.key)
        return answer


class NodeMatcher(Generic[K]):
    """The filtered links of one node, indexed by what their filter sets require.

    ``register(key, link_filter)`` when a link attaches (``None`` or an empty
    set: it matches everything), ``unregister(key)`` when it detaches. Per
    message, a topic calls :meth:`match` (every link whose set is TRUE); a
    queue keeps the message's :meth:`arrival` (the links that may match it, kept
    right as links come and go) and calls :meth:`verdict` on those with credit
    until one matches. Keys are whatever the node keeps per link.

    A set the index decides exactly (string equality and the like, see
    :func:`_exact`) is counted in its stats as evaluated and matched without
    running its ``matches``; ``always_evaluate=True`` runs it anyway (for a
    container whose ``LinkFilter`` subclass times evaluations).
    """

    def __init__(self, *, always_evaluate: bool = False) -> None:
        self.always_evaluate = always_evaluate
        self._registrations: dict[K, Registration[K]] = {}
        self._slots: dict[tuple[Section, Any], Slot] = {}
        self._always: dict[Registration[K], None] = {}
        self._seq = 0
        self._arrivals: dict[tuple[K, ...], Arrival[K]] = {}
        """The arrivals handed out since the last (un)registration, by candidates: messages
        with the same candidates share one (emptied whenever the registrations change)."""
        self._weak = weakref.ref(self)
        self._answers: dict[K, _Answers[K]] = {}
        """Per key, its answers by arrival (:meth:`answers`), emptied as ``_arrivals`` is."""
        self.stats = MatcherStats()

    def __len__(self) -> int:
        return len(self._registrations)

    def __contains__(self, key: object) -> bool:
        return key in self._registrations

    # -- attach and detach ------------------------------------------------------------

    def register(self, key: K, link_filter: LinkFilter | None) -> None:
        """Index a link's compiled filter set (replacing what ``key`` had)."""
        if key in self._registrations:
            self.unregister(key)
        self._arrivals.clear()  # taken before this registration: they must not be shared after
        self._answers.clear()
        self._seq += 1
        registration = Registration(key, link_filter, self._seq, self.stats.messages)
        self._registrations[key] = registration
        if link_filter is None or link_filter.is_trivial:
            condition = ALWAYS
        else:
            condition = decompose(link_filter.filter_set)
            registration.exact = (not self.always_evaluate
                                  and decided_by_index(link_filter.filter_set))
        if any(not conjunction for conjunction in condition):
            registration.always = True
            self._always[registration] = None
            return
        for conjunction in condition:
            ordered = sorted(conjunction, key=lambda atom: ANCHOR_RANK[type(atom)])
            anchor = min(ordered, key=self._cost)  # the first of the cheapest
            self._seq += 1
            entry = IndexEntry(registration, anchor, tuple(a for a in ordered if a is not anchor),
                           self._seq)
            registration.entries.append(entry)
            slot_key = (anchor.field.section, anchor.field.key)
            slot = self._slots.get(slot_key)
            if slot is None:
                slot = self._slots[slot_key] = Slot(*slot_key)
            slot.add(entry)

    def _cost(self, atom: Atom) -> float:
        """What anchoring on ``atom`` would cost a message that hits it (see Slot.cost)."""
        slot = self._slots.get((atom.field.section, atom.field.key))
        return (slot or EMPTY_SLOT).cost(atom)

    def unregister(self, key: K) -> None:
        """Forget a link; unknown keys are ignored (a detach may race a refusal)."""
        registration = self._registrations.pop(key, None)
        if registration is None:
            return
        self._arrivals.clear()  # they may name the key: keep no link alive once it is gone
        self._answers.clear()
        self._always.pop(registration, None)
        for entry in registration.entries:
            slot_key = (entry.anchor.field.section, entry.anchor.field.key)
            slot = self._slots[slot_key]
            slot.remove(entry)
            if not slot.size:
                del self._slots[slot_key]
        registration.entries = []

    # -- per message ---------------------------------------------------------------------

    def candidates(self, message: FilterMessage) -> tuple[K, ...]:
        """The links whose sets could be TRUE, in registration order; evaluates nothing.

        Every link not returned has a set that is not TRUE for this message.
        If the message or an indexed field cannot be decoded, every link is
        returned, so that evaluation counts and reports the error as before.
        """
        found, _ = self._found(message)
        return tuple(r.key for r in found)

    def arrival(self, message: FilterMessage) -> Arrival[K]:
        """The links that may match the message from now on, for a node that keeps it: the
        candidates (as :meth:`candidates`), every link registered later, less those that say no
        (:class:`~filtex_proton.matcher.arrival.Arrival`). Evaluates nothing."""
        found, _ = self._found(message)
        return self._shared_arrival(tuple([r.key for r in found]))

    def _shared_arrival(self, keys: tuple[K, ...]) -> Arrival[K]:
        """The arrival of a message whose candidates are ``keys`` now, shared with the other
        messages that have them (a queue's backlog holds a few distinct ones, many times)."""
        arrivals = self._arrivals
        arrival = arrivals.get(keys)
        if arrival is None:
            if len(arrivals) >= _ARRIVALS_KEPT + 2 * len(self._registrations):
                arrivals.clear()  # bounded: distinct candidate sets can outnumber the links
            arrival = arrivals[keys] = Arrival(self._registrations, self._seq, keys, self._weak)
        return arrival

    def answers(self, key: K) -> Mapping[Arrival[K], bool]:
        """``answers[arrival]`` is ``arrival.may_match(key)``, worked out once per arrival while
        the registrations stay as they are: for a scan of many kept messages for one link, a
        dict lookup a message instead of a call (messages share arrivals)."""
        answers = self._answers.get(key)
        if answers is None:
            answers = _Answers(key)
            if key in self._registrations:  # keep nothing for a key that is not a link
                self._answers[key] = answers
        return answers

    def order(self, key: K) -> int:
        """When ``key`` registered: a number that grows with each registration (round robin in
        registration order, :meth:`Arrival.links`)."""
        return self._registrations[key].seq

    def verdict(self, key: K, message: FilterMessage) -> Verdict:
        """Evaluate one registered link for one message (always by its ``matches``: a
        queue also asks about messages that arrived before the link did)."""
        link_filter = self._registrations[key].link_filter
        return Verdict.MATCHED if link_filter is None else verdict(link_filter, message)

    def match(self, message: FilterMessage) -> NodeMatch[K]:
        """Every link whose filter set is TRUE for the message (a topic's publish)."""
        found, fell_back = self._found(message)
        matched: list[K] = []
        over: list[K] = []
        for registration in found:
            link_filter = registration.link_filter
            if link_filter is None:
                matched.append(registration.key)
            elif registration.exact and not fell_back:  # the index's hit is the verdict
                stats = link_filter.filter_set.stats
                stats.evaluations += 1
                stats.matches += 1
                matched.append(registration.key)
            else:
                # verdict(), inlined: a call per set made residue sets (every set evaluated)
                # 15-20% slower (bench_matcher --quick, docs/PERFORMANCE.md)
                stats = link_filter.filter_set.stats
                before = stats.budget_exceeded
                if link_filter.matches(message):
                    matched.append(registration.key)
                elif stats.budget_exceeded != before:
                    over.append(registration.key)
        return NodeMatch(tuple(matched), tuple(over), len(found))

    def ruled_out(self, key: K) -> int:
        """Messages since ``key`` registered for which the index ruled it out, unevaluated."""
        registration = self._registrations[key]
        return self.stats.messages - registration.since - registration.candidate

    def conditions(self) -> dict[K, Condition]:
        """Each registered key's indexed condition (for tests and diagnostics)."""
        return {key: ALWAYS if r.always else tuple((e.anchor, *e.rest) for e in r.entries)
                for key, r in self._registrations.items()}

    def _found(self, message: FilterMessage) -> tuple[list[Registration[K]], bool]:
        """The candidates, in registration order, and whether the index could not be used
        (an undecodable message or field: every set is a candidate, evaluated as usual)."""
        stats = self.stats
        stats.messages += 1
        fell_back = False
        try:  # no indexed field: the message need not even be scanned
            found = self._indexed(message.view) if self._slots else {}
        except Exception:  # an undecodable message or field: let every set see it
            stats.fallbacks += 1
            fell_back = True
            result = list(self._registrations.values())
        else:
            if not found:  # already in registration order: no sort (sets with no index)
                result = list(self._always)
            else:
                if self._always:
                    found.update(self._always)
                result = list(found)
                if len(result) > 1:
                    result.sort(key=_by_seq)
        for registration in result:
            registration.candidate += 1
        stats.candidates += len(result)
        return result, fell_back

    def _indexed(self, view: MessageView) -> dict[Registration[K], None]:
        found: dict[Registration[K], None] = {}
        cache: dict[tuple[Section, Any], Any] = {}
        numbers: dict[tuple[Section, Any], Any] = {}
        field = view.field
        for slot_key, slot in self._slots.items():
            raw = cache[slot_key] = field(slot.section, slot.key)
            if slot.simple and type(raw) is str:  # slot.hits' first case, without the call
                hits = slot.eq_sql.get(raw, NO_ENTRIES)
            else:
                hits = slot.hits(raw)
            if not hits:
                continue
            for entry in hits:
                registration = entry.registration
                if registration not in found and (
                        not entry.rest or _rest_holds(entry.rest, view, cache, numbers)):
                    found[registration] = None
        return found


def _rest_holds(rest: tuple[Atom, ...], view: MessageView, cache: dict[tuple[Section, Any], Any],
                numbers: dict[tuple[Section, Any], Any]) -> bool:
    """Whether every atom of an entry's rest holds, reading each field at most once per
    message (``cache``) and a range's number at most once (``numbers``)."""
    for atom in rest:
        ref = atom.field
        rest_key = (ref.section, ref.key)
        value = cache.get(rest_key, _UNREAD)
        if value is _UNREAD:
            value = cache[rest_key] = view.field(ref.section, ref.key)
        if type(atom) is FieldRange:  # the usual rest: its number once
            number = numbers.get(rest_key, _UNREAD)
            if number is _UNREAD:
                number = numbers[rest_key] = number_value(with_default(ref, value))
            if number is None or (atom.low is not None and number < atom.low) or (
                    atom.high is not None and number > atom.high):
                return False
        elif not holds(atom, value):
            return False
    return True


_UNREAD: Final = object()
_ARRIVALS_KEPT: Final = 64
"""Distinct shared arrivals kept beyond twice the links (then the cache starts again)."""
_ANSWERS_KEPT: Final = 64
"""Answers kept per key (then its cache starts again)."""


_by_seq: Final = operator.attrgetter("seq")
