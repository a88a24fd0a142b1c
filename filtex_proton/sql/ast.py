"""The SQL filter AST: small frozen dataclasses, each with its source position.

Positions are excluded from equality so that a tree printed and parsed again
compares equal to the original. The tree is built bottom-up by the parser
without recursion; its depth is bounded by :class:`~filtex_proton.limits.Limits`
before anything walks it recursively.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from filtex_proton.amqp.view import Section
from filtex_proton.errors import SourcePosition

__all__ = [
    "Alias", "And", "Between", "Binary", "Call", "Compare", "Exists", "Expr", "Field",
    "In", "Index", "IsNull", "Key", "Like", "Literal", "Not", "Or", "Reference", "Unary",
    "children", "walk",
]


@dataclass(frozen=True, slots=True)
class Node:
    """Base of every node: where it starts in the source text."""

    pos: SourcePosition | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True, slots=True)
class Literal(Node):
    """A constant (§6.4.4.2), already typed as the AMQP value it denotes."""

    value: Any


@dataclass(frozen=True, slots=True)
class Key(Node):
    """``.name``: the entry of a map-valued field (§6.4.4.5)."""

    name: str


@dataclass(frozen=True, slots=True)
class Index(Node):
    """``[expression]``: the element of a list- or array-valued field (§6.4.4.5)."""

    index: Expr


Reference: TypeAlias = Key | Index


@dataclass(frozen=True, slots=True)
class Field(Node):
    """``[section.]name`` with map/positional references (§6.4.4.4).

    For the header and properties sections ``name`` is the canonical,
    hyphenated AMQP field name whatever spelling the text used.
    """

    section: Section
    name: str
    path: tuple[Reference, ...] = ()


@dataclass(frozen=True, slots=True)
class Alias(Node):
    """A dialect's name for a message field, e.g. JMS's ``JMSPriority``.

    The dialect says which fields it reads and how it converts them (see dialects.py).
    """

    name: str


@dataclass(frozen=True, slots=True)
class Unary(Node):
    """``+x`` or ``-x`` (§6.4.4.1.1)."""

    op: str
    operand: Expr


@dataclass(frozen=True, slots=True)
class Binary(Node):
    """``+ - * / %`` (§6.4.4.1.2); ``+`` also concatenates strings."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Compare(Node):
    """``= <> != > >= < <=`` (§6.4.2.3)."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class And(Node):
    """Conjunction of two or more predicates (§6.4.2.2), flattened."""

    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Or(Node):
    """Disjunction of two or more predicates (§6.4.2.2), flattened."""

    operands: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Not(Node):
    """``NOT predicate`` (§6.4.2.1)."""

    operand: Expr


@dataclass(frozen=True, slots=True)
class IsNull(Node):
    """``x IS [NOT] NULL`` (§6.4.3.1)."""

    operand: Expr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Like(Node):
    """``x [NOT] LIKE pattern [ESCAPE char]`` (§6.4.3.2)."""

    operand: Expr
    pattern: Expr
    escape: Expr | None = None
    negated: bool = False


@dataclass(frozen=True, slots=True)
class In(Node):
    """``x [NOT] IN (a, b, ...)`` (§6.4.3.3)."""

    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Between(Node):
    """``x [NOT] BETWEEN low AND high`` (JMS; an extension to §6)."""

    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Exists(Node):
    """``EXISTS(field)`` (§6.4.3.4): presence, not value."""

    field: Field | Alias


@dataclass(frozen=True, slots=True)
class Call(Node):
    """A function call (§6.4.4.3); ``vendor`` is set for ``prefix:name(...)``."""

    name: str
    args: tuple[Expr, ...] = ()
    vendor: str | None = None


Expr: TypeAlias = (
    Literal | Field | Alias | Unary | Binary | Compare | And | Or | Not | IsNull | Like | In
    | Between | Exists | Call
)


def children(node: Expr | Reference) -> tuple[Expr | Reference, ...]:
    """The direct sub-nodes of a node, in source order."""
    match node:
        case Literal() | Alias() | Key():
            return ()
        case Index(index=index):
            return (index,)
        case Field(path=path):
            return path
        case Unary(operand=operand) | Not(operand=operand) | IsNull(operand=operand):
            return (operand,)
        case Binary(left=left, right=right) | Compare(left=left, right=right):
            return (left, right)
        case And(operands=operands) | Or(operands=operands):
            return operands
        case Like(operand=operand, pattern=pattern, escape=escape):
            return (operand, pattern) if escape is None else (operand, pattern, escape)
        case In(operand=operand, items=items):
            return (operand, *items)
        case Between(operand=operand, low=low, high=high):
            return (operand, low, high)
        case Exists(field=target):
            return (target,)
        case Call(args=args):
            return args
    raise TypeError(f"not an AST node: {node!r}")


def walk(root: Expr) -> Iterator[tuple[Expr | Reference, int]]:
    """Every node with its depth (root = 1), pre-order, without recursion."""
    stack: list[tuple[Expr | Reference, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        stack.extend((child, depth + 1) for child in reversed(children(node)))
