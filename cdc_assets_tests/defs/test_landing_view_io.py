"""The raw layer is a pinned view of the landing (defs/landing_view_io.py): its step runs no
Spark job and writes no message, records the read in `<source>.window_reads` with the same
metadata as before (change_table reads it back), and its consumers get the window's messages,
each offset once, as the read found them."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from dagster import DagsterInstance, build_input_context, build_resources

from cdc_assets.common.spark_session import jobs_since, spark_job_ids
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.decode import get_decoder
from cdc_assets.defs.factory import build_definitions, source_builds
from cdc_assets.defs.landing_view_io import LandingViewIOManager
from cdc_assets.defs.partitions import partition_key_for_ms
from cdc_assets.defs.resources import window_output_metadata
from cdc_assets.defs.source_build import RAW
from cdc_assets.landing.land import land
from cdc_assets_tests.canal_messages import kcat_file, row, values, watermark
from cdc_assets_tests.e2e import settings_for
from cdc_assets_tests.helpers import layer_commits

HOUR = 3_600_000
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


def _kcat_file(path: Path, partition: int, messages: list[tuple[int, bytes]]) -> None:
    kcat_file(path, partition, messages, T0)


def _landed_and_defined(spark, tmp_path: Path, dump: Path, warehouse: Path):
    """The dump landed, and the definitions and source build of a project over it."""
    land(spark, dump_root=dump, layout="kcat-jsonl", decoder=get_decoder("canal-json"), warehouse=warehouse,
         source="src", window_ms=HOUR)
    settings = settings_for(tmp_path / "home", dump).with_overrides(
        warehouse=warehouse, partition_start=datetime.fromtimestamp(T0 / 1000, tz=timezone.utc))
    (build,) = source_builds(settings)
    return build_definitions(settings), build


def test_the_raw_step_records_its_read_without_spark_jobs_or_rows(spark, tmp_path):
    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    first = [(0, row("INSERT", ms_to_tso(T0 + 10), values(1, "a"))),
             (1, row("INSERT", ms_to_tso(T0 + 20), values(2, "b"))),
             (2, row("INSERT", ms_to_tso(T0 + 30), values(3, "c"))),
             (3, watermark(ms_to_tso(T0 + 2 * HOUR)))]
    _kcat_file(dump / "a.jsonl", 0, first)
    _kcat_file(dump / "overlap.jsonl", 0, first[:2])  # offsets 0 and 1 landed twice
    defs, build = _landed_and_defined(spark, tmp_path, dump, warehouse)
    key = partition_key_for_ms(build.partitions_def, T0)

    before = spark_job_ids()
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        partition_key=key, asset_selection=[build.key(RAW)], instance=DagsterInstance.ephemeral())
    assert result.success
    assert jobs_since(before) == 0  # was 5-6: the count of copies and the write of a copy of the rows

    (event,) = result.get_asset_materialization_events()
    metadata = {k: getattr(v, "value", v) for k, v in event.event_specific_data.materialization.metadata.items()}
    # The figures the raw layer always showed, unchanged.
    figures = {"messages_in": 5, "messages_out": 3, "redelivered_offsets_dropped": 2,
               "window_complete_at_read": True, "global_watermark_ts_at_read": ms_to_tso(T0 + 2 * HOUR)}
    assert {k: metadata[k] for k in figures} == figures
    assert metadata["rows"] == 3 and metadata["dagster/table_name"] == "cdc.src.landed_messages"
    # What change_table reads back (no Spark), and the record any Iceberg reader sees.
    assert window_output_metadata(warehouse, ["src", "raw_messages"], T0) == figures
    assert [c["metadata"] for c in layer_commits(warehouse, "src", "window_reads")] == [figures]
    # Run again: the window's record is replaced, one snapshot per read.
    assert defs.resolve_implicit_global_asset_job_def().execute_in_process(
        partition_key=key, asset_selection=[build.key(RAW)], instance=DagsterInstance.ephemeral()).success
    reads = load_pyiceberg_catalog(warehouse).load_table(("src", "window_reads"))
    assert len(reads.snapshots()) == 2 and reads.scan().to_arrow().num_rows == 1
    # No copy of the messages: the raw layer has no table of its own rows.
    assert not (warehouse / "src" / "raw_messages").exists()

    # What the decode step gets: each offset once, read at the recorded snapshot.
    io = LandingViewIOManager(warehouse=defs.resources["warehouse"], pyspark=defs.resources["pyspark"])
    context = build_input_context(asset_key=build.key(RAW), partition_key=key,
                                  asset_partitions_def=build.partitions_def)
    with build_resources({"io": io}) as initialized:
        before = spark_job_ids()
        messages = initialized.io.load_input(context)
        assert jobs_since(before) == 0
        assert sorted((r.kafka_partition, r.kafka_offset) for r in messages.collect()) == [(0, 0), (0, 1), (0, 2)]


def test_decoding_a_window_whose_read_was_never_recorded_stops_with_a_clear_error(spark, tmp_path):
    """change_table alone, over a range whose second window's raw read was never recorded: the
    first window is written, then the run stops at the second, naming it."""
    from dagster import AssetKey, DagsterEventType

    from cdc_assets.defs.source_build import CHANGE_TABLE

    dump, warehouse = tmp_path / "dump", tmp_path / "warehouse"
    _kcat_file(dump / "a.jsonl", 0, [(0, row("INSERT", ms_to_tso(T0 + 10), values(1, "a"))),
                                     (1, row("INSERT", ms_to_tso(T0 + HOUR + 10), values(2, "b"))),
                                     (2, watermark(ms_to_tso(T0 + 3 * HOUR)))])
    defs, build = _landed_and_defined(spark, tmp_path, dump, warehouse)
    first, second = (partition_key_for_ms(build.partitions_def, T0 + k * HOUR) for k in (0, 1))
    job = defs.resolve_implicit_global_asset_job_def()
    instance = DagsterInstance.ephemeral()
    assert job.execute_in_process(partition_key=first, asset_selection=[build.key(RAW)], instance=instance).success

    result = job.execute_in_process(
        asset_selection=[build.key(CHANGE_TABLE)], instance=instance, raise_on_error=False,
        tags={"dagster/asset_partition_range_start": first, "dagster/asset_partition_range_end": second})
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE).step_failure_data
    described = failure.user_failure_data.description if failure.user_failure_data else ""
    assert f"has no recorded read of window {second}" in failure.error.message + (described or "")
    written = [e.event_specific_data.materialization for e in result.all_events
               if e.event_type == DagsterEventType.ASSET_MATERIALIZATION]
    assert [(m.asset_key, m.partition) for m in written] == [(AssetKey(["src", "change_table"]), first)]
