"""SCD type 2 history: every version of every row, with the commit_ts range it was valid in.

A window's history holds the versions that *ended* in that window:
- a version from before the window ends at the first change to its key in the window;
- a version that starts in the window ends at the next change to its key in the window;
- TRUNCATE, DROP TABLE, DROP DATABASE and RENAME TABLE end every row of the table.
Versions still open at the window end are the window's snapshot rows (valid from
`_cdc_commit_ts`). So history(as of window N) = the history rows of windows <= N + snapshot N,
and the cost of a window grows with its changes only.

Columns: the table's columns as they were when the version ended (a RENAME COLUMN before the end
shows the new name), then `_cdc_valid_from` and `_cdc_valid_to` (commit TSOs; valid_from <= ts <
valid_to) and `_cdc_end_op` (UPDATE, DELETE, INSERT, TRUNCATE, DROP_TABLE, DROP_DATABASE,
RENAME_TABLE). A version that lived zero time (two changes in one transaction) is left out. Each row also
has `window_start_ms`, the window that wrote it.

Storage: one Iceberg table per source table, `<source>.history__<db>__<table>`
(`iceberg_tables.table_name("history", …)`), partitioned by `window_start_ms` (the window
whose run wrote the versions). A window's versions of a table are one overwrite of that
window's rows (one commit per table: by pyiceberg from Arrow when the window's events of the
table are few, `TableSchema.events` at most `ARROW_WRITE_ROWS`, and no DDL ended them; else by
Spark), so a rerun of the window replaces them.

Schemas: a window may hold versions under several schemas of a table (DDL inside it). They
are unioned by name into the Iceberg table's schema, which only grows:
- a new column is added (older versions read it as null);
- a type Iceberg widens in place (int→bigint, float→double, decimal precision) is widened;
  a value of the narrower type is written as the wider one;
- any other type change (say int→varchar) keeps the column as it was, and the versions of
  the new type go to a column `<name>__<type>` (e.g. `price__string`), added the same way.
"""

from __future__ import annotations

import functools

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession, functions as F

from cdc_assets.common.concurrent_jobs import run_concurrently
from cdc_assets.common.iceberg_arrow_writes import ARROW_WRITE_ROWS
from cdc_assets.common.iceberg_tables import WINDOW_COLUMN, IcebergTable, widens, as_stored, table_name
from cdc_assets.common.names import table_id
from cdc_assets.common.observed import observed
from cdc_assets.common.sql_text import ident
from cdc_assets.common.warehouse import use_catalog
from cdc_assets.snapshot.reconstruct import COMMIT_TS_COLUMN, END_OP, VALID_FROM, VALID_TO, key_column, value_column
from cdc_assets.snapshot.table_errors import TableFailed, caught, naming_table
from cdc_assets.snapshot.window_state import Closure, Flush, Name, WindowResult

HISTORY_LAYER = "history"


def history_table(spark: SparkSession | None, warehouse, source: str, database: str, table: str) -> IcebergTable:
    """The history table of one source table (`spark` None: no Spark catalog name needed)."""
    catalog = use_catalog(spark, warehouse) if spark is not None else ""
    return IcebergTable(catalog, source, table_name(HISTORY_LAYER, database, table), "", warehouse=warehouse)


def write_window_history(spark: SparkSession, result: WindowResult, warehouse, source: str, window_start_ms: int,
                         stale: list[Name] = ()) -> tuple[dict[str, int], list[Name], dict[Name, str]]:
    """Write the versions that ended in the window, one commit per table; `stale`: tables an
    earlier run of the window wrote versions of (their window rows are replaced even when
    none ends now). Returns the count per table (`names.table_id`), the tables' names, and
    the tables whose history failed, with the reason (the others are written regardless)."""
    parts: dict[Name, list[DataFrame]] = {}
    for f in result.flushes:
        with naming_table(table_id(*f.name), "building its history"):
            parts.setdefault(f.name, []).append(_ended_by_rows(f))
    for c in result.closures:
        with naming_table(table_id(*c.name), "building its history"):
            parts.setdefault(c.name, []).append(_ended_by_ddl(c))
    stale = {tuple(n) for n in stale}
    names = sorted(set(parts) | stale)
    if names:
        history_table(spark, warehouse, source, *names[0]).ensure_namespace(spark)
    frames = versions_by_table(parts)
    expected = _expected_versions(result)
    # A table's window applied in Arrow (small_window) has its versions: one flush, no DDL.
    smalls = {name: result.tables[name].small for name, fs in parts.items()
              if len(fs) == 1 and name in result.tables and result.tables[name].small is not None}
    # Independent small writes: submitted concurrently (see concurrent_jobs).
    written = run_concurrently([functools.partial(caught, functools.partial(
                                    _write_table, spark, warehouse, source, name, frames.get(name), window_start_ms,
                                    name in stale, expected.get(name), smalls.get(name)))
                                for name in names])
    failed = {name: str(rows) for name, rows in zip(names, written) if isinstance(rows, TableFailed)}
    counts = {table_id(*name): rows for name, rows in zip(names, written) if name in parts and name not in failed}
    return counts, [n for n in names if counts.get(table_id(*n))], failed


