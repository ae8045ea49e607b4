"""The whole warehouse on `s3://` (moto's S3 server): `cdc-assets replay` into an s3 warehouse
gives the same tables as into a local folder and matches the truth at every window; a replay
SIGKILLed mid-window and run again gives exactly the tables of an uninterrupted run. Every
table (landing, layers, snapshots, manifests, history) lives in the bucket; the only local
files are the SQLite catalog and the S3 input mirror under CDC_ASSETS_HOME."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from cdc_assets.common.settings import load_settings
from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.simulator import generate
from cdc_assets.snapshot.entry_tables import read_entry_arrow
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.e2e import differences_from_truth
from cdc_assets_tests.servers import moto_s3

pytestmark = pytest.mark.slow

KEY_ID, SECRET = "AKIAWAREHOUSE", "warehouse-secret-never-printed"
BUCKET = "lake"


def _env(home: Path, endpoint: str) -> dict[str, str]:
    """A user's environment: the catalog's home, the S3 endpoint, credentials (never settings)."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return {**os.environ, "DAGSTER_HOME": str(home), "CDC_ASSETS_HOME": str(home),
            "CDC_ASSETS_S3_ENDPOINT_URL": endpoint, "CDC_ASSETS_S3_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}


def _replay_cmd(dump: Path, warehouse: str) -> list[str]:
    return [sys.executable, "-m", "cdc_assets.cli", "replay", "--protocol", "canal-json",
            "--input", str(dump), "--warehouse", warehouse, "--source", "src"]


def _replay(dump: Path, warehouse: str, home: Path, endpoint: str) -> dict:
    done = subprocess.run(_replay_cmd(dump, warehouse), env=_env(home, endpoint), capture_output=True,
                          text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert SECRET not in done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _settings(home: Path, warehouse: str, endpoint: str):
    return load_settings({"CDC_ASSETS_HOME": str(home), "CDC_ASSETS_WAREHOUSE": warehouse,
                          "CDC_ASSETS_S3_ENDPOINT_URL": endpoint, "CDC_ASSETS_S3_REGION": "us-east-1"})


def _contents(warehouse) -> dict[int, dict[str, list]]:
    """Every committed window's tables as sorted rows, read by pyiceberg from the bucket."""
    out = {}
    for window in list_manifests(warehouse, "src"):
        manifest = read_manifest(warehouse, "src", window)
        out[window] = {tid: sorted(map(repr, read_entry_arrow(warehouse, "src", entry).to_pylist()))
                       for tid, entry in manifest.tables.items()}
    return out


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("s3_warehouse")
    dump = generate(tmp / "sim", seed=29, layout="kafka-parquet", row_changes=600, duration_ms=150 * 60_000)
    with pytest.MonkeyPatch.context() as env, moto_s3(tmp) as endpoint:
        env.setenv("AWS_ACCESS_KEY_ID", KEY_ID)  # pyiceberg's reads in this process
        env.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        env.delenv("AWS_SESSION_TOKEN", raising=False)
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield tmp, dump, endpoint, client


@pytest.fixture(scope="module")
def clean_run(s3):
    tmp, dump, endpoint, _ = s3
    summary = _replay(dump.dump_dir, f"s3://{BUCKET}/clean", tmp / "clean", endpoint)
    return summary, _settings(tmp / "clean", f"s3://{BUCKET}/clean", endpoint)


def test_a_replay_into_an_s3_warehouse_equals_the_truth_and_the_local_replay(s3, clean_run, tmp_path):
    tmp, dump, endpoint, client = s3
    summary, settings = clean_run
    assert summary["ok"] and summary["windows"] >= 2
    assert differences_from_truth(settings, dump.truth_path) == {}

    # Every table's files are in the bucket; nothing of the warehouse is on local disk.
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="clean/")
            for o in page.get("Contents", [])]
    for layer in ("landed_messages", "landing_state", "landing_watermarks", "window_reads", "change_table",
                  "snapshot_windows", "snapshots"):
        assert any(k.startswith(f"clean/src/{layer}/") for k in keys), layer
    # The raw layer is a view of landed_messages: no copy of the messages (window_reads records the reads).
    assert not any(k.startswith("clean/src/raw_messages/") for k in keys)
    local = sorted(p.name for p in (tmp / "clean").iterdir())
    assert set(local) <= {"catalog.db", "catalog.db-wal", "catalog.db-shm", "dagster.yaml", "work", "history", "logs", "schedules", "storage",
                          ".logs_queue", ".nux", ".telemetry", "runs.db"}, local

    # The same dump into a local warehouse: the same tables, row for row.
    local_summary = _replay(dump.dump_dir, str(tmp_path / "warehouse"), tmp_path / "home", endpoint)
    # Spark's job count is not data: AQE may plan a stage more or less from run to run.
    assert _without_job_counts(local_summary) == _without_job_counts(summary)
    assert _contents(tmp_path / "warehouse") == _contents(settings.iceberg_warehouse)


def _without_job_counts(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "spark_jobs_per_window"}


def test_sigkill_mid_window_on_s3_then_rerun_equals_the_uninterrupted_run(s3, clean_run):
    tmp, dump, endpoint, _ = s3
    _, clean = clean_run
    expected = _contents(clean.iceberg_warehouse)
    location = f"s3://{BUCKET}/crashed"
    home = tmp / "crashed"
    crashed = _settings(home, location, endpoint)

    proc = subprocess.Popen(_replay_cmd(dump.dump_dir, location), env=_env(home, endpoint),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the replay finished before it could be killed"
            if (home / "catalog.db").exists() and _committed(crashed):
                time.sleep(3)  # into the next window's writes
                break
            time.sleep(0.5)
        else:
            pytest.fail("the replay never committed a window")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)

    partial = _contents(crashed.iceberg_warehouse)
    assert partial and set(partial) < set(expected), "killed after the last window: nothing was interrupted"
    assert all(partial[w] == expected[w] for w in partial)
    # main of every snapshot table is the newest committed window's snapshot: nothing half-published
    newest = read_manifest(crashed.iceberg_warehouse, "src", max(partial)).tables
    catalog = load_pyiceberg_catalog(crashed.iceberg_warehouse)
    for entry in newest.values():
        assert catalog.load_table(entry.identifier).current_snapshot().snapshot_id == entry.snapshot_id

    again = _replay(dump.dump_dir, location, home, endpoint)
    assert again["ok"]
    assert _contents(crashed.iceberg_warehouse) == expected
    assert differences_from_truth(crashed, dump.truth_path) == {}


def _committed(settings) -> bool:
    try:
        return bool(list_manifests(settings.iceberg_warehouse, "src"))
    except Exception:  # the catalog or the windows table not created yet
        return False
