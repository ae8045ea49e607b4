"""Layer 4: every table's state at the window end (previous window's snapshot + changes)."""

import contextlib
import functools

from dagster import (
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetDep,
    BackfillPolicy,
    AssetExecutionContext,
    AssetsDefinition,
    AssetSpec,
    MaterializeResult,
    MetadataValue,
    TimeWindowPartitionMapping,
    multi_asset,
)
from dagster_pyspark import PySparkResource
from pyspark.sql import SparkSession, functions as F

from cdc_assets.common.concurrent_jobs import run_concurrently
from cdc_assets.common.iceberg_tables import end_tag, table_name
from cdc_assets.common.names import table_id
from cdc_assets.common.tso import tso_to_datetime
from cdc_assets.common.warehouse import qualified_name, table_identifier
from cdc_assets.defs.metadata import schema_version, table_rows_chart
from cdc_assets.defs.partitions import window_bounds_ms
from cdc_assets.defs.resources import WarehouseResource
from cdc_assets.defs.range_reporting import WindowEvents
from cdc_assets.defs.source_build import CHANGE_TABLE, HISTORY, SNAPSHOTS, SourceBuild
from cdc_assets.landing.tables import load_state
from cdc_assets.snapshot.entry_tables import read_entry
from cdc_assets.snapshot.history import HISTORY_LAYER
from cdc_assets.snapshot.manifests import TABLE as SNAPSHOT_WINDOWS, DdlRecord, FailedTable, TableEntry, WindowManifest
from cdc_assets.snapshot.store import WindowWithheld, read_manifest, write_window_snapshot
from cdc_assets.snapshot.window_range import MAX_ROWS, PrefetchedWindow, prefetched_windows, window_groups

PK_UNIQUE = "primary_key_unique"
RECONCILES = "reconciliation"
VALUES_CONVERT = "values_convert"
DDL_APPLIED = "ddl_applied"
TABLES_BUILT = "tables_built"
# ERROR checks that withhold a window from publication. `tables_built` does not: a table that
# failed keeps its previous snapshot, marked failed, and the window's other tables are
# published (docs/reliability.md, table isolation).
PUBLISH_GATES = (PK_UNIQUE, RECONCILES, VALUES_CONVERT)


