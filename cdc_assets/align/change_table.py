"""Layer 3: at-least-once duplicates removed, late events dropped, watermark-aligned.

Rules (docs/architecture.md, "Ordering, dedup and watermarks"):
- late: a row event whose commit_ts is below the highest watermark that appeared earlier
  (at the same or a lower offset) in the same Kafka partition. TiCDC guarantees everything
  below a watermark was sent before it, so such an event is a re-sent copy: dropped, counted.
- duplicate: among the rest, events with identical content (table, commit_ts, source
  position, kind, op, key, before, after, DDL text) are copies from a changefeed restart; the first one in
  (partition, offset, index) order is kept, the others dropped and counted.
- outside the window: a row or DDL event whose commit_ts is not in the window is a routing
  bug (`decode/window_events.py` gives each window its own events), never something to apply:
  dropped and counted, and the `events_inside_window` check fails.
Watermark events are not part of the output (they live in the landing state).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Observation, Window, functions as F

from cdc_assets.common.tso import PHYSICAL_SHIFT, ms_to_tso, tso_ms_col
from cdc_assets.contracts.schemas import CHANGE_LOG_COLUMNS, REJECT_REASON, ROW, WATERMARK


@dataclass(frozen=True)
class AlignmentCounts:
    events_in: int
    late: int
    duplicates: int
    events_out: int
    rows_out: int
    ddl_out: int
    outside_window: int = 0


def _sorted_entries(m: Column) -> Column:
    # Maps cannot be compared or grouped on; a sorted entry array is a stable identity.
    return F.array_sort(F.map_entries(m))


def _image_hash(m: str) -> Column:
    """A hash of an image's entries, in any column order. Spark's hashes skip nulls, so
    {a: "b", b: null} and {a: null, b: "b"} would hash alike, and so would a null image and
    an empty one: the values are also hashed as one text with nulls marked."""
    entries = _sorted_entries(F.col(m))
    values = F.array_join(entries.getField("value"), "\u001f", "\u001e")
    return F.xxhash64(entries, values)


# The offsets of a partition are cut into about this many buckets, so that an event is
# compared with the few watermark intervals of its own bucket, not with every watermark.
_OFFSET_BUCKETS = 4096
_PARTITION = ["topic", "kafka_partition"]


def _prior_watermark(events: DataFrame, watermarks: DataFrame, offsets: DataFrame) -> DataFrame:
    """Adds `_prior_watermark`: the highest watermark at or before each event's offset in its
    partition (null: none). An as-of lookup through two broadcast joins: the events are not
    shuffled, and a topic with one partition is not one task (a window over the partition was).
    `offsets`: rows with the events' lineage columns or more (see `mark_late_and_duplicates`)."""
    # Only watermarks up to the last offset of a partition can precede one of its events (a
    # higher bound than the last event's only adds intervals no event falls in).
    reach = offsets.groupBy(*_PARTITION).agg(F.max("kafka_offset").alias("_reach"))
    by_offset = Window.partitionBy(*_PARTITION).orderBy("kafka_offset", "watermark_ts")
    steps = (
        watermarks.join(reach, on=_PARTITION, how="inner")
        .where(F.col("kafka_offset") <= F.col("_reach"))
        .select(
            *_PARTITION,
            F.col("kafka_offset").alias("_from"),
            # [_from, _to]: the offsets whose latest watermark at or before them is this one
            # (inclusive, so that an offset at the top of the long range does not overflow)
            F.coalesce(F.lead("kafka_offset").over(by_offset) - 1, F.col("_reach")).alias("_to"),
            F.max("watermark_ts").over(by_offset.rowsBetween(Window.unboundedPreceding, 0)).alias("_run"),
            (F.col("_reach").cast("double") + 1
             - F.min("kafka_offset").over(Window.partitionBy(*_PARTITION)).cast("double")).alias("_span"),
        )
        .withColumn("_shift", F.greatest(F.lit(0), F.ceil(F.log2(F.col("_span") / _OFFSET_BUCKETS))).cast("int"))
    )
    shifts = steps.groupBy(*_PARTITION).agg(F.max("_shift").alias("_shift"))
    intervals = steps.where(F.col("_from") <= F.col("_to")).select(
        F.col("topic").alias("_m_topic"),
        F.col("kafka_partition").alias("_m_partition"),
        F.explode(F.sequence(F.call_function("shiftright", "_from", "_shift"),
                             F.call_function("shiftright", "_to", "_shift"))).alias("_m_bucket"),
        "_from", "_to", "_run",
    )
    located = events.join(F.broadcast(shifts), on=_PARTITION, how="left").withColumn(
        "_bucket", F.call_function("shiftright", "kafka_offset", "_shift"))
    within = (
        (located["topic"] == intervals["_m_topic"])
        & (located["kafka_partition"] == intervals["_m_partition"])
        & (located["_bucket"] == intervals["_m_bucket"])
        & (located["kafka_offset"] >= intervals["_from"])
        & (located["kafka_offset"] <= intervals["_to"])
    )
    # The intervals of a partition do not overlap: an event matches at most one.
    return located.join(F.broadcast(intervals), on=within, how="left").select(
        *events.columns, F.col("_run").alias("_prior_watermark"))


