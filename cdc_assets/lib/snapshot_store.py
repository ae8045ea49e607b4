"""Snapshot windows on disk: one Parquet folder per (table, window) + a manifest per window.

  <snapshots>/<db>.<table>/window_start_ms=<ms>/part-*.parquet
  <snapshots>/_manifests/window_start_ms=<ms>.json      written last: the commit point

A table without changes in a window is carried over by reference: the manifest entry
points at the folder of the window that last wrote it.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from cdc_assets.lib.snapshot import (
    TableSchema,
    key_actions,
    read_table,
    reconstruct_table,
    window_table_schemas,
)
from cdc_assets.lib.storage import read_json, replace_dir, temp_sibling, window_dir, write_json_atomic


def manifest_path(snapshots: Path, window_start_ms: int) -> Path:
    return snapshots / "_manifests" / f"window_start_ms={window_start_ms}.json"


def read_manifest(snapshots: Path, window_start_ms: int) -> dict | None:
    return read_json(manifest_path(snapshots, window_start_ms))


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
    latest = key_actions(changes).persist()
    try:
        schemas = window_table_schemas(changes)
        prev_tables = (previous or {}).get("tables", {})
        tables: dict[str, dict] = {}
        for s in schemas.values():
            prev_entry = prev_tables.get(s.id)
            schema = TableSchema.from_json(prev_entry["schema"]).merged_with(s) if prev_entry else s
            prev_df = read_table(spark, prev_entry["path"], prev_entry["spark_schema"]) if prev_entry else None
            result = reconstruct_table(latest, schema, prev_df)
            final = window_dir(snapshots / s.id, window_start_ms)
            tmp = temp_sibling(final)
            result.frame.write.parquet(str(tmp))
            replace_dir(tmp, final)
            rows = spark.read.parquet(str(final)).count() if any(final.glob("*.parquet")) else 0
            tables[s.id] = {
                "database": s.database, "table": s.table, "path": str(final),
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
    manifest = {"window_start_ms": window_start_ms, "window_end_ms": window_end_ms, "tables": tables}
    write_json_atomic(manifest_path(snapshots, window_start_ms), manifest)
    return manifest
