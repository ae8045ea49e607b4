"""The counts of one landing batch (`BatchStats`), read back from its landed rows: per Kafka
partition, per window, per file, the first message without a usable time, and the window the
messages without any join."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, functions as F

from cdc_assets.common.windows import is_home_copy
from cdc_assets.landing.layouts import UNPARSED_TOPIC
from cdc_assets.landing.layouts.base import relative_path, unparsed_place
from cdc_assets.landing.routing import UNROUTABLE_REASON
from cdc_assets.landing.state import BatchStats, LandingState, PartitionProgress, UnroutableFile, add_counts
from cdc_assets.landing.tables import WINDOW_COLUMN


# Bytes of the first unroutable message shown to the user (enough to tell base64 text,
# JSON or a binary frame apart).
FIRST_BYTES = 24


def collect_stats(landed: DataFrame, dump_root: Path, window_ms: int, state: LandingState) -> BatchStats:
    """The batch's counts over its landed rows (the small columns only), by one Spark job: the
    rows grouped by Kafka partition, window, file and reason (a few groups a file), the figures
    summed from the groups here. A second job names the first unroutable message, when one
    is. Messages with no usable time at all (stored with a null window) are counted in the
    window they join (`unroutable_window`, the batch's `BatchStats.unroutable_window`)."""
    home = is_home_copy(F.col(WINDOW_COLUMN))
    groups = (
        landed.groupBy("topic", "kafka_partition", WINDOW_COLUMN, "source_file", UNROUTABLE_REASON, home.alias("home"))
        .agg(
            F.count(F.lit(1)).alias("n"),  # a message landed in several windows counts in each
            F.max("kafka_offset").alias("max_offset"),
            F.max("watermark_ts").alias("max_watermark_ts"),
            F.max("routing_ms").alias("max_routing_ms"),
            F.min("routing_ms").alias("min_routing_ms"),
            F.count_if(F.col("claimed_watermark_ts").isNotNull() & F.col("watermark_ts").isNull())
            .alias("implausible_watermarks"),
        )
        .withColumn("file", relative_path(F.col("source_file"), dump_root))  # on the few groups only
        .collect()
    )
    joined, homeless = unroutable_window(groups, window_ms, state)
    implausible: dict[str, int] = {}
    partitions: dict[tuple[str, int], PartitionProgress] = {}
    windows: dict[int, int] = {}
    files: dict[str, UnroutableFile] = {}
    for g in groups:
        window = joined if g[WINDOW_COLUMN] is None else g[WINDOW_COLUMN]
        windows[window] = windows.get(window, 0) + g.n
        progress = PartitionProgress(g.topic, g.kafka_partition, g.n if g.home else 0, g.max_offset,
                                     g.max_watermark_ts, g.max_routing_ms)
        partition = partitions.setdefault((g.topic, g.kafka_partition), PartitionProgress(g.topic, g.kafka_partition))
        partition.merge(progress)
        if g.implausible_watermarks:
            add_counts(implausible, {progress.key: g.implausible_watermarks})
        if not g.home:
            continue
        f = files.setdefault(g.file, UnroutableFile())
        f.messages += g.n
        if g[UNROUTABLE_REASON] is not None:
            counts = {g[UNROUTABLE_REASON]: g.n}
            add_counts(f.unroutable, counts)
            add_counts(partition.unroutable, counts)
    unroutable = {name: f for name, f in sorted(files.items()) if f.unroutable}
    first = _first_unroutable(landed.where(home), dump_root) if unroutable else None
    return BatchStats(sum(p.messages for p in partitions.values()), list(partitions.values()), windows, implausible,
                      unroutable, first, joined if homeless else None)


def unroutable_window(groups: list, window_ms: int, state: LandingState) -> tuple[int, bool]:
    """A message with no usable time at all (garbage) joins the earliest window of its batch
    (the first to be materialized), so it is quarantined there with its lineage instead of
    being dropped; in a batch of nothing but such messages, the newest known window. Also
    whether the batch has such a message. `groups`: `collect_stats`' rows."""
    earliest = min((g.min_routing_ms for g in groups if g.min_routing_ms is not None), default=None)
    homeless = any(g[WINDOW_COLUMN] is None for g in groups)
    if earliest is None:
        return max(state.windows, default=0), homeless
    return earliest // window_ms * window_ms, homeless


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
