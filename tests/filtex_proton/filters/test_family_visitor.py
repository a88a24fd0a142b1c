"""The filter families' visitor protocol (filtex_proton/filters/visitor.py): it covers every
filter class the package defines, and every reader of filter families handles all of them."""

from __future__ import annotations

from typing import Any

import pytest

import filtex_proton.filters  # noqa: F401  (every family's module, imported)
from filtex_proton.dispatch import handler_name
from filtex_proton.filters.base import FilterBase
from filtex_proton.filters.visitor import FAMILIES, FamilyVisitor
from filtex_proton.matcher.decompose import _Decomposer
from filtex_proton.pushdown import _Translator
from filtex_proton.spark.translate import Translator


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


def test_the_protocol_covers_every_filter_class_of_the_package() -> None:
    defined = {cls for cls in _subclasses(FilterBase)
               if cls.__module__.startswith("filtex_proton.filters.")}
    assert defined == set(FAMILIES)


@pytest.mark.parametrize(("reader", "made"), [
    (_Decomposer, _Decomposer),
    (_Translator, _Translator),
    (Translator, lambda: Translator(now_ms=0)),
], ids=["node matcher", "pushdown", "spark"])
def test_every_reader_handles_every_family(reader: type, made: Any) -> None:
    assert not getattr(reader, "__abstractmethods__", None)
    handlers = reader._family_handlers  # type: ignore[attr-defined]
    assert all(family in handlers for family in FAMILIES)
    made()


def test_a_reader_lacking_a_handler_cannot_be_made() -> None:
    handlers = {handler_name("on_", c): (lambda self, item: None) for c in FAMILIES}
    del handlers["on_topic_binding"]
    partial: Any = type("Partial", (FamilyVisitor,), handlers)
    with pytest.raises(TypeError, match="on_topic_binding"):
        partial()


def test_a_handler_naming_no_family_is_refused() -> None:
    with pytest.raises(TypeError, match="on_sql_filtr names none of the classes"):
        type("Misspelled", (FamilyVisitor,), {"on_sql_filtr": lambda self, item: None})


def test_dispatch_is_by_exact_family() -> None:
    handlers = {handler_name("on_", c): (lambda self, item: type(item).__name__)
                for c in FAMILIES}
    names: Any = type("Names", (FamilyVisitor,), handlers)()
    assert names.visit_family(object.__new__(FAMILIES[0])) == FAMILIES[0].__name__
    with pytest.raises(TypeError, match="not a filter of a known family"):
        names.visit_family(object())
