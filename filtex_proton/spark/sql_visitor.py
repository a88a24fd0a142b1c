"""One SQL filter's AST to a three-valued Spark predicate, one handler per node class.

The fifth reader of the SQL AST (with the compiler, the reference interpreter,
the printer and the pushdown), on the same :class:`~filtex_proton.sql.visitor.Visitor`
base, so a new node class fails here until it is handled. Constant subtrees are
folded by the engine's own compiler; message fields become
:class:`~filtex_proton.spark.values.Value` objects and operators the rules of
values.py. What Spark cannot evaluate exactly raises
:class:`~filtex_proton.spark.values.UntranslatableError` with the reason, never a guess.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final, cast

from proton import timestamp

from filtex_proton.amqp.types import HEADER_DEFAULTS, Kind, kind_of
from filtex_proton.amqp.view import Section
from filtex_proton.archive.columns import COLUMN_OF_FIELD, MAP_COLUMNS
from filtex_proton.spark import ir
from filtex_proton.spark.regex import like_predicate
from filtex_proton.spark.values import (
    TEXT,
    UntranslatableError,
    Value,
    compare,
    compare_kinds,
    const_value,
    field_value,
    in_kinds,
    jms_view,
    map_key,
    null_test,
    slot_of,
    truth,
)
from filtex_proton.sql import ast
from filtex_proton.sql.compiler import compile_expression
from filtex_proton.sql.dialects import AMQP_SQL, JMS_SELECTOR, Dialect
from filtex_proton.sql.functions import understood
from filtex_proton.sql.like import LikeError, compile_like
from filtex_proton.sql.visitor import Visitor

__all__ = ["SqlTranslator"]

_NO_VIEW: Final[Any] = None  # what constant folding evaluates against (it reads nothing)
_ARITHMETIC: Final = ("arithmetic on message fields (overflow to NaN, exact decimals) is "
                      "evaluated by the engine")


def _predicate(expr: ir.Expr) -> Value:
    return Value(frozenset({Kind.BOOLEAN, Kind.NULL}), {"boolean": expr})


def _alias(name: str) -> Value:
    """A JMS header name (dialects.JMS_HEADERS), already as the JMS type it converts to."""
    def column(field_name: str) -> ir.Expr:
        return ir.Col(COLUMN_OF_FIELD[field_name])

    def defaulted(field_name: str, default: int) -> ir.Expr:
        return ir.op("coalesce", column(field_name), ir.Lit(default, "bigint"))

    integer, string = frozenset({Kind.INTEGER}), frozenset({Kind.STRING})
    nullable_integer = integer | {Kind.NULL}
    nullable_string = string | {Kind.NULL}
    priority = HEADER_DEFAULTS["priority"]
    match name:
        case "JMSPriority":
            return Value(integer, {"long": defaulted("priority", int(priority))})
        case "JMSDeliveryMode":
            durable = ir.op("coalesce", column("durable"), ir.FALSE)
            return Value(string, {"string": ir.case([(durable, ir.Lit("PERSISTENT", "string"))],
                                                    ir.Lit("NON_PERSISTENT", "string"))})
        case "JMSTimestamp":
            return Value(nullable_integer, {"long": column("creation-time")})
        case "JMSExpiration":
            return Value(integer, {"long": defaulted("absolute-expiry-time", 0)})
        case "JMSRedelivered":
            return Value(frozenset({Kind.BOOLEAN}), {"boolean": ir.op(
                "gt", defaulted("delivery-count", 0), ir.Lit(0, "bigint"))})
        case "JMSDestination" | "JMSReplyTo" | "JMSXGroupID":
            field_name = {"JMSDestination": "to", "JMSReplyTo": "reply-to",
                          "JMSXGroupID": "group-id"}[name]
            return Value(nullable_string, {"string": column(field_name)})
        case "JMSXGroupSeq":
            return Value(nullable_integer, {"long": column("group-sequence")})
        case "JMSXDeliveryCount":
            return Value(integer, {"long": ir.op("add", defaulted("delivery-count", 0),
                                                 ir.Lit(1, "bigint"))})
    raise UntranslatableError(f"{name} is converted by the engine (its text form or the "
                              "first of two fields)")


def _exists(section: Section, name: str) -> ir.Expr:
    if section in (Section.HEADER, Section.PROPERTIES):
        return ir.isnotnull(ir.Col(COLUMN_OF_FIELD[name]))  # a composite's null field is absent
    return ir.isnotnull(ir.Get(ir.Col(MAP_COLUMNS[section]), map_key(section, name)))


def _substitute_utc(node: Any, now: timestamp) -> Any:
    """The AST with ``UTC()`` replaced by one instant (Spark reads the clock once per plan)."""
    if isinstance(node, ast.Call) and node.vendor is None and node.name == "UTC":
        return ast.Literal(now, pos=node.pos)
    if not dataclasses.is_dataclass(node):
        return node
    changes: dict[str, Any] = {}
    for item in dataclasses.fields(node):
        if item.name == "pos":
            continue
        old = getattr(node, item.name)
        new = tuple(_substitute_utc(x, now) for x in old) if isinstance(old, tuple) else \
            _substitute_utc(old, now)
        if new is not old and new != old:
            changes[item.name] = new
    return dataclasses.replace(cast(Any, node), **changes) if changes else node


def _reads_message(node: ast.Expr | ast.Reference) -> bool:
    for part, _ in ast.walk(node):  # type: ignore[arg-type]
        if isinstance(part, ast.Field | ast.Alias | ast.Exists):
            return True
        if isinstance(part, ast.Call):
            function = understood(part.name, part.vendor)
            if function is not None and not function.deterministic:
                return True
    return False


class SqlTranslator(Visitor[Value]):
    """One SQL filter's AST (AMQP SQL dialect) to a three-valued Spark predicate."""

    def __init__(self, dialect: Dialect, now_ms: int) -> None:
        if dialect not in (AMQP_SQL, JMS_SELECTOR):
            raise UntranslatableError(f"the {dialect.name} dialect is evaluated by the engine")
        self.dialect = dialect
        self.now = timestamp(now_ms)
        self.uses_utc = False

    def predicate(self, root: ast.Expr) -> ir.Expr:
        substituted = _substitute_utc(root, self.now)
        self.uses_utc = substituted != root
        return truth(self.value(substituted))

    def value(self, node: ast.Expr) -> Value:
        if isinstance(node, ast.Call) and understood(node.name, node.vendor) is None:
            return const_value(None)  # §6.4.4.3: NULL whatever its arguments read; exact
        if not _reads_message(node):
            try:
                return const_value(compile_expression(node, self.dialect)(_NO_VIEW))
            except Exception as exc:  # would be an evaluation error: NULL for the whole filter
                raise UntranslatableError(f"constant expression fails: {exc}") from None
        return self.visit(node)

    # One handler per node class; what Spark cannot evaluate exactly raises
    # UntranslatableError (the engine evaluates that filter), never a guess.

    def visit_literal(self, node: ast.Literal) -> Value:
        return const_value(node.value)  # folded in value(); here for completeness

    def visit_field(self, node: ast.Field) -> Value:
        if node.path:
            raise UntranslatableError("map and list references (a.x.y, a.x[0]) read nested "
                                      "values, which the archive keeps encoded")
        read = field_value(node.section, node.name)
        return jms_view(read) if self.dialect.value_view is not None else read

    def visit_alias(self, node: ast.Alias) -> Value:
        return _alias(node.name)

    def visit_exists(self, node: ast.Exists) -> Value:
        target = node.field
        if isinstance(target, ast.Alias):
            return _predicate(ir.or_(*(_exists(s, n)
                                       for s, n in self.dialect.aliases[target.name].reads)))
        if target.path:
            raise UntranslatableError("Exists is evaluated by the engine")
        return _predicate(_exists(target.section, target.name))

    def visit_and(self, node: ast.And) -> Value:
        return _predicate(ir.and_(*(truth(self.value(o)) for o in node.operands)))

    def visit_or(self, node: ast.Or) -> Value:
        return _predicate(ir.or_(*(truth(self.value(o)) for o in node.operands)))

    def visit_not(self, node: ast.Not) -> Value:
        return _predicate(ir.not_(truth(self.value(node.operand))))

    def visit_compare(self, node: ast.Compare) -> Value:
        return _predicate(compare(node.op, self.value(node.left), self.value(node.right),
                                  self.dialect))

    def visit_is_null(self, node: ast.IsNull) -> Value:
        test = null_test(self.value(node.operand))
        return _predicate(ir.not_(test) if node.negated else test)

    def visit_like(self, node: ast.Like) -> Value:
        return _predicate(self._like(node))

    def visit_in(self, node: ast.In) -> Value:
        found = self._in(self.value(node.operand), [self.value(i) for i in node.items])
        return _predicate(ir.not_(found) if node.negated else found)

    def visit_between(self, node: ast.Between) -> Value:
        subject = self.value(node.operand)
        inside = ir.and_(compare(">=", subject, self.value(node.low), self.dialect),
                         compare("<=", subject, self.value(node.high), self.dialect))
        return _predicate(ir.not_(inside) if node.negated else inside)

    def visit_unary(self, node: ast.Unary) -> Value:
        raise UntranslatableError(_ARITHMETIC)

    def visit_binary(self, node: ast.Binary) -> Value:
        raise UntranslatableError(_ARITHMETIC)

    def visit_call(self, node: ast.Call) -> Value:
        raise UntranslatableError(
            f"function {node.name}() on message fields is evaluated by the engine")

    def _like(self, node: ast.Like) -> ir.Expr:
        pattern = self.value(node.pattern)
        escape = None if node.escape is None else self.value(node.escape)
        if not pattern.is_const or (escape is not None and not escape.is_const):
            raise UntranslatableError("LIKE with a pattern read from the message")
        # As the compiler: a constant that is a str (char included) is the pattern;
        # anything else makes LIKE NULL.
        if not isinstance(pattern.const, str) or (
                escape is not None and not isinstance(escape.const, str)):
            return ir.NULL
        escape_text = None if escape is None else str(escape.const)
        try:
            compile_like(str(pattern.const), escape_text)
        except LikeError:
            return ir.NULL
        operand = self.value(node.operand)
        if operand.is_const:
            raise UntranslatableError("LIKE on a constant")  # folded by the engine; not reached
        text = ir.case([(in_kinds(operand, TEXT, guard=False), slot_of(operand, "string"))],
                       ir.Lit(None, "string")) if operand.type_name is not None else (
            slot_of(operand, "string") if operand.kinds & TEXT else ir.Lit(None, "string"))
        matched = like_predicate(text, str(pattern.const), escape_text)
        return ir.not_(matched) if node.negated else matched

    def _in(self, subject: Value, items: list[Value]) -> ir.Expr:
        dialect = self.dialect
        texts = [str(i.const) for i in items if i.is_const and kind_of(i.const) in TEXT]
        if len(texts) != len(items) or subject.is_const or dialect is not AMQP_SQL:
            return ir.or_(*(compare("=", subject, item, dialect) for item in items))
        # All constant strings: one isin() for text values; timestamps compare with the
        # ISO readings; every other kind is NULL (incomparable).
        branches: list[tuple[ir.Expr, ir.Expr]] = []
        if subject.kinds & TEXT:
            condition = in_kinds(subject, TEXT, guard=False)
            string = slot_of(subject, "string")
            found: ir.Expr = (ir.op("eq", string, ir.Lit(texts[0], "string")) if len(texts) == 1
                              else ir.op("isin", string, *(ir.Lit(t, "string") for t in texts)))
            branches.append((condition, found))
        if Kind.TIMESTAMP in subject.kinds and self.dialect.iso_strings:
            results = [compare_kinds("=", subject, Kind.TIMESTAMP, item, Kind.STRING,
                                      self.dialect) for item in items]
            branches.append((in_kinds(subject, frozenset({Kind.TIMESTAMP})), ir.or_(*results)))
        return ir.case(branches, ir.NULL)
