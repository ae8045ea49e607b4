"""Incremental, idempotent landing of a topic dump into per-window message folders.

Landing reads only files it has not landed before (by content hash), places every
message in the window of its routing time, and keeps the only cross-window state the
pipeline needs: per Kafka partition the highest offset and highest watermark seen, and
an index of watermark messages (for the late-event rule). Landing the same files again
changes nothing.

Layout under `<landing root>`:
  messages/window_start_ms=<ms>/batch=<id>/part-*.parquet   raw messages of a window
  watermarks/batch=<id>/part-*.parquet                      (topic, partition, offset, watermark_ts)
  state.json                                                partitions, watermarks, windows, files
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from pyspark.sql import DataFrame, SparkSession, functions as F, types as T

from cdc_assets.lib.changelog_schema import RAW_MESSAGE_SCHEMA
from cdc_assets.lib.codecs import Decoder
from cdc_assets.lib.layouts import get_layout, list_dump_files, read_dump
from cdc_assets.lib.storage import read_json, replace_dir, temp_sibling, window_dir, write_json_atomic
from cdc_assets.lib.watermark_state import LandingState


# Landed messages carry the landing sequence number next to the raw message columns.
LANDED_SCHEMA = T.StructType(RAW_MESSAGE_SCHEMA.fields + [T.StructField("landing_seq", T.IntegerType(), True)])


@dataclass(frozen=True)
class LandingResult:
    new_files: int
    skipped_files: int
    messages: int
    batch_id: str | None
    state: LandingState


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextmanager
def landing_lock(landing_root: Path) -> Iterator[None]:
    """One lander at a time per landing area (sensor, schedule and CLI may overlap)."""
    landing_root.mkdir(parents=True, exist_ok=True)
    with (landing_root / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def messages_path(landing_root: Path, window_start_ms: int) -> Path:
    return window_dir(landing_root / "messages", window_start_ms)


def read_window_messages(spark: SparkSession, landing_root: Path, window_start_ms: int) -> DataFrame:
    batches = sorted(str(p) for p in messages_path(landing_root, window_start_ms).glob("batch=*"))
    if not batches:
        return spark.createDataFrame([], LANDED_SCHEMA)
    return spark.read.schema(LANDED_SCHEMA).parquet(*batches)


def read_watermark_index(spark: SparkSession, landing_root: Path) -> DataFrame:
    schema = "topic string, kafka_partition int, kafka_offset long, watermark_ts long"
    batches = sorted(str(p) for p in (landing_root / "watermarks").glob("batch=*"))
    if not batches:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*batches)


def load_state(landing_root: Path) -> LandingState:
    return LandingState.from_json(read_json(landing_root / "state.json", default={}))


def land(
    spark: SparkSession,
    *,
    dump_root: Path,
    layout: str,
    decoder: Decoder,
    landing_root: Path,
    window_ms: int,
) -> LandingResult:
    with landing_lock(landing_root):
        state = load_state(landing_root)
        state.check_window_ms(window_ms)
        # Read the layout's checkpoint before listing: a file written after the listing is
        # then not covered by a checkpoint we record now.
        checkpoint = get_layout(layout).checkpoint_ts(dump_root)
        files = list_dump_files(dump_root, layout)
        new: dict[str, Path] = {}
        for path in files:
            digest = state.known_digest(path)
            if digest is None:
                digest = file_digest(path)
            if digest not in state.landed_digests and digest not in new:
                new[digest] = path
            state.remember_file(path, digest)
        skipped = len(files) - len(new)
        if not new:
            state.apply_checkpoint(checkpoint)
            write_json_atomic(landing_root / "state.json", state.to_json())
            return LandingResult(0, skipped, 0, None, state)

        batch_id = hashlib.sha256("".join(sorted(new)).encode()).hexdigest()[:16]
        routed = decoder.route(read_dump(spark, list(new.values()), layout, dump_root))
        cached = routed.withColumns({
            "routing_ms": _plausible(F.col("routing_ms")),
            # Newest landing wins when the same offset is landed again with other content.
            "landing_seq": F.lit(len(state.batches)).cast("int"),
        }).persist()
        try:
            routed = _assign_windows(cached, window_ms, state)
            _write_messages(routed, landing_root, batch_id)
            _write_watermarks(routed, landing_root, batch_id)
            stats = _collect_stats(routed)
        finally:
            cached.unpersist()
        state.apply_batch(batch_id, sorted(new), stats)
        state.apply_checkpoint(checkpoint)
        write_json_atomic(landing_root / "state.json", state.to_json())
        return LandingResult(len(new), skipped, stats.messages, batch_id, state)


# Routing times outside these bounds (seconds instead of ms, garbage) are not trusted:
# such a message is treated as unroutable instead of opening a window in 1970 or 9999.
MIN_ROUTING_MS = 946_684_800_000  # 2000-01-01
MAX_ROUTING_MS = 7_258_118_400_000  # 2200-01-01


def _plausible(ms):
    return F.when((ms >= MIN_ROUTING_MS) & (ms < MAX_ROUTING_MS), ms)


def _assign_windows(routed: DataFrame, window_ms: int, state: LandingState) -> DataFrame:
    """Window = floor(routing_ms / width). A message with no usable time at all (garbage)
    joins the earliest window of its batch (the first to be materialized), so it is
    quarantined there with its lineage instead of being dropped."""
    earliest = routed.agg(F.min("routing_ms")).first()[0]
    if earliest is None:
        earliest = max(state.windows, default=0)
    routing = F.coalesce(F.col("routing_ms"), F.lit(earliest))
    return routed.withColumn("window_start_ms", F.floor(routing / window_ms).cast("long") * window_ms)


def _write_messages(routed: DataFrame, landing_root: Path, batch_id: str) -> None:
    """Write the batch partitioned by window, then move each window's files into place."""
    staging = temp_sibling(landing_root / f"staging-{batch_id}")
    (
        routed.select(*[f.name for f in RAW_MESSAGE_SCHEMA.fields], "landing_seq", "window_start_ms")
        .repartition("window_start_ms")
        .sortWithinPartitions("topic", "kafka_partition", "kafka_offset")
        .write.partitionBy("window_start_ms")
        .parquet(str(staging))
    )
    for window_folder in sorted(staging.glob("window_start_ms=*")):
        final = landing_root / "messages" / window_folder.name / f"batch={batch_id}"
        replace_dir(window_folder, final)
    shutil.rmtree(staging, ignore_errors=True)


