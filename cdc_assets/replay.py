"""Land a dump and materialize every complete window through Dagster (the CLI's engine).

Runs go through the same Definitions, jobs, IO managers and checks as the UI and the
schedules, in window order (snapshots build on the previous window): consecutive windows with
data are one run of the window job over their partition range (tags
`dagster/asset_partition_range_*`, as a `BackfillPolicy.single_run()` backfill runs them; a lone
window: its partition), whose steps loop over the range's windows in order (`_WindowRunner`). A window in which nothing landed gets no run: its manifest carries the
previous snapshot forward (`snapshot/carry_forward.py`), so commits years apart
cost one small file per quiet window, not a Spark run.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Callable

from dagster import DagsterInstance, Definitions

from cdc_assets.common.settings import Settings
from cdc_assets.common.spark_session import jobs_since, spark_job_ids
from cdc_assets.common.tso import ms_to_tso, tso_to_datetime
from cdc_assets.defs.automation import carry_quiet_windows, land_job_name, window_job_name
from cdc_assets.defs.factory import build_definitions, source_builds
from cdc_assets.defs.layers.landing import FILES_COMPLETE_CHECK
from cdc_assets.defs.partitions import partition_key_for_ms
from cdc_assets.defs.source_build import CHANGE_TABLE, HISTORY, SNAPSHOTS
from cdc_assets.landing.layouts.base import is_hidden_name
from cdc_assets.landing.routing import unroutable_line
from cdc_assets.landing.state import Completeness, CompletenessMode, LandingState
from cdc_assets.landing.tables import load_state
from cdc_assets.snapshot.store import list_manifests, read_manifest

Progress = Callable[[str], None]
# The tags of a run over a partition range (what a `BackfillPolicy.single_run()` backfill sets).
RANGE_START_TAG, RANGE_END_TAG = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"
# Dagster's per-event DEBUG lines would drown the progress lines; warnings still show.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
# The module whose warning `_RangeCheckNotice` drops.
DAGSTER_PLAN_LOGGER = "dagster._core.execution.plan.active"


class _RangeCheckNotice(logging.Filter):
    """Drops Dagster's warning that a blocking check "emitted no result" in a step: a range
    run reports each window's check results as `AssetCheckEvaluation(partition=k)`, which
    Dagster does not count, and the step itself stops after a failed blocking check
    (defs/range_reporting.py). Every replay of more than one window would print it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "emitted no result in step" not in record.getMessage()


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class ReplaySummary:
    source: str
    protocol: str
    files_landed: int = 0
    files_ignored: int = 0  # not read as the layout named explicitly (each printed with why)
    messages: int = 0
    events: int = 0
    duplicates: int = 0
    late: int = 0
    quarantined: int = 0
    unroutable: int = 0  # landed messages without a usable time of the protocol (docs/reliability.md)
    ignored_watermarks: int = 0  # moved backwards or implausible (docs/reliability.md)
    windows: int = 0
    windows_with_data: int = 0  # materialized by a Dagster run (Spark)
    # The Dagster runs that materialized them: one per range of consecutive windows with data (and one
    # more for the snapshots of a range whose layers' step stopped at a failed blocking check)
    window_runs: int = 0
    # Spark jobs of each window, in order (a local session only; each job is a fixed cost): its run's, or its
    # share of its range's layer run plus its snapshot run's (`_WindowRunner`)
    spark_jobs_per_window: list[int] = field(default_factory=list)
    quiet_windows: int = 0  # nothing landed: carried forward by a manifest alone
    incomplete_windows: int = 0
    tables: int = 0
    rows: int = 0
    checks_failed: list[str] = field(default_factory=list)  # ERROR severity: the replay is not ok
    checks_warned: list[str] = field(default_factory=list)  # WARN severity: reported, still ok
    ok: bool = True

    def as_json(self) -> dict:
        return asdict(self)


def _metadata_value(meta: dict, name: str, default=0):
    v = meta.get(name)
    return default if v is None else getattr(v, "value", v)


