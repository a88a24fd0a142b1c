"""The index's storage: a link's registration, its entries (one per alternative of its
filter set) and the slot per field (section, key) that files them by what they require of the
field (equality buckets, prefixes, ranges by bound and width class, null tests), so that a
message reads each indexed field once and looks its value up."""

from __future__ import annotations

import bisect
import math
from collections.abc import Hashable
from typing import Any, Final, Generic, TypeAlias, TypeVar

from filtex_proton.amqp.types import HEADER_DEFAULTS
from filtex_proton.amqp.view import MISSING, Section
from filtex_proton.matcher.atoms import (
    Atom,
    FieldEquals,
    FieldNotNull,
    FieldNull,
    FieldPrefix,
    FieldRange,
    number_value,
    text_value,
    value_key,
)
from filtex_proton.plugin import LinkFilter

__all__ = ["EMPTY_SLOT", "NO_ENTRIES", "Bucket", "IndexEntry", "Registration", "Slot",
           "band_of", "bucket_key"]

K = TypeVar("K", bound=Hashable)


class Registration(Generic[K]):
    __slots__ = ("always", "candidate", "entries", "exact", "key", "link_filter", "seq",
                 "since")

    def __init__(self, key: K, link_filter: LinkFilter | None, seq: int, since: int) -> None:
        self.key = key
        self.link_filter = link_filter
        self.seq = seq
        self.since = since
        self.candidate = 0
        self.entries: list[IndexEntry[K]] = []
        self.always = False
        self.exact = False
        """A hit is a match: counted as an evaluation that matched, without evaluating."""


class IndexEntry(Generic[K]):
    """One alternative of one set: indexed by ``anchor``; ``rest`` checked on a hit."""

    __slots__ = ("anchor", "registration", "rest", "sort")

    def __init__(self, registration: Registration[K], anchor: Atom,
                 rest: tuple[Atom, ...], sort: int) -> None:
        self.registration = registration
        self.anchor = anchor
        self.rest = rest
        self.sort = sort


Bucket: TypeAlias = "dict[IndexEntry[Any], None]"
NO_ENTRIES: Final[tuple[IndexEntry[Any], ...]] = ()


