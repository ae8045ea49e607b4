"""Everything the asset builders of one source need (one set of assets per source)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dagster import AssetCheckSpec, AssetKey, AssetSpec, TimeWindowPartitionsDefinition

from cdc_assets.common.settings import Settings, SourceConfig
from cdc_assets.decode import Decoder, get_decoder
from cdc_assets.landing.input_files import local_dump_root
from cdc_assets.landing.layouts import AUTO_LAYOUT, DumpLayout, Layout, check_layout_options, detect_layout, get_layout
from cdc_assets.landing.s3_input import is_s3_uri
from cdc_assets.landing.source_config import checked_source
from cdc_assets.landing.state import AUTO_COMPLETENESS, Completeness, CompletenessMode

LANDED, RAW, QUARANTINE, CHANGE_TABLE, SNAPSHOTS, HISTORY = (
    "landed_dump", "raw_messages", "quarantine", "change_table", "snapshots", "history",
)
# The Definitions' key of `resources.IcebergIOManager`: what a layer's output is written with.
ICEBERG_IO_MANAGER = "iceberg_io_manager"
# The key of `landing_view_io.LandingViewIOManager`: the raw layer, a pinned view of the landing.
LANDING_VIEW_IO_MANAGER = "landing_view_io_manager"
# The raw layer stores no messages: its table `<source>.window_reads` records each window's read
# of landed_messages (landing_view_io.py). Every other layer's table is named after it.
WINDOW_READS = "window_reads"
LAYER_TABLES = {RAW: WINDOW_READS}


@dataclass(frozen=True)
class SourceBuild:
    settings: Settings
    source: SourceConfig
    partitions_def: TimeWindowPartitionsDefinition

    def __post_init__(self) -> None:
        # An unknown protocol, layout or completeness fails here, when the definitions load.
        object.__setattr__(self, "source", checked_source(self.source))

    @property
    def group(self) -> str:
        return self.source.name

    def key(self, layer: str) -> AssetKey:
        return AssetKey([self.source.name, layer])

    def decoder(self) -> Decoder:
        return get_decoder(self.source.protocol, {"time-zone": self.source.time_zone, **self.source.options})

    def completeness(self) -> Completeness:
        mode = self.source.completeness
        if mode == AUTO_COMPLETENESS:
            # The storage sink's checkpoint-ts is a watermark whatever the protocol.
            has_marks = self.decoder().emits_watermarks() or self._layout_or_none() == Layout.STORAGE_SINK
            mode = CompletenessMode.WATERMARK if has_marks else CompletenessMode.EVENT_TIME
        return Completeness(mode, self.source.allowed_lateness_seconds * 1000)

    @property
    def is_s3(self) -> bool:
        return is_s3_uri(self.source.input_path)

    @property
    def dump_root(self) -> Path:
        """The local folder landing reads (for an S3 source: the mirror of its prefix)."""
        return local_dump_root(self.source, self.settings.iceberg_warehouse)

    def _layout_or_none(self) -> Layout | None:
        try:
            return self.layout()
        except (ValueError, OSError):
            return None  # no dump yet: nothing to detect

    def layout(self) -> Layout:
        return detect_layout(self.dump_root) if self.source.layout == AUTO_LAYOUT else self.source.layout

    def dump_layout(self) -> DumpLayout:
        """The layout with the source's layout options."""
        return get_layout(self.layout(), self.source.layout_options)

    def check_layout_options(self) -> None:
        check_layout_options(self.source.layout, self.source.layout_options)

    @property
    def tags(self) -> dict[str, str]:
        return {"protocol": str(self.source.protocol)}

    def in_windows(self) -> dict:
        """Where an asset (or a multi-asset) of a windowed layer belongs: `@asset(**b.in_windows(), ...)`."""
        return {"partitions_def": self.partitions_def, "group_name": self.group}

    def layer_asset(self, layer: str, description: str) -> dict:
        """What every asset of an Iceberg layer is declared with, in `@asset`, `AssetOut` and
        `AssetSpec` alike: its key, its kinds, the source's tags, and `description`."""
        return {"key": self.key(layer), "kinds": {"spark", "iceberg"}, "tags": self.tags, "description": description}

    def layer_spec(self, layer: str, description: str, deps: list[AssetKey]) -> AssetSpec:
        """A windowed layer that a range step writes itself, one window at a time
        (`range_reporting.py`): one window's partition of the Iceberg table `<source>.<layer>`, or
        for the raw layer the window's read of the landing area. Its IO manager only loads it
        for the steps downstream (`LandingViewIOManager`, `IcebergIOManager`)."""
        io_manager = LANDING_VIEW_IO_MANAGER if layer == RAW else ICEBERG_IO_MANAGER
        return AssetSpec(**self.layer_asset(layer, description), **self.in_windows(),
                         deps=deps).with_io_manager_key(io_manager)

    def window_check(self, name: str, layer: str, description: str, blocking: bool = False) -> AssetCheckSpec:
        """A check of a windowed layer, partitioned like it: the UI shows pass/fail per window."""
        return AssetCheckSpec(name, asset=self.key(layer), partitions_def=self.partitions_def, blocking=blocking,
                              description=description)
