"""Jobs, the hourly schedules and the landing sensor of one source."""


import hashlib
import json

from dagster import (
    AssetSelection,
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    RunsFilter,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    define_asset_job,
    schedule,
    sensor,
)
from dagster_aws.s3 import S3Resource

from cdc_assets.defs.partitions import partition_key_for_ms
from cdc_assets.defs.source_build import CHANGE_TABLE, HISTORY, LANDED, QUARANTINE, RAW, SNAPSHOTS, SourceBuild
from cdc_assets.landing.input_files import InputFile, files_not_landed, list_input_files, settled
from cdc_assets.landing.tables import load_state
from cdc_assets.snapshot.carry_forward import carry_forward_windows
from cdc_assets.snapshot.pending_windows import split_quiet, windows_to_materialize
from cdc_assets.snapshot.store import list_manifests, read_manifest

_ACTIVE = [DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED, DagsterRunStatus.STARTING,
           DagsterRunStatus.STARTED]


def _windows_with_active_runs(instance: DagsterInstance, b: SourceBuild) -> set[str]:
    """Windows a queued or running run is already working on: runs of the window job, and
    backfill or UI runs that target any windowed layer of this source."""
    layers = {b.key(k) for k in (RAW, QUARANTINE, CHANGE_TABLE, SNAPSHOTS, HISTORY)}
    runs = instance.get_runs(filters=RunsFilter(statuses=_ACTIVE))
    return {r.tags.get("dagster/partition") for r in runs
            if r.job_name == window_job_name(b) or layers & set(r.asset_selection or ())}


def pending_window_keys(b: SourceBuild, instance: DagsterInstance) -> list[str]:
    """Oldest first: windows the global watermark has completed that have no snapshot
    manifest and no queued or running run (the schedule and the sensor share this).

    Quiet windows (nothing landed) that can be committed now are carried forward here, by a
    manifest and no run (`carry_quiet_windows`); the windows with data after them are
    returned, up to the first quiet window that must wait for one of them."""
    busy = _windows_with_active_runs(instance, b)
    state = load_state(b.settings.iceberg_warehouse, b.source.name)
    pending = windows_to_materialize(
        state, b.completeness(), b.settings.window_ms,
        int(b.settings.partition_start.timestamp() * 1000), set(list_manifests(b.settings.iceberg_warehouse, b.source.name)), limit=None,
    )
    keys = {w: partition_key_for_ms(b.partitions_def, w) for w in pending}
    carry, runs = split_quiet(pending, state.windows, busy=frozenset(w for w, k in keys.items() if k in busy))
    carried = carry_quiet_windows(b.settings.iceberg_warehouse, b.source.name, carry, b.settings.window_ms)
    if carried < len(carry):  # a quiet window with no snapshot before it (the first partition): it runs
        stuck = keys[carry[carried]]
        return [] if stuck in busy else [stuck]
    return [keys[w] for w in runs if keys[w] not in busy]


def carry_quiet_windows(warehouse, source: str, starts: list[int], window_ms: int) -> int:
    """Commit consecutive quiet windows on the previous window's snapshot; stops at the first
    whose previous window has none. Returns how many were committed."""
    done = 0
    while done < len(starts):
        previous = read_manifest(warehouse, source, starts[done] - window_ms)
        if previous is None:
            return done
        run = [starts[done]]  # the consecutive windows from here: carried together
        while done + len(run) < len(starts) and starts[done + len(run)] == run[-1] + window_ms:
            run.append(starts[done + len(run)])
        carry_forward_windows(warehouse, source, run, window_ms, previous)
        done += len(run)
    return done


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
        # Partitioned by the selected assets' windows (Dagster infers it).
        selection=AssetSelection.assets(*[b.key(k) for k in (RAW, QUARANTINE, CHANGE_TABLE, SNAPSHOTS, HISTORY)]),
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
        keys = pending_window_keys(b, context.instance)
        if not keys:
            return SkipReason("no complete window is waiting (or its run is already queued)")
        tick = context.scheduled_execution_time.isoformat()
        return [RunRequest(run_key=f"window-{k}-{tick}", partition_key=k) for k in keys]

    return [land_hourly, complete_windows_hourly]


def build_landing_sensor(b: SourceBuild, windows_job, land_job):
    """Watermark-driven automation: land new dump files, then run the windows they completed.

    Stopped by default: `make dev` must not start landing and materializing behind the
    user's back.
    Turn it on in the UI (Automation) or with `dagster sensor start`.
    """

    @sensor(
        name=f"{b.source.name}__landing_sensor",
        jobs=[land_job, windows_job],
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
        description="Lands new dump files as they appear, and requests a run for every window "
        "the global watermark has completed (not the clock).",
    )
    def landing_sensor(context: SensorEvaluationContext, s3: S3Resource):
        warehouse = b.settings.iceberg_warehouse
        client = s3.get_client() if b.is_s3 else None  # an s3:// source lists its prefix
        files = list_input_files(b.source, client)
        new = files_not_landed(b.source, warehouse, client)
        wm = load_state(warehouse, b.source.name).global_watermark_ts(b.completeness())
        requests = []
        if new:
            # One landing per distinct set of new files: the run key dedupes repeated ticks.
            # One more once they have settled: a landing that waited for a file cut short
            # lands it then, though it never changes again (a writer that died).
            unsettled = "" if settled(b.source, warehouse, new, b.settings.settle_seconds) else "-unsettled"
            requests.append(RunRequest(run_key=f"land-{_listing_digest(new)}{unsettled}", job_name=land_job.name))
        # A window's run key names the watermark that completed it: a failed window is
        # retried once the watermark moves again (or from the UI), never in a tight loop.
        requests += [RunRequest(run_key=f"window-{k}-wm{wm}", job_name=windows_job.name, partition_key=k)
                     for k in pending_window_keys(b, context.instance)]
        cursor = json.dumps({"listing": _listing_digest(files), "global_watermark_ts": wm})
        if not requests:
            return SensorResult(skip_reason=SkipReason(
                f"no new dump file ({len(files)} listed) and no newly complete window (global watermark {wm})"),
                cursor=cursor)
        return SensorResult(run_requests=requests, cursor=cursor)

    return landing_sensor


def _listing_digest(files: list[InputFile]) -> str:
    """Names a set of file versions: the landing run's key, the sensor's cursor."""
    h = hashlib.sha256()
    for f in sorted(files, key=lambda f: f.name):
        h.update(f"{f.name}\0{f.size}\0{f.version}\n".encode())
    return h.hexdigest()[:16]
