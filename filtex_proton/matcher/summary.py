"""What a batch of messages holds in a few fields, small enough to keep beside the batch.

A stream keeps one :class:`BatchSummary` per segment: for each *tracked* field, the value keys
its messages have (exactly, up to :data:`EXACT_KEYS` distinct ones, then in a Bloom filter),
the range of its numbers and whether it was ever absent, null or set. Given a link's
:class:`~filtex_proton.matcher.atoms.Condition` (what its filter set requires, the same the
node matcher indexes), :meth:`BatchSummary.may_match` says whether any message of the batch
could match; when it says no, the whole batch is skipped unread.

Exactness rests on the matcher's rule (a condition is implied by the set being TRUE) and on
one more: a summary never says no for a field it did not track, nor for a message whose field
it could not read. It may say yes for a batch with no match (a Bloom false positive, values
of two alternatives in different messages); the evaluation then decides as usual.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, cast

from proton import Described

from filtex_proton.amqp.decode import decode_value
from filtex_proton.amqp.encode import encode_value
from filtex_proton.amqp.view import MISSING, Section
from filtex_proton.matcher.atoms import (
    Atom,
    Condition,
    FieldEquals,
    FieldExists,
    FieldNotNull,
    FieldNull,
    FieldPrefix,
    FieldRange,
    FieldRef,
    number_value,
    value_key,
    with_default,
)
from filtex_proton.plugin import FilterMessage

__all__ = ["BLOOM_BITS", "EXACT_KEYS", "BatchSummary", "FieldValues", "tracked_fields"]

EXACT_KEYS: Final = 64
"""Distinct value keys a field keeps exactly; beyond, they go into its Bloom filter."""
BLOOM_BITS: Final = 8192
"""A field's Bloom filter: 1 KiB, 3 hashes; about 1% false positives at 900 distinct keys."""
_HASHES: Final = 3
_FORMAT: Final = 1
"""The encoding's version (:meth:`BatchSummary.encode`)."""
_SECTIONS: Final = {section.value: section for section in Section}


def tracked_fields(condition: Condition) -> set[FieldRef]:
    """The fields a condition's atoms read: what a summary must track to judge it."""
    return {atom.field for conjunction in condition for atom in conjunction}


def _bloom_positions(key: Hashable) -> tuple[int, ...]:
    """Where a key sets bits: stable across processes (a key's ``hash`` is not), since a
    summary is written to disk with its segment."""
    digest = hashlib.blake2b(repr(key).encode(), digest_size=4 * _HASHES).digest()
    return tuple(int.from_bytes(digest[4 * i: 4 * i + 4], "little") % BLOOM_BITS
                 for i in range(_HASHES))


