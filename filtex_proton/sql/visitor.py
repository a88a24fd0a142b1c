"""One visitor protocol for the readers of the SQL AST (as sqlglot's generator).

Every reader of an expression tree -- the compiler, the reference interpreter,
the printer, the pushdown to JMS selectors and the Spark translation -- is a
subclass of :class:`Visitor`, with one ``visit_<snake_case_class>`` method per
expression class of :mod:`filtex_proton.sql.ast`. The rule it enforces:

* the base declares one abstract handler per member of :data:`ast.Expr`, and
  this module refuses to import when the two disagree, so a new node class needs
  a handler declared here first;
* a reader lacking a handler is abstract: mypy rejects instantiating it, Python
  raises when it is instantiated, and tests/filtex_proton/sql/test_visitors.py
  lists every reader against every node class;
* a ``visit_*`` method naming no node class (a typo, a removed node) raises when
  the reader's class is created;
* a reader that cannot express a node says so in that node's handler (the
  pushdown keeps the piece local, the Spark translation raises
  ``UntranslatableError``): it never falls through to a guess.

Dispatch is one dict lookup keyed by the node's class, built once per reader
class. Map and positional references (:data:`ast.Reference`) are not
expressions: each reader follows them inside its ``visit_field`` (and
``visit_exists``), and the test checks that the set of reference classes is
the one those handlers know.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Final, Generic, TypeVar, get_args

from filtex_proton.dispatch import check_protocol, handler_name, handler_table, install_dispatch
from filtex_proton.sql import ast

__all__ = ["EXPRESSION_CLASSES", "Visitor", "method_name"]

R = TypeVar("R")

EXPRESSION_CLASSES: Final[tuple[type[ast.Node], ...]] = get_args(ast.Expr)
"""The node classes a reader handles, in :data:`ast.Expr`'s order."""


def method_name(node_class: type) -> str:
    """``IsNull`` -> ``visit_is_null``: the handler's name for a node class."""
    return handler_name("visit_", node_class)


class Visitor(ABC, Generic[R]):
    """A reader of expression trees: ``visit(node)`` calls the node class's handler."""

    _handlers: ClassVar[dict[type, Callable[[Any, Any], Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._handlers = handler_table(cls, "visit_", EXPRESSION_CLASSES)
        install_dispatch(cls, "visit", cls._handlers, refusal="not an expression")

    def visit(self, node: ast.Expr) -> R:
        """The handler of ``type(node)`` applied to ``node`` (``TypeError`` if there is none)."""
        raise NotImplementedError  # each reader class gets its own (install_dispatch)

    @abstractmethod
    def visit_literal(self, node: ast.Literal) -> R: ...

    @abstractmethod
    def visit_field(self, node: ast.Field) -> R: ...

    @abstractmethod
    def visit_alias(self, node: ast.Alias) -> R: ...

    @abstractmethod
    def visit_unary(self, node: ast.Unary) -> R: ...

    @abstractmethod
    def visit_binary(self, node: ast.Binary) -> R: ...

    @abstractmethod
    def visit_compare(self, node: ast.Compare) -> R: ...

    @abstractmethod
    def visit_and(self, node: ast.And) -> R: ...

    @abstractmethod
    def visit_or(self, node: ast.Or) -> R: ...

    @abstractmethod
    def visit_not(self, node: ast.Not) -> R: ...

    @abstractmethod
    def visit_is_null(self, node: ast.IsNull) -> R: ...

    @abstractmethod
    def visit_like(self, node: ast.Like) -> R: ...

    @abstractmethod
    def visit_in(self, node: ast.In) -> R: ...

    @abstractmethod
    def visit_between(self, node: ast.Between) -> R: ...

    @abstractmethod
    def visit_exists(self, node: ast.Exists) -> R: ...

    @abstractmethod
    def visit_call(self, node: ast.Call) -> R: ...


check_protocol(Visitor, "visit_", EXPRESSION_CLASSES)
