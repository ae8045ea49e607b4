"""Layer 3: at-least-once duplicates removed, late events dropped, watermark-aligned.

Rules (docs/architecture.md, "Ordering, dedup and watermarks"):
- late: a row event whose commit_ts is below the highest watermark that appeared
  earlier (lower offset) in the same Kafka partition. TiCDC guarantees everything below
  a watermark was sent before it, so such an event is a re-sent copy: dropped, counted.
- duplicate: among the rest, events with identical content (table, commit_ts, source
  position, kind, op, key, before, after, DDL text) are copies from a changefeed restart; the first one in
  (partition, offset, index) order is kept, the others dropped and counted.
Watermark events are not part of the output (they live in the landing state).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window, functions as F

from cdc_assets.lib.changelog_schema import CHANGE_LOG_COLUMNS, ROW, WATERMARK


@dataclass(frozen=True)
class AlignmentCounts:
    events_in: int
    late: int
    duplicates: int
    events_out: int
    rows_out: int
    ddl_out: int


def _sorted_entries(m: str) -> Column:
    # Maps cannot be grouped on; a sorted entry array is a stable, groupable identity.
    return F.array_sort(F.map_entries(F.col(m)))


def mark_late_and_duplicates(changes: DataFrame, watermarks: DataFrame, window_start_tso: int) -> DataFrame:
    """Add `_late` and `_duplicate` flags to every non-watermark event."""
    events = changes.where(F.col("event_kind") != WATERMARK)
    # Only watermarks above the window start can make an event of this window late.
    marks = watermarks.where(F.col("watermark_ts") > F.lit(window_start_tso)).select(
        "topic", "kafka_partition", "kafka_offset", F.col("watermark_ts").alias("_mark")
    )
    tagged = events.select(*CHANGE_LOG_COLUMNS, F.lit(None).cast("long").alias("_mark")).unionByName(
        marks, allowMissingColumns=True
    )
    by_offset = (
        Window.partitionBy("topic", "kafka_partition")
        .orderBy("kafka_offset", F.col("event_kind").asc_nulls_first())
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    with_prior = tagged.withColumn("_prior_watermark", F.max("_mark").over(by_offset)).where(
        F.col("event_kind").isNotNull()
    )
    late = (F.col("event_kind") == ROW) & F.coalesce(
        F.col("commit_ts") < F.col("_prior_watermark"), F.lit(False)
    )
    flagged = with_prior.withColumn("_late", late)
    identity = Window.partitionBy(
        # source_position: coarse clocks (official Canal, DTS) can repeat a change in the same
        # second; only the source's position tells a real repeat from an at-least-once copy.
        "_late", "database", "table", "commit_ts", "source_position", "event_kind", "op",
        "pk_values", "ddl_sql",
        _sorted_entries("before"), _sorted_entries("after"),
    ).orderBy("kafka_partition", "kafka_offset", "event_index")
    return flagged.withColumn(
        "_duplicate", ~F.col("_late") & (F.row_number().over(identity) > 1)
    )


def aligned_events(marked: DataFrame) -> DataFrame:
    return marked.where(~F.col("_late") & ~F.col("_duplicate")).select(*CHANGE_LOG_COLUMNS)


def count_alignment(marked: DataFrame) -> AlignmentCounts:
    kept = ~F.col("_late") & ~F.col("_duplicate")
    r = marked.agg(
        F.count(F.lit(1)).alias("events_in"),
        F.count_if(F.col("_late")).alias("late"),
        F.count_if(F.col("_duplicate")).alias("duplicates"),
        F.count_if(kept).alias("events_out"),
        F.count_if(kept & (F.col("event_kind") == ROW)).alias("rows_out"),
        F.count_if(kept & (F.col("event_kind") != ROW)).alias("ddl_out"),
    ).first()
    return AlignmentCounts(**{k: int(v or 0) for k, v in r.asDict().items()})
