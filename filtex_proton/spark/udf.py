"""The engine itself, run inside Spark's Python workers: exact by construction.

What cannot be translated to Column expressions is evaluated here by the very
code the broker runs: :class:`~filtex_proton.amqp.message.RawMessageView` over
the archived bytes and :meth:`FilterSet.matches`. Compiled filters hold
closures and do not pickle, so the filters travel as their AMQP encoding (the
described values the client sent) and are decoded once per worker process.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

import pyarrow as pa
from proton import Described, symbol

from filtex_proton.amqp import DecodeError, decode_value, encode_value
from filtex_proton.amqp.message import RawMessageView
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.limits import Limits

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["decode_shipped", "encode_filters", "match_batch", "match_udf", "matches_raw",
           "unbudgeted"]


def unbudgeted(limits: Limits) -> Limits:
    """The limits without the per-message time budget.

    The budget protects a live broker from a slow message; offline, a verdict
    that depends on how busy the machine was would make two runs (and the two
    Spark paths) disagree, so every message is evaluated to its answer.
    """
    return dataclasses.replace(limits, eval_budget_ms=math.inf)


def matches_raw(filter_set: FilterSet, data: bytes | None) -> bool:
    """Whether the broker would deliver these bytes through this filter set.

    As the plugin's LinkFilter: an empty set matches everything without looking
    at the bytes; otherwise bytes that are not a message match nothing (the
    broker refuses them on arrival).
    """
    if len(filter_set) == 0:
        return True
    if data is None:
        return False
    try:
        view = RawMessageView(data)
    except DecodeError:
        return False
    return filter_set.matches(view)


def encode_filters(described: Mapping[str, Described]) -> bytes:
    """A filter set's described values as one AMQP map (what travels to the workers)."""
    return encode_value({symbol(key): value for key, value in described.items()})


_CACHE: Final[dict[tuple[bytes, Limits], FilterSet]] = {}
_CACHE_LOCK: Final = threading.Lock()


def decode_shipped(encoded: bytes, limits: Limits) -> FilterSet:
    """The filter set shipped as :func:`encode_filters` bytes, decoded once per process."""
    key = (encoded, limits)
    with _CACHE_LOCK:
        found = _CACHE.get(key)
        if found is None:
            mapping, _ = decode_value(encoded)
            found = _CACHE[key] = decode_filter_set(mapping, limits)
            if len(_CACHE) > 64:
                _CACHE.pop(next(iter(_CACHE)))
        return found


def match_batch(encoded: bytes, limits: Limits, raws: pa.Array) -> pa.Array:
    """One Arrow batch of raw messages -> whether each matches (never NULL)."""
    filter_set = decode_shipped(encoded, limits)
    return pa.array([matches_raw(filter_set, data) for data in raws.to_pylist()],
                    type=pa.bool_())


def _arrow_udf(encoded: bytes, limits: Limits) -> Callable[[Iterator[pa.Array]],
                                                         Iterator[pa.Array]]:
    def evaluate(batches: Iterator[pa.Array]) -> Iterator[pa.Array]:
        for raws in batches:
            yield match_batch(encoded, limits, raws)

    return evaluate


def _pandas_udf(encoded: bytes, limits: Limits) -> Callable[[Iterator[Any]], Iterator[Any]]:
    import pandas as pd

    def evaluate(batches: Iterator[pd.Series]) -> Iterator[pd.Series]:
        for raws in batches:
            yield pd.Series(match_batch(encoded, limits, pa.array(raws.tolist(), pa.binary()))
                            .to_pylist(), dtype=bool)

    return evaluate


def match_udf(described: Mapping[str, Described], limits: Limits, *,
              prefer_arrow: bool = True) -> Callable[[Column], Column]:
    """A vectorised Spark UDF: ``udf(col("raw"))`` is TRUE where the filters match.

    An Arrow UDF on Spark 4.1+ (batches stay Arrow end to end), a pandas UDF before.
    """
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.types import BooleanType

    encoded = encode_filters(described)
    limits = unbudgeted(limits)
    if prefer_arrow and hasattr(F, "arrow_udf"):
        # The function type (iterator of arrays) is read from _arrow_udf's type hints.
        function: Any = F.arrow_udf(_arrow_udf(encoded, limits), BooleanType())
    else:
        from pyspark.sql.pandas.functions import PandasUDFType, pandas_udf

        function = pandas_udf(_pandas_udf(encoded, limits), BooleanType(),
                              PandasUDFType.SCALAR_ITER)
    udf: Callable[[Column], Column] = function
    return udf
