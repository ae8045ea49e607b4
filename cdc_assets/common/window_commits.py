"""Which window an Iceberg commit wrote: the summary properties a window's commits carry,
the layers stored as one table partitioned by window (`WindowTable`), and a window's commit
read back (`window_commit`, pyiceberg, no Spark).

A layer table's write names its window in a write option (`WINDOW_PROPERTY`); the snapshot
tables' commits (overwrite, MERGE, emptying commit) take theirs from Spark's session-wide
snapshot properties (`window_properties`), because a SQL MERGE takes no write options;
pyiceberg's commits of the window take the same values from `iceberg_tables.snapshot_properties`."""

from __future__ import annotations

import json

import pyarrow as pa
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, functions as F

from cdc_assets.common.iceberg_refs import load_table
from cdc_assets.common.iceberg_tables import IcebergTable, WINDOW_COLUMN, as_stored, set_snapshot_properties
from cdc_assets.common.warehouse import load_pyiceberg_catalog

WINDOW_PROPERTY = "cdc.window-start-ms"
OUTPUT_METADATA_PROPERTY = "cdc.output-metadata"


def kept_metadata(metadata: dict) -> str:
    """An output's plain figures (booleans, numbers, texts) as the JSON its commit keeps."""
    plain = {k: getattr(v, "value", v) for k, v in metadata.items()}
    return json.dumps({k: v for k, v in plain.items() if isinstance(v, (bool, int, float, str))})


@dataclass(frozen=True)
class WindowTable:
    """A layer stored as one Iceberg table partitioned by window (`quarantine`,
    `change_table`): a window's write replaces its partition in
    one commit, and that commit's summary says which window it wrote (`cdc.window-start-ms`)
    and carries the output's metadata, so an empty window is a commit too."""

    table: IcebergTable

    def write(self, spark: SparkSession, frame: DataFrame, window_start_ms: int, metadata: dict[str, str],
              empty: bool = False) -> None:
        """`empty`: the caller knows `frame` has no rows (say, a quarantine whose rows were
        counted on the decode's job): an existing table takes pyiceberg's commit that empties
        the window's partition, with the same summary properties (no Spark job)."""
        stored = as_stored(frame).withColumn(WINDOW_COLUMN, F.lit(window_start_ms).cast("long"))
        properties = {WINDOW_PROPERTY: str(window_start_ms), **metadata}
        exists = self.table.exists(spark)
        if empty and exists:
            no_rows = pa.table({c: pa.nulls(0) for c in stored.columns})
            if self.table.overwrite_window_in_arrow(spark, no_rows, window_start_ms, properties) is not None:
                return
        if not exists:
            self.table.ensure_namespace(spark)
            self.table.ensure(spark, stored.schema, partition=WINDOW_COLUMN)
        self.table.evolve(spark, stored.schema)
        # `distribution-mode none`: every row is of one partition value (the window), so
        # Iceberg's default hash distribution shuffled the whole window into one task, and one
        # core wrote it. Each task of the frame's last stage now writes its own file.
        writer = stored.writeTo(self.table.sql).option("distribution-mode", "none")
        for key, value in properties.items():
            writer = writer.option(f"snapshot-property.{key}", value)
        writer.overwrite(F.col(WINDOW_COLUMN) == F.lit(window_start_ms))

    def read(self, spark: SparkSession, window_start_ms: int) -> DataFrame:
        return spark.table(self.table.sql).where(F.col(WINDOW_COLUMN) == F.lit(window_start_ms)).drop(WINDOW_COLUMN)

    def read_windows(self, spark: SparkSession, window_starts: list[int]) -> DataFrame:
        """The rows of several windows, with the window each belongs to (`WINDOW_COLUMN`)."""
        return spark.table(self.table.sql).where(F.col(WINDOW_COLUMN).isin(*window_starts))


# Snapshot summary properties every commit of a window's snapshot tables carries, whatever
# wrote it (overwrite, MERGE, emptying commit): Spark's session-wide snapshot properties,
# because a SQL MERGE takes no write options; pyiceberg's small writes copy them
# (`iceberg_tables.snapshot_properties`).
WINDOW_END_PROPERTY = "cdc.window-end-ms"
WINDOW_END_TSO_PROPERTY = "cdc.window-end-tso"
WATERMARK_PROPERTY = "cdc.global-watermark-tso"


@contextmanager
def window_properties(spark: SparkSession, properties: dict[str, str]):
    """`properties` in the summary of every Iceberg commit `spark` makes meanwhile. The tables
    of a window commit from a few threads of one session: the values must be the window's,
    the same for every table, set before the threads start and unset after they end."""
    set_snapshot_properties(spark, properties)
    try:
        yield
    finally:
        set_snapshot_properties(spark, None)


def window_commit(warehouse, identifier: str, window_start_ms: int) -> dict | None:
    """The summary of the newest commit that wrote the window (pyiceberg, no Spark); None when
    no commit did (or the table does not exist)."""
    from pyiceberg.exceptions import NoSuchTableError

    try:
        table = load_table(load_pyiceberg_catalog(warehouse), identifier)
    except NoSuchTableError:
        return None
    wanted = str(window_start_ms)
    for snapshot in sorted(table.metadata.snapshots, key=lambda s: s.sequence_number, reverse=True):
        summary = snapshot.summary
        if summary is not None and summary.additional_properties.get(WINDOW_PROPERTY) == wanted:
            return {"snapshot_id": snapshot.snapshot_id, **summary.additional_properties,
                    "operation": summary.operation.value}
    return None
