"""The same filters over archives of messages, on Spark (docs/ARCHIVE.md).

>>> from filtex_proton.spark import explain
>>> print(explain("p.subject = 'order.created' AND h.priority > 4"))  # doctest: +ELLIPSIS
filter set of 1 filter, path auto:
  'sql' (amqp:sql-filter): column - translated exactly to Spark expressions
      spark: ((subject = 'order.created') AND (coalesce(priority, 4L) > 4L))
...

Importing this package needs neither pyarrow nor PySpark: :func:`explain` and
:func:`plan` work without them (``pip install filtex-proton``); the names that read,
write or run on Spark import them on first use (``pip install 'filtex-proton[spark]'``).
"""

from typing import TYPE_CHECKING

from filtex_proton.lazy import lazy_attribute

# Planning needs neither pyarrow nor PySpark, and ``plan`` (the function) must not be
# shadowed by the submodule of the same name once something imports that submodule: these
# are bound eagerly, after the submodule is imported.
from filtex_proton.spark.plan import (
    FilterPlan,
    Plan,
    apply_filter,
    as_filter_set,
    explain,
    plan,
    select_archive,
)

if TYPE_CHECKING:
    from filtex_proton.archive import (
        ARCHIVE_SCHEMA,
        SCHEMA_VERSION,
        ArchiveIndex,
        ArchiveStats,
        ArchiveWriter,
        message_row,
        read_archive_table,
    )
    from filtex_proton.spark.metrics import Read, measure_read
    from filtex_proton.spark.session import read_archive, spark_session, use_this_python
    from filtex_proton.spark.udf import matches_raw

__all__ = [
    "ARCHIVE_SCHEMA",
    "SCHEMA_VERSION",
    "ArchiveIndex",
    "ArchiveStats",
    "ArchiveWriter",
    "FilterPlan",
    "Plan",
    "Read",
    "apply_filter",
    "as_filter_set",
    "explain",
    "matches_raw",
    "measure_read",
    "message_row",
    "plan",
    "read_archive",
    "read_archive_table",
    "select_archive",
    "spark_session",
    "use_this_python",
]

#: Where the names live, those that need neither pyarrow nor PySpark first.
_MODULES = (*(f"{__name__}.{module}" for module in ("metrics", "session", "udf")),
            "filtex_proton.archive")


def __getattr__(name: str) -> object:
    return lazy_attribute(__name__, name, __all__, _MODULES)
