"""Dump -> landing -> raw -> change log -> change table -> snapshots, through Dagster,
against the simulator's truth at every complete window, in both dump layouts."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pyarrow.parquet as pq
import pytest
from dagster import AssetKey, DagsterInstance

from cdc_assets.cli import main as cli_main
from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.defs.automation import window_job_name
from cdc_assets.defs.factory import build_definitions, source_builds
from cdc_assets.defs.partitions import partition_key_for_ms
from cdc_assets.landing.tables import load_state
from cdc_assets.simulator import generate
from cdc_assets.simulator.compare import load_truth
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.e2e import differences_from_truth, settings_for, simulate_and_replay
from cdc_assets_tests.helpers import layer_commits

HOUR = 3_600_000
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def parquet_instance():
    """Where `parquet_run`'s Dagster runs are recorded (their materializations' metadata)."""
    return DagsterInstance.ephemeral()


@pytest.fixture(scope="module")
def parquet_run(tmp_path_factory, spark, parquet_instance):
    tmp = tmp_path_factory.mktemp("e2e_parquet")
    return simulate_and_replay(tmp, seed=11, layout="kafka-parquet", row_changes=1200,
                               duration_ms=int(3.5 * HOUR), instance=parquet_instance)


def test_every_complete_window_equals_the_truth(parquet_run):
    dump, summary, settings = parquet_run
    truth = load_truth(dump.truth_path)
    complete = [w["start_ms"] for w in truth["windows"] if w["complete"]]
    assert summary.ok and summary.checks_failed == []
    # The only warning: landing ignored the resolved ts the simulated restart replayed.
    assert truth["restart"] is not None
    assert summary.checks_warned == ["src/landed_dump:watermarks_trusted@landing"]
    assert list_manifests(settings.warehouse, "src") == complete
    assert differences_from_truth(settings, dump.truth_path) == {}


def test_duplicates_and_late_events_are_dropped_and_counted(parquet_run):
    dump, summary, _ = parquet_run
    counts = load_truth(dump.truth_path)["counts"]
    assert counts["duplicates"] > 0 and counts["late"] > 0
    assert (summary.duplicates, summary.late) == (counts["duplicates"], counts["late"])
    assert summary.quarantined == 0


def test_each_snapshot_counts_the_events_of_its_windows_change_table(parquet_run, parquet_instance):
    """`events_in` of a snapshot (summed from the change table's Parquet footers) is the
    change table's `events_out` of the same window: the replay's events less the dropped ones."""
    _, summary, _ = parquet_run

    def by_window(layer: str, name: str) -> dict[str, int]:
        key = AssetKey(["src", layer])
        records = parquet_instance.fetch_materializations(key, limit=1000).records
        return {r.partition_key: r.asset_materialization.metadata[name].value for r in records}

    events_in = by_window("snapshots", "events_in")
    assert events_in and events_in == by_window("change_table", "events_out")
    assert sum(events_in.values()) == summary.events - summary.duplicates - summary.late


def test_the_decoded_change_log_is_counted_on_the_change_table_and_not_stored(parquet_run, parquet_instance):
    """Decode and align are one step (issue 45): the decode's figures ride on the change
    table's materialization, and no change_log table is written (it was a second copy of the
    window's data)."""
    _, summary, settings = parquet_run
    records = parquet_instance.fetch_materializations(AssetKey(["src", "change_table"]), limit=1000).records
    assert records
    figures = [{k: v.value for k, v in r.asset_materialization.metadata.items()
                if k in ("messages_in", "row_events", "ddl_events", "watermark_events", "events_in",
                         "duplicates_dropped", "late_dropped", "events_out")} for r in records]
    for f in figures:
        assert f["events_in"] == f["row_events"] + f["ddl_events"] > 0  # watermarks are not aligned
        assert f["events_out"] == f["events_in"] - f["duplicates_dropped"] - f["late_dropped"]
        assert f["messages_in"] > 0 and f["watermark_events"] > 0
    assert sum(f["events_in"] for f in figures) == summary.events
    assert not load_pyiceberg_catalog(settings.warehouse).table_exists("src.change_log")


def test_each_layer_output_names_its_iceberg_table_snapshot_and_columns(parquet_run, parquet_instance):
    """The UI links a run to the table version it wrote: the change table's materializations
    name `cdc.src.change_table`, a snapshot of that table, and its columns."""
    _, _, settings = parquet_run
    records = parquet_instance.fetch_materializations(AssetKey(["src", "change_table"]), limit=1000).records
    table = load_pyiceberg_catalog(settings.warehouse).load_table("src.change_table")
    snapshot_ids = {str(s.snapshot_id) for s in table.snapshots()}
    assert records
    for record in records:
        metadata = record.asset_materialization.metadata
        assert metadata["dagster/table_name"].value == "cdc.src.change_table"
        assert metadata["iceberg_snapshot_id"].value in snapshot_ids
        columns = {c.name: c.constraints.nullable for c in metadata["dagster/column_schema"].schema.columns}
        assert {"database", "table", "op", "commit_ts"} <= set(columns)
        # the frame's columns: the table's top-level ones but the partition column the IO manager adds
        assert set(columns) == {f.name for f in table.schema().fields} - {"window_start_ms"}


def test_incomplete_window_is_not_materialized_and_its_check_blocks(parquet_run, spark):
    dump, _, settings = parquet_run
    truth = load_truth(dump.truth_path)
    (open_window,) = [w["start_ms"] for w in truth["windows"] if not w["complete"]]
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    assert open_window not in list_manifests(*snapshots)

    # Forcing it through Dagster: the blocking check fails and the snapshot is skipped.
    windowed = settings.with_overrides(partition_start=settings.partition_start)
    defs = build_definitions(windowed)
    (b,) = source_builds(windowed)
    job = defs.resolve_job_def(window_job_name(b))
    result = job.execute_in_process(
        partition_key=partition_key_for_ms(b.partitions_def, open_window),
        instance=DagsterInstance.ephemeral(), raise_on_error=False,
    )
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["window_complete"] is False
    assert open_window not in list_manifests(*snapshots)


def test_landing_again_changes_nothing(parquet_run, spark):
    dump, _, settings = parquet_run
    before = load_state(settings.warehouse, "src").to_json()
    # Same content under a new name is recognised by its digest, not its path.
    first = sorted(dump.dump_dir.rglob("*.parquet"))[0]
    (first.parent / ("copy-" + first.name)).write_bytes(first.read_bytes())
    from cdc_assets.replay import replay

    again = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    after = load_state(settings.warehouse, "src").to_json()
    assert again.files_landed == 0
    assert before["partitions"] == after["partitions"] and before["windows"] == after["windows"]
    assert differences_from_truth(settings, dump.truth_path) == {}


def test_export_writes_one_parquet_file_per_table(parquet_run, tmp_path, capsys):
    dump, _, settings = parquet_run
    out = tmp_path / "export"
    assert cli_main(["export", "--warehouse", str(settings.warehouse), "--source", "src", "--out", str(out)]) == 0
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    manifest = read_manifest(*snapshots, list_manifests(*snapshots)[-1])
    files = sorted(p.name for p in out.glob("*.parquet"))
    assert files == sorted(f"{tid}.parquet" for tid in manifest.tables)
    for tid, entry in manifest.tables.items():
        assert pq.read_table(out / f"{tid}.parquet").num_rows == entry.rows
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert {x["table"] for x in lines} == set(load_truth(dump.truth_path)["tables"])


def test_export_as_of_a_window_end_equals_that_windows_snapshot(parquet_run, tmp_path):
    _, _, settings = parquet_run
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    first = read_manifest(*snapshots, list_manifests(*snapshots)[0])
    last_tso_of_window = (first.window_end_ms << 18) - 1  # commits <= this TSO
    end_time = datetime.fromtimestamp(first.window_end_ms / 1000, tz=timezone.utc).isoformat()
    for i, as_of in enumerate([str(last_tso_of_window), end_time]):  # a UTC time: commits before it
        out = tmp_path / f"asof{i}"
        assert cli_main(["export", "--warehouse", str(settings.warehouse), "--source", "src",
                         "--out", str(out), "--as-of", as_of]) == 0
        for tid, entry in first.tables.items():
            assert pq.read_table(out / f"{tid}.parquet").num_rows == entry.rows


def test_replay_cli_on_kcat_jsonl_equals_the_truth(tmp_path, capsys, caplog, spark):
    dump = generate(tmp_path / "sim", seed=5, layout="kcat-jsonl", row_changes=500, duration_ms=int(2.5 * HOUR))
    # Bad input in the dump: a line that is not kcat JSON, and a kcat record whose payload
    # is not Canal-JSON. Both are quarantined; neither stops the run.
    first = sorted(dump.dump_dir.rglob("*.jsonl"))[0]
    # An overlapping dump file (another content, so landing takes it): the first 30 offsets
    # land twice, and raw_messages keeps each once.
    redelivered = 30
    overlap = first.read_text().splitlines()[:redelivered]
    first.with_name("overlap-" + first.name).write_text("\n".join(overlap) + "\n")
    with first.open("a") as fh:
        fh.write("this is not json\n")
        fh.write(json.dumps({"topic": "tidb_cdc", "partition": 0, "offset": 10**9, "tstype": "create",
                             "ts": 1767225600001, "broker": -1, "key": None, "payload": "{broken"}) + "\n")
    warehouse = tmp_path / "wh"
    code = cli_main(["replay", "--protocol", "canal-json", "--input", str(dump.dump_dir),
                     "--warehouse", str(warehouse), "--source", "src"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    counts = load_truth(dump.truth_path)["counts"]
    assert code == 0
    # A range run's checks are reported per window: Dagster's "emitted no result" warning
    # about them is not shown (replay._RangeCheckNotice).
    assert summary["windows_with_data"] > 1
    assert not [r for r in caplog.records if "emitted no result" in r.getMessage()]
    # WARN checks fail (reported, not fatal): the restart's replayed resolved ts, the two bad
    # lines without a usable time (counted at landing), and the quarantine of their window.
    assert [c.split("@")[0] for c in summary["checks_warned"]] == [
        "src/landed_dump:watermarks_trusted", "src/landed_dump:messages_routable",
        "src/quarantine:nothing_quarantined"]
    assert summary["unroutable"] == 2
    assert summary["windows"] == sum(w["complete"] for w in load_truth(dump.truth_path)["windows"])
    assert (summary["duplicates"], summary["late"], summary["quarantined"]) == (
        counts["duplicates"], counts["late"], 2)
    settings = settings_for(tmp_path / "unused", dump.dump_dir).with_overrides(warehouse=warehouse)
    assert differences_from_truth(settings, dump.truth_path) == {}
    # The raw layer records each window's read (no copy of the rows) in `window_reads`.
    raw = [c["metadata"] for c in layer_commits(warehouse, "src", "window_reads")]
    assert sum(m["redelivered_offsets_dropped"] for m in raw) == redelivered
    assert sum(m["messages_in"] - m["messages_out"] for m in raw) == redelivered


def test_rematerializing_an_old_window_keeps_newer_snapshots_intact(parquet_run, spark):
    dump, _, settings = parquet_run
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    first_window = list_manifests(*snapshots)[0]
    defs = build_definitions(settings)
    (b,) = source_builds(settings)
    result = defs.resolve_job_def(window_job_name(b)).execute_in_process(
        partition_key=partition_key_for_ms(b.partitions_def, first_window),
        instance=DagsterInstance.ephemeral(), raise_on_error=False,
    )
    assert result.success
    # Every window's tag is still on the snapshot its manifest names, main is the newest
    # window's (the rerun wrote on its own branch), and every window still equals the truth.
    from cdc_assets.common.warehouse import load_pyiceberg_catalog

    catalog = load_pyiceberg_catalog(settings.warehouse)
    newest = read_manifest(*snapshots, list_manifests(*snapshots)[-1])
    for window in list_manifests(*snapshots):
        manifest = read_manifest(*snapshots, window)
        for entry in manifest.tables.values():
            table = catalog.load_table(tuple(entry.identifier.split(".", 1)))
            assert table.metadata.refs[manifest.tag].snapshot_id == entry.snapshot_id
            assert not [r for r in table.metadata.refs if r.startswith("window-")]  # branches published and dropped
    for entry in newest.tables.values():
        table = catalog.load_table(tuple(entry.identifier.split(".", 1)))
        assert table.current_snapshot().snapshot_id == entry.snapshot_id
    assert differences_from_truth(settings, dump.truth_path) == {}


def test_replay_cli_on_a_storage_sink_equals_the_truth(tmp_path, capsys, spark):
    """The same simulated changefeed as TiCDC's storage sink writes it: rows per table version,
    DDL in schema files, the checkpoint in `metadata`, re-sent rows in a new file after the
    restart. No watermark inside the streams, so every re-sent row is a duplicate, none late."""
    dump = generate(tmp_path / "sim", seed=5, layout="storage-sink", row_changes=500, duration_ms=int(2.5 * HOUR))
    assert (dump.dump_dir / "metadata").is_file() and list(dump.dump_dir.glob("shop/meta/schema_*.json"))
    warehouse = tmp_path / "wh"
    code = cli_main(["replay", "--protocol", "canal-json", "--input", str(dump.dump_dir),
                     "--warehouse", str(warehouse), "--source", "src"])
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    counts = load_truth(dump.truth_path)["counts"]
    assert code == 0 and summary["checks_failed"] == [] and summary["checks_warned"] == []
    assert summary["windows"] == sum(w["complete"] for w in load_truth(dump.truth_path)["windows"])
    assert (summary["duplicates"], summary["late"], summary["quarantined"]) == (
        counts["duplicates"] + counts["late"], 0, 0)
    settings = settings_for(tmp_path / "unused", dump.dump_dir).with_overrides(warehouse=warehouse)
    assert differences_from_truth(settings, dump.truth_path) == {}


def test_a_range_of_snapshot_windows_is_one_run_with_each_window_reported_as_its_own(parquet_run, spark):
    dump, _, settings = parquet_run
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    windows = list_manifests(*snapshots)
    assert len(windows) >= 3
    defs = build_definitions(settings)
    (b,) = source_builds(settings)
    keys = [partition_key_for_ms(b.partitions_def, w) for w in windows]
    layers = [AssetKey(["src", "snapshots"]), AssetKey(["src", "history"])]
    result = defs.resolve_job_def(window_job_name(b)).execute_in_process(
        asset_selection=layers, instance=DagsterInstance.ephemeral(), raise_on_error=False,
        tags={"dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]},
    )
    assert result.success
    # Each window applied on the one before, in order, inside the one run: every window's own
    # state still equals the brute-force truth.
    assert differences_from_truth(settings, dump.truth_path) == {}
    # Each window reported with its own partition and figures, once per asset and check.
    mats = result.get_asset_materialization_events()
    for layer in layers:
        assert [m.partition for m in mats if m.asset_key == layer] == keys
    rows = {m.partition: m.materialization.metadata["rows_total"].value for m in mats if m.asset_key == layers[0]}
    assert rows == {k: sum(t.rows for t in read_manifest(*snapshots, w).tables.values()) for k, w in zip(keys, windows)}
    evaluations = result.get_asset_check_evaluations()
    for name in ("primary_key_unique", "reconciliation", "values_convert", "tables_built", "ddl_applied"):
        assert [(e.partition, e.passed) for e in evaluations if e.check_name == name] == [(k, True) for k in keys]
