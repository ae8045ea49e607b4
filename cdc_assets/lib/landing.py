"""Incremental, idempotent landing of a topic dump into per-window message folders.

Landing reads only files it has not landed before (by content hash), places every
message in the window of its routing time, and keeps the only cross-window state the
pipeline needs: per Kafka partition the highest offset and highest watermark seen, and
an index of watermark messages (for the late-event rule). Landing the same files again
changes nothing. A new file cut short (a Parquet file without its footer, a kcat file
ending in part of a record) that changed in the last `settle_seconds` is still being written:
the landing waits, landing nothing, and the next landing tries again. One cut short longer
ago was left so by a writer that died: a line file is landed as it is (the cut record is
quarantined), a Parquet file is left out and reported on every landing.

Layout under `<landing root>`:
  messages/window_start_ms=<ms>/batch=<id>/part-*.parquet   raw messages of a window (+ landing_seq
                                                            and the routing columns counted at landing)
  watermarks/batch=<id>/part-*.parquet                      (topic, partition, offset, watermark_ts)
  state.json                                                partitions, watermarks, windows, files
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.errors import PythonException
from pyspark.sql import Column, DataFrame, SparkSession, functions as F, types as T

from cdc_assets.lib.changelog_schema import RAW_MESSAGE_SCHEMA
from cdc_assets.lib.codecs import Decoder
from cdc_assets.lib.codecs.base import EVENT_ROUTING_MS
from cdc_assets.lib.layouts import UNPARSED_TOPIC, get_layout
from cdc_assets.lib.layouts.base import relative_path, unparsed_place
from cdc_assets.lib.parquet_write import parquet_writer
from cdc_assets.lib.storage import exclusive, read_json, remove_path, replace_dir, temp_sibling, window_dir, write_json_atomic
from cdc_assets.lib.tso import plausible_ms
from cdc_assets.lib.watermark_audit import plausible_watermark, regressions_by_partition
from cdc_assets.lib.watermark_state import LandingState


# A file cut short that has not changed for this long is no longer being written
# (the default of `Settings.settle_seconds`).
SETTLE_SECONDS = 600

# Landed messages carry, next to the raw message columns, the landing sequence number and,
# for a message landed in several windows (a batch whose events straddle a window end), the
# windows it was landed in, its home window (the one of its routing time) first; null for a
# message landed in one window. `lib/window_events.py` reads it to decode each event once.
ROUTED_WINDOWS = "routed_windows"
LANDED_SCHEMA = T.StructType(RAW_MESSAGE_SCHEMA.fields + [
    T.StructField("landing_seq", T.IntegerType(), True),
    T.StructField(ROUTED_WINDOWS, T.ArrayType(T.LongType()), True),
])


@dataclass(frozen=True)
class LandingResult:
    new_files: int
    skipped_files: int
    messages: int
    batch_id: str | None
    state: LandingState
    # Watermarks ignored in this landing, per "topic/partition" (see lib/watermark_audit.py).
    regressed_watermarks: dict[str, int] = field(default_factory=dict)
    implausible_watermarks: dict[str, int] = field(default_factory=dict)
    # New files cut short (no Parquet footer, a kcat record cut mid-line) and changed within
    # `settle_seconds`: still being written, so nothing is landed (module docstring).
    waiting_files: list[str] = field(default_factory=list)
    # Files cut short longer ago that cannot be read (Parquet): left out, reported each time.
    unreadable_files: list[str] = field(default_factory=list)
    # This landing's messages without a usable time of their protocol (`unroutable_reason`):
    # per file (relative path) {"messages": n, "unroutable": {reason: n}}, files with any only.
    unroutable_files: dict[str, dict] = field(default_factory=dict)
    # Files of the input not read as the layout, and why (a layout named explicitly: `scan_named`).
    ignored_files: dict[str, str] = field(default_factory=dict)


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def landing_lock(landing_root: Path):
    """One lander at a time per landing area (sensor, schedule and CLI may overlap)."""
    return exclusive(landing_root / "state.json")


def messages_path(landing_root: Path, window_start_ms: int) -> Path:
    return window_dir(landing_root / "messages", window_start_ms)


def read_window_messages(spark: SparkSession, landing_root: Path, window_start_ms: int) -> DataFrame:
    batches = sorted(str(p) for p in messages_path(landing_root, window_start_ms).glob("batch=*"))
    if not batches:
        return spark.createDataFrame([], LANDED_SCHEMA)
    return spark.read.schema(LANDED_SCHEMA).parquet(*batches)


# Every watermark landed, with its place in its Kafka partition (what the late rule reads).
WATERMARK_INDEX_SCHEMA = "topic string, kafka_partition int, kafka_offset long, watermark_ts long"


def read_watermark_index(spark: SparkSession, landing_root: Path) -> DataFrame:
    batches = sorted(str(p) for p in (landing_root / "watermarks").glob("batch=*"))
    if not batches:
        return spark.createDataFrame([], WATERMARK_INDEX_SCHEMA)
    return spark.read.schema(WATERMARK_INDEX_SCHEMA).parquet(*batches)


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
    settle_seconds: int = SETTLE_SECONDS,
    layout_named: bool = False,
    layout_options: Mapping[str, str] | None = None,
) -> LandingResult:
    """`layout_named`: the user named the layout (not detected): every non-hidden file of the
    dump is read as it, or reported in `ignored_files` with why not (`DumpLayout.scan_named`).
    `layout_options`: the layout's own (`DumpLayout.default_options`)."""
    with landing_lock(landing_root):
        state = load_state(landing_root)
        _remove_uncommitted_batches(landing_root, state)
        state.check_window_ms(window_ms)
        # Read the layout's checkpoint before listing: a file written after the listing is
        # then not covered by a checkpoint we record now.
        dump_layout = get_layout(layout, layout_options)
        checkpoint = dump_layout.checkpoint_ts(dump_root)
        if layout_named:
            files, refused, ignored_paths = dump_layout.scan_named(dump_root)
        else:
            (files, refused), ignored_paths = dump_layout.scan(dump_root), {}
        ignored = {str(p.relative_to(dump_root)): why for p, why in ignored_paths.items()}
        if refused:
            raise ValueError(f"{len(refused)} file(s) under {dump_root} cannot be read as {layout}: "
                             + "; ".join(f"{path.relative_to(dump_root)}: {reason}"
                                         for path, reason in list(refused.items())[:5]))
        cut = _cut_files(files, dump_layout, state)
        waiting = [p for p in cut if changed_within(p, settle_seconds)]
        # Cut files that stopped changing were left so by a writer that died: line files are
        # landed as they are (the cut record is quarantined); others cannot be read at all.
        unreadable = [] if dump_layout.cut_files_readable else [p for p in cut if p not in waiting]
        if waiting:
            # Landing the others could move a partition's watermark past messages of a
            # waiting file, which would then arrive late: wait for the whole set.
            return LandingResult(0, 0, 0, None, state, waiting_files=_names(waiting, dump_root),
                                 unreadable_files=_names(unreadable, dump_root), ignored_files=ignored)
        files = [p for p in files if p not in unreadable]
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
            return LandingResult(0, skipped, 0, None, state, unreadable_files=_names(unreadable, dump_root),
                                 ignored_files=ignored)

        batch_id = hashlib.sha256("".join(sorted(new)).encode()).hexdigest()[:16]
        routed = _route(decoder, dump_layout.read(spark, list(new.values()), dump_root))
        if EVENT_ROUTING_MS not in routed.columns:
            routed = routed.withColumn(EVENT_ROUTING_MS, F.lit(None).cast("array<long>"))
        routed = routed.withColumns({
            UNROUTABLE_REASON: unroutable_reason(),
            "routing_ms": plausible_ms(F.col("routing_ms")),
            "claimed_watermark_ts": F.col("watermark_ts"),
            "watermark_ts": plausible_watermark(F.col("watermark_ts")),
            # Newest landing wins when the same offset is landed again with other content.
            "landing_seq": F.lit(len(state.batches)).cast("int"),
        })
        staging = temp_sibling(landing_root / f"staging-{batch_id}")
        try:
            # One pass over the dump's bytes: the messages are written once, by window. The
            # counts, the watermark index and the audit then read the staged files' small
            # columns, not the message values (no cache of the whole batch in memory).
            try:
                _stage_messages(routed, staging, window_ms)
            except PythonException as exc:  # e.g. an object the layout cannot read: its one line
                raise ValueError(f"cannot land the {layout} files under {dump_root}: {_worker_error(exc)}") from exc
            staged = spark.read.schema(_STAGED_SCHEMA).parquet(str(staging))
            unroutable_window = _unroutable_window(staged, window_ms, state)
            staged = staged.withColumn(
                "window_start_ms", F.coalesce(F.col("window_start_ms"), F.lit(unroutable_window)))
            regressed = regressions_by_partition(
                read_watermark_index(spark, landing_root), staged.where(F.col("watermark_ts").isNotNull()))
            stats = _collect_stats(staged, dump_root)
            _write_watermarks(staged, landing_root, batch_id)
            # Last: `staged` reads the staging folder, which publishing empties.
            _publish_messages(staging, landing_root, batch_id, unroutable_window)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        state.apply_batch(batch_id, sorted(new), stats)
        state.record_ignored_watermarks(regressed, stats.implausible_watermarks)
        state.apply_checkpoint(checkpoint)
        write_json_atomic(landing_root / "state.json", state.to_json())
        return LandingResult(len(new), skipped, stats.messages, batch_id, state,
                             regressed, stats.implausible_watermarks, unreadable_files=_names(unreadable, dump_root),
                             unroutable_files=stats.unroutable_files, ignored_files=ignored)


