"""Snapshot windows on disk: immutable Parquet folders per (table, window, run) + a
manifest per window.

  <snapshots>/<db>.<table>/window_start_ms=<ms>/run=<id>/range-*.parquet
  <snapshots>/_manifests/window_start_ms=<ms>.json      written last: the commit point

A table without changes in a window is carried over by reference: the manifest entry
points at the folder that last wrote it. A changed table's files are split by primary-key
range (`key_ranges`, listed in its manifest entry); the ranges its changes did not touch
are hard links to the previous folder's files, so a window's cost follows its changes. Folders are never rewritten in place, so
re-materializing an old window cannot change what a newer manifest points at; a folder
no manifest references any more is removed after the commit. Manifest paths are relative
to the snapshots root, so a warehouse can be moved.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import uuid
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, types as T

from cdc_assets.lib.concurrent_jobs import run_concurrently
from cdc_assets.lib.history import write_window_history
from cdc_assets.lib.ranged_files import write_table_files
from cdc_assets.lib.snapshot import read_table
from cdc_assets.lib.table_errors import TableFailed, caught, naming_table
from cdc_assets.lib.table_timeline import TableState, apply_window, previous_states, state_id
from cdc_assets.lib.storage import (
    exclusive, read_json, remove_stale_temps, temp_sibling, window_dir, write_json_atomic,
)


# Rows per key-range file set: a window rewrites the ranges its changes touch, not the table.
DEFAULT_RANGE_ROWS = 1_000_000


def manifest_path(snapshots: Path, window_start_ms: int) -> Path:
    return snapshots / "_manifests" / f"window_start_ms={window_start_ms}.json"


def read_manifest(snapshots: Path, window_start_ms: int) -> dict | None:
    return read_json(manifest_path(snapshots, window_start_ms))


def table_path(snapshots: Path, entry: dict) -> Path:
    return snapshots / entry["path"]


def read_table_files(spark: SparkSession, snapshots: Path, entry: dict, names: list[str]) -> DataFrame:
    """Some files of a table's folder (a few key ranges), typed as the whole table."""
    schema = T.StructType.fromJson(json.loads(entry["spark_schema"]))
    return spark.read.schema(schema).parquet(*[str(table_path(snapshots, entry) / n) for n in names])


def require_built(manifest: dict) -> dict:
    """The manifest, unless a table of it failed to build (its state there is stale): reading
    it then is an error that names the tables, never a silently old table."""
    failed = manifest.get("failed_tables") or {}
    if failed:
        names = "; ".join(f"{f['database']}.{f['table']}: {f['reason']}" for f in failed.values())
        raise ValueError(f"window {manifest['window_start_ms']} has tables that failed to build ({names}); "
                         "materialize it (and the windows after it) again")
    return manifest


def list_manifests(snapshots: Path) -> list[int]:
    folder = snapshots / "_manifests"
    if not folder.exists():
        return []
    return sorted(int(p.stem.split("=", 1)[1]) for p in folder.glob("window_start_ms=*.json"))


def write_window_snapshot(
    spark: SparkSession,
    changes: DataFrame,
    snapshots: Path,
    window_start_ms: int,
    window_end_ms: int,
    previous: dict | None,
    history_root: Path | None = None,
    range_rows: int = DEFAULT_RANGE_ROWS,
) -> dict:
    manifest_file = manifest_path(snapshots, window_start_ms)
    # Two runs of one window take turns: otherwise one run's clean-up could remove the
    # folders the other is about to commit.
    with exclusive(manifest_file):
        remove_stale_temps(manifest_file)
        tables, ddl, failed = _write_tables(spark, changes, snapshots, window_start_ms, previous, history_root,
                                            range_rows)
        manifest = {"window_start_ms": window_start_ms, "window_end_ms": window_end_ms, "tables": tables,
                    "ddl": ddl, "failed_tables": failed}
        write_json_atomic(manifest_file, manifest)
        _remove_unreferenced(snapshots, window_start_ms, tables)
    _recarry_followers(snapshots, manifest)
    return manifest


