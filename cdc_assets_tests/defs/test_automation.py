"""The hourly schedule requests every complete window not yet materialized, quiet ones too;
the landing sensor lands new files and requests the windows the watermark completed."""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from dagster import (
    AssetKey,
    DagsterRun,
    DagsterRunStatus,
    DefaultSensorStatus,
    build_schedule_context,
    build_sensor_context,
    instance_for_test,
)

from cdc_assets.common.iceberg_tables import end_tag
from cdc_assets.common.settings import load_settings
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.defs.factory import build_definitions
from cdc_assets.landing.state import Completeness, LandingState, PartitionProgress
from cdc_assets.landing.tables import load_state, save_state
from cdc_assets.snapshot import manifests
from cdc_assets.snapshot.manifests import TableEntry, WindowManifest
from cdc_assets.snapshot.pending_windows import split_quiet, windows_to_materialize
from cdc_assets.snapshot.store import read_manifest

REPO = Path(__file__).resolve().parents[2]
H = 3_600_000
W0 = 1767225600000  # 2026-01-01T00:00Z


def _state(watermark_ms: int) -> LandingState:
    state = LandingState()
    state.windows = {W0: 10, W0 + 2 * H: 5}  # the hour in between is quiet
    state.partitions = {
        f"t/{p}": PartitionProgress("t", p, messages=5, max_offset=9, max_watermark_ts=ms_to_tso(watermark_ms),
                                    max_routing_ms=watermark_ms)
        for p in (0, 1)
    }
    return state


