"""Layers 1-3 of each window of the run, in one step: record the window's read of the landing
(raw_messages, layers/raw.py), decode its messages and align them: the change table
(duplicates and late events dropped) and the quarantine.

One run may cover a range of windows (`BackfillPolicy.single_run()`): the step decodes and
aligns consecutive windows as a group in one pass (align/window_group.py), then writes them in
order, each in its own commits and reported with its own partition
(defs/range_reporting.py); a failed blocking check stops it after that window. Both tables are
written whichever of them the run selected (one decode makes both); only the selected ones
are reported.

The decoded change log is not stored (issue 45): the change table is the change log without
its duplicate, late and outside-window events, so a stored copy of it was a second copy of
the window's data that no consumer read but the next step. The decode figures and the
change-log contract ride on the change table's write (`DataFrame.observe`), with its own."""


import contextlib

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    AssetsDefinition,
    BackfillPolicy,
    MetadataValue,
    multi_asset,
)
from dagster_pyspark import PySparkResource
from pyspark.sql import functions as F

from cdc_assets.align.change_table import FLAGS, observe_alignment
from cdc_assets.align.window_group import aligned_windows, groups
from cdc_assets.common.tso import ms_to_tso, tso_to_datetime
from cdc_assets.contracts.checks import ChangeLogModel, ChangeTableModel, observed
from cdc_assets.contracts.schemas import WATERMARK
from cdc_assets.decode.window_decode import DecodedWindow
from cdc_assets.defs.check_results import contract_check
from cdc_assets.defs.metadata import MAX_BARS, counts_table, events_per_minute_chart, watermark_lag_chart, watermark_table
from cdc_assets.defs.partitions import window_bounds_ms
from cdc_assets.defs.landing_view_io import recorded_window_read
from cdc_assets.defs.layers.raw import pin_read, raw_messages_spec, record_read
from cdc_assets.defs.resources import ObservedOutput, WarehouseResource, window_output_metadata, write_layer_window
from cdc_assets.defs.source_build import CHANGE_TABLE, QUARANTINE, RAW, SourceBuild
from cdc_assets.defs.range_reporting import WindowEvents
from cdc_assets.landing.state import Completeness, LandingState
from cdc_assets.landing.tables import load_state
from cdc_assets.landing.window_messages import read_pinned_messages, read_watermark_index

WINDOW_COMPLETE = "window_complete"
INSIDE_WINDOW = "events_inside_window"
CONTRACT = "change_table_contract"
DECODED_CONTRACT = "change_log_contract"
QUARANTINE_CHECK = "nothing_quarantined"
QUARANTINE_RATE_CHECK = "quarantine_rate_within_limit"


def build_change_table(b: SourceBuild) -> AssetsDefinition:
    @multi_asset(
        name=f"{b.source.name}__decode_and_align",
        specs=[
            raw_messages_spec(b),
            b.layer_spec(CHANGE_TABLE, "Row and DDL events of the window, decoded into the one change-log schema "
                         "(docs/architecture.md), with at-least-once duplicates removed and late events (below an "
                         "earlier watermark of their partition) dropped; counts in metadata.", deps=[b.key(RAW)]),
            b.layer_spec(QUARANTINE, "Messages (or single events of a batch) that could not be used: "
                         "reason code, detail, raw key/value bytes and lineage.", deps=[b.key(RAW)]),
        ],
        partitions_def=b.partitions_def,
        can_subset=True,
        # A backfill of N windows is one run; each window is written, reported and checked in order.
        backfill_policy=BackfillPolicy.single_run(),
        # Checks are partitioned like their asset: the UI shows pass/fail per window.
        check_specs=[
            b.window_check(WINDOW_COMPLETE, CHANGE_TABLE, blocking=True,
                           description="the global watermark (min over Kafka partitions) passed the window end"),
            b.window_check(INSIDE_WINDOW, CHANGE_TABLE, blocking=True,
                           description="every decoded event has its commit_ts inside the window "
                           "(one outside is a routing bug: dropped, never applied)"),
            b.window_check(DECODED_CONTRACT, CHANGE_TABLE, "every decoded event (watermarks, duplicates and late "
                           "events included): pandera ChangeLogModel + row invariants, failing counts in metadata"),
            b.window_check(CONTRACT, CHANGE_TABLE, "pandera ChangeTableModel + row invariants"),
            b.window_check(QUARANTINE_CHECK, QUARANTINE, "warns when the window quarantined anything but records "
                           "that carry no change by design (tombstones, control records)"),
            b.window_check(QUARANTINE_RATE_CHECK, QUARANTINE, "errors when the share of quarantined messages "
                           f"exceeds the source's max_quarantine_rate ({b.source.max_quarantine_rate:g})"),
        ],
    )
    def decode_and_align(context: AssetExecutionContext, pyspark: PySparkResource, warehouse: WarehouseResource):
        spark, raw_key = pyspark.spark_session, b.key(RAW)
        record = raw_key in context.selected_asset_keys
        decode = bool(context.selected_asset_keys - {raw_key})
        events = WindowEvents(context)
        reads = _window_reads(b, warehouse, context.partition_keys, record)
        if not decode:
            for partition, read, figures in reads:
                yield from events.materialized(raw_key, partition, record_read(b, warehouse, read, figures))
            yield from events.outputs()
            return
        # Consecutive windows are decoded and aligned together (align/window_group.py); each
        # is still written, reported and checked on its own, in order.
        for group in groups(reads, lambda r: r[1].messages if r[1] is not None else 0):
            # A window whose read was never recorded stops the run there; the windows before it are written.
            missing = next((i for i, (_, read, _) in enumerate(group) if read is None), len(group))
            if missing:
                yield from _group(b, events, group[:missing], spark, warehouse)
            if missing < len(group):
                yield from events.stop(f"{raw_key.to_user_string()} has no recorded read of window "
                                       f"{group[missing][0]}: materialize that partition first")
        yield from events.outputs()

    return decode_and_align