def _recarry_followers(snapshots: Path, manifest: dict) -> None:
    """Quiet windows carried forward from an earlier run of this window point at its old state
    (a table it failed to build, say): carry them again from this one (JSON only)."""
    while (nxt := read_manifest(snapshots, manifest["window_end_ms"])) is not None and nxt.get("carried_forward"):
        manifest = carry_forward_window(snapshots, nxt["window_start_ms"], nxt["window_end_ms"], manifest)


_NOT_BUILT = "not built:"


def carried_entry(entry: dict) -> dict:
    """A table the window did not change: the previous entry (same folder), no changes counted."""
    return {**entry, "previous_rows": entry["rows"], "inserted_keys": 0, "deleted_keys": 0, "ranges_rewritten": [],
            "removed_by_ddl": 0, "moved_in": 0, "conversion_failures": 0, "schema_changes": []}


QUIET_DDL = {"applied": 0, "dropped_tables": {}, "unparsed": [], "history_versions_ended": {}}


def carry_forward_window(snapshots: Path, window_start_ms: int, window_end_ms: int, previous: dict) -> dict:
    """Commit a window in which nothing landed: its manifest points at the previous window's
    folders. No Spark, no new files: a quiet hour costs one small JSON file, so a dump whose
    commits lie years apart is not thousands of runs. `carried_forward` tells readers that
    the window has no change table (point in time needs none)."""
    if previous.get("window_end_ms") != window_start_ms:
        raise RuntimeError(f"window {window_start_ms}: the previous manifest ends at "
                           f"{previous.get('window_end_ms')}, not where this window starts")
    manifest = {"window_start_ms": window_start_ms, "window_end_ms": window_end_ms,
                "tables": {tid: carried_entry(e) for tid, e in previous["tables"].items()},
                "ddl": QUIET_DDL, "carried_forward": True,
                # a table that failed to build stays failed until its window is materialized again
                "failed_tables": previous.get("failed_tables", {})}
    manifest_file = manifest_path(snapshots, window_start_ms)
    with exclusive(manifest_file):
        write_json_atomic(manifest_file, manifest)
    return manifest


def _write_tables(spark: SparkSession, changes: DataFrame, snapshots: Path, window_start_ms: int,
                  previous: dict | None, history_root: Path | None,
                  range_rows: int) -> tuple[dict[str, dict], dict, dict[str, dict]]:
    """Write every table the window changed; carry the others over by reference.

    Returns the manifest's tables, its DDL record (applied, dropped tables, unparsed) and the
    tables that failed to build, with the reason. A failed table keeps its previous entry,
    marked `failed`; a table failed by an earlier window is not built again on that stale
    entry: it stays failed until that window is materialized again."""
    prev_tables = (previous or {}).get("tables", {})
    read = lambda e: read_table(spark, str(table_path(snapshots, e)), e["spark_schema"])  # noqa: E731

    read_files = functools.partial(read_table_files, spark, snapshots)
    states = previous_states(prev_tables, read, read_files)
    stale = {(f["database"], f["table"]): f["reason"] if f["reason"].startswith(_NOT_BUILT)
             else f"{_NOT_BUILT} an earlier window failed to build it ({f['reason']})"
             for f in (previous or {}).get("failed_tables", {}).values()}
    result = apply_window(spark, changes, states, keep_history=history_root is not None, touched_ranges_only=True,
                          failed=stale)
    try:
        # The history (the versions that ended) and the changed tables are independent small
        # jobs, submitted together (see concurrent_jobs); all are written before the manifest
        # commits the window.
        changed = [name for name, state in result.tables.items() if state.changed and name not in result.failed]
        tasks = [functools.partial(caught, functools.partial(
                     _write_table, spark, snapshots, window_start_ms, name, result.tables[name],
                     prev_tables.get(state_id(name)), range_rows))
                 for name in changed]
        if history_root is not None:
            tasks.insert(0, functools.partial(write_window_history, result, history_root, window_start_ms))
        outputs = run_concurrently(tasks)
        ended = outputs.pop(0) if history_root is not None else {}
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
    }
    failed = {state_id(n): {"database": n[0], "table": n[1], "reason": reason}
              for n, reason in sorted(result.failed.items())}
    return tables, ddl, failed



