"""Window cost against history: replay a dump of N hourly windows with the same number of
changes each, and compare the time of the last window with the first ones.

The tables grow with every window (most changes insert new keys), so a window whose cost
followed the size of the tables, not its own changes, shows up as a rising curve.
"""

from __future__ import annotations

import re
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
_WINDOW_LINE = re.compile(r"window \S+ \((\d+)/(\d+)[^)]*\): ok in ([\d.]+)s(?:, (\d+) Spark jobs)?")


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
    lines = list(_WINDOW_LINE.finditer(proc.stderr))
    seconds = [float(m.group(3)) for m in lines]
    jobs = [int(m.group(4)) for m in lines if m.group(4)]
    if not seconds:  # the replay's progress lines changed: say so instead of an empty report
        raise RuntimeError(f"no 'window … ok in Ns' lines in the history replay's output: {proc.stderr[-2000:]}")
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
