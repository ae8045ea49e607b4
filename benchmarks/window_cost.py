"""Window cost against table size, at the snapshot step: one window of 20,000 changes
applied to Iceberg tables of growing size, written as a MERGE of the keys the window
touched (what cdc_assets does: one copy-on-write commit that rewrites the data files
holding those keys) and, as the peer in the same process, as an overwrite of the whole
table (`merge_touched_keys=False`).

    python -m benchmarks.window_cost [--sizes 250000,1000000,4000000] [--runs 3]
                                     [--target-file-bytes 524288]

Two workloads per size, both with the window's uniqueness check over the snapshot it wrote:
- `recent`: 15,000 inserts of new, increasing keys (AUTO_INCREMENT) and 5,000 updates of
  the newest 100,000 keys (of every key, in a smaller table): the common OLTP shape;
- `uniform`: 20,000 updates of keys drawn over the whole key space (TiDB's AUTO_RANDOM or
  UUID keys, or a backfill).
Per size, layout and workload: the median seconds, and the data files the written snapshot
deleted (rewritten), added and holds, with their bytes (from its Iceberg summary). Prints one
JSON line.

A snapshot table is written sorted by its key (Spark range-distributes the rows), so each
data file holds one range of keys and a MERGE rewrites only the files whose range holds a
touched key. A write task rolls to a new file at the table's `write.target-file-size-bytes`
(Iceberg's default: 512 MiB), and adaptive execution coalesces the range shuffle into a few
partitions when it is small (Iceberg asks for partitions of 128 MiB of output): with the
default, each write task of these tables writes one file (400,000 rows: one or two files),
and a MERGE rewrites most of the table. The benchmark's tables take a smaller target
(`--target-file-bytes`, a catalog default set in the benchmark's session), so their files
grow in number with the table, as a large table's do with the default.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

CHANGES_PER_WINDOW = 20_000
RECENT_INSERTS = 15_000  # `recent`: new keys after the table's last one,
RECENT_UPDATES = CHANGES_PER_WINDOW - RECENT_INSERTS  # and updates of keys among
RECENT_KEYS = 100_000  # the newest RECENT_KEYS (the whole table when it has fewer rows)
TARGET_FILE_BYTES = 512 << 10
LAYOUTS = {"merge": True, "whole_table": False}  # layout -> merge_touched_keys
WORKLOADS = ("recent", "uniform")
_T0 = 1767225600000 << 18  # a TiDB TSO (2026-01-01)


def _spark():
    """The project's session settings: the Iceberg jars, extensions and catalogs come with them."""
    from cdc_assets.common.spark_session import spark_config, start_spark_session
    from cdc_assets.common.settings import load_settings

    conf = spark_config(load_settings({}))
    conf["spark.app.name"] = "bench-window-cost"
    return start_spark_session(conf)


def _changes(ids, op: str, commit_ts: int):
    """Change-log rows (the unified schema) for a frame of `id`s: table db.t (id, name, v)."""
    from cdc_assets.contracts.schemas import CHANGE_LOG_SCHEMA

    key = F.col("id").cast("string")
    values = {
        "topic": F.lit("bench"), "kafka_partition": F.lit(0), "kafka_offset": F.col("id"), "event_index": F.lit(0),
        "event_kind": F.lit("row"), "op": F.lit(op), "database": F.lit("db"), "table": F.lit("t"),
        "commit_ts": F.lit(commit_ts) + F.col("id"), "pk_names": F.array(F.lit("id")), "pk_values": F.array(key),
        "after": F.create_map(F.lit("id"), key, F.lit("name"), F.concat(F.lit(f"{op.lower()}-"), key),
                              F.lit("v"), (F.col("id") * 7 % 1000).cast("string")),
        "column_types": F.create_map(F.lit("id"), F.lit("bigint"), F.lit("name"), F.lit("varchar(40)"),
                                     F.lit("v"), F.lit("int")),
    }
    return ids.select(*[values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name)
                        for f in CHANGE_LOG_SCHEMA.fields])


