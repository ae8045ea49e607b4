"""One Iceberg table of the warehouse: its name, creation, schema evolution, a window's write on
a branch, and reads at a snapshot.

A window writes each table it changed on the branch `window-<start ms>`, cut from the
snapshot the previous window ended on (never from `main`, which may hold a later window
when an old window is materialized again). Once every table of the window is written, the
window is published: each table's snapshot is tagged `end-<UTC end>` and, when the window
is the newest one, becomes `main` (`iceberg_refs.publish`: catalog operations, no Spark job).

DDL as Iceberg operations: TRUNCATE, DROP TABLE and DROP DATABASE are emptying commits on the
window's branch (`empty_window`), so `main` and the window's tag read empty while earlier tags
keep the rows; the table stays in the catalog. RENAME TABLE renames the Iceberg table
(`rename`): history, snapshots and tags follow it. A manifest entry names the table by its
identifier when written and its Iceberg UUID; `iceberg_refs.resolve_identifier` finds it after
a rename. Every snapshot commit of a window carries the window in its summary
(`window_commits.window_properties`).
"""

from __future__ import annotations

import re
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from urllib.parse import unquote_to_bytes

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession, functions as F, types as T

from cdc_assets.common.iceberg_arrow_writes import (
    ARROW_REWRITE_BYTES, ARROW_WRITE_ROWS, as_table_rows, commit_overwrite, matches_as_spark, merged, sorted_by,
)
from cdc_assets.common.iceberg_refs import load_table
from cdc_assets.common.sql_text import ident
from cdc_assets.common.warehouse import load_pyiceberg_catalog, table_identifier

# A snapshot table is written sorted by its key (Iceberg's sort order; Spark range-distributes
# the rows), so each data file holds one range of keys. A MERGE rewrites only the files whose
# key range holds a touched key (the files' key bounds prune the rest), so a window of new,
# increasing keys rewrites the last file, not the table. Hash buckets would not: thousands of
# changed keys fall into every bucket.
TABLE_PROPERTIES = {
    "format-version": "2",
    # Copy-on-write: readers (any engine) get plain data files, no delete files to merge.
    "write.delete.mode": "copy-on-write",
    "write.update.mode": "copy-on-write",
    "write.merge.mode": "copy-on-write",
}
# Iceberg's Spark takes the summary properties of a session's commits from these settings
# (window_commits.window_properties sets them); pyiceberg's commits of the window take the same
# values from `set_snapshot_properties`' record (`snapshot_properties`), not from these settings.
SESSION_SNAPSHOT_PROPERTY = "spark.sql.iceberg.snapshot-property."
SORT_COLUMNS = "cdc.sort-columns"  # the key the table is ordered by, as JSON
_KEEP = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
_LAYER = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")  # snapshots, change_table, …


def name_part(name: str) -> str:
    """A database or table name inside an Iceberg table name: letters (any script) and digits
    kept, one `_` between them kept, anything else percent-encoded (UTF-8). Reversible, and
    `__` never occurs in a part, so it separates parts unambiguously."""
    out = []
    for i, ch in enumerate(name):
        lone_underscore = (ch == "_" and 0 < i < len(name) - 1 and name[i - 1] != "_" and name[i + 1] != "_")
        if ch in _KEEP or (ch.isalnum() and ch.isprintable()) or lone_underscore:
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass")))
    return "".join(out) or "%"  # an empty name still has a part


def table_name(layer: str, database: str, table: str) -> str:
    """`<layer>__<database>__<table>`, e.g. `snapshots__shop__orders`."""
    return f"{layer}__{name_part(database)}__{name_part(table)}"


def parse_name_part(part: str) -> str:
    """The name `name_part` encoded as `part`; a ValueError unless `part` is exactly what
    `name_part` writes (so two parts never decode to one name)."""
    if part == "%":
        return ""
    try:
        name = unquote_to_bytes(part).decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{part!r} is not an encoded name part: {exc}") from None
    if name_part(name) != part:
        raise ValueError(f"{part!r} is not an encoded name part")
    return name


