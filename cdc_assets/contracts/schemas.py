"""The one change-log schema every protocol decodes into (see docs/architecture.md).

Values in `before` / `after` are canonical strings, whatever the protocol wrote:
integers and unsigned integers as decimal text, decimals as text, character data as
UTF-8 text, binary data as standard base64 of the exact bytes, dates as `YYYY-MM-DD`,
datetimes as `YYYY-MM-DD HH:MM:SS[.ffffff]` wall-clock text, timestamps (instants) as
the same text in UTC, booleans as `1` / `0`, NULL as a missing-or-null map value. The snapshot layer types them from
`column_types` (the MySQL type as the protocol gave it).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, functions as F, types as T

ROW, DDL, WATERMARK = "row", "ddl", "watermark"
EVENT_KINDS = (ROW, DDL, WATERMARK)
INSERT, UPDATE, DELETE, READ = "INSERT", "UPDATE", "DELETE", "READ"
ROW_OPS = (INSERT, UPDATE, DELETE, READ)

_STR_MAP = T.MapType(T.StringType(), T.StringType(), valueContainsNull=True)

LINEAGE_FIELDS = [
    T.StructField("topic", T.StringType(), False),
    T.StructField("kafka_partition", T.IntegerType(), False),
    T.StructField("kafka_offset", T.LongType(), False),
    T.StructField("kafka_timestamp", T.TimestampType(), True),
]

RAW_MESSAGE_SCHEMA = T.StructType(
    LINEAGE_FIELDS
    + [
        T.StructField("key", T.BinaryType(), True),
        T.StructField("value", T.BinaryType(), True),
        T.StructField("source_file", T.StringType(), True),
    ]
)

CHANGE_LOG_SCHEMA = T.StructType(
    LINEAGE_FIELDS
    + [
        # Position of the event inside its Kafka message (batched protocols, Canal `data` arrays).
        T.StructField("event_index", T.IntegerType(), False),
        T.StructField("event_kind", T.StringType(), False),
        T.StructField("op", T.StringType(), True),
        T.StructField("database", T.StringType(), True),
        T.StructField("table", T.StringType(), True),
        T.StructField("commit_ts", T.LongType(), True),
        T.StructField("commit_time", T.TimestampType(), True),
        # The source's own order inside one commit_ts (binlog file << 32 | pos, DTS
        # sourcePosition, ...); null for TiCDC, whose commit_ts is already a total order.
        T.StructField("source_position", T.LongType(), True),
        T.StructField("event_time", T.TimestampType(), True),
        T.StructField("pk_names", T.ArrayType(T.StringType(), True), True),
        T.StructField("pk_values", T.ArrayType(T.StringType(), True), True),
        T.StructField("before", _STR_MAP, True),
        T.StructField("after", _STR_MAP, True),
        T.StructField("column_types", _STR_MAP, True),
        T.StructField("ddl_type", T.StringType(), True),
        T.StructField("ddl_sql", T.StringType(), True),
        T.StructField("watermark_ts", T.LongType(), True),
    ]
)
CHANGE_LOG_COLUMNS = [f.name for f in CHANGE_LOG_SCHEMA.fields]

QUARANTINE_SCHEMA = T.StructType(
    LINEAGE_FIELDS
    + [
        T.StructField("event_index", T.IntegerType(), True),
        T.StructField("reason", T.StringType(), False),
        T.StructField("detail", T.StringType(), True),
        T.StructField("key", T.BinaryType(), True),
        T.StructField("value", T.BinaryType(), True),
    ]
)
QUARANTINE_COLUMNS = [f.name for f in QUARANTINE_SCHEMA.fields]

# Columns a decoder adds next to the change-log columns; non-null reason = quarantine.
REJECT_REASON, REJECT_DETAIL = "_reject_reason", "_reject_detail"
DECODED_COLUMNS = [*CHANGE_LOG_COLUMNS, "key", "value", REJECT_REASON, REJECT_DETAIL]

# Records that carry no change by design (Kafka tombstones; Debezium's transaction metadata
# and heartbeats, Canal's XA COMMIT records): kept in the quarantine with their
# lineage and counted, but they are not bad input, so the quarantine's checks leave them out.
TOMBSTONE, CONTROL_RECORD = "tombstone", "control_record"
NO_CHANGE_REASONS = (TOMBSTONE, CONTROL_RECORD)


def conform(df: DataFrame, schema: T.StructType) -> DataFrame:
    """Select exactly `schema`'s columns with its types (the contract every decoder's
    output is held to, whatever nullability its expressions happened to produce)."""
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])