@dataclass(slots=True)
class FieldValues:
    """What one field held across the batch."""

    keys: set[Hashable] | None = field(default_factory=set)
    """The distinct value keys (:func:`value_key`), or None once they went into ``bloom``."""
    bloom: bytearray | None = None
    low: float | None = None
    high: float | None = None
    """The range of its numbers (:func:`number_value`), None when it held none."""
    present: bool = False
    """In the message (a map entry holding null counts), at least once."""
    null: bool = False
    """Absent or null (after the header's defaults), at least once."""
    set_: bool = False
    """Not null, at least once."""
    unsure: bool = False
    """A message's field could not be read: nothing may be ruled out."""

    def add(self, ref: FieldRef, raw: Any) -> None:
        if raw is not MISSING:
            self.present = True
        value = with_default(ref, raw)
        if value is None:
            self.null = True
            return
        self.set_ = True
        if ref.rules == "property":
            while isinstance(value, Described):
                value = value.value
        key = value_key(value, ref.rules)
        if key is not None:
            self._add_key(key)
        number = number_value(value)
        if number is not None:
            self.low = number if self.low is None else min(self.low, number)
            self.high = number if self.high is None else max(self.high, number)

    def _add_key(self, key: Hashable) -> None:
        keys = self.keys
        if keys is not None:
            keys.add(key)
            if len(keys) <= EXACT_KEYS:
                return
            self.keys = None
            self.bloom = bytearray(BLOOM_BITS // 8)
            for known in keys:
                self._set_bits(known)
            return
        self._set_bits(key)

    def _set_bits(self, key: Hashable) -> None:
        bloom = self.bloom
        assert bloom is not None
        for position in _bloom_positions(key):
            bloom[position >> 3] |= 1 << (position & 7)

    def may_have_key(self, wanted: Iterable[Hashable]) -> bool:
        keys = self.keys
        if keys is not None:
            return not keys.isdisjoint(wanted)
        bloom = self.bloom
        assert bloom is not None
        return any(all(bloom[p >> 3] & (1 << (p & 7)) for p in _bloom_positions(key))
                   for key in wanted)

    def may_hold(self, atom: Atom) -> bool:
        """Whether some message of the batch may satisfy ``atom`` (on this field)."""
        if self.unsure:
            return True
        kind = type(atom)
        if kind is FieldEquals:
            assert isinstance(atom, FieldEquals)
            return self.set_ and self.may_have_key(atom.keys)
        if kind is FieldRange:
            assert isinstance(atom, FieldRange)
            return self.low is not None and self.high is not None and (
                atom.low is None or self.high >= atom.low) and (
                atom.high is None or self.low <= atom.high)
        if kind is FieldPrefix:
            assert isinstance(atom, FieldPrefix)
            if self.keys is None:
                return self.set_
            return any(type(key) is tuple and key[0] == "s" and key[1].startswith(atom.prefix)
                       for key in self.keys)
        if kind is FieldNull:
            return self.null
        if kind is FieldNotNull:
            return self.set_
        if kind is FieldExists:
            return self.present
        return True

    def as_list(self) -> list[Any]:
        keys = None if self.keys is None else [list(cast(tuple[Any, ...], key))
                                                for key in sorted(self.keys, key=repr)]
        bloom = None if self.bloom is None else bytes(self.bloom)
        return [keys, bloom, self.low, self.high, self.present, self.null, self.set_,
                self.unsure]

    @classmethod
    def from_list(cls, items: list[Any]) -> FieldValues:
        keys, bloom, low, high, present, null, set_, unsure = items
        return cls(None if keys is None else {tuple(key) for key in keys},
                   None if bloom is None else bytearray(bloom), low, high, present, null, set_,
                   unsure)


class BatchSummary:
    """The tracked fields' values over a batch of messages (one stream segment)."""

    __slots__ = ("_by_place", "fields", "messages")

    def __init__(self, refs: Iterable[FieldRef] = (), *,
                 fields: dict[FieldRef, FieldValues] | None = None, messages: int = 0) -> None:
        self.fields = {ref: FieldValues() for ref in refs} if fields is None else fields
        self.messages = messages
        # Each (section, key) is read once per message, however many rules track it.
        self._by_place: dict[tuple[Section, Any], list[tuple[FieldRef, FieldValues]]] = {}
        for ref, values in self.fields.items():
            self._by_place.setdefault((ref.section, ref.key), []).append((ref, values))

    def add(self, message: FilterMessage) -> None:
        """Take one message's tracked fields into the summary."""
        self.messages += 1
        for (section, key), tracked in self._by_place.items():
            try:
                raw = message.view.field(section, key)
            except Exception:  # an undecodable field: this batch rules nothing out on it
                for _, values in tracked:
                    values.unsure = True
                continue
            for ref, values in tracked:
                values.add(ref, raw)

    def may_match(self, condition: Condition) -> bool:
        """Whether a message of the batch may satisfy ``condition``: some alternative whose
        every atom on a tracked field may hold."""
        fields = self.fields
        for conjunction in condition:
            for atom in conjunction:
                values = fields.get(atom.field)
                if values is not None and not values.may_hold(atom):
                    break
            else:
                return True
        return False

    # -- kept on disk with its segment ---------------------------------------------------

    def encode(self) -> bytes:
        """The summary as one AMQP list (the codec keeps symbols, ulongs and floats apart)."""
        entries = [[ref.section.value, ref.key, ref.rules, values.as_list()]
                   for ref, values in self.fields.items()]
        return encode_value([_FORMAT, self.messages, entries])

    @classmethod
    def decode(cls, data: bytes) -> BatchSummary:
        """The summary :meth:`encode` wrote. Raises ``ValueError`` on anything else."""
        try:
            (version, messages, entries), _ = decode_value(data)
            if version != _FORMAT:
                raise ValueError(f"summary format {version!r}")
            fields = {FieldRef(_SECTIONS[section], key, rules): FieldValues.from_list(values)
                      for section, key, rules, values in entries}
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"not a segment summary: {exc}") from None
        return cls(fields=fields, messages=messages)
