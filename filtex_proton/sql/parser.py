"""Text to AST: lark's LALR parser driving an inline AST builder.

The builder runs as the parser reduces, so the tree is built bottom-up with no
recursion however deeply the text nests; limits are then checked by an
iterative walk before anything else touches the tree. Every syntax and static
error becomes one :class:`FilterError` carrying the position, what was expected
and what was found.
"""

from __future__ import annotations

import difflib
import re
import struct
import threading
import unicodedata
from decimal import Decimal, InvalidOperation
from importlib import resources
from typing import Any, Final, cast

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from proton import ulong

from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS
from filtex_proton.amqp.view import Section
from filtex_proton.errors import FilterError, SourcePosition
from filtex_proton.limits import DEFAULT_LIMITS, Limits
from filtex_proton.sql import ast
from filtex_proton.sql.dialects import AMQP_SQL, Dialect
from filtex_proton.sql.functions import FUNCTIONS
from filtex_proton.sql.like import LikeError, compile_like
from filtex_proton.sql.values import ULONG_MAX, signed_constant

__all__ = ["check_filter", "parse"]

_SECTIONS: Final[dict[str, Section]] = {
    "header": Section.HEADER, "h": Section.HEADER,
    "properties": Section.PROPERTIES, "p": Section.PROPERTIES,
    "application_properties": Section.APPLICATION_PROPERTIES,
    "application-properties": Section.APPLICATION_PROPERTIES,
    "a": Section.APPLICATION_PROPERTIES,
    "delivery_annotations": Section.DELIVERY_ANNOTATIONS,
    "delivery-annotations": Section.DELIVERY_ANNOTATIONS,
    "d": Section.DELIVERY_ANNOTATIONS,
    "message_annotations": Section.MESSAGE_ANNOTATIONS,
    "message-annotations": Section.MESSAGE_ANNOTATIONS,
    "m": Section.MESSAGE_ANNOTATIONS,
    "footer": Section.FOOTER, "f": Section.FOOTER,
}


def _spellings(canonical: str) -> tuple[str, ...]:
    """'reply-to' is also written 'reply_to' and 'replyTo' (the spec's own examples)."""
    words = canonical.split("-")
    camel = words[0] + "".join(word.capitalize() for word in words[1:])
    return (canonical, canonical.replace("-", "_"), camel)


_WELL_KNOWN: Final[dict[Section, dict[str, str]]] = {
    section: {spelling: name for name, _ in fields for spelling in _spellings(name)}
    for section, fields in (
        (Section.HEADER, HEADER_FIELDS), (Section.PROPERTIES, PROPERTIES_FIELDS)
    )
}

# What lark calls a terminal, as a person would say it in "expected ...".
_TERMINAL_WORDS: Final[dict[str, str]] = {
    "LPAR": "'('", "RPAR": "')'", "COMMA": "','", "DOT": "'.'", "LSQB": "'['", "RSQB": "']'",
    "COLON": "':'", "COMPARISON": "a comparison operator", "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*', '/' or '%'", "IDENTIFIER": "a name", "DELIMITED_IDENTIFIER": "a [name]",
    "SECTION": "a section", "WELL_KNOWN_HYPHENATED": "a field name", "NUMBER": "a number",
    "STRING": "a string", "BINARY": "a binary constant", "$END": "the end of the expression",
}
_OPERATORS: Final = frozenset({
    "COMPARISON", "ADD_OP", "MUL_OP", "AND", "OR", "BETWEEN", "ESCAPE", "IN", "IS", "LIKE",
})
_EXPRESSION_STARTS: Final = frozenset({
    "NUMBER", "STRING", "BINARY", "IDENTIFIER", "DELIMITED_IDENTIFIER", "SECTION", "LPAR",
    "ADD_OP", "NOT", "EXISTS", "TRUE", "FALSE", "NULL", "INF", "NAN",
})


