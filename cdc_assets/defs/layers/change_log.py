"""Layer 2: decode raw messages into the unified change log; unusable ones to quarantine."""


from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetIn,
    AssetOut,
    AssetsDefinition,
    MetadataValue,
    Output,
    multi_asset,
)
from pyspark.sql import DataFrame

from cdc_assets.contracts.checks import ChangeLogModel, observed
from cdc_assets.decode.window_decode import decode_window
from cdc_assets.defs.check_results import contract_check
from cdc_assets.defs.metadata import counts_table
from cdc_assets.defs.partitions import window_bounds_ms
from cdc_assets.defs.resources import ObservedOutput
from cdc_assets.defs.source_build import CHANGE_LOG, QUARANTINE, RAW, SourceBuild

SCHEMA_CHECK = "change_log_contract"
QUARANTINE_CHECK = "nothing_quarantined"
QUARANTINE_RATE_CHECK = "quarantine_rate_within_limit"


def build_change_log(b: SourceBuild) -> AssetsDefinition:
    log_key, quarantine_key = b.key(CHANGE_LOG), b.key(QUARANTINE)

    @multi_asset(
        name=f"{b.source.name}__decode",
        ins={"raw_messages": AssetIn(key=b.key(RAW))},
        outs={
            "change_log": AssetOut(**b.layer_output(
                CHANGE_LOG, "Every decoded event of the window in the one change-log schema "
                "(docs/architecture.md): rows, DDL and watermarks, with lineage.")),
            "quarantine": AssetOut(**b.layer_output(
                QUARANTINE, "Messages (or single events of a batch) that could not be used: "
                "reason code, detail, raw key/value bytes and lineage.")),
        },
        **b.in_windows(),
        check_specs=[
            b.window_check(SCHEMA_CHECK, CHANGE_LOG, "pandera ChangeLogModel + row invariants, failing counts in "
                           "metadata"),
            b.window_check(QUARANTINE_CHECK, QUARANTINE, "warns when the window quarantined anything but records "
                           "that carry no change by design (tombstones, control records)"),
            b.window_check(QUARANTINE_RATE_CHECK, QUARANTINE, "errors when the share of quarantined messages "
                           f"exceeds the source's max_quarantine_rate ({b.source.max_quarantine_rate:g})"),
        ],
    )
    def decode(context: AssetExecutionContext, raw_messages: DataFrame):
        start_ms, _end_ms = window_bounds_ms(b.partitions_def, context.partition_key)
        with decode_window(b.decoder(), raw_messages, start_ms, b.settings.window_ms) as w:
            # Every figure is observed by the change log's write (decode_window, `observed`):
            # the IO manager adds them after it, and the quarantine (written next) and the
            # checks read them then.
            events, outcome = observed(ChangeLogModel, w.events)
            yield Output(
                ObservedOutput(events, lambda: {
                    "messages_in": w.messages,
                    "events_out": sum(w.kinds.values()),
                    "row_events": w.kinds.get("row", 0),
                    "ddl_events": w.kinds.get("ddl", 0),
                    "watermark_events": w.kinds.get("watermark", 0),
                    "quarantined": w.quarantined,
                }),
                output_name="change_log",
                metadata={"commit_order": b.decoder().commit_order()},
            )
            yield Output(
                w.quarantine, output_name="quarantine",
                metadata={"quarantined": w.quarantined, "quarantined_messages": w.quarantined_messages,
                          "no_change_records": w.no_change_records, "messages_in": w.messages,
                          "by_reason": MetadataValue.md(counts_table(w.reasons, ("reason", "messages")))},
            )
            yield contract_check(log_key, SCHEMA_CHECK, outcome())
            yield AssetCheckResult(
                asset_key=quarantine_key, check_name=QUARANTINE_CHECK,
                passed=w.quarantined == w.no_change_records, severity=AssetCheckSeverity.WARN,
                metadata={"quarantined": w.quarantined, "no_change_records": w.no_change_records,
                          "by_reason": MetadataValue.json(w.reasons)},
            )
            yield AssetCheckResult(
                asset_key=quarantine_key, check_name=QUARANTINE_RATE_CHECK,
                passed=w.quarantine_rate <= b.source.max_quarantine_rate, severity=AssetCheckSeverity.ERROR,
                metadata={"messages": w.messages, "no_change_messages": w.no_change_messages,
                          "quarantined_messages": w.quarantined_messages,
                          "rate": MetadataValue.float(round(w.quarantine_rate, 6)),
                          "max_rate": MetadataValue.float(b.source.max_quarantine_rate)},
            )

    return decode
