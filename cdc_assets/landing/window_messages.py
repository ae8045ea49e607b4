"""What later stages read of the landing area: a window's messages (each Kafka offset once)
and the watermark index, of the batches the committed state lists.

A window's read is pinned (`WindowRead`): the landed_messages snapshot and the batches it
read, and how many rows and redelivered copies it found. The raw layer stores that record, not
the rows (defs/landing_view_io.py); its consumers read the messages back at the pinned snapshot
(`read_pinned_messages`), so a later landing cannot change what a window decoded."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, Window, functions as F

from cdc_assets.landing.state import LandingState
from cdc_assets.landing.tables import (
    BATCH_COLUMN, LANDED_MESSAGES, LANDED_SCHEMA, LANDING_WATERMARKS, WINDOW_COLUMN, committed, landed_table_metadata,
    landing_table, load_state, read_landed,
)

# What identifies a Kafka message: an offset landed twice is one message.
OFFSET_KEY = ("topic", "kafka_partition", "kafka_offset")
# The columns a window's messages have for their readers (the landing's sequence only picks
# the newest copy of an offset).
MESSAGE_COLUMNS = tuple(f.name for f in LANDED_SCHEMA.fields if f.name != "landing_seq")


def _window_batches(state: LandingState, window_start_ms: int) -> tuple[list[str], list[str]]:
    """The committed batches with messages in the window, and those whose messages without a
    usable time (stored with a null window) joined it (`batch_stats.unroutable_window`)."""
    landed = [b.batch_id for b in state.batches if window_start_ms in b.windows]
    unroutable = [b.batch_id for b in state.batches if b.unroutable_window == window_start_ms]
    return landed, unroutable


@dataclass(frozen=True)
class WindowRead:
    """One read of a window's landed messages: the `main` snapshot of landed_messages it read
    (None: nothing landed in the window), the batches whose rows it read, and what it found."""

    window_start_ms: int
    snapshot_id: int | None
    batches: tuple[str, ...]
    unroutable_batches: tuple[str, ...]  # batches whose unroutable messages joined the window
    landed: int  # rows read, copies included
    redelivered: int  # copies of an offset landed before (dropped by readers)

    @property
    def messages(self) -> int:
        return self.landed - self.redelivered


def _spark_filter(read: WindowRead):
    in_window = F.col(WINDOW_COLUMN) == F.lit(read.window_start_ms)
    if read.unroutable_batches:
        in_window = in_window | (F.col(WINDOW_COLUMN).isNull()
                                 & F.col(BATCH_COLUMN).isin(list(read.unroutable_batches)))
    return in_window


def _iceberg_filter(read: WindowRead):
    """`_spark_filter` and the batch list, as a pyiceberg row filter (partition columns only:
    the scan keeps whole files)."""
    from pyiceberg.expressions import And, EqualTo, In, IsNull, Or

    in_window = And(EqualTo(WINDOW_COLUMN, read.window_start_ms), In(BATCH_COLUMN, list(read.batches)))
    if read.unroutable_batches:
        in_window = Or(in_window, And(IsNull(WINDOW_COLUMN), In(BATCH_COLUMN, list(read.unroutable_batches))))
    return in_window


def pin_window_read(warehouse, source: str, window_start_ms: int, state: LandingState | None = None) -> WindowRead:
    """The read of the window's messages of the batches `state` (default: the committed one)
    lists, pinned to landed_messages' current snapshot. The state is read first: a landing
    appends its rows before it commits its state, so that snapshot holds every listed batch.
    Counts the rows and the redelivered copies on the offset columns alone, with pyiceberg
    (no Spark job, no value bytes read)."""
    state = load_state(warehouse, source) if state is None else state
    landed, unroutable = _window_batches(state, window_start_ms)
    table = landed_table_metadata(warehouse, source, LANDED_MESSAGES) if landed else None
    snapshot = None if table is None else table.current_snapshot()
    if snapshot is None:
        return WindowRead(window_start_ms, None, (), (), 0, 0)
    read = WindowRead(window_start_ms, snapshot.snapshot_id, tuple(landed), tuple(unroutable), 0, 0)
    offsets = table.scan(row_filter=_iceberg_filter(read), selected_fields=OFFSET_KEY,
                         snapshot_id=snapshot.snapshot_id).to_arrow()
    distinct = offsets.group_by(list(OFFSET_KEY)).aggregate([]).num_rows
    return WindowRead(window_start_ms, snapshot.snapshot_id, tuple(landed), tuple(unroutable),
                      offsets.num_rows, offsets.num_rows - distinct)


def read_pinned_messages(spark: SparkSession, warehouse, source: str, read: WindowRead) -> DataFrame:
    """The window's messages as `read` found them, each Kafka offset once (`MESSAGE_COLUMNS`).
    Read at the pinned snapshot; when table maintenance expired it, at `main`: committed
    batches are never rewritten, so the listed batches' rows are the same."""
    if not read.batches:
        return spark.createDataFrame([], LANDED_SCHEMA).select(*MESSAGE_COLUMNS)
    table = landing_table(spark, warehouse, source, LANDED_MESSAGES)
    reader = spark.read
    if landed_table_metadata(warehouse, source, LANDED_MESSAGES).snapshot_by_id(read.snapshot_id) is not None:
        reader = reader.option("versionAsOf", str(read.snapshot_id))
    # The unroutable batches are among `batches`: a batch lists the window its unroutable
    # messages joined (landing/land.py counts them in it).
    landed = committed(reader.table(table.sql), list(read.batches)).where(
        _spark_filter(read)).select(*[f.name for f in LANDED_SCHEMA.fields])
    return newest_copies(landed, read.redelivered).select(*MESSAGE_COLUMNS)


def newest_copies(landed: DataFrame, redelivered: int) -> DataFrame:
    """The same offset landed twice (overlapping or re-written dump files) is one message:
    the newest landing wins (then the later file). The sort that picks the winners is planned
    only when the read counted a copy (`WindowRead.redelivered`)."""
    if not redelivered:
        return landed
    newest = Window.partitionBy(*OFFSET_KEY).orderBy(F.desc_nulls_last("landing_seq"), F.desc("source_file"))
    return landed.withColumn("_n", F.row_number().over(newest)).where("_n = 1").drop("_n")


def read_window_messages(spark: SparkSession, warehouse, source: str, window_start_ms: int,
                         state: LandingState | None = None) -> DataFrame:
    """The window's landed messages of the batches `state` (default: the committed one)
    lists, copies included (LANDED_SCHEMA)."""
    state = load_state(warehouse, source) if state is None else state
    landed, unroutable = _window_batches(state, window_start_ms)
    table = read_landed(spark, warehouse, source, LANDED_MESSAGES) if landed else None
    if table is None:
        return spark.createDataFrame([], LANDED_SCHEMA)
    read = WindowRead(window_start_ms, None, tuple(landed), tuple(unroutable), 0, 0)
    return committed(table, landed).where(_spark_filter(read)).select(
        *[f.name for f in LANDED_SCHEMA.fields])


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
