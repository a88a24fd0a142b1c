"""Complexity limits for filters (spec §7.1), configurable, with safe defaults.

A limit refuses a filter at attach time (a :class:`~filtex_proton.errors.FilterError`
with ``limit=True``) or, for the evaluation budget, makes one message ineligible.
Every structure the engine builds is bounded by these numbers, so hostile
filters are refused by a limit, never by a ``RecursionError`` or a hang.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["DEFAULT_LIMITS", "Limits"]


@dataclass(frozen=True, slots=True)
class Limits:
    """The knobs; every one is a positive integer (or a positive float for the budget)."""

    max_filters_per_set: int = 32
    """Entries in one source filter set."""
    max_group_depth: int = 16
    """Nesting depth of group filters (all/any/not and the Apache logic filters)."""
    max_group_members: int = 64
    """Filters inside one group filter."""
    max_sql_length: int = 8192
    """Characters in one SQL or JMS selector text."""
    max_sql_nodes: int = 2048
    """AST nodes in one SQL expression (roughly: operators, operands and constants)."""
    max_sql_depth: int = 128
    """Nesting depth of one SQL expression's tree (NOT chains, operator nesting).

    Parentheses add no node and so no depth: ``((((a))))`` is as cheap as ``a``,
    and deep parentheses are bounded by ``max_sql_length``."""
    max_in_list: int = 1024
    """Values in one IN (...) list."""
    max_property_entries: int = 256
    """Entries (counted recursively through maps and lists) in one property filter."""
    eval_budget_ms: float = 50.0
    """Wall-clock budget for evaluating one filter set against one message."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"limit {f.name} must be a positive number, not {value!r}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The limit names, for configuration files and command-line flags."""
        return tuple(f.name for f in fields(cls))


DEFAULT_LIMITS = Limits()