# Why a message has no usable time of its protocol (null: it has one). Such a message is
# placed by its Kafka timestamp when it has one, else it is unroutable; either way no window
# can rely on it, so the landing counts it (docs/reliability.md, "Unroutable messages").
UNROUTABLE_REASON = "unroutable_reason"
_PROTOCOL_MS = "_protocol_routing_ms"
_KAFKA_TIMESTAMP = "_cdc_kafka_timestamp"


def _route(decoder: Decoder, raw: DataFrame) -> DataFrame:
    """`decoder.route` on the protocol's fields alone (Kafka's timestamp hidden from it), then
    the Kafka timestamp as the fallback routing time every decoder used to apply itself: the
    same `routing_ms`, and `_PROTOCOL_MS` says whether the protocol found a time."""
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
    reasons: dict[str, int] = {}
    for p in state.partitions.values():
        for reason, n in p.get("unroutable", {}).items():
            reasons[reason] = reasons.get(reason, 0) + n
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


def changed_within(path: Path, seconds: int) -> bool:
    """Whether a file changed in the last `seconds` (0: never), so its writer may not be done."""
    return seconds > 0 and time.time() - path.stat().st_mtime < seconds


def _cut_files(files: list[Path], layout, state: LandingState) -> list[Path]:
    """New files the layout finds cut short (content already landed is not new)."""
    return [p for p in files if state.known_digest(p) is None and not layout.is_complete(p)
            and file_digest(p) not in state.landed_digests]