def versions_by_table(parts: dict[Name, list[DataFrame]]) -> dict[Name, DataFrame]:
    """Each table's versions of the window as one frame (its parts unioned by name, lazily)."""
    return {name: _union_widened([as_stored(f) for f in fs]) for name, fs in parts.items() if fs}


def _expected_versions(result: WindowResult) -> dict[Name, int | None]:
    """About how many versions each table ends in the window, known before any job: its row
    events. Each action ends at most one version, and an event is one or two actions (a
    key-changing update), so at most about twice the events. None (not known): a DDL ended
    every row of the table."""
    expected: dict[Name, int | None] = {}
    for f in result.flushes:
        events = f.schema.events
        have = expected.get(f.name, 0)
        expected[f.name] = None if events is None or have is None else have + events
    for c in result.closures:
        expected[c.name] = None
    return expected


def _write_table(spark: SparkSession, warehouse, source: str, name: Name, frame: DataFrame | None,
                 window_start_ms: int, clear: bool, expected: int | None = None, small=None) -> int:
    """One table's versions of the window as one overwrite of the window's rows, computed from
    the window's typed actions. When few are expected (`expected`, from the window's
    events: at most `ARROW_WRITE_ROWS`), they are collected by one action of their plan and committed by
    pyiceberg; else Spark's overwrite computes them and counts them (observed) in its job. A
    table with no history table yet is counted first, so that one that ends no version gets
    none (an overwrite creates it, and commits even with no rows); an existing table takes
    the overwrite either way: with no versions, a commit that leaves the window without rows
    (a rerun's rows go) and may still grow the table's schema to the window's. `small`: the
    table's window applied in Arrow (`small_window.SmallWindow`), whose versions are
    committed as they are when the table's schema already holds them (no Spark job)."""
    with naming_table(table_id(*name), "writing its history"):
        table = history_table(spark, warehouse, source, *name)
        exists = table.exists(spark)
        if frame is None:  # a rerun that ends no version of this table: its window rows go
            if clear and exists:
                spark.sql(f"DELETE FROM {table.sql} WHERE {WINDOW_COLUMN} = {int(window_start_ms)}")
            return 0
        frame = frame.withColumn(WINDOW_COLUMN, F.lit(window_start_ms).cast("long"))
        try:
            return _write_versions(spark, table, frame, window_start_ms, exists, expected,
                                   small.applied() if small is not None else None)
        finally:
            if small is not None:
                small.versions_written()


def _write_versions(spark: SparkSession, table: IcebergTable, frame: DataFrame, window_start_ms: int, exists: bool,
                    expected: int | None, applied) -> int:
    """`_write_table`'s overwrite of the window's versions (`frame`; `applied`: the window
    applied in Arrow, or None)."""
    if not exists:
        if (applied.versions.num_rows if applied is not None else frame.count()) == 0:
            return 0
        table.ensure(spark, frame.schema, partition=WINDOW_COLUMN)
    fitted = _fit(spark, table, frame)
    if applied is not None:
        versions = applied.versions
        versions = versions.append_column(WINDOW_COLUMN, pa.array([window_start_ms] * versions.num_rows, pa.int64()))
        if fitted is frame:
            written = table.overwrite_window_in_arrow(spark, versions, window_start_ms)
            if written is not None:
                return written
        # Not in the table's layout (a column of another type, one DDL dropped), or not for
        # pyiceberg: the versions found in Arrow, fitted by Spark from the driver's rows, so the
        # window's typed actions (not cached for a small window) are not computed again.
        frame = spark.createDataFrame(versions).select(
            [F.col(ident(f.name)).cast(f.dataType).alias(f.name) for f in frame.schema.fields])
        fitted = _fit(spark, table, frame)
    if expected is not None and expected <= ARROW_WRITE_ROWS:
        # Through Arrow (iceberg_arrow_writes), without Spark's write jobs.
        written = table.overwrite_window_in_arrow(spark, fitted, window_start_ms)
        if written is not None:
            return written
    counted, rows = observed(fitted, F.count(F.lit(1)).alias("rows"))
    # One task writes the window's versions, one file. A shuffle into it, not `coalesce(1)`:
    # that would also run the join with the rows before (a whole previous snapshot on the
    # MERGE path) in that one task.
    (counted.repartition(1).writeTo(table.sql).option("distribution-mode", "none")
     .overwrite(F.col(WINDOW_COLUMN) == F.lit(window_start_ms)))
    return int(rows.values()["rows"] or 0)


