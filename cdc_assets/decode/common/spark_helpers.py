"""Column helpers shared by the decoders' Spark side (routing, lineage, event times)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F, types as T

from cdc_assets.common.tso import PHYSICAL_SHIFT
from cdc_assets.contracts.schemas import LINEAGE_FIELDS
from cdc_assets.decode.common.kafka_time import kafka_ms


def lineage_columns() -> list[str]:
    return [f.name for f in LINEAGE_FIELDS]


# Up to 9999-12-31: beyond that Spark's timestamp functions raise instead of returning null.
_MAX_EVENT_MS = 253_402_300_799_999


def event_time_from_ms(ms: Column) -> Column:
    """A producer's event time in ms -> timestamp; non-positive or absurd values -> null."""
    return F.timestamp_millis(F.when((ms > 0) & (ms <= _MAX_EVENT_MS), ms))


def blank_to_null(c: Column) -> Column:
    """Protocols write "" for "no database/table"; the change log says null."""
    return F.when(F.length(c) > 0, c)


def value_text() -> Column:
    """The Kafka value as text (invalid UTF-8 is caught separately by `is_valid_utf8`)."""
    return F.col("value").cast("string")


#: The routing's parsed message (`with_parsed_value`): dropped again by the routes.
PARSED = "_cdc_parsed"


def with_parsed_value(raw: DataFrame, schema: T.StructType | str) -> DataFrame:
    """`raw` with `PARSED`: the value parsed by `from_json` with `schema`, once per message.
    Fields read straight off one `from_json` expression are parsed once each: Spark's JSON
    optimisation (`OptimizeCsvJsonExprs`) gives every field its own pruned copy of the parse,
    which had the landing parse every Canal-JSON message six times. A column of the parsed
    struct is a value its readers share (docs/performance.md, step 32)."""
    return raw.withColumn(PARSED, F.from_json(value_text(), schema))


def with_marker_routing(raw: DataFrame, own_ms: Column, marker: Column) -> DataFrame:
    """`Decoder.route` of a protocol whose messages carry their own time in ms and whose
    watermarks are marker messages (CloudCanal's TRANSACTIONEND, DTS's HEARTBEAT):
    `routing_ms` is the message's time, else its Kafka timestamp; `watermark_ts` is a
    marker's time as a TSO where `marker` holds, null elsewhere."""
    return raw.withColumns(
        {
            "routing_ms": F.coalesce(own_ms, kafka_ms()),
            "watermark_ts": F.when(marker, F.shiftleft(own_ms, PHYSICAL_SHIFT)),
        }
    )