def _position(token: Token) -> SourcePosition:
    return SourcePosition(token.line or 1, token.column or 1, token.start_pos or 0)


def _pos(item: Token | ast.Node) -> SourcePosition | None:
    return _position(item) if isinstance(item, Token) else item.pos


@v_args(inline=True)
class _AstBuilder(Transformer[Token, ast.Expr]):
    """Lark callbacks, one per grammar alternative, each returning an AST node."""

    def __init__(self, dialect: Dialect) -> None:
        super().__init__()
        self.dialect = dialect

    # -- logic --------------------------------------------------------------
    def or_(self, left: ast.Expr, keyword: Token, right: ast.Expr) -> ast.Or:
        operands = left.operands if isinstance(left, ast.Or) else (left,)
        return ast.Or((*operands, right), pos=_pos(left))

    def and_(self, left: ast.Expr, keyword: Token, right: ast.Expr) -> ast.And:
        operands = left.operands if isinstance(left, ast.And) else (left,)
        return ast.And((*operands, right), pos=_pos(left))

    def not_(self, keyword: Token, operand: ast.Expr) -> ast.Not:
        return ast.Not(operand, pos=_position(keyword))

    # -- predicates -----------------------------------------------------------
    def compare(self, left: ast.Expr, op: Token, right: ast.Expr) -> ast.Compare:
        return ast.Compare(str(op), left, right, pos=_position(op))

    def is_null(self, operand: ast.Expr, is_: Token, not_: Token | None, null: Token) -> ast.IsNull:
        return ast.IsNull(operand, negated=not_ is not None, pos=_position(is_))

    def like(
        self, operand: ast.Expr, not_: Token | None, like: Token, pattern: ast.Expr,
        escape_kw: Token | None, escape: ast.Expr | None,
    ) -> ast.Like:
        node = ast.Like(operand, pattern, escape, negated=not_ is not None, pos=_position(like))
        _check_constant_like(node)
        return node

    def in_(self, operand: ast.Expr, not_: Token | None, in_: Token, *items: ast.Expr) -> ast.In:
        return ast.In(operand, items, negated=not_ is not None, pos=_position(in_))

    def between(
        self, operand: ast.Expr, not_: Token | None, between: Token, low: ast.Expr,
        and_: Token, high: ast.Expr,
    ) -> ast.Between:
        return ast.Between(operand, low, high, negated=not_ is not None, pos=_position(between))

    def exists(self, keyword: Token, target: ast.Field | ast.Alias) -> ast.Exists:
        return ast.Exists(target, pos=_position(keyword))

    # -- expressions ----------------------------------------------------------
    def binary(self, left: ast.Expr, op: Token, right: ast.Expr) -> ast.Binary:
        return ast.Binary(str(op), left, right, pos=_position(op))

    def unary(self, op: Token, operand: ast.Expr) -> ast.Expr:
        """``-5`` is one constant, folded here once, so that every reader of the tree (the
        matcher's index, the pushdown, Spark) sees a literal; a sign on anything else, or
        one whose result has no literal (an overflow), stays an operator."""
        if isinstance(operand, ast.Literal):
            folded = signed_constant(str(op), operand.value)
            if folded is not None:
                return ast.Literal(folded, pos=_position(op))
        return ast.Unary(str(op), operand, pos=_position(op))

    # -- constants (§6.4.4.2) -------------------------------------------------
    def number(self, token: Token) -> ast.Literal:
        text = str(token)
        if self.dialect.lexicon == "java":
            return ast.Literal(_java_number(text, token), pos=_position(token))
        _check_sql_number(text, token)
        if "e" in text.lower():
            value: Any = _float_constant(text, token)
        elif "." in text:
            if self.dialect.decimal_literals == "double":
                value = _float_constant(text, token)
            else:
                value = _decimal_constant(text, token)
        else:
            value = _integer_constant(text, 10, token)
        return ast.Literal(value, pos=_position(token))

    def inf(self, token: Token) -> ast.Literal:
        return ast.Literal(float("inf"), pos=_position(token))

    def nan(self, token: Token) -> ast.Literal:
        return ast.Literal(float("nan"), pos=_position(token))

    def true(self, token: Token) -> ast.Literal:
        return ast.Literal(True, pos=_position(token))

    def false(self, token: Token) -> ast.Literal:
        return ast.Literal(False, pos=_position(token))

    def null(self, token: Token) -> ast.Literal:
        return ast.Literal(None, pos=_position(token))

    def string(self, token: Token) -> ast.Literal:
        quote = token[0]
        if self.dialect.lexicon == "java" and quote == '"':
            inner = token[1:-1].replace('""', '"')
            raise FilterError(
                f"{_shorten(str(token))}: a JMS selector has no double-quoted tokens (JMS "
                f"§3.8.1.1: strings are single-quoted; Artemis reads this as a name); write "
                f"{_shorten(repr_sql_string(inner))} for the string, or {_shorten(inner)} for "
                "the property", position=_position(token))
        if self.dialect.lexicon == "sql":
            _refuse_control(token, "string constant", "any valid printable Unicode characters",
                            "§6.4.4.2.5")
        return ast.Literal(token[1:-1].replace(quote * 2, quote), pos=_position(token))

    def binary_constant(self, token: Token) -> ast.Literal:
        digits = token[2:]
        if self.dialect.lexicon == "java":
            digits = digits.rstrip("lL")  # Java's long suffix (JMS §3.8.1.1)
        elif not _SQL_BINARY.fullmatch(token):
            raise FilterError(
                f"binary constant {_shorten(str(token))} is not '0x' followed by the hex digits "
                f"0-9 and A-F (§6.4.4.2.6); write {_shorten('0x' + digits.rstrip('lL').upper())}",
                position=_position(token))
        if self.dialect.hex_literals == "integer":
            return ast.Literal(_java_long(digits, 16, token), pos=_position(token))
        if len(digits) % 2:
            raise FilterError(
                f"binary constant {_shorten(str(token))} needs pairs of hex digits (§6.4.4.2.6)",
                position=_position(token))
        return ast.Literal(bytes.fromhex(digits), pos=_position(token))

    # -- functions (§6.4.4.3) -------------------------------------------------
    def call(self, name: Token, *args: ast.Expr | None) -> ast.Call:
        arguments = tuple(a for a in args if a is not None)
        upper = name.upper()
        function = FUNCTIONS.get(upper)
        if function is None:
            # §6.4.4.3: "If a function is not understood by an implementation, it MUST be
            # evaluated as NULL". Kept as written, so the text prints back the same.
            self._identifier(name)
            return ast.Call(str(name), arguments, pos=_position(name))
        if not function.min_args <= len(arguments) <= function.max_args:
            expected = (f"{function.min_args}" if function.min_args == function.max_args
                        else f"{function.min_args} to {function.max_args}")
            raise FilterError(
                f"{upper}() takes {expected} argument(s), not {len(arguments)}",
                position=_position(name))
        node = ast.Call(upper, arguments, pos=_position(name))
        _check_constant_date(node)
        return node

    def vendor_call(self, vendor: Token, name: Token, *args: ast.Expr | None) -> ast.Call:
        arguments = tuple(a for a in args if a is not None)
        self._identifier(vendor)
        self._identifier(name)
        return ast.Call(str(name), arguments, vendor=str(vendor), pos=_position(vendor))

    # -- fields (§6.4.4.4-6) --------------------------------------------------
    def qualified_field(self, section: Token, name: Token, *path: ast.Reference) -> ast.Field:
        target = _SECTIONS[section[:-1].lower()]
        text = _name(name) if name.type == "WELL_KNOWN_HYPHENATED" else self._identifier(name)
        if target.is_composite:
            canonical = _WELL_KNOWN[target].get(text)
            if canonical is None:
                raise FilterError(_unknown_field(target, text), position=_position(name))
            text = canonical
        return ast.Field(target, text, tuple(path), pos=_position(section))

    def unqualified_field(self, name: Token, *path: ast.Reference) -> ast.Field | ast.Alias:
        text = self._identifier(name)
        if name.type == "IDENTIFIER" and text in self.dialect.aliases:
            if path:
                raise FilterError(f"{_shorten(text)} is a single value and has no entries",
                                  position=_position(name))
            return ast.Alias(text, pos=_position(name))
        return ast.Field(Section.APPLICATION_PROPERTIES, text, tuple(path), pos=_position(name))

    def map_reference(self, name: Token) -> ast.Key:
        return ast.Key(self._identifier(name), pos=_position(name))

    def positional_reference(self, index: ast.Expr) -> ast.Index:
        return ast.Index(index, pos=index.pos)

    def _identifier(self, token: Token) -> str:
        """A name's text, once it is known to be a name in this dialect (§6.4.4.6)."""
        if token.type != "IDENTIFIER":
            return _name(token)
        text = str(token)
        if text.upper() in self.dialect.reserved:
            where = ("JMS §3.8.1.1" if self.dialect.lexicon == "java"
                     else "§6.4.4.6; delimit it: [" + text + "]")
            raise FilterError(f"{text.upper()} is a reserved word, not a name ({where})",
                              position=_position(token))
        if self.dialect.lexicon == "sql" and not _is_regular_identifier(text):
            raise FilterError(
                f"{_shorten(text)!r} is not a regular identifier: one starts with a letter and "
                "holds only letters, digits and '_' (§6.4.4.6); delimit it: "
                f"[{_shorten(text)}]",
                position=_position(token))
        return text


