"""What later stages read of the landing area: a window's messages (each Kafka offset once)
and the watermark index, of the batches the committed state lists."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, Window, functions as F

from cdc_assets.landing.state import LandingState
from cdc_assets.landing.tables import (
    BATCH_COLUMN, LANDED_MESSAGES, LANDED_SCHEMA, LANDING_WATERMARKS, WINDOW_COLUMN, committed, load_state, read_landed,
)


def _window_batches(state: LandingState, window_start_ms: int) -> tuple[list[str], list[str]]:
    """The committed batches with messages in the window, and those whose messages without a
    usable time (stored with a null window) joined it (`routing.unroutable_window`)."""
    landed = [b.batch_id for b in state.batches if window_start_ms in b.windows]
    unroutable = [b.batch_id for b in state.batches if b.unroutable_window == window_start_ms]
    return landed, unroutable


def read_window_messages(spark: SparkSession, warehouse, source: str, window_start_ms: int,
                         state: LandingState | None = None) -> DataFrame:
    """The window's landed messages of the batches `state` (default: the committed one) lists."""
    state = load_state(warehouse, source) if state is None else state
    landed, unroutable = _window_batches(state, window_start_ms)
    table = read_landed(spark, warehouse, source, LANDED_MESSAGES) if landed else None
    if table is None:
        return spark.createDataFrame([], LANDED_SCHEMA)
    in_window = F.col(WINDOW_COLUMN) == F.lit(window_start_ms)
    if unroutable:
        in_window = in_window | (F.col(WINDOW_COLUMN).isNull() & F.col(BATCH_COLUMN).isin(unroutable))
    return committed(table, landed).where(in_window).select(*[f.name for f in LANDED_SCHEMA.fields])


# Every watermark landed, with its place in its Kafka partition (what the late rule reads).
WATERMARK_INDEX_SCHEMA = "topic string, kafka_partition int, kafka_offset long, watermark_ts long"
WATERMARK_COLUMNS = ["topic", "kafka_partition", "kafka_offset", "watermark_ts"]


def read_watermark_index(spark: SparkSession, warehouse, source: str, state: LandingState | None = None) -> DataFrame:
    state = load_state(warehouse, source) if state is None else state
    batches = [b.batch_id for b in state.batches]
    table = read_landed(spark, warehouse, source, LANDING_WATERMARKS) if batches else None
    if table is None:
        return spark.createDataFrame([], WATERMARK_INDEX_SCHEMA)
    return committed(table, batches).select(*WATERMARK_COLUMNS)


@dataclass(frozen=True)
class WindowMessages:
    """A window's landed messages, each Kafka offset once, and how many copies were dropped."""

    messages: DataFrame
    landed: int  # rows read, copies included
    redelivered: int  # copies of an offset landed before (dropped)


def window_messages_once(landed: DataFrame) -> WindowMessages:
    """The same offset landed twice (overlapping or re-written dump files) is one message:
    the newest landing wins. Counted on the offsets alone (no value bytes read); the sort
    that picks the winners runs only when there is a copy."""
    copies = landed.groupBy("topic", "kafka_partition", "kafka_offset").agg(F.count(F.lit(1)).alias("n"))
    counts = copies.agg(F.coalesce(F.sum("n"), F.lit(0)).alias("landed"),
                        F.coalesce(F.sum(F.col("n") - 1), F.lit(0)).alias("redelivered")).first()
    if counts.redelivered:
        newest = Window.partitionBy("topic", "kafka_partition", "kafka_offset").orderBy(
            F.desc_nulls_last("landing_seq"), F.desc("source_file"))
        landed = landed.withColumn("_n", F.row_number().over(newest)).where("_n = 1").drop("_n")
    return WindowMessages(landed.drop("landing_seq"), int(counts.landed), int(counts.redelivered))
