"""Atomic, idempotent windows: a replay killed with SIGKILL in the middle of a
materialization, then run again (which lands the same dump again and re-materializes
every window), gives exactly the snapshots of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc_assets.lib.simulator import generate
from cdc_assets.lib.snapshot_store import list_manifests, read_entry_arrow, read_manifest

pytestmark = pytest.mark.slow


def _replay_cmd(dump: Path, warehouse: Path) -> list[str]:
    return [sys.executable, "-m", "cdc_assets.cli", "replay", "--protocol", "canal-json",
            "--input", str(dump), "--warehouse", str(warehouse), "--source", "src"]


def _env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return {**os.environ, "DAGSTER_HOME": str(home)}


def _replay(dump: Path, warehouse: Path, home: Path) -> dict:
    done = subprocess.run(_replay_cmd(dump, warehouse), env=_env(home), capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def snapshot_contents(warehouse: Path, source: str = "src") -> dict[int, dict[str, list]]:
    """Every window's tables as sorted rows (what a reader of the manifests sees)."""
    out = {}
    for window in list_manifests(warehouse, source):
        manifest = read_manifest(warehouse, source, window)
        out[window] = {
            tid: sorted(map(repr, read_entry_arrow(warehouse, source, entry).to_pylist()))
            for tid, entry in manifest["tables"].items()
        }
    return out


def _visible_partial_outputs(warehouse: Path) -> list[str]:
    """What an Iceberg reader could see of a window that was not committed: a snapshot table
    whose end tag names a window without a manifest, or whose main is not the newest
    committed window's snapshot."""
    from cdc_assets.lib.iceberg_catalog import load_pyiceberg_catalog

    snapshots = (warehouse, "src")  # (warehouse, source)
    manifests = [read_manifest(*snapshots, w) for w in list_manifests(*snapshots)]
    committed = {m["tag"]: m for m in manifests}
    newest = manifests[-1]["tables"] if manifests else {}
    bad = []
    catalog = load_pyiceberg_catalog(warehouse)
    for identifier in catalog.list_tables(("src",)):
        if not identifier[-1].startswith("snapshots__"):
            continue
        table = catalog.load_table(identifier)
        name = ".".join(identifier)
        for ref in table.metadata.refs:
            if ref.startswith("end-") and ref not in committed:
                bad.append(f"{name}: tag {ref} of a window without a manifest")
        entry = next((e for e in newest.values() if e["identifier"] == name), None)
        if entry and table.current_snapshot().snapshot_id != entry["snapshot_id"]:
            bad.append(f"{name}: main is not the newest committed window's snapshot")
    return bad


def _kill_mid_materialization(dump: Path, warehouse: Path, home: Path) -> str:
    """Start a replay and SIGKILL its whole process group (the Spark JVM too) while a
    window is being written: after the first window committed, at the first temporary
    folder of a later one."""
    proc = subprocess.Popen(_replay_cmd(dump, warehouse), env=_env(home), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    snapshots = (warehouse, "src")  # (warehouse, source)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the replay finished before it could be killed"
            if list_manifests(*snapshots) and any(warehouse.rglob(".tmp-*")):
                return "killed while a temporary folder was being written"
            time.sleep(0.02)
        pytest.fail("the replay never reached a second window")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


def test_sigkill_mid_window_then_rerun_equals_an_uninterrupted_run(tmp_path):
    dump = generate(tmp_path / "sim", seed=23, layout="kafka-parquet", row_changes=900,
                    duration_ms=150 * 60_000).dump_dir

    clean = tmp_path / "clean"
    first = _replay(dump, clean / "warehouse", clean / "home")
    expected = snapshot_contents(clean / "warehouse")
    assert first["ok"] and len(expected) >= 2

    crashed = tmp_path / "crashed"
    _kill_mid_materialization(dump, crashed / "warehouse", crashed / "home")
    # What a reader can see after the crash is whole: committed windows only.
    assert _visible_partial_outputs(crashed / "warehouse") == []
    partial = snapshot_contents(crashed / "warehouse")
    assert partial and set(partial) < set(expected)
    assert all(partial[w] == expected[w] for w in partial)

    again = _replay(dump, crashed / "warehouse", crashed / "home")
    assert again["ok"]
    assert snapshot_contents(crashed / "warehouse") == expected
    # The rerun landed nothing twice and re-materialized the committed window identically.
    assert (again["events"], again["duplicates"], again["late"], again["quarantined"]) == (
        first["events"], first["duplicates"], first["late"], first["quarantined"])
    assert not any((crashed / "warehouse").rglob(".tmp-*")), "a killed writer's temporary files were left"