def parse_table_name(name: str) -> tuple[str, str, str]:
    """`table_name` inverted: `snapshots__shop__orders` -> ('snapshots', 'shop', 'orders').
    A ValueError for a name `table_name` cannot have written (another tool's table)."""
    parts = name.split("__")
    if len(parts) != 3 or not _LAYER.fullmatch(parts[0]):
        raise ValueError(f"{name!r} is not a <layer>__<database>__<table> name")
    return parts[0], parse_name_part(parts[1]), parse_name_part(parts[2])


def end_tag(window_end_ms: int) -> str:
    """The tag of a window end: `end-20240501T0500Z` (UTC, ISO 8601 basic)."""
    return "end-" + datetime.fromtimestamp(window_end_ms / 1000, tz=timezone.utc).strftime("%Y%m%dT%H%MZ")


def branch_name(window_start_ms: int) -> str:
    return f"window-{window_start_ms}"


def sql_text(text: str) -> str:
    """`text` inside a single-quoted SQL string."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def iceberg_type(dtype: T.DataType) -> T.DataType:
    """The type Iceberg stores a Spark type as (it has no 8- or 16-bit integers)."""
    return T.IntegerType() if isinstance(dtype, (T.ByteType, T.ShortType)) else dtype


def as_stored(frame: DataFrame) -> DataFrame:
    """`frame` with the column types Iceberg stores; `frame` itself when it has them already
    (nearly always): every column expression built is a few py4j round trips."""
    fields = frame.schema.fields
    if all(iceberg_type(f.dataType) == f.dataType for f in fields):
        return frame
    return frame.select([F.col(ident(f.name)).cast(iceberg_type(f.dataType)).alias(f.name)
                         if iceberg_type(f.dataType) != f.dataType else F.col(ident(f.name)) for f in fields])


MERGE_PRESENT = "_cdc_present"  # a MERGE source's column: true for a key with a row, null for a deleted key
_IN_SOURCE = "_cdc_in_source"  # a whole-table rewrite's column: true for a key the MERGE source has
# A base snapshot of one data file of at most this size is rewritten whole, in one plan,
# instead of MERGEd. Copy-on-write rewrites every file holding a touched key, so the MERGE
# rewrote that file anyway: the rewrite writes the same bytes, in about 6 Spark jobs instead of
# the MERGE's 14 (docs/performance.md step 18), and keeps the table one file. A table of
# several files, or a larger one, is MERGEd, so that a window rewrites only the files of the
# key ranges it touched. A small source on a base of at most `ARROW_REWRITE_BYTES` is merged
# in Arrow instead, without Spark's write (iceberg_arrow_writes, step 23).
WHOLE_REWRITE_BYTES = 64 * 1024 * 1024


# The summary properties set on each session (`set_snapshot_properties`), as Spark's settings
# hold them: listing a session's settings from Python costs a py4j round trip per setting,
# about 0.3-0.5 s a pyiceberg commit (docs/performance.md step 25).
_SNAPSHOT_PROPERTIES: dict[int, dict[str, str]] = {}


def set_snapshot_properties(spark: SparkSession, properties: dict[str, str] | None) -> None:
    """`properties` in the summary of every Iceberg commit `spark` makes from now on (None: no
    more), Spark's (`SESSION_SNAPSHOT_PROPERTY` settings) and pyiceberg's
    (`snapshot_properties`)."""
    if properties is None:
        for key in _SNAPSHOT_PROPERTIES.pop(id(spark), {}):
            spark.conf.unset(SESSION_SNAPSHOT_PROPERTY + key)
        return
    _SNAPSHOT_PROPERTIES[id(spark)] = dict(properties)
    for key, value in properties.items():
        spark.conf.set(SESSION_SNAPSHOT_PROPERTY + key, value)


def snapshot_properties(spark: SparkSession) -> dict[str, str]:
    """The summary properties Spark's Iceberg commits carry now (`set_snapshot_properties`)."""
    return dict(_SNAPSHOT_PROPERTIES.get(id(spark), {}))


