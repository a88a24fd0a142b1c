"""Which links may still match a message a node keeps: the matcher's answer at arrival, kept right.

A queue asks its :class:`~filtex_proton.matcher.NodeMatcher` about a message once, when it
arrives, and keeps the message while links come and go, say no, get credit and scan. Without
help, every queue keeps the same bookkeeping beside the answer (when it was taken, who attached
since, who said no). An :class:`Arrival` is that answer with the bookkeeping in it: a link may
match the message when it was a candidate at arrival or registered after it (its set was not
indexed for the message), and has not said no since. Nothing else can match it.

Arrivals are immutable and shared: the matcher hands the same object to every message with the
same candidates until a link registers or unregisters, so a queued message costs a reference,
not a tuple of its own (docs/PERFORMANCE.md, "What a queued message costs").
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterator
from typing import Generic, Protocol, TypeVar

from filtex_proton.plugin import FilterMessage

__all__ = ["Arrival"]

K = TypeVar("K", bound=Hashable)


class _Registered(Protocol):
    """A link's registration as an arrival reads it: its registration number."""

    @property
    def seq(self) -> int: ...


class _Registry(Protocol[K]):
    """The matcher's registrations by key, in registration order (a dict)."""

    def get(self, key: K, /) -> _Registered | None: ...

    def __getitem__(self, key: K, /) -> _Registered: ...

    def __reversed__(self) -> Iterator[K]: ...


class _Source(Protocol[K]):
    """What an arrival asks of its matcher: a fresh answer, and the shared one for given keys."""

    def arrival(self, message: FilterMessage) -> Arrival[K]: ...

    def _shared_arrival(self, keys: tuple[K, ...]) -> Arrival[K]: ...


class Arrival(Generic[K]):
    """The links of one node that may match one message: ``NodeMatcher.arrival(message)``.

    ``may_match(key)`` before evaluating a link (False: its set is not TRUE for the message,
    skip it unevaluated); ``links(after)`` for the links to offer the message to;
    ``without(keys)`` once links said no; ``again(message)`` when the message changed (a
    redelivery's delivery-count, which a filter may read). A message that comes back unchanged
    keeps its arrival: links that registered meanwhile are already in it.
    """

    __slots__ = ("_keys", "_matcher", "_registry", "_since")

    def __init__(self, registry: _Registry[K], since: int, keys: tuple[K, ...],
                 matcher: Callable[[], _Source[K] | None]) -> None:
        self._registry = registry
        self._since = since
        """The matcher's registration number when the answer was taken: a link registered
        later has a higher one and was not indexed for the message."""
        self._keys = keys
        """The candidates then, in registration order, less those that said no."""
        self._matcher = matcher
        """A weak reference (so that the matcher's shared arrivals make no reference cycle
        with it)."""

    def may_match(self, key: K) -> bool:
        """Whether ``key``'s set may be TRUE for the message (False: it is not; a key that is
        not registered matches nothing)."""
        registration = self._registry.get(key)
        return registration is not None and (registration.seq > self._since
                                             or key in self._keys)

    def links(self, after: int = 0) -> list[K]:
        """The registered links that may match, in registration order from the first one
        registered after number ``after`` and round to the others: round robin, ``after`` being
        ``NodeMatcher.order(key)`` of the link served last (0: from the first)."""
        registry, since = self._registry, self._since
        found: list[tuple[int, K]] = []
        for key in self._keys:
            registration = registry.get(key)
            if registration is not None and registration.seq <= since:  # else: in _later()
                found.append((registration.seq, key))
        found += self._later()
        if after and found and found[0][0] <= after:
            split = next((i for i, (seq, _) in enumerate(found) if seq > after), len(found))
            found = found[split:] + found[:split]
        return [key for _, key in found]

    def without(self, keys: Collection[K]) -> Arrival[K]:
        """This arrival less ``keys`` (links that evaluated the message and said no, so that
        they skip it from now on). A new arrival: this one may be shared with other messages."""
        if not keys:
            return self
        remaining = tuple(key for key in self.links() if key not in keys)
        matcher = self._matcher()
        if matcher is None:  # the node is gone: nothing registers any more
            return Arrival(self._registry, _last_seq(self._registry, self._since), remaining,
                           self._matcher)
        return matcher._shared_arrival(remaining)  # links registered from now on: after it

    def again(self, message: FilterMessage) -> Arrival[K]:
        """The message's arrival taken again, as it is now (after a change a filter may read):
        what links said before no longer holds."""
        matcher = self._matcher()
        if matcher is None:
            raise ReferenceError("the arrival's matcher is gone")
        return matcher.arrival(message)

    def _later(self) -> list[tuple[int, K]]:
        """The links registered since the arrival, in registration order (the dict's)."""
        registry, since = self._registry, self._since
        later: list[tuple[int, K]] = []
        for key in reversed(registry):
            seq = registry[key].seq
            if seq <= since:
                break
            later.append((seq, key))
        later.reverse()
        return later

    def __repr__(self) -> str:
        return f"<Arrival {self.links()!r}>"


def _last_seq(registry: _Registry[K], default: int) -> int:
    """The registration number of the link registered last (``default`` with none)."""
    for key in reversed(registry):
        return registry[key].seq
    return default
