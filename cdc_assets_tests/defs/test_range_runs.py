"""Consecutive windows with data: the raw and decode-and-align layers run as ONE Dagster run
over the partition range, and still report each window's materializations and check results
with its own partition (docs/performance.md §3); the snapshots follow in the same run, window by window."""

from __future__ import annotations

from collections import defaultdict

from dagster import AssetKey, DagsterEventType, DagsterInstance, instance_for_test
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import EmptyWorkspaceTarget
from dagster_graphql.test.utils import execute_dagster_graphql

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.defs.factory import build_definitions
from cdc_assets.defs.landing_view_io import recorded_window_read
from cdc_assets.replay import RANGE_START_TAG, replay
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.canal_messages import row, values, watermark
from cdc_assets_tests.e2e import settings_for

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
HOUR = 3_600_000
KEYS = ["2026-01-01-00:00", "2026-01-01-01:00", "2026-01-01-02:00"]


def _dump(dump):
    """Window k holds k + 1 inserts (and window 1 one redelivered duplicate): each window's
    figures are its own. The watermark at T0 + 3 h completes the three."""
    messages, i = [], 0
    for k in range(3):
        for j in range(k + 1):
            i += 1
            messages.append(row("INSERT", ms_to_tso(T0 + k * HOUR + 1000 * (j + 1)), values(i, f"n{i}")))
    messages.insert(3, messages[2])  # window 1's second insert again: an at-least-once duplicate
    messages.append(watermark(ms_to_tso(T0 + 3 * HOUR)))
    (dump / "topic.txt").write_bytes(b"\n".join(messages) + b"\n")