def merge_source(keys: DataFrame, rows: DataFrame, key: list[str]) -> DataFrame:
    """A MERGE source (`IcebergTable.write_window`) from the touched keys and the rows of those
    that still have one."""
    return keys.select(*[ident(k) for k in key]).distinct().join(
        rows.withColumn(MERGE_PRESENT, F.lit(True)), on=key, how="left")


@dataclass(frozen=True)
class IcebergTable:
    catalog: str  # Spark's name of the warehouse catalog (warehouse.use_catalog)
    namespace: str
    name: str
    location: str  # "" : the catalog's default location
    # The warehouse (`warehouse.Warehouse` or its location): given, refs and snapshot summaries
    # are read with pyiceberg (catalog metadata, no Spark job); None: through Spark's metadata
    # tables (a job each).
    warehouse: object = field(default=None, compare=False, repr=False)

    @property
    def identifier(self) -> str:
        """Catalog-independent: `<namespace>.<name>` (what pyiceberg and the manifest use)."""
        return table_identifier(self.namespace, self.name)

    @property
    def in_catalog(self) -> str:
        """The table's name inside its catalog, as a procedure's `table =>` text takes it."""
        return sql_text(f"{ident(self.namespace)}.{ident(self.name)}")

    @property
    def sql(self) -> str:
        return f"{self.catalog}.{ident(self.namespace)}.{ident(self.name)}"

    def on_branch(self, branch: str) -> str:
        return f"{self.sql}.{ident('branch_' + branch)}"

    # structure -------------------------------------------------------------------------------
    def exists(self, spark: SparkSession) -> bool:
        return spark.catalog.tableExists(self.sql)

    def ensure_namespace(self, spark: SparkSession) -> None:
        """Once per window, before its tables are written side by side (two threads creating
        the namespace together would collide in the catalog)."""
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {self.catalog}.{ident(self.namespace)}")

    def ensure(self, spark: SparkSession, schema: T.StructType, partition: str | tuple[str, ...] | None = None) -> None:
        """Create the table (all columns nullable), partitioned by the column(s) `partition` if
        given; its namespace exists (`ensure_namespace`)."""
        if self.exists(spark):
            return
        columns = ", ".join(f"{ident(f.name)} {iceberg_type(f.dataType).simpleString()}" for f in schema.fields)
        partitions = (partition,) if isinstance(partition, str) else tuple(partition or ())
        partitioned = f" PARTITIONED BY ({', '.join(ident(p) for p in partitions)})" if partitions else ""
        properties = ", ".join(f"'{k}'='{sql_text(v)}'" for k, v in TABLE_PROPERTIES.items())
        # no location: the catalog's default one for the table (its warehouse, any scheme)
        located = f" LOCATION '{sql_text(self.location)}'" if self.location else ""
        spark.sql(f"CREATE TABLE IF NOT EXISTS {self.sql} ({columns}) USING iceberg{partitioned}{located} "
                  f"TBLPROPERTIES ({properties})")

    def evolve(self, spark: SparkSession, target: T.StructType, key: list[str] | None = None) -> None:
        """Make the table's current schema `target` (names, types, order) with Iceberg's own
        evolution: add, drop, widen (int→bigint, float→double, decimal precision); a type
        Iceberg cannot widen to is a drop and an add (the old snapshots keep the old column).
        `key`: the columns the table is ordered by (none: unordered)."""
        properties = dict(spark.sql(f"SHOW TBLPROPERTIES {self.sql}").collect())
        ordered_by = json.loads(properties.get(SORT_COLUMNS, "[]"))
        current = {f.name: f.dataType for f in spark.table(self.sql).schema.fields}
        wanted = [(f.name, iceberg_type(f.dataType)) for f in target.fields]
        key = [k for k in (key or []) if k in dict(wanted)]
        if ordered_by and ordered_by != key:  # a sort column cannot be dropped or retyped
            spark.sql(f"ALTER TABLE {self.sql} WRITE UNORDERED")
            spark.sql(f"ALTER TABLE {self.sql} UNSET TBLPROPERTIES ('{SORT_COLUMNS}')")
            ordered_by = []
        names = {n for n, _ in wanted}
        for gone in [n for n in current if n not in names]:
            spark.sql(f"ALTER TABLE {self.sql} DROP COLUMN {ident(gone)}")
        for name, dtype in wanted:
            have = current.get(name)
            if have is None:
                spark.sql(f"ALTER TABLE {self.sql} ADD COLUMN {ident(name)} {dtype.simpleString()}")
            elif have != dtype:
                if widens(have, dtype):
                    spark.sql(f"ALTER TABLE {self.sql} ALTER COLUMN {ident(name)} TYPE {dtype.simpleString()}")
                else:
                    spark.sql(f"ALTER TABLE {self.sql} DROP COLUMN {ident(name)}")
                    spark.sql(f"ALTER TABLE {self.sql} ADD COLUMN {ident(name)} {dtype.simpleString()}")
        order = [f.name for f in spark.table(self.sql).schema.fields]
        if order != [n for n, _ in wanted]:
            for previous, (name, _) in zip([None] + [n for n, _ in wanted], wanted):
                where = "FIRST" if previous is None else f"AFTER {ident(previous)}"
                spark.sql(f"ALTER TABLE {self.sql} ALTER COLUMN {ident(name)} {where}")
        if key and ordered_by != key:
            spark.sql(f"ALTER TABLE {self.sql} WRITE ORDERED BY {', '.join(ident(k) for k in key)}")
            spark.sql(f"ALTER TABLE {self.sql} SET TBLPROPERTIES ('{SORT_COLUMNS}'='{sql_text(json.dumps(key))}')")

    # writes ----------------------------------------------------------------------------------
    def write_window(self, spark: SparkSession, branch: str, base_snapshot_id: int | None, frame: DataFrame,
                     key: list[str], keys: DataFrame | None = None, merge: bool = False,
                     inserts_only: Callable[[], bool] | None = None,
                     expected_rows: int | None = None) -> int:
        """Write the table's state at the window end on `branch` (cut from `base_snapshot_id`)
        and return the branch's snapshot. `merge`: `frame` is a MERGE source, one row per
        key the window touched, with `MERGE_PRESENT` true (the key's row) or null (the key is
        deleted); the other keys are unchanged since the base; one MERGE commit, or one append
        when `inserts_only()`, asked once the source is materialized, says that no source key
        is in the table (the MERGE would insert its rows and change nothing else).
        `expected_rows`: the window's row events of the table, known before the source runs
        (it has at most about two rows an event); at most `ARROW_WRITE_ROWS`, the source is
        collected and committed by pyiceberg when `_write_in_arrow` can, else Spark writes the
        collected rows. `keys` given:
        `frame` holds only the rows of those keys, merged the same way. Else `frame` is the
        whole table, one overwrite."""
        stored = as_stored(frame)
        base = base_snapshot_id if base_snapshot_id is not None else self.ref_snapshot(spark, "main")
        if base is None:  # a table with no snapshot yet: its first commit is on main
            if merge or keys is not None:
                raise ValueError(f"{self.identifier}: only some keys were rebuilt, but the table has no snapshot "
                                 "to merge them into")
            stored.writeTo(self.sql).append()
            return self.ref_snapshot(spark, "main")
        spark.sql(f"ALTER TABLE {self.sql} CREATE OR REPLACE BRANCH {ident(branch)} AS OF VERSION {base}")
        if merge:
            self._write_touched(spark, branch, base, stored, key, inserts_only, expected_rows)
        elif keys is not None:
            self._write_in_spark(spark, branch, base, merge_source(keys, stored, key), key)
        else:
            stored.writeTo(self.on_branch(branch)).overwrite(F.lit(True))
        return self.ref_snapshot(spark, branch)

    def _write_touched(self, spark: SparkSession, branch: str, base: int, source: DataFrame, key: list[str],
                       inserts_only: Callable[[], bool] | None, expected_rows: int | None) -> None:
        """A MERGE source written on the branch: through Arrow when it is expected small, else
        by Spark's plans, which compute the source inside their own jobs.

        The path is chosen before anything runs: a small source is collected by one action of
        its plan (what it observes comes with it) and committed by pyiceberg; when pyiceberg
        does not commit it (`_write_in_arrow`), Spark writes the collected rows (a local
        relation, nothing computed twice)."""
        table = None
        if expected_rows is not None and expected_rows <= ARROW_WRITE_ROWS:
            table = self._pyiceberg_table_of([c for c in source.columns if c != MERGE_PRESENT])
        if table is None:
            self._write_in_spark(spark, branch, base, source, key, inserts_only)
            return
        collected = source.toArrow()
        if not self._write_in_arrow(spark, table, branch, base, collected, key, inserts_only):
            local = spark.createDataFrame(collected, schema=source.schema)
            self._write_in_spark(spark, branch, base, local, key, inserts_only, materialized=True)

    def _write_in_spark(self, spark: SparkSession, branch: str, base: int, source: DataFrame, key: list[str],
                        inserts_only: Callable[[], bool] | None = None, materialized: bool = False) -> None:
        """A MERGE source written by Spark: one rewrite of a small base, else a MERGE (or an
        append, when `inserts_only()`) of the source materialized (`materialized`: it is)."""
        if not (key and self._small(base) and self._rewrite(spark, branch, base, source, key)):
            self._merge(spark, branch, source if materialized else source.localCheckpoint(), key, inserts_only)

    def _write_in_arrow(self, spark: SparkSession, table, branch: str, base: int, collected: pa.Table,
                        key: list[str], inserts_only: Callable[[], bool] | None) -> bool:
        """The collected source committed by pyiceberg on the branch (iceberg_arrow_writes):
        merged into the base, read whole, when `_arrow_mergeable`; else appended, when it only
        inserts and Spark would append it too (a base larger than `WHOLE_REWRITE_BYTES` or of
        several files: a small one stays one file). False (nothing written): neither applies."""
        schema = table.schema().as_arrow()
        rewrites = self._arrow_mergeable(table, base, key)
        appends = (not rewrites and inserts_only is not None and inserts_only()
                   and not (key and self._small(base, metadata=table.metadata)))
        if not (rewrites or appends):
            return False
        rows = as_table_rows(collected.drop_columns([MERGE_PRESENT]), schema)
        if appends:
            present = pc.is_valid(collected[MERGE_PRESENT])
            table.append(sorted_by(rows.filter(present), key), snapshot_properties=snapshot_properties(spark),
                         branch=branch)
            return True
        before = as_table_rows(table.scan(snapshot_id=base).to_arrow(), schema)
        source = rows.append_column(MERGE_PRESENT, collected[MERGE_PRESENT])
        self._commit_merged(spark, table, branch, base, before, source, key)
        return True

    def arrow_base(self, base_snapshot_id: int | None, key: list[str], columns: list[str]):
        """The table loaded by pyiceberg, when its snapshot `base_snapshot_id` can be merged
        with a source in Arrow (`_arrow_mergeable`) and its current columns are `columns`;
        else None."""
        if base_snapshot_id is None:
            return None
        table = self._pyiceberg_table_of(columns)
        return table if table is not None and self._arrow_mergeable(table, base_snapshot_id, key) else None

    def arrow_new(self, key: list[str], columns: list[str]):
        """The table loaded by pyiceberg, when a window's rows can be written to it in Arrow
        onto no previous snapshot (a new table's first window): its current columns are
        `columns` and Arrow matches its key as Spark does; else None."""
        table = self._pyiceberg_table_of(columns)
        return table if table is not None and key and matches_as_spark(table.schema().as_arrow(), key) else None

    def _arrow_mergeable(self, table, base: int, key: list[str]) -> bool:
        """Whether the pyiceberg `table`'s snapshot `base` is merged in the driver: one file of
        at most `ARROW_REWRITE_BYTES`, in the table's current schema, keyed by columns Arrow
        matches as Spark does."""
        metadata = table.metadata
        snapshot = metadata.snapshot_by_id(base)
        return (bool(key) and snapshot is not None and snapshot.schema_id == metadata.current_schema_id
                and matches_as_spark(table.schema().as_arrow(), key)
                and self._small(base, ARROW_REWRITE_BYTES, metadata))

    def commit_merged(self, spark: SparkSession, branch: str, base_snapshot_id: int | None, before: pa.Table,
                      source: pa.Table, key: list[str]) -> int:
        """A MERGE source in Arrow (the table's columns and `MERGE_PRESENT`) merged with
        `before`, the rows of `base_snapshot_id` (one file: `arrow_base`), and committed by
        pyiceberg on `branch`, cut from that snapshot. Returns the branch's snapshot.
        `base_snapshot_id` None (`before` has no rows): the table's rows are the source's, as
        `write_window` writes a whole table: its first commit, on `main`, when it has none;
        else they replace every row, on `branch` cut from `main`."""
        if base_snapshot_id is None:
            table = load_table(load_pyiceberg_catalog(self.warehouse), self.identifier)
            main = table.metadata.refs.get("main")
            if main is None:
                table.append(merged(before, source, key, MERGE_PRESENT), snapshot_properties=snapshot_properties(spark),
                             branch="main")
                return self.ref_snapshot(spark, "main")
            base_snapshot_id = int(main.snapshot_id)
        spark.sql(f"ALTER TABLE {self.sql} CREATE OR REPLACE BRANCH {ident(branch)} AS OF VERSION {base_snapshot_id}")
        table = load_table(load_pyiceberg_catalog(self.warehouse), self.identifier)  # with Spark's branch
        self._commit_merged(spark, table, branch, base_snapshot_id, before, source, key)
        return self.ref_snapshot(spark, branch)

    @staticmethod
    def _commit_merged(spark: SparkSession, table, branch: str, base: int, before: pa.Table, source: pa.Table,
                       key: list[str]) -> None:
        from pyiceberg.expressions import AlwaysTrue

        whole = merged(before, source, key, MERGE_PRESENT)  # replaces the base's one file
        commit_overwrite(table, whole, AlwaysTrue(), snapshot_properties(spark), branch, snapshot_id=base)

    def overwrite_window_in_arrow(self, spark: SparkSession, rows: DataFrame | pa.Table,
                                  window_start_ms: int, properties: dict[str, str] | None = None) -> int | None:
        """A window-partitioned table's rows of one window replaced by `rows` (small, the
        table's columns in its order; a frame is collected by one action) and committed by
        pyiceberg on `main`, with `properties` in its summary (None: the window's,
        `snapshot_properties`); returns how many. None (nothing run, nothing written): no
        warehouse for pyiceberg, the columns are not the table's, or the table is not (or was
        not always) partitioned by `WINDOW_COLUMN` alone."""
        from pyiceberg.expressions import EqualTo
        from pyiceberg.transforms import IdentityTransform

        table = self._pyiceberg_table_of(rows.column_names if isinstance(rows, pa.Table) else rows.columns)
        if table is None:
            return None
        schema = table.schema().as_arrow()
        # Partitioned by the window, and only ever so: the files the filter selects hold that
        # window's rows only (a file of an older spec would be selected by its column bounds).
        by_window = len(table.metadata.specs()) == 1 and any(
            isinstance(f.transform, IdentityTransform) and table.schema().find_column_name(f.source_id) == WINDOW_COLUMN
            for f in table.spec().fields)
        if not by_window:
            return None
        collected = as_table_rows(rows if isinstance(rows, pa.Table) else rows.toArrow(), schema)
        commit_overwrite(table, collected, EqualTo(WINDOW_COLUMN, window_start_ms),
                         snapshot_properties(spark) if properties is None else properties)
        return collected.num_rows

    def _pyiceberg_table_of(self, columns: list[str]):
        """The table loaded by pyiceberg, when its current columns are `columns` in that order
        (None: they are not, or there is no warehouse for pyiceberg)."""
        if self.warehouse is None:
            return None
        table = load_table(load_pyiceberg_catalog(self.warehouse), self.identifier)
        return table if table.schema().as_arrow().names == columns else None

    def _merge(self, spark: SparkSession, branch: str, source: DataFrame, key: list[str],
               inserts_only: Callable[[], bool] | None = None) -> None:
        """The source's keys with a row (`MERGE_PRESENT`): upserted; without: deleted. The
        source is materialized (`localCheckpoint`): a SQL MERGE whose source reads an Iceberg
        table (the change table, the previous snapshot) fails to plan in Spark 4.1 ("No plan
        for TableReference"); it is the touched keys only, small."""
        if inserts_only is not None and inserts_only():
            # Nothing to match: an append, without the MERGE's scan for the files it would
            # rewrite and its join (about 5 Spark jobs fewer).
            rows = source.where(F.col(MERGE_PRESENT).isNotNull()).drop(MERGE_PRESENT)
            rows.writeTo(self.on_branch(branch)).append()
            return
        view = f"cdc_merge_{uuid.uuid4().hex}"
        source.createOrReplaceTempView(view)
        on = " AND ".join(f"t.{ident(k)} = s.{ident(k)}" for k in key)
        columns = [ident(c) for c in source.columns if c != MERGE_PRESENT]
        sets = ", ".join(f"t.{c} = s.{c}" for c in columns)
        present = ident(MERGE_PRESENT)
        try:
            spark.sql(
                f"MERGE INTO {self.on_branch(branch)} t USING {view} s ON {on} "
                f"WHEN MATCHED AND s.{present} IS NULL THEN DELETE "
                f"WHEN MATCHED THEN UPDATE SET {sets} "
                f"WHEN NOT MATCHED AND s.{present} IS NOT NULL THEN INSERT ({', '.join(columns)}) "
                f"VALUES ({', '.join('s.' + c for c in columns)})")
        finally:
            spark.catalog.dropTempView(view)

    def _small(self, snapshot_id: int, limit: int | None = None, metadata=None) -> bool:
        """Whether the snapshot is at most one data file of at most `limit` bytes (None:
        `WHOLE_REWRITE_BYTES`, read when called); its summary, read with pyiceberg; unknown
        without the warehouse: not small."""
        if self.warehouse is None:
            return False
        limit = WHOLE_REWRITE_BYTES if limit is None else limit
        summary = (metadata or self._metadata()).snapshot_by_id(snapshot_id).summary or {}
        files, size = summary.get("total-data-files"), summary.get("total-files-size")
        return files is not None and size is not None and int(files) <= 1 and int(size) <= limit

    def _rewrite(self, spark: SparkSession, branch: str, base: int, source: DataFrame, key: list[str]) -> bool:
        """What `_merge` does, as one overwrite of the branch: the base snapshot's rows, those of
        the source's keys replaced (`MERGE_PRESENT` true) or removed (null), the source's other
        keys added. The source is read once, inside the write's job (what it observes is known
        after it), and so is the base. One sorted file. False (nothing written): the base
        snapshot lacks a column of the source; the caller MERGEs."""
        fields = [f for f in source.schema.fields if f.name != MERGE_PRESENT]
        try:
            previous = self.read(spark, base, T.StructType(fields))
        except AnalysisException:
            return False
        new = {f.name: f"_cdc_new_{i}" for i, f in enumerate(fields) if f.name not in key}
        incoming = source.select(*[F.col(ident(k)) for k in key], *[F.col(ident(c)).alias(n) for c, n in new.items()],
                                 F.col(MERGE_PRESENT), F.lit(True).alias(_IN_SOURCE))
        untouched = F.col(_IN_SOURCE).isNull()
        whole = (previous.join(incoming, on=key, how="full_outer")
                 .where(untouched | F.col(MERGE_PRESENT).isNotNull())
                 .select([F.col(ident(f.name)) if f.name in key
                          else F.when(untouched, F.col(ident(f.name))).otherwise(F.col(new[f.name])).alias(f.name)
                          for f in fields]))
        # `distribution-mode none` and one task: no range sort (its sampling job and shuffle) for
        # a file Iceberg still sorts by the table's order within the task.
        (whole.coalesce(1).writeTo(self.on_branch(branch)).option("distribution-mode", "none")
         .overwrite(F.lit(True)))
        return True

    def empty_window(self, spark: SparkSession, branch: str, base_snapshot_id: int) -> int:
        """An emptying commit (every row deleted) on `branch`, cut from `base_snapshot_id`: what a
        DROP TABLE, DROP DATABASE or a rename to no Iceberg table leaves (the table stays in
        the catalog, so the tags before still read its rows). Returns the branch's snapshot."""
        empty = spark.createDataFrame([], spark.table(self.sql).schema)
        return self.write_window(spark, branch, base_snapshot_id, empty, key=[])

    def rename(self, spark: SparkSession, name: str) -> "IcebergTable":
        """The table under `name` in its namespace: a catalog operation that keeps its UUID,
        snapshots, branches and tags (its files stay where they are)."""
        spark.sql(f"ALTER TABLE {self.sql} RENAME TO {ident(self.namespace)}.{ident(name)}")
        return replace(self, name=name)

    def ref_snapshot(self, spark: SparkSession, ref: str) -> int | None:
        """The snapshot a branch or tag points to (None: no such ref, say `main` before the
        first commit)."""
        if self.warehouse is None:
            row = spark.sql(f"SELECT snapshot_id FROM {self.sql}.refs").where(F.col("name") == ref).first()
            return None if row is None else int(row[0])
        found = self._metadata().refs.get(ref)
        return None if found is None else int(found.snapshot_id)

    def total_records(self, spark: SparkSession, snapshot_id: int) -> int:
        """The rows of a snapshot, from its summary (metadata, no scan)."""
        if self.warehouse is None:
            row = spark.sql(f"SELECT summary FROM {self.sql}.snapshots").where(
                F.col("snapshot_id") == snapshot_id).first()
            return int(row[0]["total-records"])
        return int(self._metadata().snapshot_by_id(snapshot_id).summary["total-records"])

    def _metadata(self):
        """The table's metadata as the catalog has it now. Loaded anew on every call: Spark
        committed since any earlier load (pyiceberg never sees another engine's commit in a
        table object it already holds)."""
        return load_table(load_pyiceberg_catalog(self.warehouse), self.identifier).metadata

    # reads -----------------------------------------------------------------------------------
    def read(self, spark: SparkSession, snapshot_id: int, schema: T.StructType) -> DataFrame:
        """The table at a snapshot, in the Spark types the manifest recorded."""
        frame = spark.read.option("versionAsOf", str(snapshot_id)).table(self.sql)
        return frame.select([F.col(ident(f.name)).cast(f.dataType).alias(f.name) for f in schema.fields])


WINDOW_COLUMN = "window_start_ms"  # the window a row of a window-partitioned table belongs to


def widens(have: T.DataType, want: T.DataType) -> bool:
    if isinstance(have, T.IntegerType) and isinstance(want, T.LongType):
        return True
    if isinstance(have, T.FloatType) and isinstance(want, T.DoubleType):
        return True
    return (isinstance(have, T.DecimalType) and isinstance(want, T.DecimalType) and have.scale == want.scale
            and want.precision > have.precision)