def mark_late_and_duplicates(changes: DataFrame, watermarks: DataFrame, window_start_tso: int,
                             window_end_tso: int | None = None, offsets: DataFrame | None = None) -> DataFrame:
    """Add `_late`, `_duplicate` and `_outside` flags to every non-watermark event
    (`_outside`: its commit_ts is not in [window_start_tso, window_end_tso); never, without an end).

    `offsets` (default: the events): the window's messages or any superset of the events'
    Kafka positions, which bound the watermarks the lookup reads. Pass the raw messages when
    `changes` carries observations (`DataFrame.observe`): the events then appear once in the
    plan, which Spark Connect requires of an observed frame."""
    events = changes.where(F.col("event_kind") != WATERMARK).select(*CHANGE_LOG_COLUMNS)
    end = None if window_end_tso is None else F.lit(window_end_tso)
    return mark_rows(events, watermarks, F.lit(True), F.lit(window_start_tso), end, window_start_tso,
                     events if offsets is None else offsets)


def mark_windows(rows: DataFrame, watermarks: DataFrame, window: str, window_ms: int,
                 offsets: DataFrame, first_window_ms: int) -> DataFrame:
    """`mark_late_and_duplicates` for the decoded rows of several windows at once: each row's
    window start (ms) is in its column `window`, and each is marked as its window alone would
    mark it. The rows keep all their columns; rows that are not events to align (watermarks,
    rejects: a `_reject_reason`) are kept with false flags. `offsets`: the windows' messages;
    `first_window_ms`: the earliest window's start."""
    applies = F.coalesce(F.col(REJECT_REASON).isNull() & (F.col("event_kind") != WATERMARK), F.lit(False))
    start = F.shiftleft(F.col(window), PHYSICAL_SHIFT)
    end = F.shiftleft(F.col(window) + F.lit(window_ms), PHYSICAL_SHIFT)
    return mark_rows(rows, watermarks, applies, start, end, ms_to_tso(first_window_ms), offsets, group=[window])


def mark_rows(rows: DataFrame, watermarks: DataFrame, applies: Column, window_start_tso: Column,
              window_end_tso: Column | None, lowest_start_tso: int, offsets: DataFrame,
              group: Sequence[str] = ()) -> DataFrame:
    """The flags of `mark_late_and_duplicates` on the rows where `applies` (false elsewhere),
    each row against its own window's bounds (columns); `group`: columns that part the rows
    into windows (a copy is a copy within its window only). `lowest_start_tso`: no window of
    the rows starts below it, which bounds the watermarks read."""
    # Only watermarks above a window's start can make an event of that window late; one
    # without an offset has no place in its partition's order and is not used.
    marks = watermarks.where(
        (F.col("watermark_ts") > F.lit(lowest_start_tso)) & F.col("kafka_offset").isNotNull()
    ).select(*_PARTITION, "kafka_offset", "watermark_ts")
    with_prior = _prior_watermark(rows, marks, offsets)
    # The highest watermark at or before the event is above its window's start, or no
    # watermark above that start precedes it (then the event is not late).
    prior = F.col("_prior_watermark")
    late = applies & (F.col("event_kind") == ROW) & F.coalesce(
        (prior > window_start_tso) & (F.col("commit_ts") < prior), F.lit(False)
    )
    flagged = with_prior.withColumn("_late", late)
    # The images enter the partition key as hashes: the shuffle and the sort then carry
    # two longs instead of a second copy of both images. A hash match alone never drops an
    # event: a copy must also equal, image for image, the first event of its partition.
    identity = Window.partitionBy(
        # Rows the flags do not apply to (rejects, watermarks) are each a partition of their
        # own: a window of many rejects with null names and times is not one sorted task.
        *group, F.when(~applies, F.struct("kafka_partition", "kafka_offset", "event_index")),
        # source_position: coarse clocks (official Canal, DTS) can repeat a change in the same
        # second; only the source's position tells a real repeat from an at-least-once copy.
        "_late", "database", "table", "commit_ts", "source_position", "event_kind", "op",
        "pk_values", "ddl_sql",
        _image_hash("before"), _image_hash("after"),
    ).orderBy("kafka_partition", "kafka_offset", "event_index")

    def same_as_first(m: str) -> Column:
        return _sorted_entries(F.col(m)).eqNullSafe(_sorted_entries(F.first(m).over(identity)))

    copy = (F.row_number().over(identity) > 1) & same_as_first("before") & same_as_first("after")
    outside = F.lit(False) if window_end_tso is None else F.coalesce(
        (F.col("commit_ts") < window_start_tso) | (F.col("commit_ts") >= window_end_tso), F.lit(True))
    return flagged.withColumns({"_duplicate": applies & ~F.col("_late") & copy,
                                "_outside": applies & outside}).drop("_prior_watermark")


