"""Incremental, idempotent landing of a topic dump into the warehouse's landing tables.

Landing reads only files it has not landed before (by content hash), places every
message in the window of its routing time, and keeps the only cross-window state the
pipeline needs: per Kafka partition the highest offset and highest watermark seen, and
an index of watermark messages (for the late-event rule). Landing the same files again
changes nothing. A new file cut short (a Parquet file without its footer, a kcat file
ending in part of a record) that changed in the last `settle_seconds` is still being written:
the landing waits, landing nothing, and the next landing tries again. One cut short longer
ago was left so by a writer that died: a line file is landed as it is (the cut record is
quarantined), a Parquet file is left out and reported on every landing.

The landing area is three Iceberg tables of the source's namespace (the messages, the
watermark index and the state, which is the commit point; tables and commit protocol in
landing/tables.py): nothing but the warehouse's catalog, so a local folder or an `s3://`
warehouse alike, and one writer at a time by optimistic concurrency, not a lock.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from pyspark.errors import PythonException
from pyspark.sql import Column, DataFrame, SparkSession, functions as F, types as T

from cdc_assets.contracts.schemas import RAW_MESSAGE_SCHEMA
from cdc_assets.decode import Decoder
from cdc_assets.decode.base import EVENT_ROUTING_MS
from cdc_assets.landing.layouts import UNPARSED_TOPIC, get_layout
from cdc_assets.landing.layouts.base import relative_path, unparsed_place
from cdc_assets.landing.tables import (
    BATCH_COLUMN, LANDED_MESSAGES, LANDING_WATERMARKS, WINDOW_COLUMN, append_batch, batch_rows, commit_state,
    committed, drop_landing_tables, landing_table, load_state, read_landed, remove_uncommitted_batches, start_landing,
)
from cdc_assets.landing.tables import LandingConflict  # noqa: F401  (what `land` raises on a lost race)
from cdc_assets.common.tso import plausible_ms
from cdc_assets.common.windows import ROUTED_WINDOWS, is_home_copy, routed_windows, window_start
from cdc_assets.landing.watermark_audit import plausible_watermark, regressions_by_partition
from cdc_assets.landing.state import LandingState


# A file cut short that has not changed for this long is no longer being written
# (the default of `Settings.settle_seconds`).
SETTLE_SECONDS = 600

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
    # Watermarks ignored in this landing, per "topic/partition" (see landing/watermark_audit.py).
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
    # How long the commit of the state took (pyiceberg; None: nothing committed).
    state_commit_seconds: float | None = None


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _window_batches(state: LandingState, window_start_ms: int) -> tuple[list[str], list[str]]:
    """The committed batches with messages in the window, and those whose messages without a
    usable time (stored with a null window) joined it (`_unroutable_window`)."""
    landed = [b["batch_id"] for b in state.batches if window_start_ms in b.get("windows", ())]
    unroutable = [b["batch_id"] for b in state.batches if b.get("unroutable_window") == window_start_ms]
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
_WATERMARK_COLUMNS = ["topic", "kafka_partition", "kafka_offset", "watermark_ts"]


def read_watermark_index(spark: SparkSession, warehouse, source: str, state: LandingState | None = None) -> DataFrame:
    state = load_state(warehouse, source) if state is None else state
    batches = [b["batch_id"] for b in state.batches]
    table = read_landed(spark, warehouse, source, LANDING_WATERMARKS) if batches else None
    if table is None:
        return spark.createDataFrame([], WATERMARK_INDEX_SCHEMA)
    return committed(table, batches).select(*_WATERMARK_COLUMNS)


def land(
    spark: SparkSession,
    *,
    dump_root: Path,
    layout: str,
    decoder: Decoder,
    warehouse,
    source: str,
    window_ms: int,
    settle_seconds: int = SETTLE_SECONDS,
    layout_named: bool = False,
    layout_options: Mapping[str, str] | None = None,
) -> LandingResult:
    """Land the new files of `dump_root` into `source`'s landing tables of `warehouse` (a
    location only the catalog helpers open). `layout_named`: the user named the layout (not
    detected): every non-hidden file of the dump is read as it, or reported in `ignored_files`
    with why not (`DumpLayout.scan_named`). `layout_options`: the layout's own
    (`DumpLayout.default_options`). A LandingConflict when another landing of the source
    committed meanwhile (landing/tables.py)."""
    start = start_landing(warehouse, source)
    state = start.state
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
    before = json.dumps(state.to_json(), sort_keys=True, default=str)  # to_json shares the state's dicts
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
        if json.dumps(state.to_json(), sort_keys=True, default=str) != before:  # new fingerprints, a checkpoint
            commit_state(start, state)
            remove_uncommitted_batches(warehouse, start, state)
        return LandingResult(0, skipped, 0, None, state, unreadable_files=_names(unreadable, dump_root),
                             ignored_files=ignored)

    # The files' content names the batch; the suffix tells apart two attempts to land the
    # same files (a landing killed before its state commit, then run again).
    batch_id = hashlib.sha256("".join(sorted(new)).encode()).hexdigest()[:16] + "-" + uuid.uuid4().hex[:8]
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
    # One pass over the dump's bytes: the messages are written once, by window, in the
    # batch's one commit. The counts, the watermark index and the audit then read the
    # batch's small columns back, not the message values (no cache of the batch in memory).
    try:
        append_batch(spark, landing_table(spark, warehouse, source, LANDED_MESSAGES),
                     _landed_rows(routed, window_ms), batch_id, (WINDOW_COLUMN, BATCH_COLUMN))
    except PythonException as exc:  # e.g. an object the layout cannot read: its one line
        raise ValueError(f"cannot land the {layout} files under {dump_root}: {_worker_error(exc)}") from exc
    staged = batch_rows(spark, warehouse, source, batch_id)
    unroutable_window, has_unroutable = _unroutable_window(staged, window_ms, state)
    staged = staged.withColumn(WINDOW_COLUMN, F.coalesce(F.col(WINDOW_COLUMN), F.lit(unroutable_window)))
    regressed = regressions_by_partition(
        read_watermark_index(spark, warehouse, source, state), staged.where(F.col("watermark_ts").isNotNull()))
    stats = _collect_stats(staged, dump_root)
    if has_unroutable:
        stats = replace(stats, unroutable_window=unroutable_window)
    append_batch(spark, landing_table(spark, warehouse, source, LANDING_WATERMARKS),
                 staged.where(F.col("watermark_ts").isNotNull()).select(*_WATERMARK_COLUMNS).coalesce(1),
                 batch_id, (BATCH_COLUMN,))
    state.apply_batch(batch_id, sorted(new), stats)
    state.record_ignored_watermarks(regressed, stats.implausible_watermarks)
    state.apply_checkpoint(checkpoint)
    commit_state(start, state, batch_id)  # the commit point
    remove_uncommitted_batches(warehouse, start, state)
    return LandingResult(len(new), skipped, stats.messages, batch_id, state,
                         regressed, stats.implausible_watermarks, unreadable_files=_names(unreadable, dump_root),
                         unroutable_files=stats.unroutable_files, ignored_files=ignored,
                         state_commit_seconds=start.commit_seconds)


# Why a message has no usable time of its protocol (null: it has one). Such a message is
# placed by its Kafka timestamp when it has one, else it is unroutable; either way no window
# can rely on it, so the landing counts it (docs/reliability.md, "Unroutable messages").
UNROUTABLE_REASON = "unroutable_reason"
_PROTOCOL_MS = "_protocol_routing_ms"
_KAFKA_TIMESTAMP = "_cdc_kafka_timestamp"


def _route(decoder: Decoder, raw: DataFrame) -> DataFrame:
    """`decoder.route` on the protocol's fields alone (Kafka's timestamp hidden from it), then
    the Kafka timestamp as the fallback routing time, applied here once for every decoder: the
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


