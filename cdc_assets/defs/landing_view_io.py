"""The raw layer's IO manager: the raw layer is a pinned view of the landing area, not a copy.

A window's output is a `WindowRead` (landing/window_messages.py): the landed_messages snapshot,
the batches and the counts of the read. `handle_output` writes no message: it records the read
as one row of the small Iceberg table `<source>.window_reads` (partitioned by window, a
window's record replaces the previous one), with pyiceberg, so recording needs no Spark job.
Its commit summary names the window and carries the output's metadata, as every layer's commit
does (`window_commits.window_commit`), which is how change_table reads back the completeness
seen at read (`resources.window_output_metadata`) and how tools list it, without Spark.

`load_input` returns the window's messages read from landed_messages at the recorded snapshot,
each offset once: a later landing cannot change what a window decodes.

Why a table and not only Dagster's materialization metadata: readers outside a run (the
change_table step through `window_output_metadata`, `cdc-assets tables`, tests, other engines)
have the warehouse, not necessarily the Dagster instance that ran the window."""


import time

from dagster import (
    ConfigurableIOManager, InputContext, OutputContext, ResourceDependency, TableColumn, TableColumnConstraints,
    TableSchema,
)
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame

from cdc_assets.common.iceberg_tables import WINDOW_COLUMN
from cdc_assets.common.window_commits import OUTPUT_METADATA_PROPERTY, WINDOW_PROPERTY, kept_metadata
from cdc_assets.common.warehouse import as_warehouse, load_pyiceberg_catalog, qualified_name, table_identifier
from cdc_assets.defs.resources import WarehouseResource
from cdc_assets.defs.source_build import WINDOW_READS
from cdc_assets.landing.tables import LANDED_MESSAGES, LANDED_SCHEMA
from cdc_assets.landing.window_messages import MESSAGE_COLUMNS, WindowRead, read_pinned_messages

# A window's record; the output metadata's completeness figures are columns too, so a SQL
# reader sees them next to the pin.
COMPLETE_AT_READ, WATERMARK_AT_READ = "window_complete_at_read", "global_watermark_ts_at_read"
COMMIT_RETRIES = 8  # concurrent windows (a backfill) commit to the same small table
# A commit per window read: without a bound, the kept metadata files (each listing every
# snapshot) would grow with the square of the windows.
READS_TABLE_PROPERTIES = {"format-version": "2", "write.metadata.delete-after-commit.enabled": "true",
                          "write.metadata.previous-versions-max": "10"}


def _read_schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import BooleanType, ListType, LongType, NestedField, StringType

    return Schema(
        NestedField(1, WINDOW_COLUMN, LongType(), required=False),
        NestedField(2, "landed_snapshot_id", LongType(), required=False),
        NestedField(3, "batch_ids", ListType(10, StringType(), element_required=False), required=False),
        NestedField(4, "unroutable_batch_ids", ListType(11, StringType(), element_required=False), required=False),
        NestedField(5, "messages_in", LongType(), required=False),
        NestedField(6, "redelivered_offsets_dropped", LongType(), required=False),
        NestedField(7, "messages_out", LongType(), required=False),
        NestedField(8, COMPLETE_AT_READ, BooleanType(), required=False),
        NestedField(9, WATERMARK_AT_READ, LongType(), required=False),
    )