def _window(spark, rows: int, workload: str):
    ts = _T0 + (1 << 40)
    if workload == "recent":
        newest = min(RECENT_KEYS, rows)
        frame = _changes(spark.range(rows, rows + RECENT_INSERTS), "INSERT", ts).unionByName(
            _changes(spark.range(rows - newest, rows, max(1, newest // RECENT_UPDATES)), "UPDATE", ts))
    else:
        frame = _changes(spark.range(0, rows, max(1, rows // CHANGES_PER_WINDOW)), "UPDATE", ts)
    return frame.localCheckpoint()


def _expected_rows(rows: int, workload: str) -> int:
    return rows + (RECENT_INSERTS if workload == "recent" else 0)


def _duplicate_keys(spark, store: tuple, entry) -> int:
    """What the snapshots asset's uniqueness check costs: nothing when the MERGE observed one
    source row per key (`TableEntry.duplicate_keys`), else a scan of the table at the
    snapshot the window wrote (whole-table writes)."""
    from cdc_assets.snapshot.entry_tables import read_entry

    if entry.duplicate_keys is not None:
        return entry.duplicate_keys
    return read_entry(spark, *store, entry).groupBy("id").count().where(F.col("count") > 1).count()


def _data_files(spark, store: tuple, snapshot_id: int) -> dict[str, int]:
    """The data files the snapshot rewrote (deleted from the table), added and holds, and the
    table's files before it; the bytes of the files it holds and held before; from its Iceberg
    summary (metadata, no scan). A summary leaves out a count of zero."""
    from cdc_assets.snapshot.entry_tables import snapshot_table

    table = snapshot_table(spark, *store, "db", "t")
    summary = spark.sql(f"SELECT summary FROM {table.sql}.snapshots WHERE snapshot_id = {int(snapshot_id)}").first()[0]
    files = {name: int(summary.get(f"{key}-data-files", 0))
             for name, key in (("rewritten", "deleted"), ("added", "added"), ("total", "total"))}
    size = {name: int(summary.get(key, 0))
            for name, key in (("removed", "removed-files-size"), ("added", "added-files-size"),
                              ("total", "total-files-size"))}
    return {**files, "before": files["total"] - files["added"] + files["rewritten"],
            "bytes": size["total"], "bytes_before": size["total"] - size["added"] + size["removed"]}


@contextlib.contextmanager
def _target_file_size(spark, target_file_bytes: int):
    """Tables created meanwhile in the catalog `cdc` take `write.target-file-size-bytes` =
    `target_file_bytes` (a catalog default: the catalog loads it when `fresh_warehouse`
    points `cdc` at a new warehouse). The session's setting is restored after."""
    from cdc_assets.common.warehouse import CATALOG

    key = f"spark.sql.catalog.{CATALOG}.table-default.write.target-file-size-bytes"
    before = spark.conf.get(key, None)
    spark.conf.set(key, str(target_file_bytes))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


def _timed_window(spark, window, store: tuple, base, merge: bool) -> tuple[float, object, int]:
    """One write of the window on `base`, with its uniqueness check: seconds, entry, duplicate keys."""
    from cdc_assets.snapshot.store import write_window_snapshot

    t0 = time.perf_counter()
    manifest = write_window_snapshot(spark, window, *store, 2000, 3000, base, merge_touched_keys=merge)
    entry = manifest.tables["db.t"]
    duplicates = _duplicate_keys(spark, store, entry)
    return time.perf_counter() - t0, entry, duplicates


def _measure_workload(spark, rows: int, workload: str, layout: str, store: tuple, base,
                      runs: int) -> dict:
    window = _window(spark, rows, workload)
    seconds = []
    for i in range(runs + 1):  # the first run warms the JVM up and is not counted
        s, entry, duplicates = _timed_window(spark, window, store, base, LAYOUTS[layout])
        if i:
            seconds.append(s)
    expected = _expected_rows(rows, workload)
    if entry.rows != expected or duplicates:
        raise RuntimeError(f"{layout}/{workload} at {rows:,} rows: {entry.rows:,} rows, "
                           f"{duplicates} duplicate keys (want {expected:,}, 0)")
    files = _data_files(spark, store, entry.snapshot_id)
    print(f"[window-cost] {rows:,} rows {layout}/{workload}: {seconds} s, data files {files}",
          file=sys.stderr, flush=True)
    return {f"{layout}_{workload}_s": statistics.median(seconds) if seconds else None,
            f"{layout}_{workload}_rows": entry.rows, f"{layout}_{workload}_duplicate_keys": duplicates,
            f"{layout}_{workload}_files": files}


def _measure_layout(spark, rows: int, layout: str, root: Path, runs: int) -> dict:
    """Both workloads on one table of `rows` rows, each window cut from the same first window.
    The warehouse (catalog and tables) is this size's and layout's own, removed after."""
    from benchmarks.warehouse import fresh_warehouse
    from cdc_assets.snapshot.store import write_window_snapshot

    warehouse = root / f"{layout}-{rows}"
    store = (warehouse, "src")  # (warehouse, source): what the snapshot store takes
    fresh_warehouse(spark, warehouse)
    try:
        base = write_window_snapshot(spark, _changes(spark.range(rows), "INSERT", _T0), *store, 1000, 2000, None,
                                     merge_touched_keys=LAYOUTS[layout])
        out = {}
        for workload in WORKLOADS:
            out.update(_measure_workload(spark, rows, workload, layout, store, base, runs))
        return out
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)


def measure(spark, sizes: list[int], runs: int, root: Path, warm_up: bool = True,
            target_file_bytes: int = TARGET_FILE_BYTES) -> list[dict]:
    with _target_file_size(spark, target_file_bytes):
        if warm_up:  # the JVM's first jobs are slower: they must not flatter the smallest size
            _measure(spark, [min(sizes) // 4], 0, root / "warm-up")
        return _measure(spark, sizes, runs, root)


def _measure(spark, sizes: list[int], runs: int, root: Path) -> list[dict]:
    out = []
    for rows in sizes:
        row = {"rows": rows}
        for layout in LAYOUTS:
            row.update(_measure_layout(spark, rows, layout, root, runs))
        out.append(row)
    return out


def table_size_json(sizes: list[dict], runs: int, target_file_bytes: int) -> dict:
    """What the report's table-size section reads."""
    return {"changes_per_window": CHANGES_PER_WINDOW, "recent_inserts": RECENT_INSERTS,
            "recent_updates": RECENT_UPDATES, "recent_keys": RECENT_KEYS, "runs": runs,
            "target_file_bytes": target_file_bytes, "sizes": sizes}


def measure_in_child(sizes: str, runs: int, target_file_bytes: int = TARGET_FILE_BYTES) -> dict:
    """Run in its own process (own JVM), as every measured engine is; returns the JSON line."""
    proc = subprocess.run([sys.executable, "-m", "benchmarks.window_cost", "--sizes", sizes, "--runs", str(runs),
                           "--target-file-bytes", str(target_file_bytes)],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    if proc.returncode != 0:
        raise RuntimeError(f"window_cost failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.window_cost")
    p.add_argument("--sizes", default="250000,1000000,4000000")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--target-file-bytes", type=int, default=TARGET_FILE_BYTES,
                   help="the tables' write.target-file-size-bytes")
    args = p.parse_args(argv)
    spark = _spark()
    with tempfile.TemporaryDirectory(prefix="bench-window-cost-") as tmp:
        rows = measure(spark, [int(s) for s in args.sizes.split(",") if s], args.runs, Path(tmp),
                       target_file_bytes=args.target_file_bytes)
    spark.stop()
    print(json.dumps(table_size_json(rows, args.runs, args.target_file_bytes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
