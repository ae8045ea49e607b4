"""Raw message bytes for quarantine rows.

The Python batch decoders send a message's raw key / value back to Spark on their own
rejects only (`common.arrow_events`). Events rejected after decoding (`invalid_table_name`,
the value conversion's `invalid_value`) get them from the window's raw messages, matched by lineage.
"""

from __future__ import annotations

from collections.abc import Collection

from pyspark.sql import DataFrame, functions as F

# One Kafka message. The raw layer already keeps one row per message; the lookup still
# takes one match per key, so that no quarantine row could ever be doubled.
MESSAGE_KEY = ["topic", "kafka_partition", "kafka_offset"]


def refill_raw_bytes(rejected: DataFrame, raw_messages: DataFrame, reasons: Collection[str]) -> DataFrame:
    """`rejected` (quarantine rows: lineage, `reason`, `key`, `value`) with the raw bytes of
    rows rejected for one of `reasons` looked up in `raw_messages` where the decoder left
    them null. Other rows, and the order of the columns, are unchanged."""
    missing = F.col("reason").isin(*reasons) & F.col("key").isNull() & F.col("value").isNull()
    wanted = rejected.where(missing).select(*MESSAGE_KEY).distinct()
    found = (
        raw_messages.join(wanted, on=MESSAGE_KEY, how="left_semi")
        .dropDuplicates(MESSAGE_KEY)
        .select(*MESSAGE_KEY, F.col("key").alias("_raw_key"), F.col("value").alias("_raw_value"))
    )
    return rejected.join(found, on=MESSAGE_KEY, how="left").select(
        *[F.when(missing, F.col(f"_raw_{c}")).otherwise(F.col(c)).alias(c) if c in ("key", "value") else F.col(c)
          for c in rejected.columns]
    )
