"""AST to closures: parse and compile once per link, evaluate per message.

Each node becomes a Python closure ``(view) -> value``; evaluation never walks
the tree. Constant sub-expressions are folded at compile time, and the common
shapes (a field compared with a constant, IN over constant strings, LIKE with a
constant pattern) get closures that test the usual types inline and fall back
to :mod:`filtex_proton.sql.values` for everything else, so the fast path and
the general semantics cannot drift apart.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final

from proton import byte, int32, short, symbol, timestamp, ubyte, uint, ulong, ushort

from filtex_proton.amqp.types import HEADER_DEFAULTS, Kind, kind_of
from filtex_proton.amqp.view import MISSING, MessageView, Section
from filtex_proton.sql import ast, values
from filtex_proton.sql.dialects import AMQP_SQL, Dialect
from filtex_proton.sql.functions import understood
from filtex_proton.sql.like import LikeError, compile_like
from filtex_proton.sql.visitor import Visitor

__all__ = ["Evaluator", "compile_expression"]

Evaluator = Callable[[MessageView], Any]

_TEXT_TYPES: Final = frozenset({str, symbol})
_INT_TYPES: Final = frozenset({int, ubyte, ushort, uint, ulong, byte, short, int32, timestamp})
_PY_OPS: Final[dict[str, Callable[[Any, Any], bool]]] = {
    "=": operator.eq, "<>": operator.ne, "!=": operator.ne, ">": operator.gt,
    ">=": operator.ge, "<": operator.lt, "<=": operator.le,
}


_NO_MESSAGE: Final[Any] = None  # what constant folding evaluates against


def _constant(value: Any) -> Evaluator:
    return lambda view: value


def _entries(value: Any) -> Any:
    """The map a map reference looks into: a described map's too, as a positional
    reference looks into a described list (§6.4.4.5)."""
    return value.value if kind_of(value) is Kind.DESCRIBED else value


def _step(value: Any, reference: ast.Reference, index: Any) -> Any:
    """One map or positional reference applied to a value (§6.4.4.5); NULL if it misses."""
    if isinstance(reference, ast.Key):
        value = _entries(value)
        return value.get(reference.name) if isinstance(value, dict) else None
    if value is None or index is None or kind_of(index) is not Kind.INTEGER:
        return None
    kind = kind_of(value)
    if kind is Kind.DESCRIBED:
        value, kind = value.value, kind_of(value.value)
    if kind is Kind.ARRAY:
        value = value.elements
    elif kind is not Kind.LIST:
        return None
    return value[index] if 0 <= index < len(value) else None


class _Compiler(Visitor[Evaluator]):
    """Each handler returns the node's closure; dispatch happens here, at compile time only."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.folded: dict[int, ast.Literal | None] = {}

    # -- entry ----------------------------------------------------------------
    def compile(self, node: ast.Expr) -> Evaluator:
        folded = self.fold(node)
        if folded is not None:
            return _constant(folded.value)
        return self.visit(node)

    def fold(self, node: ast.Expr) -> ast.Literal | None:
        """The constant a node always evaluates to, if it reads nothing from the message."""
        key = id(node)
        if key not in self.folded:
            self.folded[key] = self._fold(node)
        return self.folded[key]

    def _fold(self, node: ast.Expr) -> ast.Literal | None:
        if isinstance(node, ast.Literal):
            return node
        if isinstance(node, ast.Field | ast.Alias | ast.Exists):
            return None
        if isinstance(node, ast.Call):
            function = understood(node.name, node.vendor)
            if function is None:
                return ast.Literal(None, pos=node.pos)  # §6.4.4.3, whatever the arguments
            if not function.deterministic:
                return None
        for part in ast.children(node):
            if not isinstance(part, ast.Key | ast.Index) and self.fold(part) is None:
                return None
        try:
            value = self.visit(node)(_NO_MESSAGE)  # reads nothing from it
        except Exception:  # leave it to run time, where errors are NULL
            return None
        return ast.Literal(value, pos=node.pos)

    # -- leaves ---------------------------------------------------------------
    def visit_literal(self, node: ast.Literal) -> Evaluator:
        return _constant(node.value)

    def visit_field(self, node: ast.Field) -> Evaluator:
        section, name = node.section, node.name
        default = HEADER_DEFAULTS.get(name) if section is Section.HEADER else None

        def read(view: MessageView) -> Any:
            entries = view.section(section)
            return default if entries is None else entries.get(name, default)

        base: Evaluator = self._path(read, node.path) if node.path else read
        convert = self.dialect.value_view
        if convert is None:
            return base

        def converted(view: MessageView) -> Any:
            value = base(view)
            return None if value is None else convert(value)

        return converted

    def _path(self, read: Evaluator, path: tuple[ast.Reference, ...]) -> Evaluator:
        steps = [(ref, self.compile(ref.index) if isinstance(ref, ast.Index) else None)
                 for ref in path]

        def follow(view: MessageView) -> Any:
            value = read(view)
            for reference, index in steps:
                if value is None:
                    return None
                value = _step(value, reference, None if index is None else index(view))
            return value

        return follow

    def visit_alias(self, node: ast.Alias) -> Evaluator:
        spec = self.dialect.aliases[node.name]
        convert = self.dialect.value_view

        def read(view: MessageView) -> Any:
            def lookup(section: Section, name: str) -> Any:
                value = view.field(section, name)
                if value is MISSING and section is Section.HEADER:
                    return HEADER_DEFAULTS.get(name, MISSING)
                return value

            value = spec.resolve(lookup)
            return value if value is None or convert is None else convert(value)

        return read

    def visit_exists(self, node: ast.Exists) -> Evaluator:
        target = node.field
        if isinstance(target, ast.Alias):
            reads = self.dialect.aliases[target.name].reads
            return lambda view: any(view.has_field(s, n) for s, n in reads)
        section, name, path = target.section, target.name, target.path
        if not path:
            return lambda view: view.has_field(section, name)
        steps = [(ref, self.compile(ref.index) if isinstance(ref, ast.Index) else None)
                 for ref in path]

        def exists(view: MessageView) -> bool:
            value = view.field(section, name)
            if value is MISSING:
                return False
            for reference, index in steps:
                if isinstance(reference, ast.Key):
                    value = _entries(value)
                    if not isinstance(value, dict) or reference.name not in value:
                        return False
                    value = value[reference.name]
                else:
                    position = None if index is None else index(view)
                    if value is None or position is None:
                        return False
                    probe = _step(value, reference, position)
                    if probe is None and not _in_range(value, position):
                        return False
                    value = probe
            return True

        return exists

    # -- logic ----------------------------------------------------------------
    def visit_and(self, node: ast.And) -> Evaluator:
        parts = tuple(self.compile(o) for o in node.operands)
        if len(parts) == 2:
            first, second = parts

            def and2(view: MessageView) -> bool | None:
                a = first(view)
                if a is False:
                    return False
                b = second(view)
                if b is False:
                    return False
                return True if a is True and b is True else None

            return and2

        return _junction(parts, decisive=False)

    def visit_or(self, node: ast.Or) -> Evaluator:
        return _junction(tuple(self.compile(o) for o in node.operands), decisive=True)

    def visit_not(self, node: ast.Not) -> Evaluator:
        inner = self.compile(node.operand)

        def not_(view: MessageView) -> bool | None:
            value = inner(view)
            if value is True:
                return False
            return True if value is False else None

        return not_

    # -- predicates -------------------------------------------------------------
    def visit_compare(self, node: ast.Compare) -> Evaluator:
        op, left, right = node.op, node.left, node.right
        right_constant, left_constant = self.fold(right), self.fold(left)
        if right_constant is not None and left_constant is None:
            return self._compare_constant(op, self.compile(left), right_constant.value)
        if left_constant is not None and right_constant is None:
            return self._compare_constant(values.MIRRORED[op], self.compile(right),
                                          left_constant.value)
        first, second = self.compile(left), self.compile(right)
        general = self.dialect.compare
        return lambda view: general(op, first(view), second(view))

    def _compare_constant(self, op: str, operand: Evaluator, constant: Any) -> Evaluator:
        """``field <op> constant``: the usual value types tested inline."""
        general = self.dialect.compare
        if constant is None:
            return lambda view: None
        py_op = _PY_OPS[op]
        constant_type = type(constant)
        ordering = op not in ("=", "<>", "!=")
        if constant_type in _TEXT_TYPES and (not ordering or Kind.STRING in self.dialect.ordered):
            return _typed_compare(op, operand, constant, _TEXT_TYPES, str(constant), general)
        if constant_type in _INT_TYPES and constant_type is not timestamp:
            return _typed_compare(op, operand, constant, _INT_TYPES, int(constant), general)
        if constant_type is float:

            def compare_float(view: MessageView) -> bool | None:
                value = operand(view)
                kind = type(value)
                if kind is float or kind in _INT_TYPES:
                    # NaN on either side: = and orderings False, <> True (§6.4.2.3),
                    # which is what IEEE 754 comparison of doubles gives.
                    return py_op(float(value), constant)
                if value is None:
                    return None
                return general(op, value, constant)

            return compare_float
        return lambda view: general(op, operand(view), constant)

    def visit_is_null(self, node: ast.IsNull) -> Evaluator:
        inner = self.compile(node.operand)
        if node.negated:
            return lambda view: inner(view) is not None
        return lambda view: inner(view) is None

    def visit_like(self, node: ast.Like) -> Evaluator:
        operand = self.compile(node.operand)
        negated = node.negated
        pattern, escape = self.fold(node.pattern), None if node.escape is None else self.fold(
            node.escape)
        constant_pattern = (
            pattern is not None and isinstance(pattern.value, str)
            and (node.escape is None or (escape is not None and isinstance(escape.value, str)))
        )
        if constant_pattern:
            assert pattern is not None
            try:
                matcher = compile_like(pattern.value, None if escape is None else escape.value)
            except LikeError:  # a folded (non-literal) pattern or escape: NULL, as at run time
                return lambda view: None

            def like_constant(view: MessageView) -> bool | None:
                value = operand(view)
                if type(value) in _TEXT_TYPES:
                    return matcher(value) is not negated
                text = values.text_of(value)
                return None if text is None else matcher(text) is not negated

            return like_constant
        pattern_of = self.compile(node.pattern)
        escape_of = None if node.escape is None else self.compile(node.escape)

        def like_dynamic(view: MessageView) -> bool | None:
            text = values.text_of(operand(view))
            pattern_text = values.text_of(pattern_of(view))
            escape_char = None
            if escape_of is not None:
                escape_char = values.text_of(escape_of(view))
                if escape_char is None:
                    return None
            if text is None or pattern_text is None:
                return None
            try:
                return compile_like(pattern_text, escape_char)(text) is not negated
            except LikeError:
                return None

        return like_dynamic

    def visit_in(self, node: ast.In) -> Evaluator:
        operand = self.compile(node.operand)
        negated = node.negated
        items = tuple(self.compile(item) for item in node.items)
        equal_to = self.dialect.compare

        def in_general(view: MessageView) -> bool | None:
            value = operand(view)
            if value is None:
                return None
            result: bool | None = False
            for item in items:
                equal = equal_to("=", value, item(view))
                if equal is True:
                    return not negated
                if equal is None:
                    result = None
            return result if result is None else negated

        constants = [self.fold(item) for item in node.items]
        if all(c is not None and type(c.value) in _TEXT_TYPES for c in constants):
            members = frozenset(str(c.value) for c in constants if c is not None)

            def in_strings(view: MessageView) -> bool | None:
                value = operand(view)
                if type(value) in _TEXT_TYPES:
                    return (value in members) is not negated
                return in_general(view)

            return in_strings
        return in_general

    def visit_between(self, node: ast.Between) -> Evaluator:
        operand, low, high = (self.compile(n) for n in (node.operand, node.low, node.high))
        negated = node.negated
        compare = self.dialect.compare

        def between(view: MessageView) -> bool | None:
            value = operand(view)
            above = compare(">=", value, low(view))
            if above is False:
                return negated
            below = compare("<=", value, high(view))
            if below is False:
                return negated
            if above is True and below is True:
                return not negated
            return None

        return between

    # -- expressions ------------------------------------------------------------
    def visit_unary(self, node: ast.Unary) -> Evaluator:
        inner, op = self.compile(node.operand), node.op
        return lambda view: values.negate(op, inner(view))

    def visit_binary(self, node: ast.Binary) -> Evaluator:
        left, right, op = self.compile(node.left), self.compile(node.right), node.op
        if op == "+":
            add = values.concat_or_add
            return lambda view: add(left(view), right(view))
        arithmetic = values.arithmetic
        return lambda view: arithmetic(op, left(view), right(view))

    def visit_call(self, node: ast.Call) -> Evaluator:
        function = understood(node.name, node.vendor)
        if function is None:
            return _constant(None)  # §6.4.4.3: a function not understood evaluates to NULL
        apply = function.apply
        args = tuple(self.compile(a) for a in node.args)
        if not args:
            return lambda view: apply()
        if len(args) == 1:
            (only,) = args

            def call1(view: MessageView) -> Any:
                value = only(view)
                return None if value is None else apply(value)

            return call1

        def call_n(view: MessageView) -> Any:
            evaluated = [a(view) for a in args]
            return None if any(v is None for v in evaluated) else apply(*evaluated)

        return call_n


