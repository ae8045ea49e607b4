"""Jobs and the hourly schedule of one source."""


from dagster import (
    AssetSelection,
    DagsterRunStatus,
    RunsFilter,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    define_asset_job,
    schedule,
)

from cdc_assets.defs.partitions import partition_key_for_ms
from cdc_assets.defs.source_build import CHANGE_LOG, CHANGE_TABLE, LANDED, QUARANTINE, RAW, SNAPSHOTS, SourceBuild
from cdc_assets.lib.landing import load_state
from cdc_assets.lib.snapshot_store import list_manifests
from cdc_assets.lib.window_plan import windows_to_materialize

_ACTIVE = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
           DagsterRunStatus.STARTED]


def _windows_with_active_runs(context: ScheduleEvaluationContext, job_name: str) -> set[str]:
    runs = context.instance.get_runs(filters=RunsFilter(job_name=job_name, statuses=_ACTIVE))
    return {r.tags.get("dagster/partition") for r in runs}


def window_job_name(b: SourceBuild) -> str:
    return f"{b.source.name}__windows"


def land_job_name(b: SourceBuild) -> str:
    return f"{b.source.name}__land"


# Every run of a source carries this tag; dagster.yaml limits it to one run per source, so
# windows run in order however many sources run side by side (docs/deploying.md).
SOURCE_TAG = "cdc_assets/source"


def build_jobs(b: SourceBuild):
    tags = {SOURCE_TAG: b.source.name}
    windows = define_asset_job(
        window_job_name(b),
        tags=tags,
        selection=AssetSelection.assets(*[b.key(k) for k in (RAW, CHANGE_LOG, QUARANTINE, CHANGE_TABLE, SNAPSHOTS)]),
        partitions_def=b.partitions_def,
        description="Every layer of one commitTs window, with its checks.",
    )
    land = define_asset_job(
        land_job_name(b), selection=AssetSelection.assets(b.key(LANDED)), tags=tags,
        description="Land new dump files (incremental, idempotent).",
    )
    return windows, land


def build_hourly_schedules(b: SourceBuild, windows_job, land_job):
    @schedule(
        name=f"{b.source.name}__land_hourly",
        cron_schedule="0 * * * *",
        execution_timezone="UTC",
        job=land_job,
        description="Lands the dump files that arrived since the last landing.",
    )
    def land_hourly(context: ScheduleEvaluationContext):
        return RunRequest(run_key=f"land-{context.scheduled_execution_time.isoformat()}")

    @schedule(
        name=f"{b.source.name}__complete_windows_hourly",
        cron_schedule="10 * * * *",
        execution_timezone="UTC",
        job=windows_job,
        description="Materializes, oldest first, every window the global watermark has completed "
        "and no run has materialized yet (quiet windows included: snapshots build on them).",
    )
    def complete_windows_hourly(context: ScheduleEvaluationContext):
        landing_root = b.settings.warehouse / b.source.name / "landing"
        snapshots = b.settings.warehouse / b.source.name / "snapshots"
        busy = _windows_with_active_runs(context, windows_job.name)
        pending = windows_to_materialize(
            load_state(landing_root), b.completeness(), b.settings.window_ms,
            int(b.settings.partition_start.timestamp() * 1000), set(list_manifests(snapshots)),
        )
        keys = [partition_key_for_ms(b.partitions_def, w) for w in pending]
        keys = [k for k in keys if k not in busy]
        if not keys:
            return SkipReason("no complete window is waiting (or its run is already queued)")
        tick = context.scheduled_execution_time.isoformat()
        return [RunRequest(run_key=f"window-{k}-{tick}", partition_key=k) for k in keys]

    return [land_hourly, complete_windows_hourly]
