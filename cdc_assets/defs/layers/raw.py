"""Layer 1: the raw messages of a commitTs window, with lineage: a pinned view of the landing
area (defs/landing_view_io.py records the read, not the rows).

Written by the decode-and-align step (layers/change_table.py): each window's read is pinned
before its group of windows is decoded (which reads the messages at the pinned snapshots) and
recorded just before the window is written, so that a run that stops records no read it did
not use."""


from dagster import AssetSpec

from cdc_assets.defs.landing_view_io import record_read_output
from cdc_assets.defs.partitions import window_bounds_ms
from cdc_assets.defs.resources import WarehouseResource
from cdc_assets.defs.source_build import LANDED, RAW, SourceBuild
from cdc_assets.landing.tables import load_state
from cdc_assets.landing.window_messages import WindowRead, pin_window_read


def raw_messages_spec(b: SourceBuild) -> AssetSpec:
    return b.layer_spec(
        RAW, "Kafka messages whose routing time (commitTs, watermark ts, else event time) falls "
        "in the window; key/value bytes untouched; one row per (topic, partition, offset). "
        "A view: the window's rows of landed_messages at the snapshot its read pinned "
        "(recorded in <source>.window_reads).", deps=[b.key(LANDED)])


def pin_read(b: SourceBuild, warehouse: WarehouseResource, partition: str) -> tuple[WindowRead, dict]:
    """Pin the window's read of the landing (not recorded yet: `record_read`); returns it and
    its figures."""
    start_ms, end_ms = window_bounds_ms(b.partitions_def, partition)
    # The messages read are those of the batches this state lists (a landing commits its
    # state last), so the completeness it shows covers exactly what is read.
    state, policy = load_state(warehouse.iceberg, b.source.name), b.completeness()
    wm = state.global_watermark_ts(policy)
    # No Spark job: the rows and copies are counted on the offset columns with pyiceberg.
    read = pin_window_read(warehouse.iceberg, b.source.name, start_ms, state)
    return read, {
        "messages_in": read.landed,
        "messages_out": read.messages,
        "redelivered_offsets_dropped": read.redelivered,
        "window_complete_at_read": state.is_complete(end_ms, policy),
        "global_watermark_ts_at_read": wm if wm is not None else -1,
    }


def record_read(b: SourceBuild, warehouse: WarehouseResource, read: WindowRead, figures: dict) -> dict:
    """Record a pinned read (raw_messages' materialization); returns its metadata."""
    return {**figures, **record_read_output(warehouse.iceberg, b.source.name, read, figures)}
