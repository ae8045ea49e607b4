"""Shared plumbing for end-to-end tests: simulate a dump, replay it through Dagster."""

from __future__ import annotations

from pathlib import Path

from dagster import DagsterInstance

from cdc_assets.lib.settings import SourceConfig, load_settings
from cdc_assets.lib.simulator import GeneratedDump, generate
from cdc_assets.lib.snapshot_store import list_manifests, read_manifest
from cdc_assets.lib.truth import compare_window, load_truth
from cdc_assets.replay import ReplaySummary, replay


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
    snapshots = settings.warehouse / "src" / "snapshots"
    out = {}
    for window in list_manifests(snapshots):
        verdict = compare_window(snapshots, read_manifest(snapshots, window), truth, window)
        bad = {t: v for t, v in verdict.items() if v != "ok"}
        if bad:
            out[window] = bad
    return out