def _fit(spark: SparkSession, table: IcebergTable, frame: DataFrame) -> DataFrame:
    """`frame` in the table's schema, which grows to hold it (module docstring: new columns
    added, types widened, another type in a `<name>__<type>` column)."""
    stored = spark.table(table.sql).schema.fields
    have = {f.name: f.dataType for f in stored}
    if [(f.name, f.dataType) for f in frame.schema.fields] == [(f.name, f.dataType) for f in stored]:
        return frame  # the table's schema already (each window's, mostly): no expression to build
    columns = {}
    for field in frame.schema.fields:
        name, dtype = field.name, field.dataType
        if name in have and have[name] != dtype and not widens(have[name], dtype) \
                and not widens(dtype, have[name]):
            name = f"{field.name}__{dtype.simpleString()}"  # e.g. price__string
        if name not in have:
            spark.sql(f"ALTER TABLE {table.sql} ADD COLUMN {ident(name)} {dtype.simpleString()}")
            have[name] = dtype
        elif have[name] != dtype and widens(have[name], dtype):
            spark.sql(f"ALTER TABLE {table.sql} ALTER COLUMN {ident(name)} TYPE {dtype.simpleString()}")
            have[name] = dtype
        columns[name] = F.col(ident(field.name)).cast(have[name])
    order = [f.name for f in spark.table(table.sql).schema.fields]
    return frame.select([columns.get(c, F.lit(None)).cast(have[c]).alias(c) for c in order])


def _union_widened(frames: list[DataFrame]) -> DataFrame:
    """Frames of the window's schemas as one: by name, a column in a type the other widens
    to cast to the wider one; two types neither widens (int→varchar): both kept, the later
    as `<name>__<type>` (the table then keeps them apart, `_fit`)."""
    out = frames[0]
    for f in frames[1:]:
        have = {x.name: x.dataType for x in out.schema.fields}
        renamed = {}
        for x in f.schema.fields:
            old = have.get(x.name)
            if old is None or old == x.dataType:
                continue
            if widens(old, x.dataType):
                out = out.withColumn(x.name, F.col(ident(x.name)).cast(x.dataType))
            elif widens(x.dataType, old):
                renamed[x.name] = F.col(ident(x.name)).cast(old)
            else:
                f = f.withColumnRenamed(x.name, f"{x.name}__{x.dataType.simpleString()}")
        if renamed:
            f = f.withColumns({k: v for k, v in renamed.items()})
        out = out.unionByName(f, allowMissingColumns=True)
    return out


def _ended_by_ddl(c: Closure) -> DataFrame:
    return c.frame.select(*c.schema.columns, F.col(COMMIT_TS_COLUMN).alias(VALID_FROM),
                          F.lit(c.commit_ts).cast("long").alias(VALID_TO), F.lit(c.end_op).alias(END_OP))


def _ended_by_rows(f: Flush) -> DataFrame:
    """From the typed actions the snapshot was built from: each upsert ends at its key's next
    action, and a row from before the window at its key's first one. Built as SQL text (a
    few py4j calls a table, common/sql_text): a small window's versions come from Arrow and
    this plan gives only their schema."""
    schema = f.schema
    pk = schema.primary_key
    acts = f.actions.where("_cdc_key_ok")  # a table without a primary key has no versions
    values = [f"{key_column(pk.index(c)) if c in pk else value_column(i)} AS {ident(c)}"
              for i, c in enumerate(schema.columns)]
    inside = acts.where("_cdc_kind = 'upsert' AND _cdc_next_ts > commit_ts").selectExpr(
        *values, f"commit_ts AS {VALID_FROM}", f"_cdc_next_ts AS {VALID_TO}", f"_cdc_next_op AS {END_OP}")
    if f.before is None or not pk:
        return inside
    first = acts.where("_cdc_first").selectExpr(*[f"{key_column(i)} AS {ident(c)}" for i, c in enumerate(pk)],
                                                "commit_ts AS _cdc_first_ts", "op AS _cdc_first_op")
    before = f.before.join(first, on=pk, how="inner").where(f"_cdc_first_ts > {COMMIT_TS_COLUMN}").selectExpr(
        *[ident(c) for c in schema.columns], f"{COMMIT_TS_COLUMN} AS {VALID_FROM}", f"_cdc_first_ts AS {VALID_TO}",
        f"_cdc_first_op AS {END_OP}")
    return before.unionByName(inside)