def build_snapshots(b: SourceBuild) -> AssetsDefinition:
    key, history_key = b.key(SNAPSHOTS), b.key(HISTORY)
    # Window N is built on window N-1: Dagster runs them in order in a backfill.
    previous_window = AssetDep(key, partition_mapping=TimeWindowPartitionMapping(start_offset=-1, end_offset=-1))

    @multi_asset(
        name=f"{b.source.name}__snapshots_and_history",
        specs=[
            AssetSpec(**b.layer_asset(
                SNAPSHOTS, "Each table's rows at the window end (latest version per key; deletes removed; DDL "
                "applied at its commit_ts), typed from the MySQL types: one Iceberg table per source table, "
                "tagged end-<UTC window end> at every window, committed by the window's row of "
                f"{table_identifier(b.source.name, SNAPSHOT_WINDOWS)}."),
                **b.in_windows(), deps=[b.key(CHANGE_TABLE), previous_window]),
            # No dependency on the previous window's snapshot here: a backfill would then pull in
            # the window after its range. The shared step already runs after that snapshot.
            AssetSpec(**b.layer_asset(
                HISTORY, "SCD type 2: the row versions that ended in the window, with valid-from / valid-to "
                "commit TSOs and the operation that ended them; the versions still open are the window's "
                "snapshot rows. One Iceberg table per source table (history__<db>__<table>), partitioned by "
                "window."),
                **b.in_windows(), deps=[b.key(CHANGE_TABLE)]),
        ],
        partitions_def=b.partitions_def,
        # A backfill of N windows is one run, the windows applied in order inside it.
        backfill_policy=BackfillPolicy.single_run(),
        # Either output alone is allowed (a backfill or the UI may select one); the window is applied once.
        can_subset=True,
        check_specs=[
            b.window_check(PK_UNIQUE, SNAPSHOTS, "no primary key twice in any table written"),
            b.window_check(RECONCILES, SNAPSHOTS, "previous rows + inserted keys - deleted keys - rows removed "
                           "by DDL + rows moved in by RENAME TABLE = rows, per table"),
            b.window_check(VALUES_CONVERT, SNAPSHOTS, "every non-null value converted to its column's Spark type"),
            b.window_check(TABLES_BUILT, SNAPSHOTS, "every table of the window was built; one that failed keeps "
                           "its previous snapshot, marked failed, and the others are committed"),
            b.window_check(DDL_APPLIED, SNAPSHOTS, "every DDL statement of the window was read and applied (WARN: "
                           "one that was not, say a TRUNCATE PARTITION, may leave rows the source removed)"),
        ],
    )
    def snapshots(context: AssetExecutionContext, pyspark: PySparkResource, warehouse: WarehouseResource):
        # A range run (a backfill, a replay) applies its windows in order, each on the one
        # before, and reports each window's materializations and checks as that window's own.
        # Consecutive windows share their schema pre-pass and one cache of their rows
        # (snapshot/window_range.py).
        events, spark = WindowEvents(context), pyspark.spark_session
        partitions = {window_bounds_ms(b.partitions_def, p)[0]: p for p in context.partition_keys}
        change_path = list(b.key(CHANGE_TABLE).path)
        if partitions:  # a missing predecessor fails the run before any shared work
            _previous_manifest(b, warehouse, min(partitions))
        # Each window's change-table commit as the run found it (the group's rows are read after).
        commits = {start: warehouse.layer_commit(change_path, start) for start in partitions}
        groups = window_groups(list(partitions), lambda start: _commit_rows(commits[start], MAX_ROWS + 1))
        windows = prefetched_windows(
            lambda: warehouse.layer_table(spark, change_path).read_windows(spark, list(partitions)), groups)
        with contextlib.closing(windows):
            for start_ms, prefetched in windows:
                yield from window(context, events, spark, warehouse, partitions[start_ms], prefetched,
                                  commits[start_ms])
        yield from events.outputs()

    def window(context: AssetExecutionContext, events: WindowEvents, spark: SparkSession,
               warehouse: WarehouseResource, partition: str, prefetched: PrefetchedWindow | None,
               commit_at_start: dict | None):
        start_ms, end_ms = window_bounds_ms(b.partitions_def, partition)
        store = (warehouse.iceberg, b.source.name)  # what the snapshot store's functions take
        previous = _previous_manifest(b, warehouse, start_ms)
        selected = context.selected_asset_keys
        change_path = list(b.key(CHANGE_TABLE).path)
        change_table = warehouse.read_layer_window(spark, change_path, start_ms)
        commit = warehouse.layer_commit(change_path, start_ms)
        if commit != commit_at_start:  # rewritten since the run started: the group's rows may be older
            prefetched = None
        # The window's rows from its commit's summary (no job); counted only when it expired.
        events_in = _commit_rows(commit, None)
        if events_in is None:
            events_in = change_table.count()
        checks = context.selected_asset_check_keys
        results: list = []

        def audit(manifest: WindowManifest) -> str | None:
            """Write-audit-publish: the checks run on the window's branch; an ERROR check that
            fails withholds the window (never tagged, never on main)."""
            written = {tid: t for tid, t in manifest.tables.items() if t.written_window_start_ms == start_ms}
            results[:] = _snapshot_results(key, spark, store, events_in, manifest.tables, manifest.ddl, written,
                                           manifest.failed_tables, manifest.tag)
            failed = [e.check_name for e in results if isinstance(e, AssetCheckResult) and not e.passed
                      and e.check_name in PUBLISH_GATES and AssetCheckKey(key, e.check_name) in checks]
            return f"ERROR checks failed: {', '.join(failed)}" if failed else None

        def reported(kinds: tuple):
            for e in results:
                if isinstance(e, AssetCheckResult) and isinstance(e, kinds):
                    yield from events.checked(e, partition)
                elif isinstance(e, MaterializeResult) and isinstance(e, kinds):
                    yield from events.materialized(e.asset_key, partition, dict(e.metadata or {}))

        try:
            manifest = write_window_snapshot(
                spark, change_table, *store, start_ms, end_ms, previous,
                keep_history=history_key in selected,
                audit=audit if key in selected else None,
                global_watermark_ts=load_state(warehouse.iceberg, b.source.name).global_watermark_ts(
                    b.completeness()),
                prefetched=prefetched,
            )
        except WindowWithheld as withheld:
            yield from reported((AssetCheckResult,))
            yield from events.stop(f"window {partition}: {withheld}", {"published": False, "tag": end_tag(end_ms)})
        yield from reported((MaterializeResult, AssetCheckResult))
        ended = manifest.ddl.history_versions_ended
        if history_key in selected:
            yield from events.materialized(
                history_key, partition, {
                    "versions_ended": sum(ended.values()),
                    "versions_ended_by_table": MetadataValue.json(ended),
                    # one Iceberg table per source table (snapshot/history)
                    "iceberg_tables": MetadataValue.json(
                        {table_id(*n): qualified_name(table_identifier(b.source.name, table_name(HISTORY_LAYER, *n)))
                         for n in manifest.ddl.history_tables}),
                })

    return snapshots