def repr_sql_string(text: str) -> str:
    """``text`` as a single-quoted SQL string constant."""
    return "'" + text.replace("'", "''") + "'"


def _shorten(text: str, width: int = 40) -> str:
    """Offending text for a message, without quoting thousands of characters back."""
    return text if len(text) <= width else f"{text[: width - 3]}..."


def _name(token: Token) -> str:
    """An identifier's text; delimited ones lose their brackets and escapes (§6.4.4.6)."""
    if token.type == "DELIMITED_IDENTIFIER":
        _refuse_control(token, "[delimited name]", "control characters are not permitted",
                        "§6.4.4.6")
        return token[1:-1].replace("]]", "]").replace("[[", "[")
    return str(token)


_CONTROL_NAMES: Final[dict[str, str]] = {
    "\x00": "NUL", "\t": "TAB", "\n": "LF", "\x0b": "VT", "\x0c": "FF", "\r": "CR",
    "\x1b": "ESC", "\x7f": "DEL",
}


def _refuse_control(token: Token, what: str, rule: str, section: str) -> None:
    """Name the first control character inside a token and where it is.

    Nothing before it in the token is a line break (that would be the first), so
    its line is the token's and its column the token's plus its index.
    """
    for index, char in enumerate(str(token)):
        if unicodedata.category(char) == "Cc":
            name = f"U+{ord(char):04X}"
            if char in _CONTROL_NAMES:
                name += f" ({_CONTROL_NAMES[char]})"
            position = SourcePosition(token.line or 1, (token.column or 1) + index,
                                      (token.start_pos or 0) + index)
            raise FilterError(
                f"control character {name} inside a {what}, character {index + 1} of it "
                f"({rule}, {section})",
                position=position)


