"""Dispatch by node class, shared by the package's visitor protocols.

A protocol (the SQL AST's :class:`~filtex_proton.sql.visitor.Visitor`, the filter families'
:class:`~filtex_proton.filters.visitor.FamilyVisitor`) declares one abstract handler per class
it covers, named ``<prefix><snake_case_class>``; each reader subclasses it. What this module
enforces for every protocol alike: the protocol declares exactly its classes' handlers (else it
refuses to import), a reader's method with the prefix that names no class is an error when
the reader's class is created, and dispatch is one dict lookup keyed by the class
(:func:`install_dispatch`: each reader class gets its own dispatch method, with its table in
a closure, and a node of no covered class fails with a ``TypeError`` naming it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["check_protocol", "handler_name", "handler_table", "install_dispatch"]


def handler_name(prefix: str, node_class: type) -> str:
    """``("visit_", IsNull)`` -> ``visit_is_null``: the handler's name for a class."""
    return prefix + re.sub(r"(?<!^)(?=[A-Z])", "_", node_class.__name__).lower()


def handler_table(reader: type, prefix: str,
                  classes: Sequence[type]) -> dict[type, Callable[..., Any]]:
    """The reader's handler per class; raises ``TypeError`` for a method with the prefix
    that names none of ``classes`` (a typo, a removed class) and is no base's (a reader of two
    protocols gets ``visit_family`` installed, which has the SQL visitor's prefix)."""
    names = {handler_name(prefix, node_class): node_class for node_class in classes}
    for name in vars(reader):
        if name.startswith(prefix) and name not in names \
                and not any(name in vars(base) for base in reader.__mro__[1:]):
            raise TypeError(f"{reader.__qualname__}.{name} names none of the classes its "
                            f"protocol covers ({', '.join(c.__name__ for c in classes)})")
    return {node_class: getattr(reader, name) for name, node_class in names.items()}


def check_protocol(protocol: type, prefix: str, classes: Sequence[type]) -> None:
    """The protocol declares exactly one abstract handler per class (called at import)."""
    expected = {handler_name(prefix, node_class) for node_class in classes}
    declared = {name for name in vars(protocol) if name.startswith(prefix)}
    abstract = {name for name in getattr(protocol, "__abstractmethods__", ())
                if name.startswith(prefix)}
    if declared != expected or abstract != expected:
        raise TypeError(f"{protocol.__module__}.{protocol.__qualname__} is out of step with "
                        f"the classes it covers: missing {sorted(expected - declared)}, "
                        f"unknown {sorted(declared - expected)}")


def install_dispatch(reader: type, method: str, table: Mapping[type, Callable[..., Any]], *,
                     refusal: str) -> None:
    """Give ``reader`` its dispatch ``method``: ``reader.method(node)`` applies the handler of
    ``type(node)`` in ``table``, and raises ``TypeError("<refusal>: <node>")`` for a class the
    table lacks (called when the reader's class is created).

    The table is a closure variable, not an attribute read on each call: the hit path is one
    dict lookup and one call (faster than a protocol method reading ``self``'s table, measured
    on every compile's and attach's visits). A reader that defines ``method`` itself is
    refused: it would be replaced here."""
    if method in vars(reader):
        raise TypeError(f"{reader.__qualname__}.{method} is its protocol's dispatch: a reader "
                        "defines handlers, not the dispatch")

    def dispatch(self: Any, node: Any) -> Any:
        try:
            handler = table[type(node)]
        except KeyError:
            raise TypeError(f"{refusal}: {node!r}") from None
        return handler(self, node)

    dispatch.__name__ = method
    dispatch.__qualname__ = f"{reader.__qualname__}.{method}"
    dispatch.__doc__ = getattr(reader, method).__doc__
    setattr(reader, method, dispatch)