def _snapshot_results(key, spark: SparkSession, store: tuple, events_in: int, tables: dict[str, TableEntry],
                      ddl: DdlRecord, written: dict[str, TableEntry], failed: dict[str, FailedTable], tag: str):
    """The snapshot's materialization and its five checks."""
    yield MaterializeResult(
        asset_key=key,
        metadata={
            "ddl_statements": ddl.applied,
            "ddl_unparsed": len(ddl.unparsed),
            "tables_dropped": MetadataValue.json(ddl.dropped_tables),
            "schema_changes": MetadataValue.json(
                {tid: t.schema_changes for tid, t in tables.items() if t.schema_changes}),
            "tables": len(tables),
            "tables_changed": len(written),
            "rows_total": sum(t.rows for t in tables.values()),
            "events_in": events_in,
            "table_rows": MetadataValue.md(_tables_md(tables)),
            "table_rows_chart": MetadataValue.md(table_rows_chart({tid: t.rows for tid, t in tables.items()})),
            "schema_versions": MetadataValue.json(
                {tid: schema_version(t.spark_schema) for tid, t in sorted(tables.items())}),
            # the window's commit point: its row of this table (snapshot/manifests)
            "manifest_table": qualified_name(table_identifier(store[1], SNAPSHOT_WINDOWS)),
            # Any Iceberg engine reads the window's state at this tag of each table.
            "iceberg_tag": tag,
            "iceberg_tables": MetadataValue.json(
                {tid: {"identifier": qualified_name(t.identifier), "snapshot_id": str(t.snapshot_id)}
                 for tid, t in sorted(tables.items())}),
        }
    )
    dupes = dict(zip(written, run_concurrently(
        [functools.partial(_duplicate_keys, spark, store, t) for t in written.values()])))
    yield AssetCheckResult(
        asset_key=key, check_name=PK_UNIQUE, passed=not any(dupes.values()),
        metadata={"duplicate_keys": sum(dupes.values()), "by_table": MetadataValue.json(dupes)},
    )
    off = {
        tid: t.rows - (t.previous_rows + t.inserted_keys - t.deleted_keys - t.removed_by_ddl + t.moved_in)
        for tid, t in tables.items()
    }
    yield AssetCheckResult(
        asset_key=key, check_name=RECONCILES, passed=not any(off.values()),
        metadata={
            "tables_off": sum(1 for v in off.values() if v),
            "by_table": MetadataValue.json({
                tid: {k: getattr(t, k) for k in ("previous_rows", "inserted_keys", "deleted_keys", "removed_by_ddl",
                                                 "moved_in", "rows")}
                for tid, t in tables.items()
            }),
        },
    )
    failures = {tid: t.conversion_failures for tid, t in written.items()}
    yield AssetCheckResult(
        asset_key=key, check_name=VALUES_CONVERT, passed=not any(failures.values()),
        metadata={"conversion_failures": sum(failures.values()), "by_table": MetadataValue.json(failures)},
    )
    yield AssetCheckResult(
        asset_key=key, check_name=TABLES_BUILT, passed=not failed,
        metadata={"tables_failed": len(failed),
                  "failed": MetadataValue.json({tid: f.reason for tid, f in failed.items()})},
    )
    unparsed = ddl.unparsed
    # commit_ts as text, and its UTC time: the UI's JSON viewer rounds integers beyond 2^53
    statements = [{**u, "commit_ts": str(u["commit_ts"]),
                   "commit_time": tso_to_datetime(u["commit_ts"]).isoformat()} for u in unparsed[:50]]
    yield AssetCheckResult(
        asset_key=key, check_name=DDL_APPLIED, passed=not unparsed, severity=AssetCheckSeverity.WARN,
        metadata={"ddl_unparsed": len(unparsed), "statements": MetadataValue.json(statements)},
    )