def _is_regular_identifier(text: str) -> bool:
    """§6.4.4.6: regular_identifier ::= <letter> {<letter> | <underscore> | <digit>}."""
    return text[:1].isalpha() and all(c.isalpha() or c.isdecimal() or c == "_" for c in text)


_SQL_NUMBER: Final = re.compile(r"\d+(?:\.\d+(?:[eE][+-]?\d+)?)?", re.ASCII)
_SQL_BINARY: Final = re.compile(r"0x[0-9A-F]+", re.ASCII)
_JAVA_OCTAL: Final = re.compile(r"0[0-7]+", re.ASCII)
_POINT: Final = re.compile(r"(\d*)\.(\d*)(.*)", re.ASCII)


def _check_sql_number(text: str, token: Token) -> None:
    """Hold a number to §6.4.4.2.1-3's productions; say which one it misses."""
    if _SQL_NUMBER.fullmatch(text):
        return
    if text[-1] in "lLfFdD":
        fix = text[:-1]
        reason = f"the suffix {text[-1]!r} is Java (JMS) syntax, not §6.4.4.2"
    elif "." not in text:
        mantissa, _, exponent = text.lower().partition("e")
        fix = f"{mantissa}.0E{exponent}"
        reason = "an approximate constant's coefficient is a decimal constant (§6.4.4.2.3)"
    else:
        whole, fraction, rest = _POINT.fullmatch(text).groups()  # type: ignore[union-attr]
        fix = f"{whole or '0'}.{fraction or '0'}{rest}"
        reason = "a decimal constant has digits on both sides of the point (§6.4.4.2.2)"
    raise FilterError(f"number {_shorten(text)}: {reason}; write {_shorten(fix)}",
                      position=_position(token))


