"""A dump under s3://bucket/prefix, served by moto's S3 server over HTTP on loopback, replayed
through Dagster (dagster-aws S3Resource) equals the simulator's truth; credentials come only
from the environment and never show up in the run's events or the warehouse."""

from __future__ import annotations

import boto3
import pytest
from dagster import AssetKey, DagsterInstance

from cdc_assets.defs.automation import land_job_name
from cdc_assets.defs.factory import build_definitions, source_builds
from cdc_assets.landing.input_files import files_not_landed
from cdc_assets.replay import replay
from cdc_assets.simulator import generate
from cdc_assets.simulator.compare import load_truth
from cdc_assets_tests.e2e import differences_from_truth, settings_for
from cdc_assets_tests.servers import moto_s3

HOUR = 3_600_000
SECRET = "s3cr3t-value-that-must-never-leak"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def s3_run(tmp_path_factory, spark):
    tmp = tmp_path_factory.mktemp("s3_e2e")
    dump = generate(tmp / "sim", seed=23, layout="kafka-parquet", row_changes=300, duration_ms=int(2.5 * HOUR))
    with pytest.MonkeyPatch.context() as env, moto_s3(tmp) as endpoint:
        env.setenv("AWS_ACCESS_KEY_ID", "AKIATESTKEY")
        env.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        env.delenv("AWS_SESSION_TOKEN", raising=False)
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="cdc")
        for path in dump.files:
            client.upload_file(str(path), "cdc", f"dumps/orders/{path.relative_to(dump.dump_dir).as_posix()}")
        settings = settings_for(tmp / "home", "s3://cdc/dumps/orders").with_overrides(
            s3_endpoint_url=endpoint, s3_region="us-east-1")
        instance = DagsterInstance.ephemeral()
        summary = replay(settings, "src", instance, progress=lambda _m: None)
        yield dump, summary, settings, instance, client


def _landed_metadata(instance: DagsterInstance) -> dict:
    event = instance.get_latest_materialization_event(AssetKey(["src", "landed_dump"]))
    return {k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()}


def _land(settings, instance: DagsterInstance) -> dict:
    """Run only the landing job (the windows are not re-materialized) and return its metadata."""
    (build,) = source_builds(settings)
    job = build_definitions(settings).resolve_job_def(land_job_name(build))
    assert job.execute_in_process(instance=instance).success
    return _landed_metadata(instance)


def test_s3_dump_replays_to_the_truth(s3_run):
    dump, summary, settings, instance, _ = s3_run
    truth = load_truth(dump.truth_path)
    assert summary.ok and summary.checks_failed == []
    assert summary.files_landed == len(dump.files)
    assert summary.windows == sum(w["complete"] for w in truth["windows"]) >= 2
    assert (summary.duplicates, summary.late) == (truth["counts"]["duplicates"], truth["counts"]["late"])
    assert differences_from_truth(settings, dump.truth_path) == {}
    meta = _landed_metadata(instance)
    assert (meta["s3_objects"], meta["s3_objects_downloaded"]) == (len(dump.files), len(dump.files))


def test_landing_again_downloads_and_lands_only_new_objects(s3_run):
    dump, _, settings, instance, client = s3_run
    assert files_not_landed(settings.source("src"), settings.warehouse, client) == []

    again = _land(settings, instance)
    assert (again["new_files"], again["s3_objects_downloaded"]) == (0, 0)

    # Same content under a new key: downloaded (the key is new) but not landed twice (same digest).
    first = dump.files[0]
    client.upload_file(str(first), "cdc", "dumps/orders/copy/" + first.name)
    assert [f.name for f in files_not_landed(settings.source("src"), settings.warehouse, client)] == ["copy/" + first.name]
    third = _land(settings, instance)
    assert (third["new_files"], third["skipped_files"], third["s3_objects_downloaded"]) == (0, len(dump.files) + 1, 1)
    assert files_not_landed(settings.source("src"), settings.warehouse, client) == []


def test_credentials_stay_in_the_environment(s3_run):
    _, _, settings, instance, _ = s3_run
    for run in instance.get_runs():
        for record in instance.all_logs(run.run_id):
            assert SECRET not in str(record)
        assert SECRET not in str(run.run_config)
    for path in settings.warehouse.rglob("*"):
        if path.is_file() and path.suffix in ("", ".json"):
            assert SECRET.encode() not in path.read_bytes(), path
