"""The landing area as three Iceberg tables of the source's namespace in the warehouse catalog,
so a landing needs nothing but the catalog (a local folder or `s3://…` warehouse alike):

  <source>.landed_messages     the landed messages (LANDED_SCHEMA, the routing columns the
                               landing counted, `window_start_ms`, `batch_id`), partitioned by
                               window and batch
  <source>.landing_watermarks  the watermark index (topic, kafka_partition, kafka_offset,
                               watermark_ts, batch_id), partitioned by batch
  <source>.landing_state       one row: the LandingState document (JSON), the commit point

Commit protocol of one landing batch (landing.land):
1. read the state table (pyiceberg); its `main` snapshot is the landing's condition, and the
   landed tables' `main` snapshots bound what step 5 may delete;
2. append the batch's messages: one Spark commit whose summary names the batch (`cdc.landing-batch`);
3. append its watermarks the same way;
4. commit the new state (it lists the batch) with pyiceberg, which asserts that `main` of the
   state table is still the snapshot read in 1 (no retry): a landing that committed meanwhile
   makes this one fail ("another landing … committed meanwhile; rerun");
5. delete the rows of batches the state does not list (a landing killed between 2 and 4, or
   one that lost the race of 4) that were there when this landing started.

Readers keep only rows of the batches the state lists, so a killed landing's rows are never
seen, and its files, not in the state's digests, are landed again by the next landing. Step 5
deletes only rows written before this landing's start: a landing that wrote them had read an
older state or the same one, so after step 4 succeeded it can never commit (while one that
started after could, and its rows must stay). `batch_id` is a partition: those deletes drop
whole files (metadata only), and readers prune by it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F, types as T

from cdc_assets.common.iceberg_tables import IcebergTable, as_stored
from cdc_assets.common.warehouse import as_warehouse, load_pyiceberg_catalog, use_catalog
from cdc_assets.common.windows import ROUTED_WINDOWS
from cdc_assets.contracts.schemas import RAW_MESSAGE_SCHEMA
from cdc_assets.landing.state import LandingState

LANDED_MESSAGES, LANDING_WATERMARKS, LANDING_STATE = "landed_messages", "landing_watermarks", "landing_state"
WINDOW_COLUMN, BATCH_COLUMN, STATE_COLUMN = "window_start_ms", "batch_id", "state"
BATCH_PROPERTY = "cdc.landing-batch"  # snapshot summary: the batch a commit appended
REMOVED_PROPERTY = "cdc.removed-batches"  # snapshot summary: uncommitted batches a cleanup deleted
# The state is committed once, on the snapshot read at the landing's start: pyiceberg's own
# retry would rebase it on a concurrent landing's state and lose that landing's batch.
STATE_TABLE_PROPERTIES = {"format-version": "2", "commit.retry.num-retries": "0"}

# A landed message as later stages read it: the raw message, the landing it came with (the
# newest of an offset landed twice wins) and the windows its events fall in.
LANDED_SCHEMA = T.StructType(RAW_MESSAGE_SCHEMA.fields + [
    T.StructField("landing_seq", T.IntegerType(), True),
    T.StructField(ROUTED_WINDOWS, T.ArrayType(T.LongType()), True),
])


class LandingConflict(RuntimeError):
    """Another landing of the source committed its state between this one's read and commit."""


def landing_table(spark: SparkSession | None, warehouse, source: str, name: str) -> IcebergTable:
    catalog = use_catalog(spark, warehouse) if spark is not None else ""
    return IcebergTable(catalog, source, name, as_warehouse(warehouse).table_location(source, name))


def _load(catalog, source: str, name: str):
    """The pyiceberg table, or None when it does not exist yet."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        return catalog.load_table((source, name))
    except (NoSuchTableError, NoSuchNamespaceError):
        return None


def landed_table_metadata(warehouse, source: str, name: str):
    """A landing table as pyiceberg loads it (its snapshots, its scans), None before the first
    landing: what readers plan and count with, no Spark."""
    return _load(load_pyiceberg_catalog(warehouse), source, name)


def _main_snapshot_id(table) -> int | None:
    snapshot = None if table is None else table.current_snapshot()
    return None if snapshot is None else snapshot.snapshot_id


def _read_document(table) -> tuple[LandingState, list]:
    """The state document at the table's `main`, and the data files holding it."""
    if _main_snapshot_id(table) is None:
        return LandingState(), []
    scan = table.scan(snapshot_id=_main_snapshot_id(table))
    files = [task.file for task in scan.plan_files()]
    rows = scan.to_arrow().column(STATE_COLUMN).to_pylist()
    if len(rows) != 1:
        raise RuntimeError(f"the landing state table {table.name()} holds {len(rows)} rows, not one")
    return LandingState.from_json(json.loads(rows[0])), files


def load_state(warehouse, source: str) -> LandingState:
    """The committed landing state (empty before the first landing); pyiceberg, no Spark."""
    local = as_warehouse(warehouse)
    if not local.is_s3 and not Path(local.location).is_dir():
        return LandingState()  # a local warehouse not made yet: nothing landed
    return _read_document(_load(load_pyiceberg_catalog(warehouse), source, LANDING_STATE))[0]


@dataclass
class StartOfLanding:
    """What a landing read at its start: the state, the state table as loaded (its `main` is
    the condition of the state commit) and the landed tables' `main` snapshots (the cleanup's
    bound)."""

    source: str
    state: LandingState
    state_table: object
    state_files: list  # the data files of the state read (the commit replaces them)
    landed_snapshots: dict[str, int | None] = field(default_factory=dict)
    commit_seconds: float | None = None  # how long the state commit took (pyiceberg)


