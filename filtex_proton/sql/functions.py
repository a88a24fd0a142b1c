"""The functions of §6.4.4.3, as data: name, arity and implementation.

Each implementation takes already-evaluated arguments and returns a value or
``None`` (NULL) for bad arguments: "a negative value MUST cause an error", and
evaluation errors make the expression NULL (§2.3), never an exception.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from proton import timestamp

from filtex_proton.amqp.types import Kind, kind_of
from filtex_proton.sql import iso8601
from filtex_proton.sql.values import text_of

__all__ = ["FUNCTIONS", "Function", "understood"]


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    min_args: int
    max_args: int
    apply: Callable[..., Any]
    deterministic: bool = True  # may be folded at compile time when its arguments are constant


def _count(value: Any) -> int | None:
    """A non-negative integer argument, else ``None``."""
    if value is None or kind_of(value) is not Kind.INTEGER or value < 0:
        return None
    return int(value)


# Locale-dependent case mappings (Unicode SpecialCasing.txt) for the languages
# whose rules differ from the default; the default mapping is locale-neutral so
# every broker agrees on the result whatever its own locale.
_TURKIC_LOWER: Final = str.maketrans({"I": "ı", "İ": "i"})
_TURKIC_UPPER: Final = str.maketrans({"i": "İ", "ı": "I"})
_TURKIC: Final = frozenset({"tr", "az"})


def _language(tag: Any) -> str | None:
    text = text_of(tag)
    return None if text is None else text.split("-")[0].split("_")[0].lower()


def _lower(value: Any, tag: Any = "") -> str | None:
    text, language = text_of(value), _language(tag)
    if text is None or language is None:
        return None
    if language in _TURKIC:
        text = text.replace("İ", "i").translate(_TURKIC_LOWER)
    return text.lower()


def _upper(value: Any, tag: Any = "") -> str | None:
    text, language = text_of(value), _language(tag)
    if text is None or language is None:
        return None
    if language in _TURKIC:
        text = text.translate(_TURKIC_UPPER)
    return text.upper()


def _left(value: Any, count: Any) -> str | None:
    text, n = text_of(value), _count(count)
    return None if text is None or n is None else text[:n]


def _right(value: Any, count: Any) -> str | None:
    text, n = text_of(value), _count(count)
    if text is None or n is None:
        return None
    return text[len(text) - n :] if n < len(text) else text


def _substring(value: Any, start: Any, count: Any = None) -> str | None:
    text, begin = text_of(value), _count(start)
    if text is None or begin is None or begin < 1:
        return None
    if count is None:
        return text[begin - 1 :]
    n = _count(count)
    return None if n is None else text[begin - 1 : begin - 1 + n]


def _utc() -> timestamp:
    return timestamp(time.time_ns() // 1_000_000)


def _date(value: Any) -> timestamp | None:
    text = text_of(value)
    millis = None if text is None else iso8601.parse_datetime(text)
    return None if millis is None else timestamp(millis)


FUNCTIONS: Final[dict[str, Function]] = {
    f.name: f
    for f in (
        Function("LOWER", 1, 2, _lower),
        Function("UPPER", 1, 2, _upper),
        Function("LEFT", 2, 2, _left),
        Function("RIGHT", 2, 2, _right),
        Function("SUBSTRING", 2, 3, _substring),
        Function("UTC", 0, 0, _utc, deterministic=False),
        Function("DATE", 1, 1, _date),
    )
}


def understood(name: str, vendor: str | None) -> Function | None:
    """The function a call names, or ``None`` when this broker does not understand it:
    a vendor's, or an unprefixed name that is not one of §6.4.4.3's. Such a call
    evaluates to NULL ("it MUST be evaluated as NULL") and its arguments are not
    evaluated, since nothing could depend on them."""
    return FUNCTIONS.get(name) if vendor is None else None