def _window_reads(b: SourceBuild, warehouse: WarehouseResource, partitions, record: bool):
    """Each window's read of the landing, in order (lazily): pinned now when the run
    materializes raw_messages (with its figures; recorded when the window is written, so that a
    run that stops records no read it did not use), else as recorded (None: never recorded)."""
    for partition in partitions:
        if record:
            read, figures = pin_read(b, warehouse, partition)
        else:
            start_ms = window_bounds_ms(b.partitions_def, partition)[0]
            read, figures = recorded_window_read(warehouse.iceberg, b.source.name, start_ms), None
        yield partition, read, figures


def _group(b: SourceBuild, events: WindowEvents, group: list, spark, warehouse: WarehouseResource):
    """Decode and align a group of windows in one pass, then write and report each in order.
    When the group's shared pass fails, its windows are taken one by one: the failure is
    then the failing window's own, and the windows before it are written."""
    state = load_state(warehouse.iceberg, b.source.name)
    marks = read_watermark_index(spark, warehouse.iceberg, b.source.name, state)
    starts = {partition: window_bounds_ms(b.partitions_def, partition)[0] for partition, _, _ in group}
    raw = {starts[p]: read_pinned_messages(spark, warehouse.iceberg, b.source.name, read) for p, read, _ in group}
    with contextlib.ExitStack() as stack:
        try:
            windows = stack.enter_context(aligned_windows(b.decoder(), raw, marks, b.settings.window_ms))
        except Exception as failure:
            if len(group) == 1:
                raise
            events.context.log.warning(f"the shared decode of windows {group[0][0]}..{group[-1][0]} failed "
                                       f"({failure!r}); decoding them one by one")
            windows = None
        if windows is None:
            for one in group:
                yield from _group(b, events, [one], spark, warehouse)
            return
        for partition, read, figures in group:
            if figures is not None:  # raw_messages is materialized: the read this window decoded
                yield from events.materialized(b.key(RAW), partition, record_read(b, warehouse, read, figures))
            yield from _window(b, events, partition, spark, warehouse, state, windows[starts[partition]])
            yield from events.stop_if_blocked(partition)