def test_plan_includes_quiet_windows_and_skips_materialized_ones():
    state = _state(W0 + 3 * H)
    plan = windows_to_materialize(state, Completeness(), H, W0, materialized={W0})
    assert plan == [W0 + H, W0 + 2 * H]
    # Nothing complete yet: nothing to do.
    assert windows_to_materialize(_state(W0 + H // 2), Completeness(), H, W0, set()) == []


def _iceberg_snapshot(warehouse, identifier: tuple[str, str]) -> int:
    """A real table of the warehouse's catalog with one snapshot (a quiet window tags it)."""
    import pyarrow as pa

    warehouse.mkdir(parents=True, exist_ok=True)
    catalog = load_pyiceberg_catalog(warehouse)
    catalog.create_namespace_if_not_exists(identifier[0])
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    table = catalog.create_table(identifier, rows.schema, location=str(warehouse / "t"))
    table.append(rows)
    return table.current_snapshot().snapshot_id


def test_schedule_requests_pending_windows_oldest_first(tmp_path):
    settings = load_settings({"CDC_ASSETS_HOME": str(tmp_path)})
    save_state(settings.warehouse, "sample", _state(W0 + 3 * H))
    snapshots = (settings.warehouse, "sample")  # (warehouse, source)
    since = manifests.begin(*snapshots)  # the windows table first, as a window's run makes it
    table = TableEntry("db", "t", "sample.snapshots__db__t",
                       _iceberg_snapshot(settings.warehouse, ("sample", "snapshots__db__t")), rows=3,
                       written_window_start_ms=W0, schema={}, spark_schema="{}")
    manifests.commit(*snapshots, since, [WindowManifest(W0, W0 + H, end_tag(W0 + H), {"db.t": table})])
    defs = build_definitions(settings)
    schedule = next(s for s in defs.schedules if s.name.endswith("complete_windows_hourly"))
    with instance_for_test() as instance:
        context = build_schedule_context(
            instance=instance, repository_def=defs.get_repository_def(),
            scheduled_execution_time=datetime(2026, 1, 1, 4, 10, tzinfo=timezone.utc))
        requests = list(schedule.evaluate_tick(context).run_requests)
    # the quiet hour is carried forward by its manifest, without a run; the hour with data runs
    assert [r.partition_key for r in requests] == ["2026-01-01-02:00"]
    carried = read_manifest(*snapshots, W0 + H)
    assert carried.carried_forward and carried.tables["db.t"].snapshot_id == table.snapshot_id
    assert (carried.tables["db.t"].rows, carried.tables["db.t"].inserted_keys) == (3, 0)
    tagged = load_pyiceberg_catalog(settings.warehouse).load_table(("sample", "snapshots__db__t"))
    assert tagged.metadata.refs["end-20260101T0200Z"].snapshot_id == table.snapshot_id


def test_quiet_windows_wait_for_the_run_before_them():
    with_data = {W0, W0 + 3 * H}
    pending = [W0 + i * H for i in range(6)]
    # W0 must run before W0+1h..2h can be carried; nothing after them is requested yet
    assert split_quiet(pending, with_data) == ([], [W0])
    # once W0 is committed: carry 1h..2h, run 3h, and 4h..5h wait for it
    assert split_quiet(pending[1:], with_data) == ([W0 + H, W0 + 2 * H], [W0 + 3 * H])
    assert split_quiet([W0, W0 + 3 * H], with_data, limit=1) == ([], [W0])


def _sensor_setup(tmp_path, watermark_ms: int):
    """Settings whose dump folder holds one kcat file, and a landing state that already
    landed W0 and W0+2h (watermark at `watermark_ms`) but not that file."""
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "part-0.jsonl").write_text('{"topic": "t", "partition": 0, "offset": 0, "payload": "{}"}\n')
    settings = load_settings({"CDC_ASSETS_HOME": str(tmp_path), "CDC_ASSETS_INPUT": str(dump)})
    save_state(settings.warehouse, "sample", _state(watermark_ms))
    defs = build_definitions(settings)
    sensor = next(s for s in defs.sensors if s.name == "sample__landing_sensor")
    return settings, defs, sensor, dump


def _tick(defs, sensor, instance, cursor=None):
    context = build_sensor_context(instance=instance, repository_def=defs.get_repository_def(), cursor=cursor,
                                   resources={"s3": defs.resources["s3"]})
    return sensor.evaluate_tick(context)


def test_sensor_is_stopped_by_default_and_targets_both_jobs(tmp_path):
    _, _, sensor, _ = _sensor_setup(tmp_path, W0)
    assert sensor.default_status == DefaultSensorStatus.STOPPED
    assert sensor.minimum_interval_seconds == 30
    assert {j.name for j in sensor.jobs} == {"sample__land", "sample__windows"}


def test_sensor_lands_new_files_once_per_listing(tmp_path):
    settings, defs, sensor, dump = _sensor_setup(tmp_path, W0 + H // 2)  # nothing complete yet
    with instance_for_test() as instance:
        first = _tick(defs, sensor, instance)
        (land,) = first.run_requests
        assert land.job_name == "sample__land" and land.run_key.startswith("land-")
        assert json.loads(first.cursor)["global_watermark_ts"] == ms_to_tso(W0 + H // 2)
        # Same listing, same key (Dagster drops the repeat); a new file, a new key.
        (again,) = _tick(defs, sensor, instance, first.cursor).run_requests
        assert again.run_key == land.run_key
        (dump / "part-1.jsonl").write_text('{"topic": "t", "partition": 1, "offset": 0, "payload": "{}"}\n')
        (more,) = _tick(defs, sensor, instance, first.cursor).run_requests
        assert more.run_key != land.run_key
        # Once landing recorded both files (size + mtime), the sensor has nothing to do.
        state = load_state(settings.warehouse, "sample")
        for p in dump.iterdir():
            state.remember_file(p, "digest-" + p.name)
            state.landed_digests.add("digest-" + p.name)
        save_state(settings.warehouse, "sample", state)
        quiet = _tick(defs, sensor, instance, first.cursor)
        assert quiet.run_requests == [] and "no new dump file" in quiet.skip_message


def test_sensor_asks_once_more_when_the_new_files_have_settled(tmp_path):
    """A landing waits for a file cut short while it still changes; if its writer died it never
    changes again, so the listing (and its run key) stays the same: one more landing, with
    another key, once the files are older than settle_seconds lands it as it is."""
    _, defs, sensor, dump = _sensor_setup(tmp_path, W0 + H // 2)
    with instance_for_test() as instance:
        (fresh,) = _tick(defs, sensor, instance).run_requests
        assert fresh.run_key.endswith("-unsettled")
        past = time.time() - 601
        os.utime(dump / "part-0.jsonl", (past, past))
        (settled,) = _tick(defs, sensor, instance).run_requests
        assert settled.run_key.startswith("land-") and not settled.run_key.endswith("-unsettled")


def test_sensor_requests_windows_the_watermark_completed_except_done_or_running(tmp_path):
    settings, defs, sensor, dump = _sensor_setup(tmp_path, W0 + 3 * H)
    # window 00:00 is committed (its row of the windows table)
    manifests.commit(settings.warehouse, "sample", manifests.begin(settings.warehouse, "sample"),
                     [WindowManifest(W0, W0 + H, end_tag(W0 + H))])
    with instance_for_test() as instance:
        # Window 01:00 already has a running run: only 02:00 is requested (after the landing).
        instance.add_run(DagsterRun(job_name="sample__windows", run_id=str(uuid.uuid4()),
                                    status=DagsterRunStatus.STARTED, tags={"dagster/partition": "2026-01-01-01:00"}))
        result = _tick(defs, sensor, instance)
        windows = [r for r in result.run_requests if r.job_name == "sample__windows"]
        assert [r.partition_key for r in windows] == ["2026-01-01-02:00"]
        assert windows[0].run_key == f"window-2026-01-01-02:00-wm{ms_to_tso(W0 + 3 * H)}"
        # A backfill run (the asset job) on 02:00 makes that window busy too.
        instance.add_run(DagsterRun(job_name="__ASSET_JOB", run_id=str(uuid.uuid4()),
                                    status=DagsterRunStatus.STARTED, tags={"dagster/partition": "2026-01-01-02:00"},
                                    asset_selection=frozenset({AssetKey(["sample", "raw_messages"])})))
        again = _tick(defs, sensor, instance)
        assert [r for r in again.run_requests if r.job_name == "sample__windows"] == []


def test_every_run_of_a_source_carries_its_tag_and_the_instance_limits_it_to_one(tmp_path, monkeypatch):
    from dagster import DagsterInstance

    from cdc_assets.defs.automation import SOURCE_TAG

    defs = build_definitions(load_settings({"CDC_ASSETS_SOURCE": "orders"}))
    for name in ("orders__windows", "orders__land"):
        assert defs.resolve_job_def(name).tags[SOURCE_TAG] == "orders"
    # The shipped dagster.yaml loads and limits that tag to one run per value.
    (tmp_path / "dagster.yaml").write_text((REPO / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with DagsterInstance.get() as instance:
        (limit,) = instance.run_coordinator.get_run_queue_config().tag_concurrency_limits
    assert limit == {"key": SOURCE_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}


def test_sensor_lands_new_objects_of_an_s3_source(tmp_path, monkeypatch):
    import boto3
    from dagster_aws.s3 import S3Resource

    from cdc_assets_tests.servers import moto_s3

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
    with moto_s3(tmp_path) as endpoint:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="dumps")
        client.put_object(Bucket="dumps", Key="cdc/part-0.jsonl",
                          Body=b'{"topic": "t", "partition": 0, "offset": 0, "payload": "{}"}\n')
        settings = load_settings({"CDC_ASSETS_HOME": str(tmp_path), "CDC_ASSETS_INPUT": "s3://dumps/cdc",
                                  "CDC_ASSETS_LAYOUT": "kcat-jsonl", "CDC_ASSETS_S3_ENDPOINT_URL": endpoint,
                                  "CDC_ASSETS_S3_REGION": "us-east-1"})
        defs = build_definitions(settings)
        sensor = next(s for s in defs.sensors if s.name == "sample__landing_sensor")
        s3 = S3Resource(endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="test-key", aws_secret_access_key="test-secret")
        with instance_for_test() as instance:
            context = build_sensor_context(instance=instance, repository_def=defs.get_repository_def(),
                                           resources={"s3": s3})
            (land,) = sensor.evaluate_tick(context).run_requests
    assert land.job_name == "sample__land" and land.run_key.startswith("land-")