FLAGS = ("_late", "_duplicate", "_outside")


def kept() -> Column:
    """True on the events of a marked frame that the change table keeps."""
    return ~F.col("_late") & ~F.col("_duplicate") & ~F.col("_outside")


def aligned_events(marked: DataFrame) -> DataFrame:
    return marked.where(kept()).select(*CHANGE_LOG_COLUMNS)


def alignment_metrics() -> list[Column]:
    """The counts of a marked frame (`AlignmentCounts`' fields), observed by the write of its kept events."""
    is_kept = kept()
    return [
        F.count(F.lit(1)).alias("events_in"),
        F.count_if(F.col("_late")).alias("late"),
        F.count_if(F.col("_duplicate")).alias("duplicates"),
        F.count_if(is_kept).alias("events_out"),
        F.count_if(is_kept & (F.col("event_kind") == ROW)).alias("rows_out"),
        F.count_if(is_kept & (F.col("event_kind") != ROW)).alias("ddl_out"),
        F.count_if(F.col("_outside")).alias("outside_window"),
    ]


def alignment_counts(row: dict) -> AlignmentCounts:
    """The counts from the values of `alignment_metrics` (other keys are left out)."""
    return AlignmentCounts(**{f: int(row[f] or 0) for f in AlignmentCounts.__dataclass_fields__})


_BAR = "_bar"


class ObservedAlignment:
    """`aligned` (the kept events of a marked frame) with the alignment counts and the kept
    events per chart bar observed by its first action (the change table's write): read them
    after it. Observed before the filter, so the late, duplicate and outside events count too.

    Bars: a minute of commit time each, or `ceil(minutes / bars)` minutes each in wider
    windows (`defs.metadata.events_per_minute_chart`'s bins). A grouped count cannot be
    observed, and one `count_if` per bar cost a window more than its alignment (every observed
    aggregate is updated per row: 60 of them took 3 s of a 250k-event window). One
    `histogram_numeric` over the bar numbers counts them all: it keeps a bin per distinct
    value and merges bins only when there are more distinct values than bins, and a kept
    event's bar is one of `bars` whole numbers, so every bin is one bar with its exact count
    (bins of one value merged across tasks can move the centre by a rounding error: rounded)."""

    def __init__(self, marked: DataFrame, window_start_ms: int, window_ms: int, bars: int):
        minutes = max(window_ms // 60_000, 1)
        self._start_ms = window_start_ms
        self._bar_ms = math.ceil(minutes / bars) * 60_000
        self._bars = math.ceil(minutes / (self._bar_ms // 60_000))
        minute = F.floor(tso_ms_col(F.col("commit_ts")) / 60_000).cast("long") * 60_000
        bar = F.floor((minute - F.lit(window_start_ms)) / F.lit(self._bar_ms)).cast("double")
        self._observation = Observation()
        kept_bar = F.when(kept(), F.col(_BAR))  # null (not counted) for a dropped event
        per_bar = F.histogram_numeric(kept_bar, F.lit(max(self._bars, 2))).alias(_BAR)
        self.aligned = aligned_events(marked.withColumn(_BAR, bar).observe(
            self._observation, *alignment_metrics(), per_bar))

    def counts(self) -> AlignmentCounts:
        return alignment_counts(self._observation.get)

    def events_per_bar(self) -> dict[int, int]:
        """Kept events by the start (ms) of their bar; bars without events left out."""
        bins = self._observation.get[_BAR] or []
        return {self._start_ms + round(b["x"]) * self._bar_ms: int(b["y"]) for b in bins if b["y"]}


def observe_alignment(marked: DataFrame, window_start_ms: int, window_ms: int, bars: int) -> ObservedAlignment:
    return ObservedAlignment(marked, window_start_ms, window_ms, bars)
