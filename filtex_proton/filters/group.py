"""Group filters: spec §3 all/any/not and the Apache or/and/not (apache-filters §3).

Unlike SQL's three-valued OR, a group is NULL as soon as any member is NULL
(§3: "the entire grouping expression evaluates to NULL and the error condition
of the first failing filter is propagated"): ``any(NULL, TRUE)`` is NULL.

Nested groups are evaluated with an explicit stack, never by recursion, so the
depth a group may have is whatever the limits allow, and the evaluation budget
is checked between members at every level.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from proton import Described, symbol

from filtex_proton.amqp.view import MessageView
from filtex_proton.errors import FilterError
from filtex_proton.filters.base import DecodeContext, EvaluationContext, Filter, FilterBase

__all__ = ["GroupFilter", "GroupOp", "GroupRule"]


class GroupOp(enum.Enum):
    """How a group combines its members' results once none of them is NULL."""

    ALL = "all"  # §3.1 all-filter, apache and-filter
    ANY = "any"  # §3.2 any-filter, apache or-filter
    NONE = "none"  # §3.3 not-filter ("none is TRUE"), apache not-filter (negation of one)

    def combine(self, any_true: bool, any_false: bool) -> bool:
        if self is GroupOp.ALL:
            return not any_false
        if self is GroupOp.ANY:
            return any_true
        return not any_true


@dataclass(slots=True)
class _Frame:
    group: GroupFilter
    members: Iterator[Filter]
    any_true: bool = False
    any_false: bool = False


class GroupFilter(FilterBase):
    """A logical combination of filters of any type, nested to any permitted depth."""

    __slots__ = ("members", "op")

    def __init__(self, descriptor: Any, value: Any, type_name: str, op: GroupOp,
                 members: Sequence[Filter]) -> None:
        super().__init__(descriptor, value, type_name)
        self.op = op
        self.members = tuple(members)

    def _evaluate(self, view: MessageView, ctx: EvaluationContext) -> bool | None:
        stack = [_Frame(self, iter(self.members))]
        while True:
            frame = stack[-1]
            member = next(frame.members, None)
            if member is None:
                result = frame.group.op.combine(frame.any_true, frame.any_false)
                stack.pop()
                if not stack:
                    return result
                frame = stack[-1]
            else:
                if ctx.over_budget():
                    return None
                if isinstance(member, GroupFilter):
                    stack.append(_Frame(member, iter(member.members)))
                    continue
                outcome = member.evaluate(view, ctx)
                if outcome is None:
                    return None  # §3: one NULL member makes every enclosing group NULL
                result = outcome
            if result:
                frame.any_true = True
            else:
                frame.any_false = True

    def normalised(self) -> Described:
        # Recursion is bounded by the group-depth limit the decoder enforced.
        return Described(symbol(self.type_name), [m.normalised() for m in self.members])


@dataclass(frozen=True, slots=True)
class GroupRule:
    """How the registry decodes one group type: its operator and arity.

    Decoding is split in two so that the registry can decode nested groups
    iteratively: :meth:`members` validates the list and returns the described
    member values; the registry decodes those, then calls :meth:`build`.
    """

    op: GroupOp
    single: bool = False
    """The Apache not-filter is a composite with exactly one field, the filter to negate."""

    def members(self, value: Any, ctx: DecodeContext) -> Sequence[Any]:
        if not isinstance(value, list):
            raise ctx.type_error(value, "a list of filters")
        if self.single and len(value) != 1:
            raise FilterError(
                f"{ctx.type_name} holds exactly one filter (the filter to negate), "
                f"not {len(value)}"
            )
        if not value:
            raise FilterError(f"{ctx.type_name} is empty: a group holds one or more filters (§3)")
        limit = ctx.limits.max_group_members
        if len(value) > limit:
            raise FilterError(
                f"{ctx.type_name} has {len(value)} members, more than {limit} "
                "(limit max_group_members)",
                limit=True,
            )
        return value

    def build(self, value: Any, members: Sequence[Filter], ctx: DecodeContext) -> GroupFilter:
        return GroupFilter(ctx.descriptor, value, ctx.type_name, self.op, members)
