"""Atomic, idempotent windows: a replay killed with SIGKILL in the middle of a
materialization, then run again (which lands the same dump again and re-materializes
every window), gives exactly the snapshots of an uninterrupted run: every window equal to
the brute-force truth (an uninterrupted run is proven equal to it, test_end_to_end.py), the
window committed before the kill re-materialized row for row, and every message landed once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from cdc_assets.simulator import generate
from cdc_assets.snapshot.entry_tables import read_entry_arrow
from cdc_assets.snapshot.store import list_manifests, read_manifest

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
            for tid, entry in manifest.tables.items()
        }
    return out


def _visible_partial_outputs(warehouse: Path) -> list[str]:
    """What an Iceberg reader could see of a window that was not committed: a snapshot table
    whose end tag names a window without a manifest, or whose main is not the newest
    committed window's snapshot."""
    from cdc_assets.common.warehouse import load_pyiceberg_catalog

    snapshots = (warehouse, "src")  # (warehouse, source)
    manifests = [read_manifest(*snapshots, w) for w in list_manifests(*snapshots)]
    committed = {m.tag: m for m in manifests}
    newest = manifests[-1].tables if manifests else {}
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
        entry = next((e for e in newest.values() if e.identifier == name), None)
        if entry and table.current_snapshot().snapshot_id != entry.snapshot_id:
            bad.append(f"{name}: main is not the newest committed window's snapshot")
    return bad


def _kill_mid_materialization(dump: Path, warehouse: Path, home: Path) -> str:
    """Start a replay and SIGKILL its whole process group (the Spark JVM too) while a
    window is being written: two seconds after the first window committed."""
    proc = subprocess.Popen(_replay_cmd(dump, warehouse), env=_env(home), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    snapshots = (warehouse, "src")  # (warehouse, source)
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the replay finished before it could be killed"
            if _committed(snapshots):
                time.sleep(2)  # into the next window's writes (no temporary folder tells them now)
                return "killed while the next window was being written"
            time.sleep(0.2)
        pytest.fail("the replay never reached a second window")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)


def _committed(snapshots) -> bool:
    try:
        return bool(list_manifests(*snapshots))
    except Exception:  # the catalog or the windows table not created yet
        return False


def test_sigkill_mid_window_then_rerun_equals_an_uninterrupted_run(tmp_path):
    """The reference is the brute-force truth, not a second (uninterrupted) replay of the
    same dump: an uninterrupted replay equals the truth at every complete window
    (test_end_to_end.py), so "the same snapshots as an uninterrupted run" is "exactly the
    complete windows, each equal to the truth" here, checked for the windows committed
    before the kill and for every window after the rerun. What the truth does not hold is
    checked directly: the window committed before the kill is re-materialized identically,
    every column of every row (not only the truth's columns), and the landing holds every
    message of the dump exactly once (the rerun landed nothing twice); the dropped duplicate
    and late counts are the simulator's and nothing is quarantined."""
    from cdc_assets.simulator.compare import load_truth
    from cdc_assets_tests.e2e import differences_from_truth

    generated = generate(tmp_path / "sim", seed=23, layout="kafka-parquet", row_changes=900,
                         duration_ms=150 * 60_000)
    dump = generated.dump_dir
    truth = load_truth(generated.truth_path)
    complete = [w["start_ms"] for w in truth["windows"] if w["complete"]]
    assert len(complete) >= 2

    crashed = tmp_path / "crashed"
    warehouse = crashed / "warehouse"
    settings = SimpleNamespace(iceberg_warehouse=warehouse)  # what differences_from_truth reads
    _kill_mid_materialization(dump, warehouse, crashed / "home")
    # What a reader can see after the crash is whole: committed windows only, each the truth.
    assert _visible_partial_outputs(warehouse) == []
    partial = snapshot_contents(warehouse)
    assert partial and set(partial) < set(complete)
    assert differences_from_truth(settings, generated.truth_path) == {}

    again = _replay(dump, warehouse, crashed / "home")
    assert again["ok"]
    after = snapshot_contents(warehouse)
    assert list(after) == complete
    assert differences_from_truth(settings, generated.truth_path) == {}
    # The committed window re-materialized identically, every column.
    assert all(after[w] == partial[w] for w in partial)
    # The rerun landed nothing twice: each message of the dump once, and the same drops as the simulator's.
    from cdc_assets.common.warehouse import load_pyiceberg_catalog
    landed = load_pyiceberg_catalog(warehouse).load_table(("src", "landed_messages")).scan(
        selected_fields=("topic", "kafka_partition", "kafka_offset")).to_arrow().to_pylist()
    keys = {(r["topic"], r["kafka_partition"], r["kafka_offset"]) for r in landed}
    assert len(landed) == len(keys) == truth["counts"]["messages"]
    assert (again["duplicates"], again["late"], again["quarantined"]) == (
        truth["counts"]["duplicates"], truth["counts"]["late"], 0)
    assert not any(warehouse.rglob(".tmp-*")), "a killed writer's temporary files were left"


