"""The contracts of the layers, each written once as a list of `ContractColumn`s: the Spark
schemas below and the pandera models of `contracts/checks.py` are both built from them.

The change log is the one schema every protocol decodes into (see docs/architecture.md).
Values in `before` / `after` are canonical strings, whatever the protocol wrote:
integers and unsigned integers as decimal text, decimals as text, character data as
UTF-8 text, binary data as standard base64 of the exact bytes, dates as `YYYY-MM-DD`,
datetimes as `YYYY-MM-DD HH:MM:SS[.ffffff]` wall-clock text, timestamps (instants) as
the same text in UTC, booleans as `1` / `0`, NULL as a missing-or-null map value. The snapshot layer types them from
`column_types` (the MySQL type as the protocol gave it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame, functions as F, types as T

ROW, DDL, WATERMARK = "row", "ddl", "watermark"
EVENT_KINDS = (ROW, DDL, WATERMARK)
INSERT, UPDATE, DELETE, READ = "INSERT", "UPDATE", "DELETE", "READ"
ROW_OPS = (INSERT, UPDATE, DELETE, READ)


@dataclass(frozen=True)
class ContractColumn:
    """One column of a contract: its Spark type and nullability, and the value checks the
    pandera model runs on it (`pandera.Field` arguments: `ge`, `gt`, `isin`)."""

    name: str
    data_type: T.DataType
    nullable: bool = True
    checks: Mapping[str, object] = field(default_factory=dict)

    @property
    def spark_field(self) -> T.StructField:
        return T.StructField(self.name, self.data_type, self.nullable)


def column(name: str, data_type: T.DataType, nullable: bool = True, **checks) -> ContractColumn:
    return ContractColumn(name, data_type, nullable, checks)


def spark_schema(columns: Sequence[ContractColumn]) -> T.StructType:
    return T.StructType([c.spark_field for c in columns])


def with_checks(columns: Sequence[ContractColumn], **checks_by_column: Mapping[str, object]) -> list[ContractColumn]:
    """`columns` with the checks of the named ones replaced (a later layer's narrower rule)."""
    return [replace(c, checks=checks_by_column[c.name]) if c.name in checks_by_column else c for c in columns]


_STR_MAP = T.MapType(T.StringType(), T.StringType(), valueContainsNull=True)
_STRINGS = T.ArrayType(T.StringType(), True)

LINEAGE = [
    column("topic", T.StringType(), nullable=False),
    column("kafka_partition", T.IntegerType(), nullable=False, ge=0),
    column("kafka_offset", T.LongType(), nullable=False, ge=0),
    column("kafka_timestamp", T.TimestampType()),
]
LINEAGE_FIELDS = [c.spark_field for c in LINEAGE]

RAW_MESSAGE = [
    *LINEAGE,
    column("key", T.BinaryType()),
    column("value", T.BinaryType()),
    column("source_file", T.StringType()),
]
RAW_MESSAGE_SCHEMA = spark_schema(RAW_MESSAGE)

CHANGE_LOG = [
    *LINEAGE,
    # Position of the event inside its Kafka message (batched protocols, Canal `data` arrays).
    column("event_index", T.IntegerType(), nullable=False, ge=0),
    column("event_kind", T.StringType(), nullable=False, isin=list(EVENT_KINDS)),
    column("op", T.StringType(), isin=list(ROW_OPS)),
    column("database", T.StringType()),
    column("table", T.StringType()),
    column("commit_ts", T.LongType(), gt=0),
    column("commit_time", T.TimestampType()),
    # The source's own order inside one commit_ts (binlog file << 32 | pos, DTS
    # sourcePosition, ...); null for TiCDC, whose commit_ts is already a total order.
    column("source_position", T.LongType()),
    column("event_time", T.TimestampType()),
    column("pk_names", _STRINGS),
    column("pk_values", _STRINGS),
    column("before", _STR_MAP),
    column("after", _STR_MAP),
    column("column_types", _STR_MAP),
    column("ddl_type", T.StringType()),
    column("ddl_sql", T.StringType()),
    column("watermark_ts", T.LongType(), gt=0),
]
CHANGE_LOG_SCHEMA = spark_schema(CHANGE_LOG)
CHANGE_LOG_COLUMNS = [c.name for c in CHANGE_LOG]

# The change table holds the change log's rows and DDL, deduplicated and aligned: no watermarks.
CHANGE_TABLE = with_checks(CHANGE_LOG, event_kind={"isin": [ROW, DDL]})

QUARANTINE = [
    *LINEAGE,
    column("event_index", T.IntegerType()),
    column("reason", T.StringType(), nullable=False),
    column("detail", T.StringType()),
    column("key", T.BinaryType()),
    column("value", T.BinaryType()),
]
QUARANTINE_SCHEMA = spark_schema(QUARANTINE)
QUARANTINE_COLUMNS = [c.name for c in QUARANTINE]

# Columns a decoder adds next to the change-log columns; non-null reason = quarantine.
REJECT_REASON, REJECT_DETAIL = "_reject_reason", "_reject_detail"
DECODED_COLUMNS = [*CHANGE_LOG_COLUMNS, "key", "value", REJECT_REASON, REJECT_DETAIL]

# Records that carry no change by design (Kafka tombstones; Debezium's transaction metadata
# and heartbeats, Canal's XA COMMIT records): kept in the quarantine with their
# lineage and counted, but they are not bad input, so the quarantine's checks leave them out.
TOMBSTONE, CONTROL_RECORD = "tombstone", "control_record"
NO_CHANGE_REASONS = (TOMBSTONE, CONTROL_RECORD)


def conform(df: DataFrame, schema: T.StructType, extra: Sequence[str] = ()) -> DataFrame:
    """Select exactly `schema`'s columns with its types (the contract every decoder's
    output is held to, whatever nullability its expressions happened to produce), then the
    `extra` columns as they are."""
    return df.select(*[F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields], *extra)