# Stored next to the landed columns: what the counts and the audit read back, and why a
# message has no usable time.
_ROUTING_COLUMNS = ["routing_ms", "watermark_ts", "claimed_watermark_ts"]


def _worker_error(exc: PythonException) -> str:
    """The error a Python worker raised, without the traceback Spark wraps it in (the layouts'
    errors name the file, partition and offset)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1].removeprefix("ValueError: ") if lines else type(exc).__name__


def _landed_rows(routed: DataFrame, window_ms: int) -> DataFrame:
    """Window = floor(routing_ms / width). Routing times outside the plausible range
    (seconds instead of ms, garbage) were nulled: such a message is unroutable instead of
    opening a window in 1970 or 9999, and is stored with a null window (the batch's state
    entry names the window it joins: `_unroutable_window`). A message whose events fall in
    other windows too is stored once more in each of them. Clustered by window within each
    task (the table is partitioned by it), sorted by place in Kafka inside a window."""
    return (
        routed.withColumn(ROUTED_WINDOWS, routed_windows(F.col("routing_ms"), F.col(EVENT_ROUTING_MS), window_ms))
        .withColumn(WINDOW_COLUMN, F.explode(F.coalesce(F.col(ROUTED_WINDOWS), F.array(window_start("routing_ms", window_ms)))))
        .select(*[f.name for f in LANDED_SCHEMA.fields], *_ROUTING_COLUMNS, UNROUTABLE_REASON, WINDOW_COLUMN)
        .repartition(WINDOW_COLUMN)
        .sortWithinPartitions(WINDOW_COLUMN, "topic", "kafka_partition", "kafka_offset")
    )


def _unroutable_window(staged: DataFrame, window_ms: int, state: LandingState) -> tuple[int, bool]:
    """A message with no usable time at all (garbage) joins the earliest window of its batch
    (the first to be materialized), so it is quarantined there with its lineage instead of
    being dropped; in a batch of nothing but such messages, the newest known window. Also
    whether the batch has such a message."""
    earliest, homeless = staged.agg(F.min("routing_ms"), F.count_if(F.col(WINDOW_COLUMN).isNull())).first()
    if earliest is None:
        return max(state.windows, default=0), bool(homeless)
    return earliest // window_ms * window_ms, bool(homeless)


@dataclass(frozen=True)
class BatchStats:
    messages: int
    partitions: list[dict]  # topic, kafka_partition, messages, max_offset, max_watermark_ts, max_routing_ms
    windows: dict[int, int]  # window_start_ms -> messages landed in it (with copies of straddling batches)
    implausible_watermarks: dict[str, int] = field(default_factory=dict)  # "topic/partition" -> messages
    unroutable_files: dict[str, dict] = field(default_factory=dict)  # see LandingResult
    first_unroutable: dict | None = None  # file, topic, partition, offset, reason, first bytes
    unroutable_window: int | None = None  # the window its messages without a usable time joined


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


def reset_landing(warehouse, source: str) -> None:
    """Drop the source's landing tables: the next landing starts from nothing."""
    drop_landing_tables(warehouse, source)
