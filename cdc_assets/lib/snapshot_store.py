"""Snapshot windows on disk: immutable Parquet folders per (table, window, run) + a
manifest per window.

  <snapshots>/<db>.<table>/window_start_ms=<ms>/run=<id>/part-*.parquet
  <snapshots>/_manifests/window_start_ms=<ms>.json      written last: the commit point

A table without changes in a window is carried over by reference: the manifest entry
points at the folder that last wrote it. Folders are never rewritten in place, so
re-materializing an old window cannot change what a newer manifest points at; a folder
no manifest references any more is removed after the commit. Manifest paths are relative
to the snapshots root, so a warehouse can be moved.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from cdc_assets.lib.snapshot import (
    TableSchema,
    key_actions,
    read_table,
    reconstruct_table,
    window_table_schemas,
)
from cdc_assets.lib.storage import exclusive, read_json, remove_stale_temps, temp_sibling, window_dir, write_json_atomic


def manifest_path(snapshots: Path, window_start_ms: int) -> Path:
    return snapshots / "_manifests" / f"window_start_ms={window_start_ms}.json"


def read_manifest(snapshots: Path, window_start_ms: int) -> dict | None:
    return read_json(manifest_path(snapshots, window_start_ms))


def table_path(snapshots: Path, entry: dict) -> Path:
    return snapshots / entry["path"]


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
) -> dict:
    manifest_file = manifest_path(snapshots, window_start_ms)
    # Two runs of one window take turns: otherwise one run's clean-up could remove the
    # folders the other is about to commit.
    with exclusive(manifest_file):
        remove_stale_temps(manifest_file)
        tables = _write_tables(spark, changes, snapshots, window_start_ms, previous)
        manifest = {"window_start_ms": window_start_ms, "window_end_ms": window_end_ms, "tables": tables}
        write_json_atomic(manifest_file, manifest)
        _remove_unreferenced(snapshots, window_start_ms, tables)
    return manifest


def _write_tables(spark: SparkSession, changes: DataFrame, snapshots: Path, window_start_ms: int,
                  previous: dict | None) -> dict[str, dict]:
    """Write every table the window changed; carry the others over by reference."""
    latest = key_actions(changes).persist()
    try:
        schemas = window_table_schemas(changes)
        prev_tables = (previous or {}).get("tables", {})
        tables: dict[str, dict] = {}
        for s in schemas.values():
            prev_entry = prev_tables.get(s.id)
            schema = TableSchema.from_json(prev_entry["schema"]).merged_with(s) if prev_entry else s
            prev_df = (read_table(spark, str(table_path(snapshots, prev_entry)), prev_entry["spark_schema"])
                       if prev_entry else None)
            result = reconstruct_table(latest, schema, prev_df)
            final = window_dir(snapshots / s.id, window_start_ms) / f"run={uuid.uuid4().hex[:12]}"
            tmp = temp_sibling(final)
            result.frame.write.parquet(str(tmp))
            os.replace(tmp, final)
            rows = spark.read.parquet(str(final)).count() if any(final.glob("*.parquet")) else 0
            tables[s.id] = {
                "database": s.database, "table": s.table, "path": str(final.relative_to(snapshots)),
                "rows": rows, "previous_rows": result.previous_rows,
                "inserted_keys": result.inserted_keys, "deleted_keys": result.deleted_keys,
                "conversion_failures": result.conversion_failures,
                "written_window_start_ms": window_start_ms,
                "schema": schema.to_json(), "spark_schema": result.frame.schema.json(),
            }
        for tid, entry in prev_tables.items():
            if tid not in tables:
                tables[tid] = {**entry, "previous_rows": entry["rows"], "inserted_keys": 0,
                               "deleted_keys": 0, "conversion_failures": 0}
    finally:
        latest.unpersist()
    return tables


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