class Slot:
    """The entries anchored on one field (section, key): one read per message.

    Equality under the SQL rules is the common case and has its own dict, so
    that a slot holding only such entries costs one lookup (``simple``).
    """

    __slots__ = ("bands", "default", "eq_prop", "eq_sql", "exists", "highs", "key", "lows",
                 "notnull", "null", "prefix_lengths", "prefixes", "section", "simple", "size")

    def __init__(self, section: Section, key: Any) -> None:
        self.section = section
        self.key = key
        self.default = HEADER_DEFAULTS.get(key) if section is Section.HEADER else None
        # Equality buckets are keyed by value_key, except that a string's ("s", text) is
        # kept as the plain text (no tuple to build per message; a str never equals a tuple).
        self.eq_sql: dict[Hashable, Bucket] = {}
        self.eq_prop: dict[Hashable, Bucket] = {}
        self.prefixes: dict[tuple[str, str], Bucket] = {}
        self.prefix_lengths: dict[tuple[str, int], int] = {}
        self.lows: list[tuple[float, int, IndexEntry[Any]]] = []
        """Ranges with a low bound only, by bound: a value's hits are a prefix."""
        self.highs: list[tuple[float, int, IndexEntry[Any]]] = []
        """Ranges with a high bound only, by bound: a value's hits are a suffix."""
        self.bands: dict[float, list[tuple[float, int, IndexEntry[Any]]]] = {}
        """Ranges with both bounds, by width class (a power of two above the width, or
        inf) and then by low bound: a value x can only be in those whose low lies in
        [x - class, x], found by bisection instead of a scan of every range."""
        self.null: Bucket = {}
        self.notnull: Bucket = {}
        self.exists: Bucket = {}
        self.size = 0
        self.simple = True

    def _update(self) -> None:
        self.simple = not (self.eq_prop or self.prefixes or self.lows or self.highs
                           or self.bands or self.null or self.notnull or self.exists)

    def cost(self, atom: Atom) -> float:
        """How many entries a hit on ``atom`` would share its bucket with, weighted by how
        broad the atom's kind is: the anchor of a conjunction is its cheapest atom."""
        if type(atom) is FieldEquals:
            by_key = self.eq_sql if atom.field.rules == "sql" else self.eq_prop
            return float(sum(len(by_key.get(bucket_key(key), NO_ENTRIES)) + 1 for key in atom.keys))
        if type(atom) is FieldPrefix:
            bucket = self.prefixes.get((atom.field.rules, atom.prefix), NO_ENTRIES)
            return 2.0 * (len(bucket) + 1)
        if type(atom) is FieldRange:
            if atom.low is None or atom.high is None:
                return 8.0 * (len(self.lows if atom.high is None else self.highs) + 1)
            window = band_of(atom.low, atom.high)
            band = self.bands.get(window, [])
            if window == math.inf:
                return 8.0 * (len(band) + 1)
            near = bisect.bisect_right(band, (atom.high, math.inf)) - bisect.bisect_left(
                band, (atom.low - window,))
            return 2.0 * (near + 1)
        if type(atom) is FieldNull:
            return 16.0 * (len(self.null) + 1)
        return 32.0 * (len(self._bucket(atom)) + 1)

    def _ranges(self, atom: FieldRange) -> list[tuple[float, int, IndexEntry[Any]]]:
        if atom.high is None:
            return self.lows
        if atom.low is None:
            return self.highs
        return self.bands.setdefault(band_of(atom.low, atom.high), [])

    def add(self, entry: IndexEntry[Any]) -> None:
        atom = entry.anchor
        self.size += 1
        if type(atom) is FieldEquals:
            by_key = self.eq_sql if atom.field.rules == "sql" else self.eq_prop
            for key in atom.keys:
                by_key.setdefault(bucket_key(key), {})[entry] = None
        elif type(atom) is FieldPrefix:
            rules = atom.field.rules
            self.prefixes.setdefault((rules, atom.prefix), {})[entry] = None
            length = (rules, len(atom.prefix))
            self.prefix_lengths[length] = self.prefix_lengths.get(length, 0) + 1
        elif type(atom) is FieldRange:
            bound = atom.high if atom.low is None else atom.low
            assert bound is not None
            bisect.insort(self._ranges(atom), (bound, entry.sort, entry))
        else:
            self._bucket(atom)[entry] = None
        self._update()

    def remove(self, entry: IndexEntry[Any]) -> None:
        atom = entry.anchor
        self.size -= 1
        if type(atom) is FieldEquals:
            by_key = self.eq_sql if atom.field.rules == "sql" else self.eq_prop
            for key in atom.keys:
                ikey = bucket_key(key)
                bucket = by_key[ikey]
                del bucket[entry]
                if not bucket:
                    del by_key[ikey]
        elif type(atom) is FieldPrefix:
            rules = atom.field.rules
            bucket = self.prefixes[(rules, atom.prefix)]
            del bucket[entry]
            if not bucket:
                del self.prefixes[(rules, atom.prefix)]
            length = (rules, len(atom.prefix))
            self.prefix_lengths[length] -= 1
            if not self.prefix_lengths[length]:
                del self.prefix_lengths[length]
        elif type(atom) is FieldRange:
            ranges = self._ranges(atom)
            bound = atom.high if atom.low is None else atom.low
            del ranges[bisect.bisect_left(ranges, (bound, entry.sort))]
            if not ranges and atom.low is not None and atom.high is not None:
                del self.bands[band_of(atom.low, atom.high)]
        else:
            del self._bucket(atom)[entry]
        self._update()

    def _bucket(self, atom: Atom) -> Bucket:
        if type(atom) is FieldNull:
            return self.null
        return self.notnull if type(atom) is FieldNotNull else self.exists

    def hits(self, raw: Any) -> Any:
        """The entries whose anchor holds for this field value (an iterable)."""
        value = self.default if raw is MISSING else raw
        if self.simple:
            if type(value) is str:
                return self.eq_sql.get(value, NO_ENTRIES)
            key = value_key(value, "sql")
            return NO_ENTRIES if key is None else self.eq_sql.get(bucket_key(key), NO_ENTRIES)
        found: list[IndexEntry[Any]] = []
        if raw is not MISSING:
            found.extend(self.exists)
        if value is None:
            found.extend(self.null)
            return found
        found.extend(self.notnull)
        if self.eq_sql or self.eq_prop:
            self._equal_hits(value, found)
        if self.prefixes:
            self._prefix_hits(value, found)
        if self.lows or self.highs or self.bands:
            self._range_hits(value, found)
        return found

    def _equal_hits(self, value: Any, found: list[IndexEntry[Any]]) -> None:
        """Adds the entries whose equality (SQL or property rules) holds for a non-null value."""
        if self.eq_sql:
            key = value_key(value, "sql")
            if key is not None:
                found.extend(self.eq_sql.get(bucket_key(key), NO_ENTRIES))
        if self.eq_prop:
            key = value_key(value, "property")
            if key is not None:
                found.extend(self.eq_prop.get(bucket_key(key), NO_ENTRIES))

    def _prefix_hits(self, value: Any, found: list[IndexEntry[Any]]) -> None:
        """Adds the entries whose prefix the value's text starts with: one lookup per prefix
        length registered, not one per prefix."""
        texts = {"sql": text_value(value, "sql"), "property": text_value(value, "property")}
        for rules, length in self.prefix_lengths:
            text = texts[rules]
            if text is not None and length <= len(text):
                found.extend(self.prefixes.get((rules, text[:length]), NO_ENTRIES))

    def _range_hits(self, value: Any, found: list[IndexEntry[Any]]) -> None:
        """Adds the entries whose range holds the value's number: a prefix of the low
        bounds, a suffix of the high bounds, and per width class the bands whose low
        bound lies within one width below the number."""
        number = number_value(value)
        if number is None:
            return
        lows = self.lows
        found.extend(entry for _low, _sort, entry in lows[:bisect.bisect_right(
            lows, (number, math.inf))])
        highs = self.highs
        found.extend(entry for _high, _sort, entry in highs[bisect.bisect_left(
            highs, (number, -1)):])
        for window, band in self.bands.items():
            start = 0 if window == math.inf else bisect.bisect_left(band, (number - window,))
            for _low, _sort, entry in band[start:bisect.bisect_right(band, (number, math.inf))]:
                if number <= entry.anchor.high:  # type: ignore[union-attr,operator]
                    found.append(entry)


EMPTY_SLOT: Final = Slot(Section.APPLICATION_PROPERTIES, None)


def bucket_key(key: Hashable) -> Hashable:
    """An equality bucket's key for a value_key: a string's text alone."""
    return key[1] if type(key) is tuple and key[0] == "s" else key


def band_of(low: float, high: float) -> float:
    """The width class of a range with both bounds: a power of two at least twice its
    width (so that rounding in ``x - class`` cannot lose one), or inf."""
    width = high - low
    if not math.isfinite(width):
        return math.inf
    return math.ldexp(1.0, math.frexp(width)[1] + 1)