def replay(
    settings: Settings,
    source_name: str,
    instance: DagsterInstance,
    progress: Progress = _stderr,
) -> ReplaySummary:
    notice, plan_logger = _RangeCheckNotice(), logging.getLogger(DAGSTER_PLAN_LOGGER)
    plan_logger.addFilter(notice)
    try:
        return _replay(settings, source_name, instance, progress)
    finally:
        plan_logger.removeFilter(notice)


def _replay(settings: Settings, source_name: str, instance: DagsterInstance, progress: Progress) -> ReplaySummary:
    source = settings.source(source_name)
    summary = ReplaySummary(source=source.name, protocol=source.protocol)
    # A finished dump: a file cut short stays so (no waiting for it), and is reported.
    settings = settings.with_overrides(settle_seconds=0)
    defs = build_definitions(settings)
    build = next(b for b in source_builds(settings) if b.source.name == source_name)
    progress(f"[{source.name}] landing {source.input_path} ({source.protocol})")
    land = defs.resolve_job_def(land_job_name(build)).execute_in_process(instance=instance, run_config=QUIET)
    for mat in land.get_asset_materialization_events():
        meta = mat.materialization.metadata
        summary.files_landed += int(_metadata_value(meta, "new_files"))
        summary.ignored_watermarks += int(_metadata_value(meta, "regressed_watermarks")) + int(
            _metadata_value(meta, "implausible_watermarks"))
    _record_checks(land, summary, "landing")
    landed_meta = [m.materialization.metadata for m in land.get_asset_materialization_events()]
    unreadable = sum(int(_metadata_value(meta, "unreadable_files")) for meta in landed_meta)
    if unreadable:  # settle_seconds = 0: a replay waits for no file, it reports them
        names = _unreadable_files(land)
        progress(f"[{source.name}] {unreadable} dump file(s) cut short and unreadable, left out: "
                 + ", ".join(names[:5]) + (f" and {unreadable - 5} more" if unreadable > 5 else "")
                 + " (see the landing's files_complete check)")
        summary.ok = False
    ignored: dict[str, str] = {}
    for meta in landed_meta:
        summary.files_ignored += int(_metadata_value(meta, "ignored_files"))
        ignored.update(_metadata_value(meta, "first_ignored_files", {}))
    for name, why in ignored.items():
        progress(f"[{source.name}] skipped {name}: {why}")
    state = load_state(settings.iceberg_warehouse, source.name)
    summary.messages = state.messages()
    summary.unroutable = state.unroutable_messages()
    policy = build.completeness()
    complete = state.complete_windows(settings.window_ms, policy)
    summary.incomplete_windows = len([w for w in state.windows if w not in complete])
    if not summary.messages and _has_files(build.dump_root):
        progress(f"[{source.name}] landed nothing from {source.input_path} as {build.layout()}"
                 + (f": {summary.files_ignored} file(s) skipped (above)" if summary.files_ignored else
                    ": no file of the input holds a message of it"))
        summary.ok = False
        return summary
    if not complete:
        if summary.messages:  # a non-empty dump that completes no window is not ok: say why
            progress(f"[{source.name}] no window can complete: {_why_no_window(state, policy, source.protocol)}")
            summary.ok = False
        else:
            progress(f"[{source.name}] no complete window yet: nothing to materialize")
        return summary

    # Partitions start at the first window with data, so every window is materialized in order.
    first = min(state.windows)
    windowed = settings.with_overrides(
        partition_start=datetime.fromtimestamp(first / 1000, tz=timezone.utc)
    )
    defs = build_definitions(windowed)
    build = next(b for b in source_builds(windowed) if b.source.name == source_name)
    job = defs.resolve_job_def(window_job_name(build))
    starts = list(range(first, complete[-1] + 1, settings.window_ms))
    with_data = [w for w in starts if w in state.windows]
    summary.windows_with_data = len(with_data)
    groups = list(_runs_of_data(starts, state.windows))
    runs = sum(1 for _, run in groups if run)
    progress(f"[{source.name}] {len(starts)} window(s) to materialize, {len(with_data)} with data "
             f"(in {runs} run(s), one per range of consecutive windows with data); "
             f"{len(starts) - len(with_data)} quiet, carried forward without Spark")
    runner = _WindowRunner(source.name, build, job, instance, summary, progress, len(with_data))
    for quiet, run in groups:
        if quiet:
            # Nothing landed in these windows: each snapshot is the previous one (a manifest, no run).
            carried = carry_quiet_windows(settings.iceberg_warehouse, source.name, quiet, settings.window_ms)
            summary.windows += carried
            summary.quiet_windows += carried
            if carried < len(quiet):
                progress(f"[{source.name}] window {quiet[carried]}: no previous snapshot to carry forward")
                summary.ok = False
                break
        if run and not runner.materialize(run):
            summary.ok = False
            break
    manifests = list_manifests(settings.iceberg_warehouse, source.name)
    if manifests:
        last = read_manifest(settings.iceberg_warehouse, source.name, manifests[-1])
        tables = last.tables if last is not None else {}
        summary.tables = len(tables)
        summary.rows = sum(t.rows for t in tables.values())
    summary.ok = summary.ok and not summary.checks_failed
    return summary