def _names(paths: list[Path], root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in paths]


def _remove_uncommitted_batches(landing_root: Path, state: LandingState) -> None:
    """A landing killed before it wrote state.json leaves batch folders no state knows:
    remove them (their files are landed again), so no message is landed twice."""
    committed = {b["batch_id"] for b in state.batches}
    for folder in [*landing_root.glob("messages/window_start_ms=*/batch=*"), *landing_root.glob("watermarks/batch=*")]:
        if folder.name.split("=", 1)[1] not in committed:
            shutil.rmtree(folder, ignore_errors=True)
    for stale in [*landing_root.glob(".tmp-*"), *landing_root.glob("messages/*/.tmp-*"),
                  *landing_root.glob("watermarks/.tmp-*")]:
        remove_path(stale)


# Staged message files carry, next to the landed columns, what the counts and the audit read.
_ROUTING_COLUMNS = ["routing_ms", "watermark_ts", "claimed_watermark_ts"]
_STAGED_SCHEMA = T.StructType([
    T.StructField("topic", T.StringType()), T.StructField("kafka_partition", T.IntegerType()),
    T.StructField("kafka_offset", T.LongType()), T.StructField("source_file", T.StringType()),
    # read only for the first unroutable message (Parquet reads the columns a query needs)
    T.StructField("key", T.BinaryType()), T.StructField("value", T.BinaryType()),
    *[T.StructField(c, T.LongType()) for c in _ROUTING_COLUMNS],
    T.StructField(UNROUTABLE_REASON, T.StringType()),
    T.StructField(ROUTED_WINDOWS, T.ArrayType(T.LongType())),
    T.StructField("window_start_ms", T.LongType()),  # the folder; null: no usable routing time
])


