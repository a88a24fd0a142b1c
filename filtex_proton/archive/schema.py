"""The archive's columns and their types, and the version that names them (docs/ARCHIVE.md).

Every header and properties field gets a typed column, so the common filters become plain
column comparisons; the map sections keep each value's AMQP type (``uint 5`` is not
``long 5``), so the spec's comparison rules can be applied by whatever reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import pyarrow as pa
import pyarrow.dataset as pads

from filtex_proton.amqp.types import HEADER_FIELDS, PROPERTIES_FIELDS
from filtex_proton.amqp.view import Section

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

#: The exact decimal slot: 38 digits, 18 after the point; every AMQP integer fits.
DECIMAL_PRECISION: Final = 38
DECIMAL_SCALE: Final = 18

LONG_MIN: Final = -(2**63)
LONG_MAX: Final = 2**63 - 1

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

#: Header/properties field name -> (column, Arrow type, the AMQP type a conforming value has).
#: ``None`` as the AMQP type: polymorphic (message-id, correlation-id), stored as TYPED_VALUE.
FIELD_COLUMNS: Final[dict[str, tuple[str, pa.DataType, str | None]]] = {
    "durable": ("durable", pa.bool_(), "boolean"),
    "priority": ("priority", pa.int16(), "ubyte"),
    "ttl": ("ttl", pa.int64(), "uint"),
    "first-acquirer": ("first_acquirer", pa.bool_(), "boolean"),
    "delivery-count": ("delivery_count", pa.int64(), "uint"),
    "message-id": ("message_id", TYPED_VALUE, None),
    "user-id": ("user_id", pa.binary(), "binary"),
    "to": ("to", pa.string(), "string"),
    "subject": ("subject", pa.string(), "string"),
    "reply-to": ("reply_to", pa.string(), "string"),
    "correlation-id": ("correlation_id", TYPED_VALUE, None),
    "content-type": ("content_type", pa.string(), "symbol"),
    "content-encoding": ("content_encoding", pa.string(), "symbol"),
    "absolute-expiry-time": ("absolute_expiry_time", pa.int64(), "timestamp"),
    "creation-time": ("creation_time", pa.int64(), "timestamp"),
    "group-id": ("group_id", pa.string(), "string"),
    "group-sequence": ("group_sequence", pa.int64(), "uint"),
    "reply-to-group-id": ("reply_to_group_id", pa.string(), "string"),
}
assert list(FIELD_COLUMNS) == [n for n, _ in HEADER_FIELDS] + [n for n, _ in PROPERTIES_FIELDS]

#: AMQP field name (hyphenated) -> archive column name.
COLUMN_OF_FIELD: Final[Mapping[str, str]] = {f: c for f, (c, _, _) in FIELD_COLUMNS.items()}

#: Map section -> archive column.
MAP_COLUMNS: Final[Mapping[Section, str]] = {
    Section.DELIVERY_ANNOTATIONS: "delivery_annotations",
    Section.MESSAGE_ANNOTATIONS: "message_annotations",
    Section.APPLICATION_PROPERTIES: "application_properties",
    Section.FOOTER: "footer",
}

#: The key types a *regular* row's map section may have (AMQP 1.0 §3.2.3, §3.2.5, §3.2.10).
KEY_TYPES: Final[Mapping[Section, frozenset[str]]] = {
    Section.DELIVERY_ANNOTATIONS: frozenset({"symbol", "ulong"}),
    Section.MESSAGE_ANNOTATIONS: frozenset({"symbol", "ulong"}),
    Section.APPLICATION_PROPERTIES: frozenset({"string"}),
    Section.FOOTER: frozenset({"symbol", "ulong"}),
}

#: Directory partition keys, outermost first; their values are in the paths, not the files.
#: ``regular`` is one so that Spark prunes whole directories: the engine's branch over
#: irregular rows reads no file at all when there are none.
PARTITION_COLUMNS: Final = ("address", "date", "regular")

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
