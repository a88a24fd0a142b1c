"""ISO 8601 strings as timestamps and durations (§6.3.2, §6.4.4.3.7).

Date-times without a zone are UTC (§6.4.4.3.7). Durations become milliseconds;
only fixed-length units are accepted (weeks, days, hours, minutes, seconds):
years and months have no fixed length in milliseconds.
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


def parse_datetime(text: str) -> int | None:
    """Milliseconds since the epoch for an ISO 8601 date or date-time, else ``None``."""
    candidate = text.strip()
    if not candidate or not candidate[0].isdigit():
        return None
    try:
        moment = datetime.datetime.fromisoformat(candidate.replace("z", "Z"))
    except ValueError:
        return None
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
