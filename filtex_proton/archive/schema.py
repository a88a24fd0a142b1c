"""The archive's columns and their types, and the version that names them (docs/ARCHIVE.md).

Every header and properties field gets a typed column, so the common filters become plain
column comparisons; the map sections keep each value's AMQP type (``uint 5`` is not
``long 5``), so the spec's comparison rules can be applied by whatever reads them.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa
import pyarrow.dataset as pads

from filtex_proton.archive.columns import (
    COLUMN_OF_FIELD,
    DECIMAL_PRECISION,
    DECIMAL_SCALE,
    KEY_TYPES,
    LONG_MAX,
    LONG_MIN,
    MAP_COLUMNS,
    PARTITION_COLUMNS,
)

__all__ = [
    "ARCHIVE_SCHEMA",
    "COLUMN_OF_FIELD",
    "DECIMAL_PRECISION",
    "DECIMAL_SCALE",
    "FIELD_COLUMNS",
    "KEY_TYPES",
    "LONG_MAX",
    "LONG_MIN",
    "MAP_COLUMNS",
    "PARTITIONING",
    "PARTITION_COLUMNS",
    "PARTITION_FIELDS",
    "SCHEMA_VERSION",
    "TYPED_MAP",
    "TYPED_VALUE",
    "VERSION_KEY",
    "with_partitions",
]

#: Bumped whenever a column is added, removed or changes meaning (docs/ARCHIVE.md).
SCHEMA_VERSION: Final = 2
VERSION_KEY: Final = b"filtex.archive.schema_version"

#: One AMQP value with its type: the type name and the slot(s) that hold the value.
TYPED_VALUE: Final = pa.struct([
    pa.field("type", pa.string()),
    pa.field("boolean", pa.bool_()),
    pa.field("long", pa.int64()),
    pa.field("decimal", pa.decimal128(DECIMAL_PRECISION, DECIMAL_SCALE)),
    pa.field("double", pa.float64()),
    pa.field("string", pa.string()),
    pa.field("binary", pa.binary()),
])

#: A map section: typed key (``"string:region"``, ``"symbol:x-opt-foo"``) -> typed value.
TYPED_MAP: Final = pa.map_(pa.string(), TYPED_VALUE)

#: Header/properties field name -> (Arrow type, the AMQP type a conforming value has).
#: ``None`` as the AMQP type: polymorphic (message-id, correlation-id), stored as TYPED_VALUE.
_FIELD_TYPES: Final[dict[str, tuple[pa.DataType, str | None]]] = {
    "durable": (pa.bool_(), "boolean"),
    "priority": (pa.int16(), "ubyte"),
    "ttl": (pa.int64(), "uint"),
    "first-acquirer": (pa.bool_(), "boolean"),
    "delivery-count": (pa.int64(), "uint"),
    "message-id": (TYPED_VALUE, None),
    "user-id": (pa.binary(), "binary"),
    "to": (pa.string(), "string"),
    "subject": (pa.string(), "string"),
    "reply-to": (pa.string(), "string"),
    "correlation-id": (TYPED_VALUE, None),
    "content-type": (pa.string(), "symbol"),
    "content-encoding": (pa.string(), "symbol"),
    "absolute-expiry-time": (pa.int64(), "timestamp"),
    "creation-time": (pa.int64(), "timestamp"),
    "group-id": (pa.string(), "string"),
    "group-sequence": (pa.int64(), "uint"),
    "reply-to-group-id": (pa.string(), "string"),
}
assert list(_FIELD_TYPES) == list(COLUMN_OF_FIELD)

#: Header/properties field name -> (column, Arrow type, AMQP type of a conforming value).
FIELD_COLUMNS: Final[dict[str, tuple[str, pa.DataType, str | None]]] = {
    field: (column, *_FIELD_TYPES[field]) for field, column in COLUMN_OF_FIELD.items()}


ARCHIVE_SCHEMA: Final = pa.schema(
    [
        pa.field("arrival_ms", pa.int64(), nullable=False),
        pa.field("sequence", pa.int64(), nullable=False),
        pa.field("decode_error", pa.string()),
        *(pa.field(column, arrow_type) for column, arrow_type, _ in FIELD_COLUMNS.values()),
        *(pa.field(column, TYPED_MAP) for column in MAP_COLUMNS.values()),
        pa.field("nonconforming", TYPED_MAP),
        pa.field("raw", pa.binary(), nullable=False),
        pa.field("long_address", pa.string()),
    ],
    metadata={VERSION_KEY: str(SCHEMA_VERSION).encode()},
)

PARTITION_FIELDS: Final = (pa.field("address", pa.string()), pa.field("date", pa.string()),
                             pa.field("regular", pa.bool_()))
PARTITIONING: Final = pads.partitioning(pa.schema(list(PARTITION_FIELDS)), flavor="hive")


def with_partitions(schema: pa.Schema) -> pa.Schema:
    """The archive's schema with the partition columns (read from directory names) last."""
    for item in PARTITION_FIELDS:
        schema = schema.append(item)
    return schema
