"""Shared plumbing for end-to-end tests: simulate a dump, replay it through Dagster."""

from __future__ import annotations

from pathlib import Path

import random
from datetime import datetime, timezone

from dagster import DagsterInstance
from pyspark.sql import SparkSession

from cdc_assets.common.settings import SourceConfig, load_settings
from cdc_assets.replay import ReplaySummary, replay
from cdc_assets.simulator import GeneratedDump, generate
from cdc_assets.simulator.compare import canonical, compare_window, load_truth, truth_rows
from cdc_assets.simulator.schema import DEMO_TABLES
from cdc_assets.simulator.truth import states_at
from cdc_assets.simulator.workload import Workload
from cdc_assets.snapshot.point_in_time import parse_instant, tables_as_of
from cdc_assets.snapshot.store import list_manifests, read_manifest


def settings_for(home: Path, dump: Path, protocol: str = "canal-json", layout: str = "auto", name: str = "src",
                 options: dict[str, str] | None = None):
    base = load_settings({"CDC_ASSETS_HOME": str(home)})
    source = SourceConfig(name=name, protocol=protocol, input_path=str(dump), layout=layout,
                          options=dict(options or {}))
    return base.with_overrides(sources=(source,))


def simulate_and_replay(tmp: Path, *, seed: int, layout: str, row_changes: int, duration_ms: int,
                        protocol: str = "canal-json", decoder: str | None = None,
                        options: dict[str, str] | None = None, instance: DagsterInstance | None = None,
                        **setting_overrides) -> tuple[GeneratedDump, ReplaySummary, object]:
    """Simulate `protocol` (an encoder) and replay it with `decoder` (default: the same
    name) and its `options` (SourceConfig.options); `setting_overrides` go to Settings.
    `instance`: where the runs are recorded (default: an ephemeral one)."""
    dump = generate(tmp / "sim", seed=seed, layout=layout, row_changes=row_changes, duration_ms=duration_ms,
                    protocol=protocol)
    settings = settings_for(tmp / "home", dump.dump_dir, protocol=decoder or protocol, options=options)
    settings = settings.with_overrides(**setting_overrides) if setting_overrides else settings
    summary = replay(settings, "src", instance or DagsterInstance.ephemeral(), progress=lambda _m: None)
    return dump, summary, settings


def differences_from_truth(settings, truth_path: Path) -> dict[int, dict[str, str]]:
    """Every materialized window compared with the simulator's truth: only the mismatches."""
    truth = load_truth(truth_path)
    snapshots = (settings.iceberg_warehouse, "src")  # (warehouse, source)
    out = {}
    for window in list_manifests(*snapshots):
        verdict = compare_window(*snapshots, read_manifest(*snapshots, window), truth, window)
        bad = {t: v for t, v in verdict.items() if v != "ok"}
        if bad:
            out[window] = bad
    return out


def differences_at_instants(spark: SparkSession, settings, truth_path: Path, *, inside: int = 2, seed: int = 0,
                            tables=DEMO_TABLES) -> dict[str, dict[str, str]]:
    """Every table read the way a user reads it (`tables_as_of`, as `export --as-of` does)
    at each materialized window's UTC end time and at `inside` random TSOs inside each of those
    windows, against a brute-force replay of the simulator's workload (every commit with
    commit_ts <= the instant). Only the mismatches, by instant."""
    truth = load_truth(truth_path)
    snapshots = (settings.iceberg_warehouse, "src")  # (warehouse, source)
    windows = [read_manifest(*snapshots, w) for w in list_manifests(*snapshots)]
    rng = random.Random(seed)
    instants: dict[str, int] = {}
    for m in windows:
        end = datetime.fromtimestamp(m.window_end_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        instants[end] = parse_instant(end)
        for _ in range(inside):
            tso = rng.randrange(m.window_start_ms << 18, m.window_end_ms << 18)
            instants[str(tso)] = tso
    expected = states_at(Workload(**truth["workload"], tables=tables).events(), tables, instants.values())
    out: dict[str, dict[str, str]] = {}
    for label, tso in instants.items():
        got = tables_as_of(spark, settings.iceberg_warehouse, "src", tso)
        bad = {}
        for name, rows in expected[tso].items():
            meta = truth["tables"][name]
            db, tbl = name.split(".", 1)
            want = truth_rows(rows, meta["columns"], meta["types"])
            state = got.get((db, tbl))
            have = [] if state is None else sorted(
                (tuple(canonical(r[c], meta["types"][c]) for c in meta["columns"])
                 for r in state.frame.select(*meta["columns"]).collect()), key=repr)
            if have != want:
                bad[name] = (f"{len(have)} rows vs {len(want)} expected ({len(set(want) - set(have))} missing, "
                             f"{len(set(have) - set(want))} unexpected)")
        if bad:
            out[label] = bad
    return out