def _window(b: SourceBuild, events: WindowEvents, partition: str, spark, warehouse: WarehouseResource,
            state: LandingState, w: DecodedWindow):
    """Align and write one decoded window of the run (both tables, whichever the run
    selected), then report it: its materializations and its check results."""
    table_key, quarantine_key = b.key(CHANGE_TABLE), b.key(QUARANTINE)
    start_ms, end_ms = window_bounds_ms(b.partitions_def, partition)
    policy = b.completeness()
    # One pass: the decode counts, the alignment counts (late, duplicate and outside rows
    # too: observed before the filter), the events per minute and both contracts are
    # observed by the change table's write; the quarantine, written next, reads the same
    # cached group.
    decoded, decoded_outcome = observed(ChangeLogModel, w.flagged, extra=FLAGS)
    marked = decoded.where(F.col("event_kind") != WATERMARK)
    alignment = observe_alignment(marked, start_ms, b.settings.window_ms, MAX_BARS)
    aligned, outcome = observed(ChangeTableModel, alignment.aligned)

    def observed_metadata() -> dict:
        counts = alignment.counts()
        return {
            **_decode_figures(w),
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

    at_read = window_output_metadata(warehouse.iceberg, list(b.key(RAW).path), start_ms)
    complete, wm = _completeness_at_read(policy, state, at_read, end_ms)
    table_metadata = {
        "commit_order": b.decoder().commit_order(),
        "window_complete": complete,
        "global_watermark_ts": wm if wm is not None else -1,
        "kafka_partitions": MetadataValue.md(watermark_table(state)),
        "watermark_lag_chart": MetadataValue.md(watermark_lag_chart(state)),
    }
    table_metadata.update(write_layer_window(warehouse, spark, list(table_key.path),
                                             ObservedOutput(aligned, observed_metadata), start_ms, table_metadata))
    yield from events.materialized(table_key, partition, table_metadata)
    quarantine_metadata = {
        "quarantined": w.quarantined, "quarantined_messages": w.quarantined_messages,
        "no_change_records": w.no_change_records, "messages_in": w.messages,
        "by_reason": MetadataValue.md(counts_table(w.reasons, ("reason", "messages")))}
    # Its rows were counted on the change table's job: an empty one is written without a job.
    quarantine_metadata.update(write_layer_window(warehouse, spark, list(quarantine_key.path), w.quarantine,
                                                  start_ms, quarantine_metadata, empty=w.quarantined == 0))
    yield from events.materialized(quarantine_key, partition, quarantine_metadata)
    for result in _quarantine_checks(b, quarantine_key, w):
        yield from events.checked(result, partition)
    counts = alignment.counts()
    yield from events.checked(contract_check(table_key, DECODED_CONTRACT, decoded_outcome()), partition)
    yield from events.checked(contract_check(table_key, CONTRACT, outcome()), partition)
    # The blocking checks come last: a failed one stops the run after this window.
    yield from events.checked(AssetCheckResult(
        asset_key=table_key,
        check_name=WINDOW_COMPLETE,
        passed=complete,
        metadata={
            "window_end_tso": ms_to_tso(end_ms),
            "global_watermark_ts": wm if wm is not None else -1,
            "global_watermark_time": str(tso_to_datetime(wm)) if wm is not None else "none yet",
            "completeness_mode": policy.mode.value,
        },
    ), partition, blocking=True)
    yield from events.checked(AssetCheckResult(
        asset_key=table_key,
        check_name=INSIDE_WINDOW,
        passed=counts.outside_window == 0,
        severity=AssetCheckSeverity.ERROR,
        metadata={"outside_window": counts.outside_window, "window_start_tso": ms_to_tso(start_ms),
                  "window_end_tso": ms_to_tso(end_ms)},
    ), partition, blocking=True)


def _decode_figures(w: DecodedWindow) -> dict:
    """What the decode read and made of it (observed by the change table's write)."""
    return {
        "messages_in": w.messages,
        "row_events": w.kinds.get("row", 0),
        "ddl_events": w.kinds.get("ddl", 0),
        "watermark_events": w.kinds.get("watermark", 0),
        "quarantined": w.quarantined,
    }


def _completeness_at_read(policy: Completeness, state: LandingState, at_read: dict,
                          end_ms: int) -> tuple[bool, int | None]:
    """Whether the window was complete, and the global watermark, as of when raw_messages read
    the landing: a landing since then may have closed the window with events this run has
    not seen."""
    wm = at_read.get("global_watermark_ts_at_read", state.global_watermark_ts(policy) or -1)
    complete = bool(at_read.get("window_complete_at_read", state.is_complete(end_ms, policy)))
    return complete, None if wm == -1 else wm


def _quarantine_checks(b: SourceBuild, key, w: DecodedWindow):
    yield AssetCheckResult(
        asset_key=key, check_name=QUARANTINE_CHECK,
        passed=w.quarantined == w.no_change_records, severity=AssetCheckSeverity.WARN,
        metadata={"quarantined": w.quarantined, "no_change_records": w.no_change_records,
                  "by_reason": MetadataValue.json(w.reasons)},
    )
    yield AssetCheckResult(
        asset_key=key, check_name=QUARANTINE_RATE_CHECK,
        passed=w.quarantine_rate <= b.source.max_quarantine_rate, severity=AssetCheckSeverity.ERROR,
        metadata={"messages": w.messages, "no_change_messages": w.no_change_messages,
                  "quarantined_messages": w.quarantined_messages,
                  "rate": MetadataValue.float(round(w.quarantine_rate, 6)),
                  "max_rate": MetadataValue.float(b.source.max_quarantine_rate)},
    )
