"""The semantics of SQL filter values (§6.2-§6.4): comparison, arithmetic, truth.

These functions are the single definition of what an operator means; the
compiler specialises them for the hot path and the reference interpreter calls
them as they are, and the two are tested against each other. Every function is
total: a value it cannot work with gives ``None`` (NULL, "unknowable", §2.1),
never an exception.
"""

from __future__ import annotations

import decimal
import math
import operator
from collections.abc import Callable
from typing import Any, Final

from proton import timestamp

from filtex_proton.amqp.types import Kind, kind_of
from filtex_proton.sql import iso8601

__all__ = [
    "LONG_MIN",
    "MAX_CONCAT_LENGTH",
    "MIRRORED",
    "NAN",
    "ULONG_MAX",
    "arithmetic",
    "as_decimal",
    "compare",
    "concat_or_add",
    "negate",
    "signed_constant",
    "truth",
]

NAN: Final = float("nan")
LONG_MIN: Final = -(2**63)
ULONG_MAX: Final = 2**64 - 1
#: The longest string ``+`` builds (spec §7.1). Without a bound, a filter of a
#: thousand concatenations of one long property, ``((a+a)+(a+a))+...``, makes a
#: string a thousand times the message's size for every message it evaluates.
MAX_CONCAT_LENGTH: Final = 65536

#: decimal128's value space (IEEE 754-2008): results beyond it overflow to NaN (§6.3.1).
DECIMAL128: Final = decimal.Context(
    prec=34, Emax=6144, Emin=-6143, rounding=decimal.ROUND_HALF_EVEN,
    traps=[decimal.Overflow, decimal.InvalidOperation, decimal.DivisionByZero],
)

NUMERIC: Final = frozenset({Kind.INTEGER, Kind.FLOAT, Kind.DECIMAL, Kind.TIMESTAMP})
TEXT: Final = frozenset({Kind.STRING, Kind.SYMBOL})
INTEGRAL: Final = frozenset({Kind.INTEGER, Kind.TIMESTAMP})

#: Kinds whose values can be ordered with > and < when both operands share the kind.
ORDERED_ALL: Final = frozenset(
    {Kind.INTEGER, Kind.FLOAT, Kind.DECIMAL, Kind.TIMESTAMP, Kind.STRING, Kind.SYMBOL,
     Kind.CHAR, Kind.BOOLEAN, Kind.BINARY, Kind.UUID}
)
#: Kinds whose values can be tested with = and <> against a value of the same kind.
EQUATABLE: Final = ORDERED_ALL


def as_decimal(value: Any) -> decimal.Decimal:
    """An exact ``Decimal`` for an integer, float or any AMQP decimal representation."""
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, int) and kind_of(value) is not Kind.DECIMAL:
        return decimal.Decimal(int(value))
    if isinstance(value, float):
        return decimal.Decimal(value)
    from filtex_proton.amqp.bid import as_decimal as from_bid

    return from_bid(value)


def truth(value: Any) -> bool | None:
    """A value used as a predicate: booleans are themselves, anything else is NULL."""
    return value if value is True or value is False else None


# ---------------------------------------------------------------------------
# comparison (§6.4.2.3)

