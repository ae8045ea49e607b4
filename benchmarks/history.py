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
    """Each window's seconds, from the Iceberg commit times: the replay runs a range of
    windows as one Dagster run and prints one time per range.

    Per run (consecutive windows with data; it starts at the landing's last commit, or at the
    previous run's last manifest), a window's decode-and-align share runs from the previous
    window's quarantine commit to its own, and its snapshot share from the previous window's
    manifest commit to its own (the first window's from the run's last quarantine commit).
    The first window's decode share also holds the run's shared pass (the group's one decode
    and alignment, align/window_group.py): what it has beyond the median of the others is
    spread evenly over the run's windows, so that each carries its part of the decode."""
    from cdc_assets.common.warehouse import load_pyiceberg_catalog
    from cdc_assets.common.window_commits import WINDOW_PROPERTY
    from cdc_assets.landing.tables import LANDING_STATE
    from cdc_assets.snapshot.manifests import FIRST_PROPERTY, TABLE

    catalog = load_pyiceberg_catalog(warehouse)

    def snapshots(table: str):
        return sorted(catalog.load_table((source, table)).snapshots(), key=lambda x: x.sequence_number)

    def commits(table: str, prop: str) -> dict[int, int]:
        out = {}
        for snap in snapshots(table):
            window = (snap.summary.additional_properties if snap.summary else {}).get(prop)
            if window is not None:
                out[int(window)] = snap.timestamp_ms  # the newest commit of the window
        return out

    quarantine, manifests = commits("quarantine", WINDOW_PROPERTY), commits(TABLE, FIRST_PROPERTY)
    landed = [snap.timestamp_ms for snap in snapshots(LANDING_STATE)]
    windows = sorted(w for w in manifests if w in quarantine)  # a quiet window is carried: no quarantine
    seconds, run = [], []
    for i, w in enumerate(windows):
        run.append(w)
        # a run ends where the next window's decode began after this window's manifest
        if i + 1 == len(windows) or quarantine[windows[i + 1]] > manifests[w]:
            start = max([t for t in landed if t <= quarantine[run[0]]] +
                        [m for m in manifests.values() if m <= quarantine[run[0]]], default=quarantine[run[0]])
            seconds += _run_seconds(run, start, quarantine, manifests)
            run = []
    return seconds


def _run_seconds(run: list[int], start: int, quarantine: dict, manifests: dict) -> list[float]:
    layer_from = [start] + [quarantine[w] for w in run[:-1]]
    snapshot_from = [quarantine[run[-1]]] + [manifests[w] for w in run[:-1]]
    layer = [(quarantine[w] - a) / 1000 for w, a in zip(run, layer_from)]
    snapshot = [(manifests[w] - b) / 1000 for w, b in zip(run, snapshot_from)]
    if len(layer) > 1:
        shared = max(layer[0] - statistics.median(layer[1:]), 0.0)
        layer = [x + shared / len(layer) - (shared if i == 0 else 0) for i, x in enumerate(layer)]
    return [a + b for a, b in zip(layer, snapshot)]


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
