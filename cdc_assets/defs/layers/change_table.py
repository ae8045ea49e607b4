"""Layer 3: deduplicated, watermark-aligned change table of one window."""


from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetIn,
    AssetsDefinition,
    MetadataValue,
    Output,
    asset,
)
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame

from cdc_assets.align.change_table import mark_late_and_duplicates, observe_alignment
from cdc_assets.common.tso import ms_to_tso, tso_to_datetime
from cdc_assets.contracts.checks import ChangeTableModel, observed
from cdc_assets.defs.check_results import contract_check
from cdc_assets.defs.metadata import MAX_BARS, events_per_minute_chart, watermark_lag_chart, watermark_table
from cdc_assets.defs.partitions import window_bounds_ms
from cdc_assets.defs.resources import ObservedOutput, WarehouseResource, window_output_metadata
from cdc_assets.defs.source_build import CHANGE_LOG, CHANGE_TABLE, QUARANTINE, RAW, SourceBuild
from cdc_assets.landing.tables import load_state
from cdc_assets.landing.window_messages import read_watermark_index

WINDOW_COMPLETE = "window_complete"
INSIDE_WINDOW = "events_inside_window"
CONTRACT = "change_table_contract"


def build_change_table(b: SourceBuild) -> AssetsDefinition:
    key = b.key(CHANGE_TABLE)

    @asset(
        **b.layer_output(CHANGE_TABLE, "Row and DDL events of the window with at-least-once duplicates removed and "
                         "late events (below an earlier watermark of their partition) dropped; counts in metadata."),
        **b.in_windows(),
        ins={"change_log": AssetIn(key=b.key(CHANGE_LOG))},
        # Checks are partitioned like their asset: the UI shows pass/fail per window.
        check_specs=[
            b.window_check(WINDOW_COMPLETE, CHANGE_TABLE, blocking=True,
                           description="the global watermark (min over Kafka partitions) passed the window end"),
            b.window_check(INSIDE_WINDOW, CHANGE_TABLE, blocking=True,
                           description="every event of the change log has its commit_ts inside the window "
                           "(one outside is a routing bug: dropped, never applied)"),
            b.window_check(CONTRACT, CHANGE_TABLE, "pandera ChangeTableModel + row invariants"),
        ],
    )
    def change_table(
        context: AssetExecutionContext,
        change_log: DataFrame,
        pyspark: PySparkResource,
        warehouse: WarehouseResource,
    ):
        start_ms, end_ms = window_bounds_ms(b.partitions_def, context.partition_key)
        state = load_state(warehouse.iceberg, b.source.name)
        marks = read_watermark_index(pyspark.spark_session, warehouse.iceberg, b.source.name, state)
        marked = mark_late_and_duplicates(change_log, marks, ms_to_tso(start_ms), ms_to_tso(end_ms))
        # One pass: the counts (late, duplicate and outside rows too: observed before the
        # filter), the events per minute and the contract are observed by the write.
        alignment = observe_alignment(marked, start_ms, b.settings.window_ms, MAX_BARS)
        aligned, outcome = observed(ChangeTableModel, alignment.aligned)
        policy = b.completeness()
        # Judge completeness as of when raw_messages read the landing area: a landing
        # since then may have closed the window with events this run has not seen.
        at_read = window_output_metadata(warehouse.iceberg, list(b.key(RAW).path), start_ms)
        wm = at_read.get("global_watermark_ts_at_read", state.global_watermark_ts(policy) or -1)
        wm = None if wm == -1 else wm
        complete = bool(at_read.get("window_complete_at_read", state.is_complete(end_ms, policy)))
        quarantined = window_output_metadata(warehouse.iceberg, list(b.key(QUARANTINE).path),
                                             start_ms).get("quarantined", 0)

        def observed_metadata() -> dict:
            counts = alignment.counts()
            return {
                "events_in": counts.events_in,
                "duplicates_dropped": counts.duplicates,
                "late_dropped": counts.late,
                "outside_window_dropped": counts.outside_window,
                "events_out": counts.events_out,
                "row_events_out": counts.rows_out,
                "ddl_events_out": counts.ddl_out,
                "events_per_minute_chart": MetadataValue.md(events_per_minute_chart(
                    alignment.events_per_bar(), start_ms, b.settings.window_ms)),
            }

        yield Output(
            ObservedOutput(aligned, observed_metadata),
            metadata={
                "quarantined": quarantined,
                "window_complete": complete,
                "global_watermark_ts": wm if wm is not None else -1,
                "kafka_partitions": MetadataValue.md(watermark_table(state)),
                "watermark_lag_chart": MetadataValue.md(watermark_lag_chart(state)),
            },
        )
        counts = alignment.counts()
        yield AssetCheckResult(
            check_name=WINDOW_COMPLETE,
            passed=complete,
            metadata={
                "window_end_tso": ms_to_tso(end_ms),
                "global_watermark_ts": wm if wm is not None else -1,
                "global_watermark_time": str(tso_to_datetime(wm)) if wm is not None else "none yet",
                "completeness_mode": policy.mode.value,
            },
        )
        yield AssetCheckResult(
            check_name=INSIDE_WINDOW,
            passed=counts.outside_window == 0,
            severity=AssetCheckSeverity.ERROR,
            metadata={"outside_window": counts.outside_window, "window_start_tso": ms_to_tso(start_ms),
                      "window_end_tso": ms_to_tso(end_ms)},
        )
        yield contract_check(key, CONTRACT, outcome())

    return change_table