def _typed_compare(
    op: str, operand: Evaluator, constant: Any, fast_types: frozenset[type], fast_constant: Any,
    general: Callable[[str, Any, Any], bool | None],
) -> Evaluator:
    """``value <op> constant`` with the usual value types compared inline by Python
    (exact for strings and integers) and everything else by the dialect's rules."""
    py_op = _PY_OPS[op]

    def compare(view: MessageView) -> bool | None:
        value = operand(view)
        if type(value) in fast_types:
            return py_op(value, fast_constant)
        if value is None:
            return None
        return general(op, value, constant)

    return compare


def _junction(parts: tuple[Evaluator, ...], *, decisive: bool) -> Evaluator:
    """AND (``decisive=False``) or OR (``decisive=True``) in three-valued logic:
    the decisive value wins at once; otherwise any non-boolean makes it NULL."""
    neutral = not decisive

    def junction(view: MessageView) -> bool | None:
        result: bool | None = neutral
        for part in parts:
            value = part(view)
            if value is decisive:
                return not neutral
            if value is not neutral:
                result = None
        return result

    return junction


def _in_range(value: Any, position: Any) -> bool:
    if kind_of(position) is not Kind.INTEGER:
        return False
    if kind_of(value) is Kind.DESCRIBED:
        value = value.value
    if kind_of(value) is Kind.ARRAY:
        value = value.elements  # a tuple in proton's Array
    return isinstance(value, list | tuple) and bool(0 <= position < len(value))


def compile_expression(node: ast.Expr, dialect: Dialect = AMQP_SQL) -> Evaluator:
    """A closure computing the node's value (not yet reduced to a truth value)."""
    return _Compiler(dialect).compile(node)
