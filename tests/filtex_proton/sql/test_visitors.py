"""The five readers of the SQL AST share one visitor protocol.

Every concrete node class of sql/ast.py is either an expression, which every
reader handles with its own ``visit_<snake_case_class>`` method, or a map or
positional reference, which every reader follows inside ``visit_field`` and
``visit_exists``. A new node class fails here until each reader handles it.
"""

from __future__ import annotations

import inspect
from typing import Any, get_args

import pytest

from filtex_proton import pushdown
from filtex_proton.spark import sql_visitor
from filtex_proton.sql import ast, compiler, printer, reference
from filtex_proton.sql.visitor import EXPRESSION_CLASSES, Visitor, method_name

READERS: dict[str, type[Visitor[Any]]] = {
    "compiler": compiler._Compiler,
    "reference interpreter": reference._Interpreter,
    "printer": printer._Printer,
    "pushdown": pushdown._Translator,
    "spark translation": sql_visitor.SqlTranslator,
}

REFERENCE_CLASSES = {ast.Key, ast.Index}
"""What every reader's visit_field and visit_exists follow along a field's path."""


def node_classes() -> set[type]:
    """Every concrete node class defined in sql/ast.py."""
    return {
        value for value in vars(ast).values()
        if inspect.isclass(value) and issubclass(value, ast.Node) and value is not ast.Node
        and value.__module__ == ast.__name__
    }


def all_subclasses(cls: type) -> set[type]:
    found: set[type] = set()
    for sub in cls.__subclasses__():
        found |= {sub, *all_subclasses(sub)}
    return found


def test_every_node_class_is_an_expression_or_a_reference() -> None:
    classes = node_classes()
    assert set(get_args(ast.Reference)) == REFERENCE_CLASSES, (
        "a new reference class: teach every reader's visit_field and visit_exists to follow "
        "it, then add it to REFERENCE_CLASSES")
    assert set(EXPRESSION_CLASSES) == set(get_args(ast.Expr))
    orphans = classes - set(EXPRESSION_CLASSES) - REFERENCE_CLASSES
    assert not orphans, f"node classes in neither ast.Expr nor ast.Reference: {orphans}"
    assert set(EXPRESSION_CLASSES) | REFERENCE_CLASSES == classes


@pytest.mark.parametrize("reader", READERS.values(), ids=list(READERS))
def test_every_reader_handles_every_expression_class(reader: type[Visitor[Any]]) -> None:
    assert issubclass(reader, Visitor)
    missing = [name for name in map(method_name, node_classes() - REFERENCE_CLASSES)
               if getattr(reader, name, None) is None
               or getattr(getattr(reader, name), "__isabstractmethod__", False)]
    assert not missing, f"{reader.__qualname__} has no handler for {sorted(missing)}"
    assert not inspect.isabstract(reader)
    for node_class, handler in reader._handlers.items():
        assert handler is getattr(reader, method_name(node_class))


def test_the_readers_are_all_known() -> None:
    """A new reader of the AST is listed here, so that the test above covers it."""
    readers = {cls for cls in all_subclasses(Visitor) if cls.__module__.startswith("filtex_proton")}
    assert readers == set(READERS.values())


def test_a_handler_naming_no_node_class_is_refused() -> None:
    with pytest.raises(TypeError, match=r"visit_is_nul names none of the classes"):
        type("Misspelled", (Visitor,), {"visit_is_nul": lambda self, node: None})


def test_a_reader_lacking_a_handler_cannot_be_made() -> None:
    handlers = {method_name(c): (lambda self, node: None) for c in EXPRESSION_CLASSES}
    del handlers["visit_between"]
    partial: Any = type("Partial", (Visitor,), handlers)
    with pytest.raises(TypeError, match="visit_between"):
        partial()


def test_dispatch_is_by_exact_class() -> None:
    handlers = {method_name(c): (lambda self, node: type(node).__name__)
                for c in EXPRESSION_CLASSES}
    names: Any = type("Names", (Visitor,), handlers)()
    assert names.visit(ast.IsNull(ast.Literal(1))) == "IsNull"
    assert names.visit(ast.Exists(ast.Alias("JMSType"))) == "Exists"
    assert method_name(ast.IsNull) == "visit_is_null"
    with pytest.raises(TypeError, match="not an expression"):
        names.visit(ast.Key("x"))


def test_a_reader_defining_the_dispatch_is_refused() -> None:
    handlers: dict[str, Any] = {method_name(c): (lambda self, node: None)
                                for c in EXPRESSION_CLASSES}
    handlers["visit"] = lambda self, node: None
    with pytest.raises(TypeError, match="visit is its protocol's dispatch"):
        type("Own", (Visitor,), handlers)
