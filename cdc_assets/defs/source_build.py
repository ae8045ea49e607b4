"""Everything the asset builders of one source need (one set of assets per source)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dagster import AssetKey, TimeWindowPartitionsDefinition

from cdc_assets.decode import Decoder, get_decoder
from cdc_assets.landing.input_files import local_dump_root
from cdc_assets.landing.layouts import AUTO_LAYOUT, DumpLayout, Layout, check_layout_options, detect_layout, get_layout
from cdc_assets.landing.s3_input import is_s3_uri
from cdc_assets.landing.source_config import checked_source
from cdc_assets.common.settings import Settings, SourceConfig
from cdc_assets.landing.state import AUTO_COMPLETENESS, Completeness, CompletenessMode

LANDED, RAW, CHANGE_LOG, QUARANTINE, CHANGE_TABLE, SNAPSHOTS, HISTORY = (
    "landed_dump", "raw_messages", "change_log", "quarantine", "change_table", "snapshots", "history",
)


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
