"""ISO 8601 strings as timestamps and durations (§6.3.2, §6.4.4.3.7).

Date-times without a zone are UTC (§6.4.4.3.7). Besides what
``datetime.fromisoformat`` reads (calendar and week dates, basic and extended
forms), ISO 8601 also writes ordinal dates (``2024-122``), dates of reduced
precision (``2024-05``, ``2024``: the first instant of that month or year) and
``24:00`` for the end of a day (the next day's ``00:00``); those are read here.
Durations become milliseconds; only fixed-length units are accepted (weeks,
days, hours, minutes, seconds): years and months have no fixed length in
milliseconds.
"""

from __future__ import annotations

import datetime
import re
from typing import Any, Final

__all__ = ["parse_datetime", "parse_duration", "to_millis"]

_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_DURATION: Final = re.compile(
    r"(?P<sign>[+-])?P(?:(?P<weeks>\d+(?:[.,]\d+)?)W)?(?:(?P<days>\d+(?:[.,]\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:[.,]\d+)?)H)?(?:(?P<minutes>\d+(?:[.,]\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:[.,]\d+)?)S)?)?",
    re.ASCII,
)
_UNIT_MS: Final = {
    "weeks": 604_800_000, "days": 86_400_000, "hours": 3_600_000, "minutes": 60_000,
    "seconds": 1_000,
}


# 2024-122 / 2024122, alone or before the time; 2024-05 and 2024 alone
_ORDINAL: Final = re.compile(r"(\d{4})-?(\d{3})(?=$|[Tt ])", re.ASCII)
_REDUCED: Final = re.compile(r"(\d{4})(?:-(\d{2}))?", re.ASCII)
# T24:00, T24:00:00, T24:00:00.000, T2400, T240000 (the end of the day), before any zone
_END_OF_DAY: Final = re.compile(r"([Tt ])24(:?)00(?:\2(00)(?:[.,]0+)?)?(?=$|[Zz+-])", re.ASCII)


def _reduced(match: re.Match[str]) -> datetime.datetime | None:
    year, month = int(match.group(1)), int(match.group(2) or 1)
    if year < 1 or not 1 <= month <= 12:
        return None
    return datetime.datetime(year, month, 1, tzinfo=datetime.UTC)


def _ordinal(match: re.Match[str]) -> str | None:
    """The calendar date an ordinal date names, or ``None`` past the year's end."""
    year, day = int(match.group(1)), int(match.group(2))
    start = datetime.date(year, 1, 1) if year else None
    if start is None or not 1 <= day <= (366 if _leap(year) else 365):
        return None
    return (start + datetime.timedelta(days=day - 1)).isoformat()


def _leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def parse_datetime(text: str) -> int | None:
    """Milliseconds since the epoch for an ISO 8601 date or date-time, else ``None``."""
    candidate = text.strip()
    if not candidate or not candidate[0].isdigit():
        return None
    reduced = _REDUCED.fullmatch(candidate)
    if reduced is not None:
        moment: datetime.datetime | None = _reduced(reduced)
        return None if moment is None else _millis(moment)
    ordinal = _ORDINAL.match(candidate)
    if ordinal is not None:
        calendar = _ordinal(ordinal)
        if calendar is None:
            return None
        candidate = calendar + candidate[ordinal.end():]
    candidate, end_of_day = _END_OF_DAY.subn(r"\g<1>00\g<2>00", candidate, count=1)
    try:
        moment = datetime.datetime.fromisoformat(candidate.replace("z", "Z"))
    except ValueError:
        return None
    if end_of_day:
        try:
            moment += datetime.timedelta(days=1)
        except OverflowError:
            return None
    return _millis(moment)


def _millis(moment: datetime.datetime) -> int:
    """Milliseconds since the epoch; a moment without a zone is UTC (§6.4.4.3.7)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def parse_duration(text: str) -> int | None:
    """Milliseconds for an ISO 8601 duration such as ``PT1H30M``, else ``None``."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.group(unit) for unit in _UNIT_MS):
        return None
    if text.strip().endswith("T"):
        return None
    total = 0.0
    for unit, factor in _UNIT_MS.items():
        amount = match.group(unit)
        if amount:
            total += float(amount.replace(",", ".")) * factor
    millis = round(total)
    return -millis if match.group("sign") == "-" else millis


def to_millis(value: Any) -> int | None:
    """A string compared with a timestamp: a date-time, else a duration (§6.3.2)."""
    if not isinstance(value, str):
        return None
    moment = parse_datetime(value)
    return moment if moment is not None else parse_duration(value)
