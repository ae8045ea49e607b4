"""Snapshot windows: every source table is an Iceberg table of the warehouse's catalog
(`<source>.snapshots__<db>__<table>`, lib/iceberg_tables.py), and each window has a manifest,
a row of the Iceberg table `<source>.snapshot_windows` (lib/snapshot_windows.py): the commit
point.

A window writes the tables it changed on a branch cut from the snapshot the previous window
ended on (a table whose rows alone changed is a MERGE of the keys it touched, one commit);
then every table of the window is tagged with the window's end (`end-<UTC end>`) and, in
the newest window, `main` moves to it (`iceberg_tables.publish`); last, its manifest row is
committed, conditioned on the windows table as the run found it when it started (two runs of
one window: the later fails, `snapshot_windows.ManifestConflict`). The manifest records each
table's Iceberg identifier and snapshot id and the window's counts; a table without changes
keeps its previous entry (same snapshot), tagged again. Any engine reads a window's state
with `VERSION AS OF 'end-…'`.

The warehouse is an opaque location (a folder or `s3://…`): it is only handed to the catalog
helpers, never made into a path here.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession, types as T

from cdc_assets.lib import snapshot_windows
from cdc_assets.lib.concurrent_jobs import run_concurrently
from cdc_assets.lib.history import write_window_history
from cdc_assets.lib.iceberg_catalog import load_pyiceberg_catalog, use_catalog
from cdc_assets.lib.iceberg_tables import (
    IcebergTable, branch_name, end_tag, load_table, publish, table_name, tag_snapshots,
)
from cdc_assets.lib.snapshot_windows import CARRIED_FROM, ManifestConflict, OldFormatWarehouse  # noqa: F401
from cdc_assets.lib.table_errors import TableFailed, caught, naming_table
from cdc_assets.lib.table_timeline import TableState, apply_window, previous_states, state_id

SNAPSHOTS_LAYER = "snapshots"


def read_manifest(warehouse, source: str, window_start_ms: int) -> dict | None:
    """The committed manifest of one window (None: not committed)."""
    return snapshot_windows.read_window(warehouse, source, window_start_ms)


def read_manifests(warehouse, source: str) -> dict[int, dict]:
    """Every committed window's manifest, by window start, in one scan."""
    return snapshot_windows.read_windows(warehouse, source)


def list_manifests(warehouse, source: str) -> list[int]:
    """The starts of the committed windows, ascending."""
    return snapshot_windows.list_windows(warehouse, source)


def snapshot_table(spark: SparkSession | None, warehouse, source: str, database: str, table: str) -> IcebergTable:
    """The Iceberg table of one source table (`spark` None: no Spark catalog name needed). Its
    location is the catalog's default for it (no path is built from the warehouse)."""
    catalog = use_catalog(spark, warehouse) if spark is not None else ""
    return IcebergTable(catalog, source, table_name(SNAPSHOTS_LAYER, database, table), "")


def read_entry(spark: SparkSession, warehouse, source: str, entry: dict) -> DataFrame:
    """A manifest entry's rows: its table at its snapshot, in the recorded Spark types."""
    schema = T.StructType.fromJson(json.loads(entry["spark_schema"]))
    return snapshot_table(spark, warehouse, source, entry["database"], entry["table"]).read(
        spark, entry["snapshot_id"], schema)


