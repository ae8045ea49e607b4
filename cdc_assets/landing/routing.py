"""Where a landed message goes: its routing time by its protocol (Kafka's timestamp as the
fallback), the windows it is stored in, and why a message has no usable time (counted and
reported, never dropped: docs/reliability.md, "Unroutable messages")."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F

from cdc_assets.common.tso import plausible_ms
from cdc_assets.common.windows import ROUTED_WINDOWS, routed_windows, window_start
from cdc_assets.decode import Decoder
from cdc_assets.decode.base import EVENT_ROUTING_MS
from cdc_assets.landing.layouts import UNPARSED_TOPIC
from cdc_assets.landing.layouts.base import unparsed_place
from cdc_assets.landing.state import LandingState
from cdc_assets.landing.tables import LANDED_SCHEMA, WINDOW_COLUMN
from cdc_assets.landing.watermark_audit import plausible_watermark


# Why a message has no usable time of its protocol (null: it has one). Such a message is
# placed by its Kafka timestamp when it has one, else it is unroutable; either way no window
# can rely on it, so the landing counts it (docs/reliability.md, "Unroutable messages").
UNROUTABLE_REASON = "unroutable_reason"
_PROTOCOL_MS = "_protocol_routing_ms"
_KAFKA_TIMESTAMP = "_cdc_kafka_timestamp"


def routed_messages(decoder: Decoder, raw: DataFrame, landing_seq: int) -> DataFrame:
    """The dump's messages with their routing time (implausible: null), their watermark
    (implausible: null; `claimed_watermark_ts` as the message said), why they have no usable
    time, and the landing's sequence number (`landing_seq`: the newest landing of an offset
    landed twice wins)."""
    routed = _route(decoder, raw)
    if EVENT_ROUTING_MS not in routed.columns:
        routed = routed.withColumn(EVENT_ROUTING_MS, F.lit(None).cast("array<long>"))
    return routed.withColumns({
        UNROUTABLE_REASON: unroutable_reason(),
        "routing_ms": plausible_ms(F.col("routing_ms")),
        "claimed_watermark_ts": F.col("watermark_ts"),
        "watermark_ts": plausible_watermark(F.col("watermark_ts")),
        "landing_seq": F.lit(landing_seq).cast("int"),
    })


def _route(decoder: Decoder, raw: DataFrame) -> DataFrame:
    """`decoder.route` on the protocol's fields alone (Kafka's timestamp hidden from it), then
    the Kafka timestamp as the fallback routing time: the same `routing_ms` for every
    decoder, and `_PROTOCOL_MS` says whether the protocol found a time."""
    if decoder.routes_by_kafka_timestamp():  # the Kafka timestamp is the protocol's time
        routed = decoder.route(raw)
        return routed.withColumn(_PROTOCOL_MS, F.col("routing_ms"))
    hidden = raw.withColumns({_KAFKA_TIMESTAMP: F.col("kafka_timestamp"),
                              "kafka_timestamp": F.lit(None).cast("timestamp")})
    routed = decoder.route(hidden)
    return routed.withColumns({
        _PROTOCOL_MS: F.col("routing_ms"),
        "routing_ms": F.coalesce(F.col("routing_ms"), F.unix_millis(F.col(_KAFKA_TIMESTAMP))),
        "kafka_timestamp": F.col(_KAFKA_TIMESTAMP),
    }).drop(_KAFKA_TIMESTAMP)


def unroutable_reason() -> Column:
    """Over a `_route`d frame (before `routing_ms` is checked for plausibility). A message
    without a value (a Debezium tombstone) has no time of its own by design: not counted."""
    protocol_ms = F.col(_PROTOCOL_MS)
    return (
        F.when(F.col("topic") == UNPARSED_TOPIC, F.lit("unparsed_record"))
        .when(F.col("value").isNull() | (F.length("value") == 0), F.lit(None))
        .when(protocol_ms.isNull(), F.lit("no_time_in_message"))
        .when(plausible_ms(protocol_ms).isNull(), F.lit("implausible_time"))
    )


def unroutable_line(state: LandingState, protocol: str) -> str:
    """One line: how many landed messages have no usable time of `protocol`, by reason, and
    where the first one is with its first bytes."""
    reasons = state.unroutable_by_reason()
    line = (f"{sum(reasons.values())} message(s) not routable as {protocol} ("
            + ", ".join(f"{r}: {n}" for r, n in sorted(reasons.items())) + ")")
    first = state.first_unroutable
    if first:
        place = (f"{unparsed_place(first['kafka_offset'])} (not a record of the layout)"
                 if first["topic"] == UNPARSED_TOPIC else
                 f"partition {first['topic']}/{first['kafka_partition']}, offset {first['kafka_offset']}")
        line += (f": first in file {first['file']}, {place}: first bytes of key {first['key_first_bytes']}, "
                 f"of value {first['value_first_bytes']}")
    return line


# Stored next to the landed columns: what the counts and the audit read back, and why a
# message has no usable time.
_ROUTING_COLUMNS = ["routing_ms", "watermark_ts", "claimed_watermark_ts"]


def landed_rows(routed: DataFrame, window_ms: int) -> DataFrame:
    """Window = floor(routing_ms / width). Routing times outside the plausible range
    (seconds instead of ms, garbage) were nulled: such a message is unroutable instead of
    opening a window in 1970 or 9999, and is stored with a null window (the batch's state
    entry names the window it joins: `batch_stats.unroutable_window`). A message whose events fall in
    other windows too is stored once more in each of them. Sorted by window within each task
    (Iceberg's writer needs a task's rows clustered by partition), by place in Kafka inside
    a window. No shuffle by window: it moved every byte of the dump once more (about a third
    of a 1M-event landing), and a dump's read tasks each cover a stretch of Kafka time, so a
    task writes into one or two windows and a window gets a file per task that read it."""
    return (
        routed.withColumn(ROUTED_WINDOWS, routed_windows(F.col("routing_ms"), F.col(EVENT_ROUTING_MS), window_ms))
        .withColumn(WINDOW_COLUMN, F.explode(F.coalesce(F.col(ROUTED_WINDOWS), F.array(window_start("routing_ms", window_ms)))))
        .select(*[f.name for f in LANDED_SCHEMA.fields], *_ROUTING_COLUMNS, UNROUTABLE_REASON, WINDOW_COLUMN)
        .sortWithinPartitions(WINDOW_COLUMN, "topic", "kafka_partition", "kafka_offset")
    )
