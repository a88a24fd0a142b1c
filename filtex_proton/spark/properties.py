"""Property filters and the Apache bindings as Spark predicates, TRUE or FALSE (never NULL).

The map-matching filter families (amqp:*-filter over a section, the legacy
direct, headers and topic bindings) match a field against a reference value
by §4.1's rules, not SQL's: a reference either matches or it does not. They
read fields and compare through values.py, as the SQL visitor does, but with
§4.1.1's own equality (single precision for floats, ``&p:``/``&s:``/``&&``
modifiers on strings).
"""

from __future__ import annotations

import math
from typing import Any, Final

from proton import float32

from filtex_proton.amqp.bid import as_decimal as bid_decimal
from filtex_proton.amqp.types import Kind, kind_of
from filtex_proton.amqp.view import Section
from filtex_proton.archive.columns import COLUMN_OF_FIELD
from filtex_proton.filters.apache import DirectBinding, HeadersBinding
from filtex_proton.filters.matching import Reference, TextPattern, as_float32
from filtex_proton.filters.property import PropertyFilter
from filtex_proton.spark import ir
from filtex_proton.spark.regex import java_regex_char
from filtex_proton.spark.values import (
    TEXT,
    UntranslatableError,
    Value,
    as_double,
    const_value,
    field_value,
    fits_decimal,
    in_kinds,
    int_cmp,
    slot_of,
)

__all__ = [
    "direct_predicate", "headers_predicate", "match_reference", "property_predicate",
    "topic_predicate",
]

_DOUBLE_INF: Final = ir.Lit(math.inf, "double")
_DOUBLE_NINF: Final = ir.Lit(-math.inf, "double")


def _isinf(expr: ir.Expr) -> ir.Expr:
    return ir.or_(ir.op("eq", expr, _DOUBLE_INF), ir.op("eq", expr, _DOUBLE_NINF))


def _type_is(value: Value, name: str) -> ir.Expr:
    assert value.type_name is not None
    return ir.op("eq", value.type_name, ir.Lit(name, "string"))


def _float_field_equal(value: Value, ref: float, ref32: bool) -> ir.Expr:
    """§4.1.1's floating-point rule for a float or double field value (matching.py's
    ``_float_equal``): single precision when either side is a float."""
    double = slot_of(value, "double")
    # The reference rounded to single precision (a float32 object given by a program may
    # hold any double: the engine rounds it too); None when it overflows: no match.
    single = as_float32(ref)
    branches: list[tuple[ir.Expr, ir.Expr]] = []
    # A float field: its (decoded) value is already single precision.
    branches.append((_type_is(value, "float"), ir.FALSE if single is None else
                     ir.op("eq", double, ir.Lit(single, "double"))))
    if ref32 and single is None:
        branches.append((_type_is(value, "double"), ir.FALSE))
    elif ref32:
        # A double field is rounded to single precision; one that overflows it matches nothing.
        narrowed = ir.op("cast_float", double)
        overflow = ir.and_(_isinf(narrowed), ir.not_(_isinf(double)))
        branches.append((_type_is(value, "double"),
                         ir.case([(overflow, ir.FALSE)],
                                 ir.op("eq", narrowed, ir.Lit(single, "double")))))
    else:
        branches.append((_type_is(value, "double"), ir.op("eq", double, ir.Lit(ref, "double"))))
    return ir.case(branches, ir.FALSE)


#: A text pattern's test, as the Spark operator that makes it.
_TEXT_TESTS: Final = {"exact": "eq", "prefix": "startswith", "suffix": "endswith"}