def read_entry_arrow(warehouse, source: str, entry: dict):
    """A manifest entry's rows as an Arrow table, read by pyiceberg (no Spark), in the Arrow
    types of the recorded Spark types (Iceberg keeps a smallint as an int)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    table = load_table(load_pyiceberg_catalog(warehouse), entry["identifier"])
    schema = to_arrow_schema(T.StructType.fromJson(json.loads(entry["spark_schema"])))
    data = table.scan(snapshot_id=entry["snapshot_id"]).to_arrow()
    return data.select(schema.names).cast(schema)


def require_built(manifest: dict) -> dict:
    """The manifest, unless a table of it failed to build (its state there is stale): reading
    it then is an error that names the tables, never a silently old table."""
    failed = manifest.get("failed_tables") or {}
    if failed:
        names = "; ".join(f"{f['database']}.{f['table']}: {f['reason']}" for f in failed.values())
        raise ValueError(f"window {manifest['window_start_ms']} has tables that failed to build ({names}); "
                         "materialize it (and the windows after it) again")
    return manifest


def write_window_snapshot(
    spark: SparkSession,
    changes: DataFrame,
    warehouse,
    source: str,
    window_start_ms: int,
    window_end_ms: int,
    previous: dict | None,
    keep_history: bool = False,
    merge_touched_keys: bool = True,
    audit: Callable[[dict], str | None] | None = None,
) -> dict:
    """Build and publish window [start, end) on `previous` (its manifest; None: the first).
    `keep_history`: also write the versions that ended in it (lib/history).
    `merge_touched_keys=False` rewrites every changed table whole (the benchmarks' peer).

    Write-audit-publish: the tables are written on the window's branch, then `audit` sees
    the manifest to be; a reason it returns withholds the window (`WindowWithheld`): no
    tag, `main` unchanged, no manifest, the branch `window-<start ms>` left for inspection.
    Another run that committed this window since this one started: `ManifestConflict`,
    raised before anything is published."""
    since = snapshot_windows.begin(warehouse, source)
    earlier = read_manifest(warehouse, source, window_start_ms)  # this window's last commit, if any
    tables, ddl, failed = _write_tables(spark, changes, warehouse, source, window_start_ms, previous, keep_history,
                                        merge_touched_keys, earlier)
    manifest = {"window_start_ms": window_start_ms, "window_end_ms": window_end_ms, "tables": tables,
                "ddl": ddl, "failed_tables": failed, "tag": end_tag(window_end_ms)}
    reason = audit(manifest) if audit is not None else None
    if reason is not None:
        raise WindowWithheld(f"window {window_start_ms} was not published: {reason}; its tables are on "
                             f"the Iceberg branch {branch_name(window_start_ms)}")
    snapshot_windows.check_unchanged(warehouse, source, since, [window_start_ms])
    # main follows the newest window with data (quiet windows after it carry its snapshots)
    newest = all(snapshot_windows.carried_after(warehouse, source, window_start_ms).values())
    written = {t["identifier"]: t["snapshot_id"] for t in tables.values()
               if t["written_window_start_ms"] == window_start_ms and "failed" not in t}
    carried = {t["identifier"]: t["snapshot_id"] for t in tables.values()}
    publish(warehouse, written, carried, end_tag(window_end_ms), branch_name(window_start_ms), newest)
    snapshot_windows.commit(warehouse, source, since, [manifest])
    _recarry_followers(warehouse, source, manifest)
    return manifest


class WindowWithheld(RuntimeError):
    """The window's audit failed: it was written on its branch but not published."""


def _recarry_followers(warehouse, source: str, manifest: dict) -> None:
    """Quiet windows carried forward from an earlier run of this window point at its old state
    (a table it failed to build, say): carry them again from this one."""
    later = snapshot_windows.carried_after(warehouse, source, manifest["window_start_ms"])
    followers, start = [], manifest["window_end_ms"]
    while later.get(start):
        followers.append(start)
        start += manifest["window_end_ms"] - manifest["window_start_ms"]
    if followers:
        carry_forward_windows(warehouse, source, followers, manifest["window_end_ms"] - manifest["window_start_ms"],
                              manifest)


_NOT_BUILT = "not built:"


def carried_entry(entry: dict) -> dict:
    """A table the window did not change: the previous entry (same snapshot), no changes counted."""
    return {**entry, "previous_rows": entry["rows"], "inserted_keys": 0, "deleted_keys": 0,
            "removed_by_ddl": 0, "moved_in": 0, "conversion_failures": 0, "schema_changes": []}


QUIET_DDL = {"applied": 0, "dropped_tables": {}, "unparsed": [], "history_versions_ended": {}, "history_tables": []}


def carry_forward_window(warehouse, source: str, window_start_ms: int, window_end_ms: int, previous: dict) -> dict:
    return carry_forward_windows(warehouse, source, [window_start_ms], window_end_ms - window_start_ms, previous)


def carry_forward_windows(warehouse, source: str, starts: list[int], window_ms: int, previous: dict) -> dict:
    """Commit consecutive windows in which nothing landed, after `previous`: every table keeps
    the previous window's snapshot and gets each window's end tag (one catalog commit per
    table for the whole run of windows, no Spark), then the windows' manifest rows, which refer
    to the window with data they carry, in one commit. A quiet hour costs a tag per table and
    a small row, so a dump whose commits lie years apart is not thousands of runs.
    `carried_forward` tells readers that the window has no change table (point in time needs
    none). Returns the last manifest."""
    expected = [previous.get("window_end_ms", -1) + i * window_ms for i in range(len(starts))]
    if starts != expected:
        raise RuntimeError(f"windows {starts[:3]}…: the previous manifest ends at "
                           f"{previous.get('window_end_ms')}, not where they start, or they are not consecutive")
    since = snapshot_windows.begin(warehouse, source)
    tables = {tid: carried_entry(e) for tid, e in previous["tables"].items()}
    # Tags first: a crash before the manifests leaves tags of windows the next tick carries again.
    tag_snapshots(warehouse, {t["identifier"]: t["snapshot_id"] for t in tables.values()},
                  [end_tag(s + window_ms) for s in starts])
    root = previous[CARRIED_FROM] if previous.get("carried_forward") else previous["window_start_ms"]
    manifests = [{"window_start_ms": start, "window_end_ms": start + window_ms,
                  "tables": tables, "ddl": QUIET_DDL, "carried_forward": True, CARRIED_FROM: root,
                  "tag": end_tag(start + window_ms),
                  # a table that failed to build stays failed until its window is materialized again
                  "failed_tables": previous.get("failed_tables", {})}
                 for start in starts]
    snapshot_windows.commit(warehouse, source, since, manifests)
    return manifests[-1]


def _write_tables(spark: SparkSession, changes: DataFrame, warehouse, source: str, window_start_ms: int,
                  previous: dict | None, keep_history: bool, merge_touched_keys: bool = True,
                  earlier: dict | None = None) -> tuple[dict[str, dict], dict, dict[str, dict]]:
    """Write every table the window changed; carry the others over by reference.

    Returns the manifest's tables, its DDL record (applied, dropped tables, unparsed) and the
    tables that failed to build, with the reason. A failed table keeps its previous entry,
    marked `failed`; a table failed by an earlier window is not built again on that stale
    entry: it stays failed until that window is materialized again."""
    prev_tables = (previous or {}).get("tables", {})
    states = previous_states(prev_tables, functools.partial(read_entry, spark, warehouse, source))
    stale = {(f["database"], f["table"]): f["reason"] if f["reason"].startswith(_NOT_BUILT)
             else f"{_NOT_BUILT} an earlier window failed to build it ({f['reason']})"
             for f in (previous or {}).get("failed_tables", {}).values()}
    result = apply_window(spark, changes, states, keep_history=keep_history,
                          touched_keys_only=merge_touched_keys,
                          failed=stale)
    try:
        # The history (the versions that ended) and the changed tables are independent small
        # jobs, submitted together (see concurrent_jobs); all are written before the manifest
        # commits the window.
        changed = [name for name, state in result.tables.items() if state.changed and name not in result.failed]
        if changed:
            snapshot_table(spark, warehouse, source, *changed[0]).ensure_namespace(spark)
        tasks = [functools.partial(caught, functools.partial(
                     _write_table, spark, warehouse, source, window_start_ms, name, result.tables[name],
                     prev_tables.get(state_id(name))))
                 for name in changed]
        if keep_history:
            # a rerun of the window clears its history rows of tables that end no version now
            rerun = [tuple(n) for n in (earlier or {}).get("ddl", {}).get("history_tables", [])]
            tasks.insert(0, functools.partial(write_window_history, spark, result, warehouse, source,
                                              window_start_ms, rerun))
        outputs = run_concurrently(tasks)
        ended, history_tables = outputs.pop(0) if keep_history else ({}, [])
        written = dict(zip(changed, outputs))
        result.failed.update({n: str(out) for n, out in written.items() if isinstance(out, TableFailed)})
        tables: dict[str, dict] = {}
        for name, state in result.tables.items():
            tid = state_id(name)
            if name in result.failed:
                if tid in prev_tables:
                    tables[tid] = {**carried_entry(prev_tables[tid]), "failed": result.failed[name]}
            elif state.changed:
                tables[tid] = written[name]
            else:
                tables[tid] = carried_entry(prev_tables[tid])
    finally:
        result.release()
    ddl = {
        "applied": len(result.barriers),
        "dropped_tables": {state_id(n): d for n, d in result.dropped.items() if n not in result.tables},
        "unparsed": result.unparsed_ddl,
        "history_versions_ended": ended,
        "history_tables": [list(n) for n in history_tables],  # names of the history tables it wrote rows to
    }
    failed = {state_id(n): {"database": n[0], "table": n[1], "reason": reason}
              for n, reason in sorted(result.failed.items())}
    return tables, ddl, failed


def _write_table(spark: SparkSession, warehouse, source: str, window_start_ms: int, name: tuple[str, str],
                 state: TableState, previous_entry: dict | None) -> dict:
    """One changed table's snapshot (on the window's branch) and its manifest entry."""
    with naming_table(state_id(name), "writing its snapshot"):
        return _commit_table(spark, warehouse, source, window_start_ms, name, state, previous_entry)


def _commit_table(spark: SparkSession, warehouse, source: str, window_start_ms: int, name: tuple[str, str],
                  state: TableState, previous_entry: dict | None) -> dict:
    frame = state.frame if state.frame is not None else spark.createDataFrame([], state.schema.spark_schema())
    partial = state.touched_keys is not None
    if partial and previous_entry is None:  # the frame holds the touched keys only: never write it as the table
        raise RuntimeError(f"{state_id(name)}: only some keys were rebuilt, but there is no previous snapshot "
                           "to merge them into")
    table = snapshot_table(spark, warehouse, source, *name)
    key = state.schema.primary_key
    table.ensure(spark, frame.schema)
    table.evolve(spark, frame.schema, key)
    base = previous_entry["snapshot_id"] if previous_entry and previous_entry.get("identifier") == table.identifier \
        else None
    snapshot_id = table.write_window(spark, branch_name(window_start_ms), base, frame, key,
                                     keys=state.touched_keys if partial else None)
    return {
        "database": name[0], "table": name[1], "identifier": table.identifier, "snapshot_id": snapshot_id,
        "rows": table.total_records(spark, snapshot_id),
        "previous_rows": state.previous_rows,
        "inserted_keys": state.inserted_keys, "deleted_keys": state.deleted_keys,
        "removed_by_ddl": state.removed_by_ddl, "moved_in": state.moved_in,
        "conversion_failures": state.conversion_failures,
        "written_window_start_ms": window_start_ms,
        "schema": state.schema.to_json(), "spark_schema": frame.schema.json(),
        "schema_changes": state.schema_changes,
    }