def test_three_windows_are_one_layer_run_with_per_window_materializations_and_checks(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    _dump(dump)
    settings = settings_for(tmp_path / "home", dump, layout="lines")
    # A persistent instance: the UI's GraphQL reads it (below).
    with instance_for_test() as instance:
        _replay_and_check(settings, instance)


# What the UI asks for a check's executions of one window (the partition filter of PR #33231).
CHECK_EXECUTIONS = """query ($path: [String!]!, $check: String!, $partition: String) {
  assetCheckExecutions(assetKey: {path: $path}, checkName: $check, limit: 20, partition: $partition) {
    partition status runId
  }
}"""


def _replay_and_check(settings, instance):
    lines: list[str] = []
    summary = replay(settings, "src", instance, progress=lines.append)

    assert (summary.ok, summary.windows, summary.windows_with_data, summary.window_runs) == (True, 3, 3, 1), lines
    assert (summary.events, summary.duplicates, summary.rows) == (7, 1, 6)
    # the range run's jobs shared over its windows
    assert len(summary.spark_jobs_per_window) == 3 and min(summary.spark_jobs_per_window) > 0
    # one landing, then ONE run of every windowed layer over the range
    runs = instance.get_runs()
    assert len(runs) == 1 + 1
    [layers] = [r for r in runs if r.tags.get(RANGE_START_TAG)]
    assert (layers.tags[RANGE_START_TAG], layers.tags["dagster/asset_partition_range_end"]) == (KEYS[0], KEYS[-1])

    materialized = defaultdict(dict)
    for entry in instance.all_logs(layers.run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION):
        m = entry.asset_materialization
        assert m.partition not in materialized[m.asset_key.path[-1]]  # one per window, never twice
        materialized[m.asset_key.path[-1]][m.partition] = {k: getattr(v, "value", v) for k, v in m.metadata.items()}
    assert set(materialized) == {"raw_messages", "change_table", "quarantine", "snapshots", "history"}
    assert [materialized["snapshots"][k]["rows_total"] for k in KEYS] == [1, 3, 6]
    raw, table, quarantine = (materialized[k] for k in ("raw_messages", "change_table", "quarantine"))
    assert [raw[k]["messages_in"] for k in KEYS] == [1, 3, 3]
    assert [table[k]["events_in"] for k in KEYS] == [1, 3, 3]
    assert [table[k]["duplicates_dropped"] for k in KEYS] == [0, 1, 0]
    assert [table[k]["events_out"] for k in KEYS] == [1, 2, 3]
    assert [table[k]["rows"] for k in KEYS] == [1, 2, 3]  # what the write committed
    assert len({table[k]["iceberg_snapshot_id"] for k in KEYS}) == 3  # each window its own commit
    assert [quarantine[k]["quarantined"] for k in KEYS] == [0, 0, 0]
    assert all(table[k]["dagster/table_name"] == "cdc.src.change_table" for k in KEYS)

    # Every check of the step: three executions, one per window, none without a partition.
    defs = build_definitions(settings)
    step = defs.resolve_assets_def(AssetKey(["src", "change_table"]))
    assert len(step.check_keys) == 6
    for check in step.check_keys:
        history = instance.event_log_storage.get_asset_check_execution_history(check, limit=20)
        in_range = [h for h in history if h.run_id == layers.run_id]
        assert sorted(h.partition for h in in_range) == KEYS, check
        assert {h.status for h in in_range} == {AssetCheckExecutionRecordStatus.SUCCEEDED}, check
        assert all(h.partition is not None for h in history)
    # ... and so does the UI's GraphQL: each window's executions, and none without a partition.
    with WorkspaceProcessContext(instance, EmptyWorkspaceTarget()) as process:
        context = process.create_request_context()
        for check in step.check_keys:
            for partition in KEYS:
                found = execute_dagster_graphql(context, CHECK_EXECUTIONS, {
                    "path": list(check.asset_key.path), "check": check.name, "partition": partition,
                }).data["assetCheckExecutions"]
                assert [(e["partition"], e["status"]) for e in found if e["runId"] == layers.run_id] == [
                    (partition, "SUCCEEDED")], (check, partition)
            unpartitioned = execute_dagster_graphql(context, CHECK_EXECUTIONS, {
                "path": list(check.asset_key.path), "check": check.name, "partition": ""})
            assert unpartitioned.data["assetCheckExecutions"] == [], check

    # the snapshots built on one another, window by window
    manifests = list_manifests(settings.warehouse, "src")
    assert manifests == [T0, T0 + HOUR, T0 + 2 * HOUR]
    assert [sum(t.rows for t in read_manifest(settings.warehouse, "src", w).tables.values())
            for w in manifests] == [1, 3, 6]


def test_a_failed_blocking_check_stops_the_range_at_its_window_and_the_windows_before_are_applied(
        tmp_path, monkeypatch):
    from cdc_assets.defs.layers import change_table as step

    dump = tmp_path / "dump"
    dump.mkdir()
    _dump(dump)
    settings = settings_for(tmp_path / "home", dump, layout="lines")
    real = step._completeness_at_read

    def second_window_incomplete(policy, state, at_read, end_ms):
        complete, wm = real(policy, state, at_read, end_ms)
        return (False, wm) if end_ms == T0 + 2 * HOUR else (complete, wm)

    monkeypatch.setattr(step, "_completeness_at_read", second_window_incomplete)
    instance = DagsterInstance.ephemeral()
    summary = replay(settings, "src", instance, progress=lambda _m: None)
    # The layers' step wrote windows 0 and 1, failed window 1's blocking check and stopped:
    # window 2 was not written; window 0 got its snapshot in one more run, window 1 none.
    assert (summary.ok, summary.windows) == (False, 1)
    assert summary.checks_failed == [f"src/change_table:window_complete@{KEYS[1]}"]
    assert list_manifests(settings.warehouse, "src") == [T0]
    assert read_manifest(settings.warehouse, "src", T0).tables["db.t"].rows == 1
    # a read is recorded when its window is written: none for the window the run never reached
    assert [recorded_window_read(settings.warehouse, "src", T0 + k * HOUR) is not None for k in range(3)] == [
        True, True, False]
    assert len(instance.get_runs()) == 1 + 2  # the landing, the range run, window 0's snapshots


def test_a_group_whose_shared_pass_fails_is_taken_window_by_window(tmp_path, monkeypatch):
    """The range's windows are decoded and aligned as one group (align/window_group.py); when
    that shared pass fails, each window is decoded on its own, so that a failure is the
    failing window's own and the others are still written."""
    from cdc_assets.defs.layers import change_table as step

    dump = tmp_path / "dump"
    dump.mkdir()
    _dump(dump)
    settings = settings_for(tmp_path / "home", dump, layout="lines")
    real, groups_seen = step.aligned_windows, []

    def fails_for_groups(decoder, raw, marks, window_ms):
        groups_seen.append(sorted(raw))
        if len(raw) > 1:
            raise RuntimeError("the group's shared pass failed")
        return real(decoder, raw, marks, window_ms)

    monkeypatch.setattr(step, "aligned_windows", fails_for_groups)
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    assert groups_seen == [[T0, T0 + HOUR, T0 + 2 * HOUR], [T0], [T0 + HOUR], [T0 + 2 * HOUR]]
    assert (summary.ok, summary.windows, summary.events, summary.duplicates, summary.rows) == (True, 3, 7, 1, 6)
    assert [sum(t.rows for t in read_manifest(settings.warehouse, "src", w).tables.values())
            for w in list_manifests(settings.warehouse, "src")] == [1, 3, 6]
