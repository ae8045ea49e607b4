"""The Definitions load, with the expected assets, checks, jobs and schedules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dagster import AssetKey, BackfillPolicy, TimeWindowPartitionsDefinition

from cdc_assets.common.settings import load_settings
from cdc_assets.defs.factory import build_definitions

REPO = Path(__file__).resolve().parents[2]


def test_module_definitions_load_with_every_layer_and_check():
    from cdc_assets.definitions import defs

    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert keys == {f"sample/{layer}" for layer in
                    ("landed_dump", "raw_messages", "quarantine", "change_table", "snapshots", "history")}
    checks = {f"{c.asset_key.to_user_string()}:{c.name}" for c in graph.asset_check_keys}
    assert checks == {
        "sample/change_table:change_log_contract",
        "sample/quarantine:nothing_quarantined",
        "sample/quarantine:quarantine_rate_within_limit",
        "sample/landed_dump:watermarks_trusted",
        "sample/landed_dump:files_complete",
        "sample/landed_dump:messages_routable",
        "sample/change_table:window_complete",
        "sample/change_table:events_inside_window",
        "sample/change_table:change_table_contract",
        "sample/snapshots:primary_key_unique",
        "sample/snapshots:reconciliation",
        "sample/snapshots:values_convert",
        "sample/snapshots:tables_built",
        "sample/snapshots:ddl_applied",
    }
    assert {j.name for j in defs.jobs} == {"sample__windows", "sample__land", "sample__maintenance"}
    assert {s.name for s in defs.schedules} == {"sample__land_hourly", "sample__complete_windows_hourly",
                                                "sample__maintenance_daily"}
    assert {s.name for s in defs.sensors} == {"sample__landing_sensor"}


def test_windows_are_hourly_utc_commit_ts_partitions_and_a_backfill_of_snapshots_is_one_run():
    defs = build_definitions(load_settings({"CDC_ASSETS_START": "2026-01-01T00:00"}))
    snapshots = defs.resolve_assets_def(AssetKey(["sample", "snapshots"]))
    pdef = snapshots.partitions_def
    assert isinstance(pdef, TimeWindowPartitionsDefinition)
    assert pdef.timezone == "UTC" and pdef.cron_schedule == "0 * * * *"
    assert pdef.get_first_partition_key() == "2026-01-01-00:00"
    # One run per backfilled range: the step applies its windows in order and reports each
    # window's materializations and checks with that window's partition.
    assert snapshots.backfill_policy == BackfillPolicy.single_run()
    # The snapshot of window N depends on window N-1 of itself.
    deps = defs.resolve_asset_graph().get(AssetKey(["sample", "snapshots"])).parent_keys
    assert AssetKey(["sample", "snapshots"]) in deps


def test_window_width_is_configurable():
    defs = build_definitions(load_settings({"CDC_ASSETS_WINDOW_MINUTES": "15"}))
    pdef = defs.resolve_assets_def(AssetKey(["sample", "raw_messages"])).partitions_def
    assert pdef.cron_schedule == "*/15 * * * *"


def test_dagster_definitions_validate_passes(tmp_path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "CDC_ASSETS_HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dagster_definitions_validate_passes_without_dagster_home(tmp_path):
    # Dagster's own habit: run from the project root with no DAGSTER_HOME. It then reads the
    # root dagster.yaml, which must not name an unset environment variable (issue 44, item 1).
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env["CDC_ASSETS_HOME"] = str(tmp_path / "home")
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "All code locations passed validation" in out
    assert "DAGSTER_HOME\" which is not set" not in out
