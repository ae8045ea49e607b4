"""Jobs and the hourly schedule of one source."""


from dagster import (
    AssetSelection,
    RunRequest,
    ScheduleEvaluationContext,
    SkipReason,
    define_asset_job,
    schedule,
)

from cdc_assets.defs.partitions import partition_key_for_ms
from cdc_assets.defs.source_build import CHANGE_LOG, CHANGE_TABLE, LANDED, QUARANTINE, RAW, SNAPSHOTS, SourceBuild
from cdc_assets.lib.landing import load_state


def window_job_name(b: SourceBuild) -> str:
    return f"{b.source.name}__windows"


def land_job_name(b: SourceBuild) -> str:
    return f"{b.source.name}__land"


def build_jobs(b: SourceBuild):
    windows = define_asset_job(
        window_job_name(b),
        selection=AssetSelection.assets(*[b.key(k) for k in (RAW, CHANGE_LOG, QUARANTINE, CHANGE_TABLE, SNAPSHOTS)]),
        partitions_def=b.partitions_def,
        description="Every layer of one commitTs window, with its checks.",
    )
    land = define_asset_job(
        land_job_name(b), selection=AssetSelection.assets(b.key(LANDED)),
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
        name=f"{b.source.name}__latest_window_hourly",
        cron_schedule="10 * * * *",
        execution_timezone="UTC",
        job=windows_job,
        description="Materializes the latest window the global watermark has completed.",
    )
    def latest_window_hourly(context: ScheduleEvaluationContext):
        landing_root = b.settings.warehouse / b.source.name / "landing"
        complete = load_state(landing_root).complete_windows(b.settings.window_ms, b.completeness())
        if not complete:
            return SkipReason("no window is complete yet (the global watermark has not passed a window end)")
        key = partition_key_for_ms(b.partitions_def, complete[-1])
        return RunRequest(run_key=f"window-{key}", partition_key=key)

    return [land_hourly, latest_window_hourly]