def start_landing(warehouse, source: str) -> StartOfLanding:
    """Step 1 of the protocol; creates the source's namespace and state table if missing."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField, StringType

    catalog = load_pyiceberg_catalog(warehouse)
    catalog.create_namespace_if_not_exists((source,))
    table = catalog.create_table_if_not_exists(
        (source, LANDING_STATE), Schema(NestedField(1, STATE_COLUMN, StringType(), required=False)),
        location=as_warehouse(warehouse).table_location(source, LANDING_STATE), properties=STATE_TABLE_PROPERTIES)
    state, files = _read_document(table)
    # After the state: a batch appended in between belongs to a landing that read this state
    # or an older one, which cannot commit once this one did (module docstring).
    landed = {name: _main_snapshot_id(_load(catalog, source, name)) for name in (LANDED_MESSAGES, LANDING_WATERMARKS)}
    return StartOfLanding(source, state, table, files, landed)


def commit_state(start: StartOfLanding, state: LandingState, batch_id: str | None = None) -> None:
    """Step 4: the state document replaces the one read at the start, in one pyiceberg commit
    that fails if another landing committed since."""
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    data = pa.table({STATE_COLUMN: pa.array([state.to_document()], pa.string())})
    table = start.state_table
    began = time.perf_counter()
    try:
        # One snapshot that swaps the document's file (`Table.overwrite` would plan a delete
        # and commit two snapshots).
        with table.transaction() as tx:
            properties = {BATCH_PROPERTY: batch_id} if batch_id else {}
            with tx.update_snapshot(snapshot_properties=properties).overwrite() as swap:
                for old in start.state_files:
                    swap.delete_data_file(old)
                for new in _dataframe_to_data_files(table_metadata=tx.table_metadata, df=data, io=table.io):
                    swap.append_data_file(new)
    except CommitFailedException as exc:
        raise LandingConflict(f"another landing of source {start.source!r} committed meanwhile; rerun "
                              f"(nothing of this landing is visible: {exc})") from None
    start.commit_seconds = time.perf_counter() - began


def save_state(warehouse, source: str, state: LandingState) -> None:
    """Commit `state` as the source's landing state (tools and tests; a landing uses the protocol)."""
    commit_state(start_landing(warehouse, source), state)


def remove_uncommitted_batches(warehouse, start: StartOfLanding, state: LandingState) -> dict[str, list[str]]:
    """Step 5, after a successful state commit: per landed table, the batches it deleted.
    Which batches a table holds comes from its commits' summaries (metadata only, no manifest
    read); a batch whose commit expired (table maintenance) stays, invisible to readers."""
    from pyiceberg.expressions import In
    from pyiceberg.table.snapshots import ancestors_of

    committed = {b.batch_id for b in state.batches}
    catalog, removed = load_pyiceberg_catalog(warehouse), {}
    for name, snapshot_id in start.landed_snapshots.items():
        table = None if snapshot_id is None else _load(catalog, start.source, name)
        if table is None or table.snapshot_by_id(snapshot_id) is None:
            continue
        appended, gone = set(), set()
        for snapshot in ancestors_of(table.snapshot_by_id(snapshot_id), table.metadata):
            props = snapshot.summary.additional_properties if snapshot.summary else {}
            if props.get(BATCH_PROPERTY):
                appended.add(props[BATCH_PROPERTY])
            gone.update(b for b in props.get(REMOVED_PROPERTY, "").split(",") if b)
        orphans = sorted(appended - committed - gone)
        if orphans:
            table.delete(In(BATCH_COLUMN, orphans), snapshot_properties={REMOVED_PROPERTY: ",".join(orphans)})
            removed[name] = orphans
    return removed


def append_batch(spark: SparkSession, table: IcebergTable, frame: DataFrame, batch_id: str,
                 partition: tuple[str, ...]) -> None:
    """Steps 2 and 3: `frame` (clustered by `partition` within each task) appended as the
    batch's one commit. `distribution-mode none`: the frame is already clustered, and
    Iceberg's range distribution would sample it, reading the dump a second time."""
    stored = as_stored(frame.withColumn(BATCH_COLUMN, F.lit(batch_id)))
    if not table.exists(spark):
        table.ensure_namespace(spark)
        table.ensure(spark, stored.schema, partition=partition)
    (stored.writeTo(table.sql).option("distribution-mode", "none")
     .option(f"snapshot-property.{BATCH_PROPERTY}", batch_id).append())


def committed(frame: DataFrame, batch_ids: list[str]) -> DataFrame:
    """Rows of the listed batches only (a small list: an `IN` the scan prunes partitions by; a
    long one: a broadcast semi-join)."""
    if len(batch_ids) <= 1000:
        return frame.where(F.col(BATCH_COLUMN).isin(batch_ids))
    ids = frame.sparkSession.createDataFrame([(b,) for b in batch_ids], f"{BATCH_COLUMN} string")
    return frame.join(F.broadcast(ids), on=BATCH_COLUMN, how="left_semi")


def read_landed(spark: SparkSession, warehouse, source: str, name: str) -> DataFrame | None:
    """A landed table with all its rows (committed or not), None before the first landing."""
    table = landing_table(spark, warehouse, source, name)
    return spark.table(table.sql) if table.exists(spark) else None


def batch_rows(spark: SparkSession, warehouse, source: str, batch_id: str) -> DataFrame:
    """The landed messages of one batch (the landing's counts read them back)."""
    return spark.table(landing_table(spark, warehouse, source, LANDED_MESSAGES).sql).where(
        F.col(BATCH_COLUMN) == F.lit(batch_id))