def _write_watermarks(routed: DataFrame, landing_root: Path, batch_id: str) -> None:
    final = landing_root / "watermarks" / f"batch={batch_id}"
    tmp = temp_sibling(final)
    (
        routed.where(F.col("watermark_ts").isNotNull())
        .select("topic", "kafka_partition", "kafka_offset", "watermark_ts")
        .coalesce(1)
        .write.parquet(str(tmp))
    )
    replace_dir(tmp, final)


@dataclass(frozen=True)
class BatchStats:
    messages: int
    partitions: list[dict]  # topic, kafka_partition, messages, max_offset, max_watermark_ts, max_routing_ms
    windows: dict[int, int]  # window_start_ms -> messages


def _collect_stats(routed: DataFrame) -> BatchStats:
    per_partition = (
        routed.groupBy("topic", "kafka_partition", "window_start_ms")
        .agg(
            F.count(F.lit(1)).alias("messages"),
            F.max("kafka_offset").alias("max_offset"),
            F.max("watermark_ts").alias("max_watermark_ts"),
            F.max("routing_ms").alias("max_routing_ms"),
        )
        .collect()
    )
    partitions: dict[tuple[str, int], dict] = {}
    windows: dict[int, int] = {}
    for r in per_partition:
        windows[r.window_start_ms] = windows.get(r.window_start_ms, 0) + r.messages
        p = partitions.setdefault(
            (r.topic, r.kafka_partition),
            {"topic": r.topic, "kafka_partition": r.kafka_partition, "messages": 0,
             "max_offset": None, "max_watermark_ts": None, "max_routing_ms": None},
        )
        p["messages"] += r.messages
        for field in ("max_offset", "max_watermark_ts", "max_routing_ms"):
            value = getattr(r, field)
            if value is not None and (p[field] is None or value > p[field]):
                p[field] = value
    return BatchStats(sum(windows.values()), list(partitions.values()), windows)


def reset_landing(landing_root: Path) -> None:
    if landing_root.exists():
        shutil.rmtree(landing_root)
    os.makedirs(landing_root, exist_ok=True)
