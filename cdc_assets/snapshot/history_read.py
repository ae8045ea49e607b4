"""Reading the SCD2 history back: one table's ended versions, or its whole history with the open
versions from the newest snapshot (see `snapshot/history` for what a window writes)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, functions as F, types as T

from cdc_assets.common.iceberg_tables import WINDOW_COLUMN
from cdc_assets.common.names import table_id
from cdc_assets.snapshot.entry_tables import read_entry
from cdc_assets.snapshot.history import END_OP, VALID_FROM, VALID_TO, history_table
from cdc_assets.snapshot.reconstruct import COMMIT_TS_COLUMN
from cdc_assets.snapshot.store import list_manifests, read_manifest


def read_history(spark: SparkSession, warehouse, source: str, database: str, table: str) -> DataFrame | None:
    """Every ended version of one table, all windows (its Iceberg history table, without the
    window column; None: no version ended yet). Versions that ended under different schemas
    sit side by side: a column a version did not have is null (snapshot/history: schemas)."""
    history = history_table(spark, warehouse, source, database, table)
    if not history.exists(spark):
        return None
    return spark.table(history.sql).drop(WINDOW_COLUMN)


def _union_loose(a: DataFrame, b: DataFrame) -> DataFrame:
    """unionByName; a column typed differently on the two sides (MODIFY COLUMN) becomes bigint
    when both are integers, else text."""
    types_a = {f.name: f.dataType for f in a.schema.fields}
    types_b = {f.name: f.dataType for f in b.schema.fields}
    clash = {c: (T.LongType() if isinstance(types_a[c], _INTEGERS) and isinstance(types_b[c], _INTEGERS)
                 else T.StringType())
             for c in types_a.keys() & types_b.keys() if types_a[c] != types_b[c]}
    common = lambda df: df.withColumns({c: F.col(c).cast(t) for c, t in clash.items()}) if clash else df  # noqa: E731
    return common(a).unionByName(common(b), allowMissingColumns=True)


_INTEGERS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def full_history(spark: SparkSession, warehouse, source: str, database: str, table: str) -> DataFrame | None:
    """The whole SCD2 table up to the newest snapshot: every ended version, plus the open versions
    (the snapshot's rows, with `_cdc_valid_to` and `_cdc_end_op` null). None if the table never had rows."""
    windows = list_manifests(warehouse, source)
    if not windows:
        return None
    manifest = read_manifest(warehouse, source, windows[-1])
    ended = read_history(spark, warehouse, source, database, table)
    if ended is not None:  # a window whose history was written but whose manifest was not: not yet
        ended = ended.where(F.col(VALID_TO) < F.lit(manifest.window_end_ms << 18))
    entry = manifest.tables.get(table_id(database, table))
    if entry is None:
        return ended
    current = read_entry(spark, warehouse, source, entry)
    open_versions = current.select(
        *[c for c in current.columns if c != COMMIT_TS_COLUMN], F.col(COMMIT_TS_COLUMN).alias(VALID_FROM),
        F.lit(None).cast("long").alias(VALID_TO), F.lit(None).cast("string").alias(END_OP))
    return open_versions if ended is None else _union_loose(ended, open_versions)
