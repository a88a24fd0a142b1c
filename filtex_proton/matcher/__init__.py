"""A node's matcher: which of many links' filter sets are TRUE for one message.

A queue or topic with thousands of filtered links cannot afford to evaluate
every set for every message. :class:`NodeMatcher` keeps an index over what each
set *requires* of a message and, per message, reads each indexed field once,
looks its value up (a dict lookup per field for equality), and returns the
links that could match: the *candidates*. Only candidates are evaluated, by
their own :class:`~filtex_proton.plugin.LinkFilter`, so the verdict is exactly
per-link evaluation's. A node that keeps a message (a queue) keeps its
:class:`Arrival`: those candidates, kept right as links register and say no.

Exactness rests on one rule: what the index asks of a message is *implied* by
the set being TRUE under the dialect's three-valued logic and type rules
(:func:`decompose`). It may admit a message the set refuses (the evaluation
then says no), never the reverse. A set with nothing indexable is a candidate
for every message; a set that can never be TRUE (a false-filter) for none.
See docs/PLUGIN.md ("Many links on one node") and docs/SEMANTICS.md.
"""

from filtex_proton.matcher.arrival import Arrival
from filtex_proton.matcher.atoms import (
    ALWAYS,
    NEVER,
    Atom,
    Condition,
    FieldEquals,
    FieldExists,
    FieldNotNull,
    FieldNull,
    FieldPrefix,
    FieldRange,
    FieldRef,
    holds,
    value_key,
)
from filtex_proton.matcher.decompose import STREAM_FILTER_FIELD, decompose
from filtex_proton.matcher.index import MatcherStats, NodeMatch, NodeMatcher, Verdict, verdict
from filtex_proton.matcher.literals import text_prefilter
from filtex_proton.matcher.summary import BatchSummary, tracked_fields

__all__ = [
    "ALWAYS", "NEVER", "STREAM_FILTER_FIELD", "Arrival", "Atom", "BatchSummary", "Condition",
    "FieldEquals", "FieldExists", "FieldNotNull", "FieldNull", "FieldPrefix", "FieldRange",
    "FieldRef", "MatcherStats", "NodeMatch", "NodeMatcher", "Verdict", "decompose", "holds",
    "text_prefilter", "tracked_fields", "value_key", "verdict",
]
