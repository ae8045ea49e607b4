"""Window cost against history: replay a dump of N hourly windows with the same number of
changes each, and compare the time of the last window with the first ones.

The tables grow with every window (most changes insert new keys), so a window whose cost
followed the size of the tables, not its own changes, shows up as a rising curve.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.dump import DumpSpec, generate_dump

EVENTS_PER_WINDOW = 20_000
# Issue 45's fixed-cost target: a 5,000-event window on a warm JVM.
FIXED_COST_WINDOWS, FIXED_COST_EVENTS = 6, 5_000


def window_seconds(warehouse: Path, source: str) -> list[float]:
    """Each window's seconds, from the Iceberg commit times (the replay runs a range of windows
    as one Dagster run, so it prints one time per range): its decode-and-align share (from the
    previous window's quarantine commit to its own; window 1 from the first read's record, so
    it also carries the range's shared decode pass) plus its snapshot share (from the previous
    window's manifest commit to its own; window 1 from the last quarantine commit)."""
    from cdc_assets.common.warehouse import load_pyiceberg_catalog
    from cdc_assets.common.window_commits import WINDOW_PROPERTY
    from cdc_assets.snapshot.manifests import FIRST_PROPERTY, TABLE

    catalog = load_pyiceberg_catalog(warehouse)

    def commits(table: str, prop: str) -> dict[int, int]:
        out = {}
        for snap in sorted(catalog.load_table((source, table)).snapshots(), key=lambda x: x.sequence_number):
            window = (snap.summary.additional_properties if snap.summary else {}).get(prop)
            if window is not None:
                out[int(window)] = snap.timestamp_ms  # the newest commit of the window
        return out

    reads, quarantine = commits("window_reads", WINDOW_PROPERTY), commits("quarantine", WINDOW_PROPERTY)
    manifests = commits(TABLE, FIRST_PROPERTY)
    windows = sorted(manifests)
    if not windows or any(w not in quarantine for w in windows):
        return []
    layer_from = [min(reads[w] for w in windows if w in reads)] + [quarantine[w] for w in windows[:-1]]
    snapshot_from = [quarantine[windows[-1]]] + [manifests[w] for w in windows[:-1]]
    return [((quarantine[w] - a) + (manifests[w] - b)) / 1000 for w, a, b in zip(windows, layer_from, snapshot_from)]


def _summary(output: str) -> dict:
    """The replay's JSON summary (its last line that is one)."""
    for line in reversed(output.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return {}


def measure_history(windows: int, cache: Path, seed: int, events_per_window: int = EVENTS_PER_WINDOW) -> dict:
    spec = DumpSpec(windows * events_per_window, seed=seed, hours=windows, keys_per_event=1.0)
    dump = generate_dump(spec, cache)
    warehouse = cache / "work" / "history_warehouse"
    shutil.rmtree(warehouse, ignore_errors=True)
    cli = Path(sys.executable).with_name("cdc-assets")
    env = {k: v for k, v in __import__("os").environ.items() if k != "DAGSTER_HOME"}
    t0 = time.perf_counter()
    proc = subprocess.run(
        [str(cli), "replay", "--protocol", "canal-json", "--layout", "kafka-parquet",
         "--input", str(dump.dump_dir), "--warehouse", str(warehouse), "--source", "bench"],
        capture_output=True, text=True, env=env,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"history replay failed ({proc.returncode}): {proc.stderr[-3000:]}")
    seconds = window_seconds(warehouse, "bench")
    jobs = _summary(proc.stdout + proc.stderr).get("spark_jobs_per_window") or []
    if not seconds:
        raise RuntimeError(f"the history replay committed no window: {proc.stderr[-2000:]}")
    shutil.rmtree(warehouse, ignore_errors=True)
    rows = dump.info["counts"]["expected_rows"]
    return {
        "windows": len(seconds),
        "events_per_window": events_per_window,
        "final_rows": sum(rows.values()),
        "seconds": seconds,
        "spark_jobs": jobs,
        "first": seconds[0] if seconds else None,
        # Window 1 pays one-off costs (first Spark jobs in the JVM): the median of windows
        # 2-4 is the steadier baseline; both ratios are reported.
        "early_median": statistics.median(seconds[1:4]) if len(seconds) >= 4 else None,
        "last": seconds[-1] if seconds else None,
        # The fixed cost of a small window on a warm JVM: the median of windows 2..N.
        "warm_median": statistics.median(seconds[1:]) if len(seconds) >= 2 else None,
        "wall_s": wall,
    }