def _write_table(spark: SparkSession, snapshots: Path, window_start_ms: int, name: tuple[str, str],
                 state: TableState, previous_entry: dict | None, range_rows: int) -> dict:
    """One changed table's new folder (written to a temporary sibling, then renamed) and its manifest entry.

    The folder holds one set of files per primary-key range (see key_ranges); when the window
    touched only some ranges, the others are linked from the previous folder."""
    with naming_table(state_id(name), "writing its snapshot"):
        return _write_table_files(spark, snapshots, window_start_ms, name, state, previous_entry, range_rows)


def _write_table_files(spark: SparkSession, snapshots: Path, window_start_ms: int, name: tuple[str, str],
                       state: TableState, previous_entry: dict | None, range_rows: int) -> dict:
    frame = state.frame if state.frame is not None else spark.createDataFrame([], state.schema.spark_schema())
    final = window_dir(snapshots / state_id(name), window_start_ms) / f"run={uuid.uuid4().hex[:12]}"
    tmp = temp_sibling(final)
    expected = (state.previous_rows + state.inserted_keys - state.deleted_keys - state.removed_by_ddl
                + state.moved_in)
    partial = state.touched_ranges is not None
    if partial and previous_entry is None:  # the frame holds the touched ranges only: never write it as the table
        raise RuntimeError(f"{state_id(name)}: only some key ranges were rebuilt, but there is no previous folder "
                           "to carry the others over from")
    ranges = write_table_files(
        spark, frame, state.schema, tmp, range_rows, expected,
        previous=state.ranges if partial else None,
        previous_folder=table_path(snapshots, previous_entry) if partial else None,
        touched=state.touched_ranges if partial else None,
    )
    rows = sum(ranges.rows)
    os.replace(tmp, final)
    linked = {n for i, names in enumerate(state.ranges.files) if i not in state.touched_ranges
              for n in names} if partial else set()
    return {
        "database": name[0], "table": name[1], "path": str(final.relative_to(snapshots)),
        "rows": rows, "ranges": ranges.to_json(),
        # Ranges whose files this window wrote (the others are links to files checked before).
        "ranges_rewritten": [i for i, names in enumerate(ranges.files) if any(n not in linked for n in names)],
        "previous_rows": state.previous_rows,
        "inserted_keys": state.inserted_keys, "deleted_keys": state.deleted_keys,
        "removed_by_ddl": state.removed_by_ddl, "moved_in": state.moved_in,
        "conversion_failures": state.conversion_failures,
        "written_window_start_ms": window_start_ms,
        "schema": state.schema.to_json(), "spark_schema": frame.schema.json(),
        "schema_changes": state.schema_changes,
    }


def _remove_unreferenced(snapshots: Path, window_start_ms: int, tables: dict[str, dict]) -> None:
    """Drop this window's older run folders that no manifest points at any more."""
    referenced = {
        entry["path"]
        for w in list_manifests(snapshots)
        for entry in (read_manifest(snapshots, w) or {}).get("tables", {}).values()
    }
    for tid in tables:
        folder = window_dir(snapshots / tid, window_start_ms)
        for run in folder.glob("run=*"):
            if str(run.relative_to(snapshots)) not in referenced:
                shutil.rmtree(run, ignore_errors=True)
        for stale in folder.glob(".tmp-run=*"):  # left by a killed run of this window
            shutil.rmtree(stale, ignore_errors=True)