def _integer_constant(digits: str, base: int, token: Token) -> int:
    """An integer up to 2^64-1 (§6.4.4.2.1): a long, or a ulong above 2^63-1."""
    digits = digits.lstrip("0") or "0"  # int() refuses more than 4300 digits
    value = int(digits, base) if len(digits) <= 22 else ULONG_MAX + 1
    if value > ULONG_MAX:
        raise FilterError(
            f"integer constant {_shorten(str(token))} is out of range (the largest is 2^64-1)",
            position=_position(token))
    return ulong(value) if value > 2**63 - 1 else value


def _java_long(digits: str, base: int, token: Token) -> int:
    """A hexadecimal or octal JMS literal: at most 2^63-1.

    Java reads ``0xFFFFFFFFFFFFFFFFL`` as -1 (two's complement) while Artemis and ActiveMQ
    (``Long.parseLong``) refuse it: a selector that means two things is refused here too.
    """
    value = _integer_constant(digits, base, token)
    if value > 2**63 - 1:
        raise FilterError(
            f"integer {_shorten(str(token))} is above 2^63-1, the largest hexadecimal or octal "
            "selector literal (JMS §3.8.1.1: Java would read it as a negative long, Artemis and "
            "ActiveMQ refuse it); write the value in decimal",
            position=_position(token))
    return value


def _java_number(text: str, token: Token) -> int | float:
    """A Java integer or floating-point literal, as JMS §3.8.1.1 says selectors write them.

    ``010`` is octal and ``10L`` a long; ``1.5f`` is a float, so it is rounded to
    single precision (as Java widens it), ``1.5d`` and ``7.``/``.5``/``7E3`` doubles.
    """
    suffix = text[-1] if text[-1] in "lLfFdD" else ""
    body = text[:-1] if suffix else text
    floating = suffix in ("f", "F", "d", "D") or "." in body or "e" in body.lower()
    if not floating:
        if len(body) > 1 and body[0] == "0":
            if not _JAVA_OCTAL.fullmatch(body):
                raise FilterError(
                    f"integer {_shorten(text)}: a leading 0 makes a Java integer literal octal "
                    "(JMS §3.8.1.1), and 8 and 9 are not octal digits",
                    position=_position(token))
            return _java_long(body, 8, token)
        return _integer_constant(body, 10, token)
    if suffix in ("l", "L"):
        raise FilterError(f"number {_shorten(text)}: 'L' marks an integer, and this has a "
                          "point or an exponent (JMS §3.8.1.1)", position=_position(token))
    value = _float_constant(body, token)
    if suffix in ("f", "F"):
        try:
            value = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:
            raise FilterError(f"number {_shorten(text)} is beyond the range of a float",
                              position=_position(token)) from None
    return value


