"""Helpers shared by the SQL filter tests: evaluation with an oracle check, BID decimals
built bit by bit (independently of filtex_proton.amqp.bid's encoder), strict AST equality."""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal
from typing import Any

from proton import decimal32, decimal64, decimal128

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.sql import AMQP_SQL, Dialect, ast, compile_sql
from filtex_proton.sql.reference import interpret_truth


def evaluate(text: str, dialect: Dialect = AMQP_SQL, **sections: Any) -> bool | None:
    """TRUE/FALSE/NULL of a filter for one message, checked against the reference interpreter."""
    compiled = compile_sql(text, dialect)
    view = DictMessageView(**sections)
    result = compiled.evaluate(view)
    oracle = interpret_truth(compiled.ast, view, dialect)
    assert result is oracle, f"compiled {result!r} but the reference interpreter says {oracle!r}"
    return result


# ---- IEEE 754-2008 BID bits, written out by hand -------------------------------------------

def bid32(coefficient: int, exponent: int = 0, *, negative: bool = False) -> decimal32:
    """decimal32 in form 1 (coefficient < 2**23): s | exponent+101 (8 bits) | coefficient."""
    assert 0 <= coefficient < 2**23
    return decimal32((negative << 31) | ((exponent + 101) << 23) | coefficient)


def bid64(coefficient: int, exponent: int = 0, *, negative: bool = False) -> decimal64:
    """decimal64 in form 1 (coefficient < 2**53): s | exponent+398 (10 bits) | coefficient."""
    assert 0 <= coefficient < 2**53
    return decimal64((negative << 63) | ((exponent + 398) << 53) | coefficient)


def bid128(coefficient: int, exponent: int = 0, *, negative: bool = False) -> decimal128:
    """decimal128 in form 1, as its 16 big-endian wire bytes: s | exponent+6176 (14) | coeff."""
    assert 0 <= coefficient < 2**113
    bits = (negative << 127) | ((exponent + 6176) << 113) | coefficient
    return decimal128(bits.to_bytes(16, "big"))


# ---- strict (type- and NaN-aware) AST equality ----------------------------------------------

def same_value(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, Decimal):
        return a == b and a.is_signed() == b.is_signed()
    if isinstance(a, float) and a == 0:
        return math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


def same_tree(a: Any, b: Any) -> bool:
    """Equality of two ASTs that also compares literal types (1 vs 1.0 vs TRUE) and NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, ast.Literal):
        return same_value(a.value, b.value)
    if dataclasses.is_dataclass(a):
        return all(
            same_tree(getattr(a, f.name), getattr(b, f.name))
            for f in dataclasses.fields(a) if f.name != "pos"
        )
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same_tree(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