def _runs_of_data(starts: list[int], with_data: dict[int, int]):
    """(quiet windows, the consecutive windows with data after them), in order; the last run
    may be empty (quiet windows at the end)."""
    quiet: list[int] = []
    run: list[int] = []
    for w in starts:
        if w in with_data:
            run.append(w)
            continue
        if run:
            yield quiet, run
            quiet, run = [], []
        quiet.append(w)
    if quiet or run:
        yield quiet, run


class _WindowRunner:
    """Materializes runs of consecutive windows with data, in order: one run of the window job
    over the range (a lone window: its partition), whose steps loop over its windows in order
    (each snapshot builds on the previous one). When the layers' step stops at a failed
    blocking check, the windows it wrote before get their snapshots in one more run.

    `spark_jobs_per_window` counts, per window, its share of its runs' jobs (divided evenly,
    the remainder to the first windows, so the list sums to every job run)."""

    def __init__(self, source: str, build, job, instance: DagsterInstance, summary: ReplaySummary,
                 progress: Progress, windows_with_data: int):
        self.source, self.build, self.job, self.instance = source, build, job, instance
        self.summary, self.progress, self.total, self.done = summary, progress, windows_with_data, 0

    def _run(self, keys: list[str], **kwargs):
        started, jobs_before = time.perf_counter(), spark_job_ids()
        partitions = {"partition_key": keys[0]} if len(keys) == 1 else {
            "tags": {RANGE_START_TAG: keys[0], RANGE_END_TAG: keys[-1]}}
        result = self.job.execute_in_process(instance=self.instance, raise_on_error=False, run_config=QUIET,
                                             **partitions, **kwargs)
        self.summary.window_runs += 1
        return result, time.perf_counter() - started, jobs_since(jobs_before)

    def _report(self, keys: list[str], result, elapsed: float, jobs: int | None, what: str = "") -> bool:
        _collect(result, self.summary)
        where = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"
        failed = _record_checks(result, self.summary, where)
        done = self._snapshotted(result, keys)
        first = self.done + 1
        self.done += len(done)
        self.summary.windows += len(done)
        if jobs is not None:
            self.summary.spark_jobs_per_window += _shares(jobs, len(done)) if done else []
        count = f"{first}/{self.total}" if len(keys) == 1 else f"{first}-{first + len(keys) - 1}/{self.total}"
        self.progress(
            f"[{self.source}] window{'s' if len(keys) > 1 else ''} {where} ({count} with data{what}): "
            f"{'ok' if result.success and not failed else 'FAILED'} in {elapsed:.1f}s"
            + (f", {jobs} Spark jobs" if jobs is not None else "")
            + (f" ({jobs / len(keys):.0f} per window)" if jobs is not None and len(keys) > 1 else "")
            + (f" checks failed: {', '.join(failed)}" if failed else ""))
        return result.success

    def _snapshotted(self, result, keys: list[str]) -> list[str]:
        snapshots = self.build.key(SNAPSHOTS)
        done = {m.partition for m in result.get_asset_materialization_events() if m.asset_key == snapshots}
        return [k for k in keys if k in done]

    def materialize(self, run: list[int]) -> bool:
        keys = [partition_key_for_ms(self.build.partitions_def, w) for w in run]
        result, elapsed, jobs = self._run(keys)
        if self._report(keys, result, elapsed, jobs):
            return True
        # A blocking check stopped the layers' step at a window: the windows it wrote before
        # that one are applied, so that the replay stops at the failing window, as a backfill does.
        written = [m.partition for m in result.get_asset_materialization_events()
                   if m.asset_key == self.build.key(CHANGE_TABLE)]
        written = [k for k in keys if k in written]
        blocked = {e.partition for e in result.get_asset_check_evaluations() if e.blocking and not e.passed}
        ready = [k for k in written if k not in blocked and k not in self._snapshotted(result, keys)]
        ready = ready[:next((i for i, k in enumerate(ready) if keys.index(k) != i), len(ready))]
        if ready:
            snapshots = [self.build.key(k) for k in (SNAPSHOTS, HISTORY)]
            result, elapsed, jobs = self._run(ready, asset_selection=snapshots)
            self._report(ready, result, elapsed, jobs, ", snapshots")
        return False