def match_reference(reference: Reference, value: Value) -> ir.Expr:
    """matching.compile_reference's matcher for a reference (typed at decode) applied to a
    field value; TRUE/FALSE (NULL = FALSE)."""
    if isinstance(reference, TextPattern):
        return _text_match(value, _TEXT_TESTS[reference.how], reference.text)
    ref = reference.value
    kind = kind_of(ref)
    if kind is Kind.INTEGER:
        exact = int(ref)
        integers = frozenset({Kind.INTEGER})
        branches = [(in_kinds(value, integers),
                     int_cmp("=", value, Kind.INTEGER, const_value(ref), Kind.INTEGER)
                     if value.kinds & integers else ir.FALSE)]
        if Kind.FLOAT in value.kinds:
            branches.append((in_kinds(value, frozenset({Kind.FLOAT})),
                             _float_field_equal(value, float(exact), False)))
        return _definitely(ir.case(branches, ir.FALSE))
    if kind is Kind.FLOAT:
        number, single = float(ref), isinstance(ref, float32)
        if math.isnan(number):
            return ir.FALSE
        branches = []
        if Kind.FLOAT in value.kinds:
            branches.append((in_kinds(value, frozenset({Kind.FLOAT})),
                             _float_field_equal(value, number, single)))
        if Kind.INTEGER in value.kinds:
            field_double = as_double(value, Kind.INTEGER)
            target: float | None = number
            if single:  # both rounded to single precision (an integer's never overflows)
                field_double = ir.op("cast_float", field_double)
                target = as_float32(number)
            branches.append((in_kinds(value, frozenset({Kind.INTEGER})),
                             ir.FALSE if target is None else
                             ir.op("eq", field_double, ir.Lit(target, "double"))))
        return _definitely(ir.case(branches, ir.FALSE))
    if kind is Kind.DECIMAL:
        expected = bid_decimal(ref)
        fits = fits_decimal(expected) if not expected.is_nan() else None
        if fits is None or Kind.DECIMAL not in value.kinds:
            return ir.FALSE  # a regular row's decimals all fit: none equals this one
        return _definitely(ir.case([(in_kinds(value, frozenset({Kind.DECIMAL})),
                                     ir.op("eq", slot_of(value, "decimal"),
                                           ir.Lit(fits, "decimal(38,18)")))], ir.FALSE))
    same: dict[Kind, tuple[str, Any]] = {
        Kind.BOOLEAN: ("boolean", ref), Kind.TIMESTAMP: ("long", int(ref) if kind is
                                                         Kind.TIMESTAMP else None),
        Kind.CHAR: ("string", str(ref)), Kind.UUID: ("binary", getattr(ref, "bytes", None)),
        Kind.BINARY: ("binary", ref if kind is Kind.BINARY else None),
    }
    if kind in same:
        if kind not in value.kinds:
            return ir.FALSE
        slot, expected = same[kind]
        spark_type = {"boolean": "boolean", "long": "bigint", "string": "string",
                      "binary": "binary"}[slot]
        return _definitely(ir.case([(in_kinds(value, frozenset({kind})),
                                     ir.op("eq", slot_of(value, slot),
                                           ir.Lit(expected, spark_type)))],  # type: ignore[arg-type]
                                   ir.FALSE))
    raise UntranslatableError(
        f"{kind.name.lower()} reference values (§4.1.2-§4.1.5) are matched by the engine")


def _text_match(value: Value, how: str, text: str) -> ir.Expr:
    if not value.kinds & TEXT:
        return ir.FALSE
    return _definitely(ir.case([(in_kinds(value, TEXT), ir.op(how, slot_of(value, "string"),
                                                                ir.Lit(text, "string")))],
                               ir.FALSE))


def _definitely(expr: ir.Expr) -> ir.Expr:
    """TRUE or FALSE, never NULL: a property filter entry either matches or it does not."""
    if isinstance(expr, ir.Lit):
        return ir.FALSE if expr.value is None else expr
    return ir.op("coalesce", expr, ir.FALSE)


def property_predicate(item: PropertyFilter) -> ir.Expr:
    """A section filter: every entry's field matches its reference (§4.1)."""
    section = item.section
    parts: list[ir.Expr] = []
    for key, reference in item.references:  # §4.1.1: a NULL reference is not among them
        parts.append(match_reference(reference, field_value(section, key)))
    return ir.and_(*parts)


def direct_predicate(item: DirectBinding) -> ir.Expr:
    """The legacy direct binding: the subject equals the binding key."""
    subject = ir.Col(COLUMN_OF_FIELD["subject"])
    return _definitely(ir.op("eq", subject, ir.Lit(item.key, "string")))


def headers_predicate(item: HeadersBinding) -> ir.Expr:
    """The legacy headers binding: all or any of its application properties present (and
    matching, where a value is given), the ``x-`` keys aside."""
    oks: list[ir.Expr] = []
    for key, reference in item.references:  # the x- keys are not among them
        value = field_value(Section.APPLICATION_PROPERTIES, key)
        assert value.struct is not None
        present = ir.isnotnull(value.struct)
        if reference is None:
            oks.append(present)
        else:
            oks.append(ir.and_(present, match_reference(reference, value)))
    return ir.and_(*oks) if item.match_all else ir.or_(*oks)


def topic_predicate(pattern: str) -> ir.Expr:
    """The legacy topic binding (apache-filters §1.2) as one anchored regex.

    The subject's words, each followed by a dot ("a.b" -> "a.b.", "" -> no words),
    are matched by one unit per pattern word: a literal word and its dot, ``*`` any
    one word (``[^.]*\\.``), ``#`` any number of words. That is the language the
    engine's segment search decides; without a subject only ``#`` matches.
    """
    units = []
    for word in pattern.split(".") if pattern else []:
        if word == "#":
            units.append("(?:[^.]*\\.)*")
        elif word == "*":
            units.append("[^.]*\\.")
        else:
            units.append("".join(java_regex_char(c) for c in word) + "\\.")
    subject = ir.Col(COLUMN_OF_FIELD["subject"])
    dotted = ir.case([(ir.op("eq", subject, ir.Lit("", "string")), ir.Lit("", "string"))],
                     ir.op("concat", subject, ir.Lit(".", "string")))
    matched = ir.op("rlike", dotted, ir.Lit(f"(?s)\\A{''.join(units)}\\z", "string"))
    return ir.case([(ir.isnull(subject), ir.Lit(pattern == "#", "boolean"))], matched)