def _commit_rows(commit: dict | None, expired: int | None) -> int | None:
    """The rows a change-table window's commit wrote, from its summary (Iceberg metadata);
    `expired` when no commit names the window (maintenance expired it). In grouping, such a
    window counts as too large to share the pre-pass: it is read and checked on its own."""
    return int(commit.get("added-records", 0)) if commit is not None else expired


def _previous_manifest(b: SourceBuild, warehouse: WarehouseResource, start_ms: int) -> WindowManifest | None:
    prev_start = start_ms - b.settings.window_ms
    previous = read_manifest(warehouse.iceberg, b.source.name, prev_start)
    if previous is not None:
        return previous
    state = load_state(warehouse.iceberg, b.source.name)
    has_earlier_data = any(w < start_ms for w in state.windows)
    first_partition = int(b.settings.partition_start.timestamp() * 1000) >= start_ms
    if has_earlier_data and not first_partition:
        raise RuntimeError(
            f"the snapshot of the previous window (start {prev_start} ms) is missing but the dump has "
            "earlier data: materialize the earlier windows first (a backfill runs them in order)"
        )
    return None


def _duplicate_keys(spark: SparkSession, store: tuple, table: TableEntry) -> int:
    """Keys twice in the table at the snapshot the window wrote: known from its write when it
    was a MERGE of one source row per key (`TableEntry.duplicate_keys`); else a scan of the
    whole table (a table written whole: its first window, DDL)."""
    if table.duplicate_keys is not None:
        return table.duplicate_keys
    pk = table.schema["primary_key"]
    df = read_entry(spark, *store, table)
    return df.groupBy(*pk).count().where(F.col("count") > 1).count()


def _tables_md(tables: dict[str, TableEntry]) -> str:
    """Per table: rows, key changes, schema version (short hash of column names and types), and
    the Iceberg table and snapshot."""
    lines = ["| table | rows | inserted keys | deleted keys | schema version | columns | written in window "
             "| Iceberg table | snapshot |",
             "|---|---|---|---|---|---|---|---|---|"]
    for tid, t in sorted(tables.items()):
        lines.append(
            f"| {tid} | {t.rows} | {t.inserted_keys} | {t.deleted_keys} | "
            f"{schema_version(t.spark_schema)} | {len(t.schema['columns'])} | {t.written_window_start_ms} "
            f"| {t.identifier} | {t.snapshot_id} |"
        )
    return "\n".join(lines)
