"""Watermarks are claims made by the upstream; these helpers decide which claims to ignore.

- Implausible: a watermark whose physical time is outside the plausible routing range
  (a corrupted or mis-encoded ts) is not a watermark at all: it would complete every
  window at once.
- Regressed: a watermark below one seen earlier (lower offset) in the same Kafka partition,
  typically a resolved ts replayed after a changefeed restart. Completeness and the
  late-event rule only ever use the running maximum, so a regression cannot move anything
  backwards; it is counted and reported so an operator sees the upstream misbehave.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, functions as F

from cdc_assets.common.tso import PHYSICAL_SHIFT, plausible_ms


def plausible_watermark(ts: Column) -> Column:
    """The watermark TSO when its physical time is plausible, else null."""
    return F.when(plausible_ms(F.shiftright(ts, PHYSICAL_SHIFT)).isNotNull(), ts)


def regressions_by_partition(earlier: DataFrame, batch: DataFrame) -> dict[str, int]:
    """Watermark messages of `batch` below a watermark at a lower offset of the same
    partition, in `batch` or in `earlier` (the index of batches landed before).
    Both frames: topic, kafka_partition, kafka_offset, watermark_ts."""
    cols = ["topic", "kafka_partition", "kafka_offset", "watermark_ts"]
    marks = earlier.select(*cols, F.lit(False).alias("_new")).unionByName(
        batch.select(*cols, F.lit(True).alias("_new"))
    )
    before = (
        Window.partitionBy("topic", "kafka_partition")
        .orderBy("kafka_offset", F.col("_new").asc())
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    regressed = F.col("_new") & (F.col("watermark_ts") < F.max("watermark_ts").over(before))
    rows = (
        marks.withColumn("_regressed", F.coalesce(regressed, F.lit(False)))
        .groupBy("topic", "kafka_partition")
        .agg(F.count_if("_regressed").alias("n"))
        .where(F.col("n") > 0)
        .collect()
    )
    return {f"{r.topic}/{r.kafka_partition}": int(r.n) for r in rows}
