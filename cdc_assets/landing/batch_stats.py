"""The counts of one landing batch (`BatchStats`), read back from its landed rows: per Kafka
partition, per window, per file, and the first message without a usable time."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, functions as F

from cdc_assets.common.windows import is_home_copy
from cdc_assets.landing.layouts import UNPARSED_TOPIC
from cdc_assets.landing.layouts.base import relative_path, unparsed_place
from cdc_assets.landing.routing import UNROUTABLE_REASON
from cdc_assets.landing.state import BatchStats, PartitionProgress, UnroutableFile, add_counts


# Bytes of the first unroutable message shown to the user (enough to tell base64 text,
# JSON or a binary frame apart).
FIRST_BYTES = 24


def collect_stats(routed: DataFrame, dump_root: Path) -> BatchStats:
    """The batch's counts over its landed rows (the small columns only)."""
    messages, partitions, windows, implausible = _partition_stats(routed)
    home = routed.where(is_home_copy(F.col("window_start_ms")))
    per_file = (
        home.groupBy("source_file", "topic", "kafka_partition", UNROUTABLE_REASON)
        .agg(F.count(F.lit(1)).alias("n"))
        .withColumn("file", relative_path(F.col("source_file"), dump_root))  # on the few groups only
        .collect()
    )
    files: dict[str, UnroutableFile] = {}
    for r in per_file:
        f = files.setdefault(r.file, UnroutableFile())
        f.messages += r.n
        if r[UNROUTABLE_REASON] is not None:
            counts = {r[UNROUTABLE_REASON]: r.n}
            add_counts(f.unroutable, counts)
            add_counts(partitions[(r.topic, r.kafka_partition)].unroutable, counts)
    unroutable = {name: f for name, f in sorted(files.items()) if f.unroutable}
    first = _first_unroutable(home, dump_root) if unroutable else None
    return BatchStats(messages, list(partitions.values()), windows, implausible, unroutable, first)


def _first_unroutable(home: DataFrame, dump_root: Path) -> dict:
    """The first unroutable message (by file, partition, offset) with its first bytes."""
    r = (home.where(F.col(UNROUTABLE_REASON).isNotNull())
         .select(relative_path(F.col("source_file"), dump_root).alias("file"), "topic", "kafka_partition",
                 "kafka_offset", UNROUTABLE_REASON, F.substring("key", 1, FIRST_BYTES).alias("key"),
                 F.substring("value", 1, FIRST_BYTES).alias("value"))
         .orderBy("file", "topic", "kafka_partition", "kafka_offset").first())
    line = {"line": unparsed_place(r.kafka_offset)} if r.topic == UNPARSED_TOPIC else {}
    return {"file": r.file, "topic": r.topic, "kafka_partition": r.kafka_partition,
            "kafka_offset": r.kafka_offset, **line, "reason": r[UNROUTABLE_REASON],
            "key_first_bytes": _shown(r.key), "value_first_bytes": _shown(r.value)}


def _shown(data: bytes | bytearray | None) -> str:
    """Bytes as Python writes them (printable ASCII as is, others escaped), or `null`."""
    return "null" if data is None else repr(bytes(data))


def _partition_stats(routed: DataFrame) -> tuple[int, dict[tuple[str, int], PartitionProgress],
                                                 dict[int, int], dict[str, int]]:
    """Messages, the progress of each Kafka partition, messages per window (a message in
    several windows counts in each) and implausible watermarks per partition."""
    per_window = (
        routed.groupBy("topic", "kafka_partition", "window_start_ms")
        .agg(
            F.count(F.lit(1)).alias("copies"),  # a message landed in several windows counts in each
            F.count_if(is_home_copy(F.col("window_start_ms"))).alias("messages"),
            F.max("kafka_offset").alias("max_offset"),
            F.max("watermark_ts").alias("max_watermark_ts"),
            F.max("routing_ms").alias("max_routing_ms"),
            F.count_if(F.col("claimed_watermark_ts").isNotNull() & F.col("watermark_ts").isNull())
            .alias("implausible_watermarks"),
        )
        .collect()
    )
    implausible: dict[str, int] = {}
    partitions: dict[tuple[str, int], PartitionProgress] = {}
    windows: dict[int, int] = {}
    for r in per_window:
        windows[r.window_start_ms] = windows.get(r.window_start_ms, 0) + r.copies
        progress = PartitionProgress(r.topic, r.kafka_partition, r.messages, r.max_offset, r.max_watermark_ts,
                                     r.max_routing_ms)
        partitions.setdefault((r.topic, r.kafka_partition), PartitionProgress(r.topic, r.kafka_partition)).merge(
            progress)
        if r.implausible_watermarks:
            add_counts(implausible, {progress.key: r.implausible_watermarks})
    return sum(p.messages for p in partitions.values()), partitions, windows, implausible