def _worker_error(exc: PythonException) -> str:
    """The error a Python worker raised, without the traceback Spark wraps it in (the layouts'
    errors name the file, partition and offset)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1].removeprefix("ValueError: ") if lines else type(exc).__name__


def _stage_messages(routed: DataFrame, staging: Path, window_ms: int) -> None:
    """Window = floor(routing_ms / width). Routing times outside the plausible range
    (seconds instead of ms, garbage) were nulled: such a message is unroutable instead of
    opening a window in 1970 or 9999, and is staged in the null window's folder. A message
    whose events fall in other windows too is staged once more in each of them."""
    staged = (
        routed.withColumn(ROUTED_WINDOWS, routed_windows(F.col("routing_ms"), F.col(EVENT_ROUTING_MS), window_ms))
        .withColumn("window_start_ms", F.explode(F.coalesce(F.col(ROUTED_WINDOWS), F.array(window_start("routing_ms", window_ms)))))
        .select(*[f.name for f in LANDED_SCHEMA.fields], *_ROUTING_COLUMNS, UNROUTABLE_REASON, "window_start_ms")
        .repartition("window_start_ms")
        .sortWithinPartitions("topic", "kafka_partition", "kafka_offset")
    )
    parquet_writer(staged).partitionBy("window_start_ms").parquet(str(staging))


def window_start(ms: str | Column, window_ms: int) -> Column:
    """The start (ms) of the window holding physical time `ms`."""
    ms = F.col(ms) if isinstance(ms, str) else ms
    return F.floor(ms / window_ms).cast("long") * window_ms


def routed_windows(routing_ms: Column, event_ms: Column, window_ms: int) -> Column:
    """[home window, other windows of its events...], or null when all are in the home window
    (or the message has no usable routing time: it stays unroutable, quarantined at home)."""
    others = F.array_sort(F.array_distinct(F.transform(
        F.filter(event_ms, lambda ms: plausible_ms(ms).isNotNull()), lambda ms: window_start(ms, window_ms))))
    home = window_start(routing_ms, window_ms)
    others = F.array_remove(others, home)
    return F.when(home.isNotNull() & (F.size(others) > 0), F.concat(F.array(home), others))


def is_home_copy(window_start_ms: Column) -> Column:
    """The copy of a message in its home window (every message landed in one window is)."""
    return F.col(ROUTED_WINDOWS).isNull() | (F.col(ROUTED_WINDOWS)[0] == window_start_ms)


def _unroutable_window(staged: DataFrame, window_ms: int, state: LandingState) -> int:
    """A message with no usable time at all (garbage) joins the earliest window of its batch
    (the first to be materialized), so it is quarantined there with its lineage instead of
    being dropped; in a batch of nothing but such messages, the newest known window."""
    earliest = staged.agg(F.min("routing_ms")).first()[0]
    if earliest is None:
        return max(state.windows, default=0)
    return earliest // window_ms * window_ms


def _publish_messages(staging: Path, landing_root: Path, batch_id: str, unroutable_window: int) -> None:
    """Move each staged window's files into place as this batch's folder of the window."""
    unroutable = staging / "window_start_ms=__HIVE_DEFAULT_PARTITION__"
    if unroutable.exists():
        target = window_dir(staging, unroutable_window)
        if target.exists():
            for part in unroutable.iterdir():  # data files only: not `.crc` / `_SUCCESS`
                if not part.name.startswith((".", "_")):
                    os.replace(part, target / f"unroutable-{part.name}")
            shutil.rmtree(unroutable)
        else:
            os.replace(unroutable, target)
    for window_folder in sorted(staging.glob("window_start_ms=*")):
        final = landing_root / "messages" / window_folder.name / f"batch={batch_id}"
        replace_dir(window_folder, final)


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
    windows: dict[int, int]  # window_start_ms -> messages landed in it (with copies of straddling batches)
    implausible_watermarks: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> messages
    unroutable_files: dict[str, dict] = field(default_factory=dict)  # see LandingResult
    first_unroutable: dict | None = None  # file, topic, partition, offset, reason, first bytes


# Bytes of the first unroutable message shown to the user (enough to tell base64 text,
# JSON or a binary frame apart).
FIRST_BYTES = 24


def _collect_stats(routed: DataFrame, dump_root: Path) -> BatchStats:
    stats = _partition_stats(routed)
    home = routed.where(is_home_copy(F.col("window_start_ms")))
    per_file = (
        home.groupBy("source_file", "topic", "kafka_partition", UNROUTABLE_REASON)
        .agg(F.count(F.lit(1)).alias("n"))
        .withColumn("file", relative_path(F.col("source_file"), dump_root))  # on the few groups only
        .collect()
    )
    files: dict[str, dict] = {}
    for r in per_file:
        f = files.setdefault(r.file, {"messages": 0, "unroutable": {}})
        f["messages"] += r.n
        if r[UNROUTABLE_REASON] is not None:
            f["unroutable"][r[UNROUTABLE_REASON]] = f["unroutable"].get(r[UNROUTABLE_REASON], 0) + r.n
            p = next(p for p in stats.partitions
                     if (p["topic"], p["kafka_partition"]) == (r.topic, r.kafka_partition))
            p["unroutable"][r[UNROUTABLE_REASON]] = p["unroutable"].get(r[UNROUTABLE_REASON], 0) + r.n
    unroutable = {name: f for name, f in sorted(files.items()) if f["unroutable"]}
    first = None
    if unroutable:
        first = _first_unroutable(home, dump_root)
    return BatchStats(stats.messages, stats.partitions, stats.windows, stats.implausible_watermarks,
                      unroutable, first)


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


def _partition_stats(routed: DataFrame) -> BatchStats:
    per_partition = (
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
    partitions: dict[tuple[str, int], dict] = {}
    windows: dict[int, int] = {}
    for r in per_partition:
        windows[r.window_start_ms] = windows.get(r.window_start_ms, 0) + r.copies
        p = partitions.setdefault(
            (r.topic, r.kafka_partition),
            {"topic": r.topic, "kafka_partition": r.kafka_partition, "messages": 0,
             "max_offset": None, "max_watermark_ts": None, "max_routing_ms": None, "unroutable": {}},
        )
        p["messages"] += r.messages
        if r.implausible_watermarks:
            key = f"{r.topic}/{r.kafka_partition}"
            implausible[key] = implausible.get(key, 0) + r.implausible_watermarks
        for name in ("max_offset", "max_watermark_ts", "max_routing_ms"):
            value = getattr(r, name)
            if value is not None and (p[name] is None or value > p[name]):
                p[name] = value
    return BatchStats(sum(p["messages"] for p in partitions.values()), list(partitions.values()), windows, implausible)


def reset_landing(landing_root: Path) -> None:
    if landing_root.exists():
        shutil.rmtree(landing_root)
    os.makedirs(landing_root, exist_ok=True)