_ORDER_OPS: Final[dict[str, Callable[[int], bool]]] = {
    "=": lambda c: c == 0,
    "<>": lambda c: c != 0,
    "!=": lambda c: c != 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def _three_way(a: Any, b: Any) -> int:
    return int(a > b) - int(a < b)


def _numeric_pair(a: Any, ka: Kind, b: Any, kb: Kind) -> tuple[Any, Any] | None:
    """Both operands in the domain the comparison happens in (§6.4.2.3 bullets 3-5).

    Integers (and timestamps, §6.3.2) compare by exact value; if either side is a
    float both become doubles; else if either is a decimal both become exact
    decimals. ``None`` means a NaN is involved.
    """
    if ka is Kind.FLOAT or kb is Kind.FLOAT:
        x = float(as_decimal(a)) if ka is Kind.DECIMAL else float(a)
        y = float(as_decimal(b)) if kb is Kind.DECIMAL else float(b)
        if math.isnan(x) or math.isnan(y):
            return None
        return x, y
    if ka is Kind.DECIMAL or kb is Kind.DECIMAL:
        dx, dy = as_decimal(a), as_decimal(b)
        if dx.is_nan() or dy.is_nan():
            return None
        return dx, dy
    return int(a), int(b)


def compare(
    op: str,
    a: Any,
    b: Any,
    *,
    incomparable: bool | None = None,
    ordered: frozenset[Kind] = ORDERED_ALL,
    iso_strings: bool = True,
) -> bool | None:
    """Apply a comparison operator with the rules of §6.4.2.3.

    NULL on either side gives NULL. NaN is "not of equal value" to anything and
    neither greater nor lesser: ``=`` and the orderings are FALSE, ``<>`` TRUE.
    Values of kinds that cannot be compared give ``incomparable`` (NULL in AMQP
    SQL per §2.1, FALSE in JMS). ``ordered`` lists the kinds that support > and <
    (JMS restricts strings and booleans to = and <>). With ``iso_strings`` a
    string compared with a timestamp is read as ISO 8601 (§6.3.2).
    """
    if a is None or b is None:
        return None
    ka, kb = kind_of(a), kind_of(b)
    decide = _ORDER_OPS[op]
    equality = op in ("=", "<>", "!=")
    if ka in NUMERIC and kb in NUMERIC:
        if not equality and (ka not in ordered or kb not in ordered):
            return incomparable
        pair = _numeric_pair(a, ka, b, kb)
        if pair is None:
            return op in ("<>", "!=")
        return decide(_three_way(*pair))
    if iso_strings and (
        (ka is Kind.TIMESTAMP and kb in TEXT) or (kb is Kind.TIMESTAMP and ka in TEXT)
    ):
        converted = iso8601.to_millis(b if ka is Kind.TIMESTAMP else a)
        if converted is None:
            return incomparable
        x, y = (int(a), converted) if ka is Kind.TIMESTAMP else (converted, int(b))
        return decide(_three_way(x, y))
    if ka in TEXT and kb in TEXT:
        if not equality and ka not in ordered:
            return incomparable
        return decide(_three_way(str(a), str(b)))
    if ka is kb and ka in EQUATABLE:
        if not equality and ka not in ordered:
            return incomparable
        if ka is Kind.UUID:
            return decide(_three_way(a.bytes, b.bytes))
        return decide(_three_way(a, b))
    return incomparable


# ---------------------------------------------------------------------------
# arithmetic (§6.3.1, §6.4.4.1)


def _integer_result(value: int, kinds: tuple[Kind, Kind], op: str) -> Any:
    """An integer result in the widest AMQP integer type, or NaN past it (§6.3.1)."""
    if not LONG_MIN <= value <= ULONG_MAX:
        return NAN
    # timestamp ± integer stays a point in time; timestamp - timestamp is a duration (long).
    if op in "+-" and (kinds[0] is Kind.TIMESTAMP) != (kinds[1] is Kind.TIMESTAMP):
        return timestamp(value)
    return value


def _float_result(value: float, a: float, b: float) -> float:
    """Overflow past double's range is NaN, not infinity (§6.3.1)."""
    if math.isinf(value) and not (math.isinf(a) or math.isinf(b)):
        return NAN
    return value


_DECIMAL_OPS: Final[dict[str, Callable[[decimal.Decimal, decimal.Decimal], decimal.Decimal]]] = {
    "+": DECIMAL128.add, "-": DECIMAL128.subtract, "*": DECIMAL128.multiply,
    "/": DECIMAL128.divide,
}


def _truncating_div(x: int, y: int) -> int:
    """Integer division rounding toward zero, as SQL and Java do."""
    quotient = abs(x) // abs(y)
    return quotient if (x < 0) == (y < 0) else -quotient


#: ``+ - *`` and ``/`` of two doubles or two integers (a zero divisor is checked before).
_FLOAT_OPS: Final[dict[str, Callable[[float, float], float]]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
}
_INTEGER_OPS: Final[dict[str, Callable[[int, int], int]]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _truncating_div,
}


def arithmetic(op: str, a: Any, b: Any) -> Any:
    """``+ - * / %`` over numbers (§6.4.4.1.2); NULL for anything else.

    Division by zero and overflow give a float NaN and never fail. The operands'
    kinds choose the domain as comparison does (§6.4.2.3): a float makes both
    doubles, else a decimal makes both exact decimals, else both are integers.
    """
    if a is None or b is None:
        return None
    ka, kb = kind_of(a), kind_of(b)
    if ka not in NUMERIC or kb not in NUMERIC:
        return None
    if op == "%":
        return _modulo(a, ka, b, kb)
    if ka is Kind.FLOAT or kb is Kind.FLOAT:
        return _float_arithmetic(op, a, ka, b, kb)
    if ka is Kind.DECIMAL or kb is Kind.DECIMAL:
        return _decimal_arithmetic(op, a, b)
    x, y = int(a), int(b)
    if op == "/" and y == 0:
        return NAN
    return _integer_result(_INTEGER_OPS[op](x, y), (ka, kb), op)


def _modulo(a: Any, ka: Kind, b: Any, kb: Kind) -> Any:
    """``%``: integers only, with the sign of the dividend (Java's and SQL's remainder)."""
    if ka not in INTEGRAL or kb not in INTEGRAL:
        return None
    x, y = int(a), int(b)
    if y == 0:
        return NAN
    return _integer_result(x - y * _truncating_div(x, y), (ka, kb), "%")


def _float_arithmetic(op: str, a: Any, ka: Kind, b: Any, kb: Kind) -> Any:
    fx = float(as_decimal(a)) if ka is Kind.DECIMAL else float(a)
    fy = float(as_decimal(b)) if kb is Kind.DECIMAL else float(b)
    if op == "/" and fy == 0.0:
        return NAN
    return _float_result(_FLOAT_OPS[op](fx, fy), fx, fy)


def _decimal_arithmetic(op: str, a: Any, b: Any) -> Any:
    """Exact decimals, rounded to decimal128 (§6.3.1): NaN past its range."""
    dx, dy = as_decimal(a), as_decimal(b)
    if dx.is_nan() or dy.is_nan():
        return NAN
    if op == "/" and dy == 0:
        return NAN
    try:
        return _DECIMAL_OPS[op](dx, dy)
    except (decimal.Overflow, decimal.InvalidOperation, decimal.DivisionByZero):
        return NAN


def concat_or_add(a: Any, b: Any) -> Any:
    """``+``: concatenation of strings/symbols (a string), else numeric addition.

    A concatenation longer than :data:`MAX_CONCAT_LENGTH` is an evaluation error (NULL).
    """
    if isinstance(a, str) and isinstance(b, str):
        ka, kb = kind_of(a), kind_of(b)
        if ka in TEXT and kb in TEXT and len(a) + len(b) <= MAX_CONCAT_LENGTH:
            return str(a) + str(b)
        return None
    return arithmetic("+", a, b)


#: ``a OP b`` is ``b MIRRORED[OP] a`` (a comparison with its operands swapped).
MIRRORED: Final = {"=": "=", "<>": "<>", "!=": "!=", ">": "<", ">=": "<=", "<": ">", "<=": ">="}


def negate(op: str, value: Any) -> Any:
    """Unary ``+``/``-`` over numbers (§6.4.4.1.1); an unsigned result that does
    not fit a long (``-(2**64-1)``) is an overflow, NaN."""
    if value is None:
        return None
    kind = kind_of(value)
    if kind not in NUMERIC:
        return None
    if op == "+":
        return value
    if kind is Kind.FLOAT:
        return -float(value)
    if kind is Kind.DECIMAL:
        number = as_decimal(value)
        return NAN if number.is_nan() else number.copy_negate()  # exact: '-' rounds to 28 digits
    result = -int(value)
    return result if LONG_MIN <= result <= ULONG_MAX else NAN


def signed_constant(op: str, value: Any) -> Any:
    """A numeric constant with a sign applied as evaluation applies it; None where the
    result cannot be a literal (not a number, or an overflow to NaN). The parser folds
    ``-5`` into one literal with it."""
    if value is None or isinstance(value, bool) or kind_of(value) not in NUMERIC:
        return None
    result = negate(op, value)
    return None if isinstance(result, float) and math.isnan(result) else result


def text_of(value: Any) -> str | None:
    """A string or symbol as ``str`` (symbols are strings to SQL), else ``None``."""
    if isinstance(value, str) and kind_of(value) in TEXT:
        return str(value)
    return None