# A landing whose process group is SIGKILLed once its batch's messages and watermarks are
# committed, just before the state commit (landing/tables.py, the commit point).
_KILLED_LANDING = """
import os, signal, sys
from pathlib import Path
from cdc_assets.common.settings import load_settings
from cdc_assets.common.spark_session import spark_config, start_spark_session
from cdc_assets.decode import get_decoder
from cdc_assets.landing import land as landing

def killed(*args, **kwargs):
    os.killpg(0, signal.SIGKILL)

landing.commit_state = killed
conf = spark_config(load_settings({}))
conf.update({"spark.master": "local[1]", "spark.sql.shuffle.partitions": "2"})
landing.land(start_spark_session(conf), dump_root=Path(sys.argv[1]), layout="kafka-parquet",
             decoder=get_decoder("canal-json"), warehouse=Path(sys.argv[2]), source="src", window_ms=3_600_000)
"""


def test_sigkill_between_the_batch_and_the_state_commit_leaves_nothing_visible_and_lands_once(spark, tmp_path):
    from cdc_assets.decode import get_decoder
    from cdc_assets.common.warehouse import load_pyiceberg_catalog
    from cdc_assets.landing.land import land
    from cdc_assets.landing.tables import load_state
    from cdc_assets.landing.window_messages import read_watermark_index, read_window_messages

    dump = generate(tmp_path / "sim", seed=5, layout="kafka-parquet", row_changes=200,
                    duration_ms=150 * 60_000).dump_dir
    warehouse = tmp_path / "warehouse"
    killed = subprocess.run([sys.executable, "-c", _KILLED_LANDING, str(dump), str(warehouse)],
                            env={**os.environ}, capture_output=True, text=True, timeout=600, start_new_session=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]

    # The killed landing's rows are in the table, but no state lists their batch: unread.
    catalog = load_pyiceberg_catalog(warehouse)
    orphans = catalog.load_table(("src", "landed_messages")).scan().to_arrow()
    windows = sorted({w for w in orphans.column("window_start_ms").to_pylist() if w is not None})
    assert len(orphans) > 0 and windows
    assert load_state(warehouse, "src").batches == []
    assert all(read_window_messages(spark, warehouse, "src", w).count() == 0 for w in windows)
    assert read_watermark_index(spark, warehouse, "src").count() == 0

    result = land(spark, dump_root=dump, layout="kafka-parquet", decoder=get_decoder("canal-json"),
                  warehouse=warehouse, source="src", window_ms=3_600_000)
    assert result.new_files == len(list(dump.rglob("*.parquet")))
    state = load_state(warehouse, "src")
    assert [b.batch_id for b in state.batches] == [result.batch_id]
    for w, n in state.windows.items():  # each message once: no copy of the killed batch
        rows = read_window_messages(spark, warehouse, "src", w)
        assert rows.count() == rows.select("topic", "kafka_partition", "kafka_offset").distinct().count() == n
    # The killed batch's rows were deleted by the landing that committed after it.
    assert len(catalog.load_table(("src", "landed_messages")).scan().to_arrow()) == sum(state.windows.values())