def _reads_table(warehouse, source: str, create: bool):
    """The pyiceberg table `<source>.window_reads` (None when missing and not `create`)."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    catalog = load_pyiceberg_catalog(warehouse)
    try:
        return catalog.load_table((source, WINDOW_READS))
    except (NoSuchTableError, NoSuchNamespaceError):
        if not create:
            return None
    # Loaded first: pyiceberg's `create_table_if_not_exists` writes a metadata file before it
    # finds the table exists, and leaves it behind.
    catalog.create_namespace_if_not_exists((source,))
    spec = PartitionSpec(PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name=WINDOW_COLUMN))
    return catalog.create_table_if_not_exists(
        (source, WINDOW_READS), _read_schema(), partition_spec=spec,
        location=as_warehouse(warehouse).table_location(source, WINDOW_READS), properties=READS_TABLE_PROPERTIES)


def record_window_read(warehouse, source: str, read: WindowRead, complete: bool, watermark_ts: int,
                       properties: dict[str, str]) -> None:
    """The window's record replaces its previous one, in one commit (one snapshot: its files
    swapped, as `landing.tables.commit_state` does) whose summary names the window and carries
    `properties`. A commit that lost a race with another window's is retried on the table as
    it is then (each window touches only its own partition)."""
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.expressions import EqualTo
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    row = {WINDOW_COLUMN: read.window_start_ms, "landed_snapshot_id": read.snapshot_id,
           "batch_ids": list(read.batches), "unroutable_batch_ids": list(read.unroutable_batches),
           "messages_in": read.landed, "redelivered_offsets_dropped": read.redelivered,
           "messages_out": read.messages, COMPLETE_AT_READ: complete, WATERMARK_AT_READ: watermark_ts}
    summary = {WINDOW_PROPERTY: str(read.window_start_ms), **properties}
    for attempt in range(COMMIT_RETRIES):
        table = _reads_table(warehouse, source, create=True)
        data = pa.Table.from_pylist([row], schema=table.schema().as_arrow())
        try:
            with table.transaction() as tx:
                with tx.update_snapshot(snapshot_properties=summary).overwrite() as swap:
                    for task in table.scan(row_filter=EqualTo(WINDOW_COLUMN, read.window_start_ms)).plan_files():
                        swap.delete_data_file(task.file)
                    for new in _dataframe_to_data_files(table_metadata=tx.table_metadata, df=data, io=table.io):
                        swap.append_data_file(new)
            return
        except CommitFailedException:
            if attempt == COMMIT_RETRIES - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def recorded_window_read(warehouse, source: str, window_start_ms: int) -> WindowRead | None:
    """The window's recorded read (pyiceberg, no Spark); None when none was recorded."""
    from pyiceberg.expressions import EqualTo

    table = _reads_table(warehouse, source, create=False)
    if table is None or table.current_snapshot() is None:
        return None
    rows = table.scan(row_filter=EqualTo(WINDOW_COLUMN, window_start_ms)).to_arrow().to_pylist()
    if not rows:
        return None
    r = rows[-1]
    return WindowRead(window_start_ms, r["landed_snapshot_id"], tuple(r["batch_ids"] or ()),
                      tuple(r["unroutable_batch_ids"] or ()), r["messages_in"], r["redelivered_offsets_dropped"])


def record_read_output(warehouse, source: str, read: WindowRead, metadata: dict) -> dict:
    """Record the window's read with `metadata`'s plain figures in its commit summary
    (`record_window_read`); returns the figures the record adds: rows, table, snapshot, columns."""
    plain = {k: getattr(v, "value", v) for k, v in metadata.items()}
    record_window_read(warehouse, source, read, bool(plain.get(COMPLETE_AT_READ)),
                       int(plain.get(WATERMARK_AT_READ, -1)), {OUTPUT_METADATA_PROPERTY: kept_metadata(metadata)})
    return {
        "rows": read.messages,
        # The rows live in landed_messages: a reader takes that snapshot's rows of the batches.
        "dagster/table_name": qualified_name(table_identifier(source, LANDED_MESSAGES)),
        "iceberg_snapshot_id": str(read.snapshot_id),
        "landed_batches": len(read.batches),
        "read_record": qualified_name(table_identifier(source, WINDOW_READS)),
        "dagster/column_schema": message_schema(),
    }


def pinned_window_messages(spark, warehouse, source: str, start_ms: int, asset: str) -> DataFrame:
    """The window's messages read at its recorded landed_messages snapshot, each offset once."""
    read = recorded_window_read(warehouse, source, start_ms)
    if read is None:
        raise FileNotFoundError(
            f"{asset} has no recorded read of window {start_ms} in the Iceberg "
            f"table {table_identifier(source, WINDOW_READS)}: materialize that partition first")
    return read_pinned_messages(spark, warehouse, source, read)


def message_schema() -> TableSchema:
    """The UI's column list of the raw layer: the columns its readers get."""
    fields = {f.name: f for f in LANDED_SCHEMA.fields}
    return TableSchema(columns=[
        TableColumn(name=name, type=fields[name].dataType.simpleString(),
                    constraints=TableColumnConstraints(nullable=fields[name].nullable))
        for name in MESSAGE_COLUMNS])


class LandingViewIOManager(ConfigurableIOManager):
    """`WindowRead` -> a row of `<source>.window_reads`; inputs: the window's messages read
    at the recorded landed_messages snapshot (module docstring)."""

    warehouse: ResourceDependency[WarehouseResource]
    pyspark: ResourceDependency[PySparkResource]

    @staticmethod
    def _window(context: InputContext | OutputContext) -> tuple[str, int]:
        return context.asset_key.path[0], int(context.asset_partitions_time_window.start.timestamp() * 1000)

    def handle_output(self, context: OutputContext, obj: WindowRead) -> None:
        source, _ = self._window(context)
        context.add_output_metadata(record_read_output(self.warehouse.iceberg, source, obj, context.output_metadata or {}))

    def load_input(self, context: InputContext) -> DataFrame:
        source, start_ms = self._window(context)
        return pinned_window_messages(self.pyspark.spark_session, self.warehouse.iceberg, source, start_ms,
                                      context.asset_key.to_user_string())
