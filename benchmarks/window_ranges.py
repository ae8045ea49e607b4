"""Window cost against table size, at the snapshot step: one window of 20,000 changes
applied to tables of growing size, written in key ranges (what cdc_assets does) and, as the
peer in the same process, as one range (the whole table rewritten, as before key ranges).

    python -m benchmarks.window_ranges [--sizes 250000,1000000,4000000] [--runs 3]

Two workloads per size, both with the window's uniqueness check over the files it wrote:
- `recent`: 15,000 inserts of new, increasing keys (AUTO_INCREMENT) and 5,000 updates of
  the newest 100,000 keys: the common OLTP shape, which touches one or two ranges;
- `uniform`: 20,000 updates of keys drawn over the whole key space (TiDB's AUTO_RANDOM or
  UUID keys, or a backfill), which touches every range, so no layout can skip a rewrite.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RANGE_ROWS = 250_000
WHOLE_TABLE = 10**15  # one range whatever the size
_T0 = 1767225600000 << 18  # a TiDB TSO (2026-01-01)


def _spark():
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("bench-window-ranges")
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "4g")
             .config("spark.sql.shuffle.partitions", "8").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _changes(ids, op: str, commit_ts: int):
    """Change-log rows (the unified schema) for a frame of `id`s: table db.t (id, name, v)."""
    from pyspark.sql import functions as F

    from cdc_assets.lib.changelog_schema import CHANGE_LOG_SCHEMA

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
        frame = _changes(spark.range(rows, rows + 15_000), "INSERT", ts).unionByName(
            _changes(spark.range(max(0, rows - 100_000), rows, max(1, min(100_000, rows) // 5_000)), "UPDATE", ts))
    else:
        frame = _changes(spark.range(0, rows, max(1, rows // 20_000)), "UPDATE", ts)
    return frame.localCheckpoint()


def _duplicate_keys(spark, snapshots: Path, manifest: dict) -> int:
    """What the snapshots asset's uniqueness check reads: the rewritten ranges only."""
    from cdc_assets.lib.snapshot import read_table
    from cdc_assets.lib.snapshot_store import read_table_files, table_path

    entry = manifest["tables"]["db.t"]
    if len(entry["ranges"]["files"]) > 1:
        names = [n for i in entry["ranges_rewritten"] for n in entry["ranges"]["files"][i]]
        frame = read_table_files(spark, snapshots, entry, names)
    else:
        frame = read_table(spark, str(table_path(snapshots, entry)), entry["spark_schema"])
    return frame.groupBy("id").count().where("count > 1").count()


def measure(spark, sizes: list[int], runs: int, root: Path, range_rows: int = RANGE_ROWS,
            warm_up: bool = True) -> list[dict]:
    if warm_up:  # the JVM's first jobs are slower: they must not flatter the smallest size
        _measure(spark, [min(sizes) // 4], 0, root / "warm-up", range_rows)
    return _measure(spark, sizes, runs, root, range_rows)


def _measure(spark, sizes: list[int], runs: int, root: Path, range_rows: int) -> list[dict]:
    from cdc_assets.lib.snapshot_store import write_window_snapshot

    out = []
    for rows in sizes:
        first = _changes(spark.range(rows), "INSERT", _T0)
        row = {"rows": rows}
        for layout, layout_rows in (("ranges", range_rows), ("whole_table", WHOLE_TABLE)):
            snapshots = root / f"{layout}-{rows}"
            base = write_window_snapshot(spark, first, snapshots, 1000, 2000, None, range_rows=layout_rows)
            for workload in ("recent", "uniform"):
                window = _window(spark, rows, workload)
                seconds = []
                for i in range(runs + 1):  # the first run warms the JVM up and is not counted
                    t0 = time.perf_counter()
                    manifest = write_window_snapshot(spark, window, snapshots, 2000, 3000, base,
                                                     range_rows=layout_rows)
                    duplicates = _duplicate_keys(spark, snapshots, manifest)
                    if i:
                        seconds.append(time.perf_counter() - t0)
                entry = manifest["tables"]["db.t"]
                expected = rows + (15_000 if workload == "recent" else 0)
                if entry["rows"] != expected or duplicates:
                    raise RuntimeError(f"{layout}/{workload} at {rows:,} rows: {entry['rows']:,} rows, "
                                       f"{duplicates} duplicate keys (want {expected:,}, 0)")
                row[f"{layout}_{workload}_s"] = statistics.median(seconds) if seconds else None
                row[f"{layout}_{workload}_rewritten"] = [len(entry["ranges_rewritten"]), len(entry["ranges"]["files"])]
                print(f"[window-ranges] {rows:,} rows {layout}/{workload}: {seconds} s, "
                      f"rewrote {row[f'{layout}_{workload}_rewritten']}", file=sys.stderr, flush=True)
            shutil.rmtree(snapshots, ignore_errors=True)
        out.append(row)
    return out


def measure_in_child(sizes: str, runs: int) -> dict:
    """Run in its own process (own JVM), as every measured engine is; returns the JSON line."""
    proc = subprocess.run([sys.executable, "-m", "benchmarks.window_ranges", "--sizes", sizes, "--runs", str(runs)],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    if proc.returncode != 0:
        raise RuntimeError(f"window_ranges failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.window_ranges")
    p.add_argument("--sizes", default="250000,1000000,4000000")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    spark = _spark()
    with tempfile.TemporaryDirectory(prefix="bench-window-ranges-") as tmp:
        rows = measure(spark, [int(s) for s in args.sizes.split(",") if s], args.runs, Path(tmp))
    spark.stop()
    print(json.dumps({"range_rows": RANGE_ROWS, "changes_per_window": 20_000, "runs": args.runs, "sizes": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
