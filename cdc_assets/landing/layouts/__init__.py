"""Dump layouts users land Kafka topics in, all read into `RAW_MESSAGE_SCHEMA`.

One module per layout behind `DumpLayout`; `LAYOUTS` maps names to layouts. A layout may take
options (`DumpLayout.default_options`, the writer's own names: `get_layout(name, options)`).
- `kafka-parquet`: Parquet written by Spark's Kafka source.
- `kcat-jsonl`: `kcat -C -J` lines (binary payloads too: kcat copies their bytes).
- `lines`: plain files with one message per line (LF or CRLF), e.g. exported samples.
- `storage-sink`: TiCDC's storage sink folders (canal-json files per table version, the
  schema files whose statements are its only record of DDL, and the `metadata` file whose
  checkpoint-ts is a watermark for every table).
- `kafka-connect-s3`: Confluent's Kafka Connect S3 sink objects
  (`<topic>+<partition>+<start offset>.<ext>`, offsets from the names).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from cdc_assets.landing.layouts.base import UNPARSED_TOPIC, DumpLayout, SampledMessage, check_options
from cdc_assets.landing.layouts.kafka_connect_s3 import KafkaConnectS3Layout
from cdc_assets.landing.layouts.kafka_parquet import KafkaParquetLayout
from cdc_assets.landing.layouts.kcat_jsonl import KcatJsonlLayout
from cdc_assets.landing.layouts.lines import LinesLayout
from cdc_assets.landing.layouts.storage_sink import StorageSinkLayout

LAYOUT_CLASSES: dict[str, DumpLayout] = {
    layout.name: layout
    for layout in (KafkaParquetLayout(), KcatJsonlLayout(), LinesLayout(), StorageSinkLayout(),
                   KafkaConnectS3Layout())
}
LAYOUTS = tuple(LAYOUT_CLASSES)
# The layout names a source may declare (`kafka-parquet`: KAFKA_PARQUET); `auto` detects one.
Layout = StrEnum("Layout", {name.upper().replace("-", "_"): name for name in LAYOUTS})
AUTO_LAYOUT = "auto"


def layout_named(name: str) -> Layout:
    """The registered layout `name`; a ValueError naming the known ones."""
    try:
        return Layout(name)
    except ValueError:
        raise ValueError(f"unknown layout {name!r}; known: {', '.join(LAYOUTS)}") from None


def get_layout(name: str, options: Mapping[str, str] | None = None) -> DumpLayout:
    """The layout `name`, with `options` (ValueError naming an unknown one and the known)."""
    layout = LAYOUT_CLASSES[layout_named(name)]
    return type(layout)(options) if options else layout


def check_layout_options(name: str, options: Mapping[str, str] | None) -> None:
    """Fail early on an option no layout would take: with `auto`, one that no layout knows
    (the detected layout checks its own when the dump is read)."""
    if name != AUTO_LAYOUT:
        get_layout(name, options)
    elif options:
        known = {o: v for layout in LAYOUT_CLASSES.values() for o, v in layout.default_options.items()}
        check_options(AUTO_LAYOUT, known, options)


def list_dump_files(root: Path, layout: str) -> list[Path]:
    return get_layout(layout).list_files(root)


def sniff_layouts(root: Path) -> dict[str, str]:
    """Each layout the dump under `root` looks like -> why (`DumpLayout.sniff`), without the
    layouts a sniffed one shadows."""
    found = {name: why for name, layout in LAYOUT_CLASSES.items() if (why := layout.sniff(root)) is not None}
    shadowed = {s for name in found for s in LAYOUT_CLASSES[name].shadowed(root)}
    return {name: why for name, why in found.items() if name not in shadowed}


def detect_layout(root: Path) -> Layout:
    """The one layout the dump under `root` looks like; several or none is an error naming
    them (never a guess)."""
    found = sniff_layouts(root)
    if len(found) != 1:
        if found:
            seen = f"it looks like {len(found)} layouts ({'; '.join(f'{n}: {why}' for n, why in found.items())})"
        else:
            kinds = ", ".join(f"{n} {'/'.join(lay.extensions)}" for n, lay in LAYOUT_CLASSES.items())
            seen = f"no file of any layout ({kinds})"
        raise ValueError(f"cannot detect the dump layout under {root}: {seen}; "
                         f"pass the layout explicitly (one of {', '.join(LAYOUTS)})")
    return Layout(next(iter(found)))


def read_dump(spark: SparkSession, files: list[Path], layout: str, root: Path,
              options: Mapping[str, str] | None = None) -> DataFrame:
    return get_layout(layout, options).read(spark, files, root)


__all__ = ["AUTO_LAYOUT", "LAYOUTS", "UNPARSED_TOPIC", "DumpLayout", "KafkaConnectS3Layout", "Layout", "SampledMessage",
           "check_layout_options", "detect_layout", "get_layout", "layout_named", "list_dump_files", "read_dump",
           "sniff_layouts"]