def _shares(jobs: int | None, windows: int) -> list[int | None]:
    """`jobs` divided over `windows`, the remainder to the first ones."""
    if jobs is None:
        return [None] * windows
    return [jobs // windows + (1 if i < jobs % windows else 0) for i in range(windows)]


def _unreadable_files(result) -> list[str]:
    """The files the landing's files_complete check names as cut short and unreadable."""
    for e in result.get_asset_check_evaluations():
        if e.check_name == FILES_COMPLETE_CHECK:
            return list(_metadata_value(e.metadata, "first_unreadable_files", []))
    return []


def _has_files(root) -> bool:
    """Whether the (local or mirrored) input holds any non-hidden file."""
    return root.exists() and any(
        p.is_file() and not any(is_hidden_name(part) for part in p.relative_to(root).parts) for p in root.rglob("*"))


def _why_no_window(state: LandingState, policy: Completeness, protocol: str) -> str:
    """What holds every window back, in one line: partitions without a watermark (or how far
    the global one got), and the messages with no usable time of the protocol."""
    reasons = []
    missing = state.partitions_without_watermark() if policy.mode == CompletenessMode.WATERMARK else []
    if missing:
        reasons.append(f"no watermark in partition(s) {', '.join(missing[:5])}"
                       + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    else:
        wm = state.global_watermark_ts(policy)
        shown = tso_to_datetime(wm).isoformat() if wm is not None else "none"
        first_end = tso_to_datetime(ms_to_tso(min(state.windows) + (state.window_ms or 0))).isoformat()
        reasons.append(f"the global watermark ({policy.mode}: {shown}) has not reached the end of the "
                       f"first window with data ({first_end})")
    if state.unroutable_messages():
        reasons.append(unroutable_line(state, protocol))
    return "; ".join(reasons)


def _record_checks(result, summary: ReplaySummary, where: str) -> list[str]:
    """Failed checks of one run: ERROR ones make the replay fail, WARN ones are reported."""
    failing = [e for e in result.get_asset_check_evaluations() if not e.passed]
    # A range run's evaluations carry their window; a one-window run's, the run's partition.
    named = [(f"{e.asset_key.to_user_string()}:{e.check_name}@{e.partition or where}", e.severity.value)
             for e in failing]
    failed = [n for n, severity in named if severity == "ERROR"]
    summary.checks_failed += failed
    summary.checks_warned += [n for n, severity in named if severity != "ERROR"]
    return failed


def _collect(result, summary: ReplaySummary) -> None:
    for mat in result.get_asset_materialization_events():
        meta = mat.materialization.metadata
        layer = mat.asset_key.path[-1]
        if layer == "change_table":
            summary.events += int(_metadata_value(meta, "events_in"))
            summary.duplicates += int(_metadata_value(meta, "duplicates_dropped"))
            summary.late += int(_metadata_value(meta, "late_dropped"))
        elif layer == "quarantine":
            summary.quarantined += int(_metadata_value(meta, "quarantined"))


def default_instance() -> DagsterInstance:
    """The persistent instance when DAGSTER_HOME is set (the UI sees the runs), else ephemeral."""
    import os

    return DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else DagsterInstance.ephemeral()


__all__ = ["ReplaySummary", "replay", "default_instance", "Definitions"]
