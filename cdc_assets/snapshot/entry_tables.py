"""Where a manifest entry's rows are: the Iceberg table of one source table
(`<source>.snapshots__<db>__<table>`, common/iceberg_tables.py), read at the entry's snapshot.

A table may have been renamed since the entry was written (RENAME TABLE renames the Iceberg
table): a read that finds no table under the entry's identifier, or one without its snapshot,
finds it by the UUID the entry recorded (`iceberg_refs.resolve_identifier`).

The warehouse is an opaque location (a folder or `s3://…`): it is only handed to the catalog
helpers, never made into a path here.
"""

from __future__ import annotations

import json
import uuid

from pyspark.errors import AnalysisException, IllegalArgumentException
from pyspark.sql import DataFrame, SparkSession, types as T

from cdc_assets.common.iceberg_refs import load_table, resolve_identifier
from cdc_assets.common.iceberg_tables import IcebergTable, table_name
from cdc_assets.common.names import table_id
from cdc_assets.common.warehouse import as_warehouse, identifier_parts, load_pyiceberg_catalog, use_catalog
from cdc_assets.snapshot.manifests import TableEntry

SNAPSHOTS_LAYER = "snapshots"


def snapshot_table(spark: SparkSession | None, warehouse, source: str, database: str, table: str) -> IcebergTable:
    """The Iceberg table of one source table (`spark` None: no Spark catalog name needed).

    Its location, used when it is created, is a folder of its own
    (`<warehouse>/<source>/snapshots/<db>.<table>-<random>`, joined as text): a table renamed
    away keeps its files under the old name's folder, and a table created later under that
    name must not share it (orphan-file removal of one would delete the other's files)."""
    catalog = use_catalog(spark, warehouse) if spark is not None else ""
    folder = f"{table_id(database, table)}-{uuid.uuid4().hex[:8]}"
    return IcebergTable(catalog, source, table_name(SNAPSHOTS_LAYER, database, table),
                        as_warehouse(warehouse).snapshot_location(source, folder), warehouse=warehouse)


def table_at(spark: SparkSession, warehouse, identifier: str) -> IcebergTable:
    """The Iceberg table `<namespace>.<name>` of the store (reads, emptying commits)."""
    namespace, name = identifier_parts(identifier)
    return IcebergTable(use_catalog(spark, warehouse), namespace, name, "", warehouse=warehouse)


def entry_identifier(warehouse, entry: TableEntry) -> str:
    """The identifier a manifest entry's table has now: the entry's own, unless a later
    RENAME TABLE renamed the Iceberg table (`iceberg_refs.resolve_identifier`)."""
    return resolve_identifier(load_pyiceberg_catalog(warehouse), entry.identifier, entry.table_uuid,
                              entry.snapshot_id)


def read_entry(spark: SparkSession, warehouse, source: str, entry: TableEntry) -> DataFrame:
    """A manifest entry's rows: its table at its snapshot, in the recorded Spark types. A table
    renamed since (no table under the entry's identifier, or one without the snapshot) is
    found by its UUID."""
    schema = T.StructType.fromJson(json.loads(entry.spark_schema))
    try:
        return table_at(spark, warehouse, entry.identifier).read(spark, entry.snapshot_id, schema)
    except (AnalysisException, IllegalArgumentException):
        identifier = entry_identifier(warehouse, entry)
        if identifier == entry.identifier:
            raise
    return table_at(spark, warehouse, identifier).read(spark, entry.snapshot_id, schema)


def read_entry_arrow(warehouse, source: str, entry: TableEntry):
    """A manifest entry's rows as an Arrow table, read by pyiceberg (no Spark), in the Arrow
    types of the recorded Spark types (Iceberg keeps a smallint as an int)."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyspark.sql.pandas.types import to_arrow_schema

    catalog = load_pyiceberg_catalog(warehouse)
    try:
        table = load_table(catalog, entry.identifier)
    except NoSuchTableError:
        table = None
    if table is None or table.metadata.snapshot_by_id(entry.snapshot_id) is None:  # renamed since
        table = load_table(catalog, resolve_identifier(catalog, entry.identifier, entry.table_uuid, entry.snapshot_id))
    schema = to_arrow_schema(T.StructType.fromJson(json.loads(entry.spark_schema)))
    data = table.scan(snapshot_id=entry.snapshot_id).to_arrow()
    return data.select(schema.names).cast(schema)