def _unknown_field(section: Section, name: str) -> str:
    known = sorted({canonical for canonical in _WELL_KNOWN[section].values()})
    close = difflib.get_close_matches(name, list(_WELL_KNOWN[section]), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; the fields are {', '.join(known)}"
    return f"{_shorten(name)!r} is not a field of the {section.value} section (§6.4.4.4){hint}"


def _float_constant(text: str, token: Token) -> float:
    value = float(text)
    if value == float("inf"):
        raise FilterError(f"number {_shorten(text)} is beyond the range of a double (§6.4.4.2.3)",
                          position=_position(token))
    return value


def _decimal_constant(text: str, token: Token) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:  # pragma: no cover - the token pattern admits only numbers
        raise FilterError(f"{text} is not a number", position=_position(token)) from None
    if len(value.as_tuple().digits) > 34:
        raise FilterError(
            f"decimal constant {_shorten(text)} has more than the 34 digits of a decimal128 (§6.2)",
            position=_position(token))
    return value


def _check_constant_like(node: ast.Like) -> None:
    """A constant pattern or escape that can never work is a definitional error."""
    escape = node.escape
    if isinstance(escape, ast.Literal) and isinstance(escape.value, str) and len(escape.value) != 1:
        raise FilterError(
            f"the LIKE escape must be one character, not {escape.value!r} (§6.4.3.2)",
            position=escape.pos)
    pattern = node.pattern
    if isinstance(pattern, ast.Literal) and isinstance(pattern.value, str) and (
        escape is None or (isinstance(escape, ast.Literal) and isinstance(escape.value, str))
    ):
        try:
            compile_like(pattern.value, None if escape is None else escape.value)
        except LikeError as error:
            raise FilterError(f"invalid LIKE pattern: {error}", position=pattern.pos) from None


def _check_constant_date(node: ast.Call) -> None:
    if node.name == "DATE" and isinstance(node.args[0], ast.Literal):
        argument = node.args[0].value
        if isinstance(argument, str) and FUNCTIONS["DATE"].apply(argument) is None:
            raise FilterError(f"DATE({argument!r}): not an ISO 8601 date-time (§6.4.4.3.7)",
                              position=node.args[0].pos)


def _expected(terminals: set[str]) -> str:
    words: list[str] = []
    names = set(terminals)
    if {"NUMBER", "IDENTIFIER"} <= names:
        words.append("an expression")
        names -= _EXPRESSION_STARTS
    if len(names & _OPERATORS) > 2:
        words.append("an operator")
        names -= _OPERATORS | {"NOT"}
    words.extend(sorted(_TERMINAL_WORDS.get(n, n) for n in names))
    if len(words) > 1:
        return ", ".join(words[:-1]) + " or " + words[-1]
    return words[0] if words else "something else"


def _syntax_error(error: UnexpectedInput, text: str) -> FilterError:
    line, column = error.line, error.column
    offset = error.pos_in_stream or 0
    if isinstance(error, UnexpectedCharacters):
        char = text[offset] if offset < len(text) else ""
        if char in "'\"":
            reason = f"unterminated string: no closing {char}"
        elif char == "[":
            reason = "unterminated [delimited name]: no closing ]"
        else:
            reason = f"unexpected character {char!r}; expected {_expected(set(error.allowed))}"
    elif isinstance(error, UnexpectedToken) and error.token == "[" and (
        "DELIMITED_IDENTIFIER" in error.expected
    ):
        reason = "unterminated [delimited name]: no closing ]"
    elif isinstance(error, UnexpectedToken) and error.token.type != "$END":
        found = _shorten(str(error.token))
        reason = f"unexpected {found!r}; expected {_expected(set(error.expected))}"
    else:
        expected: set[str] = set()
        if isinstance(error, UnexpectedToken | UnexpectedEOF):
            expected = set(error.expected)
        reason = f"unexpected end of expression; expected {_expected(expected)}"
        lines = text.rstrip().splitlines() or [""]
        line, column, offset = len(lines), len(lines[-1]) + 1, len(text.rstrip())
    return FilterError(
        "syntax error: " + reason, position=SourcePosition(line, column, offset), source=text)


_PARSERS: dict[str, Lark] = {}
_PARSERS_LOCK = threading.Lock()


def _parser(dialect: Dialect) -> Lark:
    with _PARSERS_LOCK:
        parser = _PARSERS.get(dialect.name)
        if parser is None:
            grammar = resources.files("filtex_proton.sql").joinpath("grammar.lark").read_text()
            parser = Lark(grammar, parser="lalr", lexer="contextual", maybe_placeholders=True,
                          transformer=_AstBuilder(dialect))
            _PARSERS[dialect.name] = parser
        return parser


def _check_limits(root: ast.Expr, text: str, limits: Limits) -> None:
    for count, (node, depth) in enumerate(ast.walk(root), start=1):
        if count > limits.max_sql_nodes:
            raise FilterError(f"expression has more than {limits.max_sql_nodes} nodes",
                              limit=True, source=text)
        if depth > limits.max_sql_depth:
            raise FilterError(f"expression nests deeper than {limits.max_sql_depth} levels",
                              position=getattr(node, "pos", None), source=text, limit=True)
        if isinstance(node, ast.In) and len(node.items) > limits.max_in_list:
            raise FilterError(f"IN list has more than {limits.max_in_list} values",
                              position=node.pos, source=text, limit=True)


def parse(text: str, dialect: Dialect = AMQP_SQL, limits: Limits = DEFAULT_LIMITS) -> ast.Expr:
    """Parse and statically check a SQL filter or JMS selector; raise :class:`FilterError`."""
    if not isinstance(text, str):
        raise FilterError(f"a SQL filter is a string, not {type(text).__name__}")
    if len(text) > limits.max_sql_length:
        raise FilterError(f"expression is {len(text)} characters long; the limit is "
                          f"{limits.max_sql_length}", limit=True)
    if not text.strip():
        if dialect.empty_matches_all:  # JMS §3.8.1.1: an empty selector is no selector
            return ast.Literal(True)
        raise FilterError("the expression is empty")
    try:
        root = cast(ast.Expr, _parser(dialect).parse(text))
    except UnexpectedInput as error:
        raise _syntax_error(error, text) from None
    except FilterError as error:
        raise FilterError(error.reason, position=error.position, source=text,
                          limit=error.limit) from None
    _check_limits(root, text, limits)
    return root


_PREDICATES: Final = (ast.Compare, ast.IsNull, ast.Like, ast.In, ast.Between, ast.Exists,
                      ast.Field, ast.Alias)


def check_filter(root: ast.Expr, text: str, dialect: Dialect) -> None:
    """What a whole filter must be beyond an expression: in JMS (§3.8.1.1) "a selector
    is a conditional expression": every operand of AND, OR and NOT, and the whole, is
    a predicate, a boolean literal or an identifier (a boolean property to JMS),
    never a number, string or NULL. (:func:`parse` reads any expression, which the
    printer and the tests rely on.)"""
    if not dialect.conditional_only:
        return
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.And | ast.Or):
            stack.extend(node.operands)
        elif isinstance(node, ast.Not):
            stack.append(node.operand)
        elif not isinstance(node, _PREDICATES) and not (
                isinstance(node, ast.Literal) and isinstance(node.value, bool)):
            from filtex_proton.sql.printer import to_sql

            raise FilterError(
                f"{_shorten(to_sql(node))} is not a condition: a JMS selector is a conditional "
                "expression (JMS §3.8.1.1), such as a comparison, and its AND, OR and NOT "
                "operands are conditions too",
                position=node.pos, source=text)
