"""Where rows go: Hive-style partition directories by address, day and regularity.

Addresses are escaped as Spark escapes partition names; one too long for a file name is
shortened with a digest (its real address is kept in ``long_address``).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
from typing import Final

__all__ = [
    "MAX_DIRECTORY_BYTES",
    "address_directory",
    "address_partition",
    "arrival_date",
]


#: Characters Spark escapes in partition directory names (ExternalCatalogUtils.escapePathName),
#: and ``~``, which marks a shortened address (so a plain name never has one).
_ESCAPED: Final = (frozenset('"#%\'*/:=?\\\x7f{[]^~')
                   | frozenset(chr(c) for c in range(0x20)))
_NULL_PARTITION: Final = "__HIVE_DEFAULT_PARTITION__"
#: Longest directory name written, in bytes (file systems allow 255).
MAX_DIRECTORY_BYTES: Final = 240
_DIGEST_CHARS: Final = 32  # 128 bits of SHA-256: distinct addresses never share a directory
_KEY_PREFIX: Final = "address="


def _escape(text: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in text)


def _name_bytes(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@functools.lru_cache(maxsize=4096)
def address_partition(address: str) -> str:
    """The ``address`` partition value of an address: the address itself when its escaped
    directory name fits ``MAX_DIRECTORY_BYTES``, else a prefix of it, ``~`` and a hash.

    A shortened address is not the address: the rows in it carry the real one in
    ``long_address``, and the readers (:func:`read_archive_table`,
    ``session.read_archive``) put it back in ``address``.
    """
    if _name_bytes(_KEY_PREFIX + _escape(address)) <= MAX_DIRECTORY_BYTES:
        return address
    digest = hashlib.sha256(address.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST_CHARS]
    budget = MAX_DIRECTORY_BYTES - len(_KEY_PREFIX) - 1 - _DIGEST_CHARS
    cut = 0
    for char in address:  # whole characters and whole %XX escapes only
        budget -= _name_bytes(_escape(char))
        if budget < 0:
            break
        cut += 1
    return f"{address[:cut]}~{digest}"


def address_directory(address: str) -> str:
    """The partition directory of an address, escaped the way Spark and pyarrow read it back.

    Only what Spark itself escapes (and ``~``) becomes ``%XX``: Spark un-escapes
    byte by byte, so other (non-ASCII) characters stay as they are, UTF-8 in the
    file name. An empty address is the partition Spark reads as NULL. An address
    too long for a file name gets :func:`address_partition`'s shortened form.
    """
    if not address:
        return f"{_KEY_PREFIX}{_NULL_PARTITION}"
    value = address_partition(address)
    if value == address:
        return _KEY_PREFIX + _escape(address)
    prefix, _, digest = value.rpartition("~")
    return f"{_KEY_PREFIX}{_escape(prefix)}~{digest}"



_DAY_MS: Final = 86_400_000


def arrival_date(arrival_ms: int) -> str:
    return _date_of_day(arrival_ms // _DAY_MS)  # floor: days before 1970 too


@functools.lru_cache(maxsize=64)
def _date_of_day(day: int) -> str:
    """The ISO date of a day since the epoch (cached: an archive's rows share a few days)."""
    return (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()
