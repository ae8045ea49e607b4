"""Dump layouts users land Kafka topics in, all read into `RAW_MESSAGE_SCHEMA`.

One module per layout behind `DumpLayout`; `LAYOUTS` maps names to layouts.
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

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from cdc_assets.lib.layouts.base import UNPARSED_TOPIC, DumpLayout
from cdc_assets.lib.layouts.kafka_connect_s3 import KafkaConnectS3Layout
from cdc_assets.lib.layouts.kafka_parquet import KafkaParquetLayout
from cdc_assets.lib.layouts.kcat_jsonl import KcatJsonlLayout
from cdc_assets.lib.layouts.lines import LinesLayout
from cdc_assets.lib.layouts.storage_sink import StorageSinkLayout

LAYOUT_CLASSES: dict[str, DumpLayout] = {
    layout.name: layout
    for layout in (KafkaParquetLayout(), KcatJsonlLayout(), LinesLayout(), StorageSinkLayout(),
                   KafkaConnectS3Layout())
}
LAYOUTS = tuple(LAYOUT_CLASSES)


def get_layout(name: str) -> DumpLayout:
    try:
        return LAYOUT_CLASSES[name]
    except KeyError:
        raise ValueError(f"unknown layout {name!r}; known: {', '.join(LAYOUTS)}") from None


def list_dump_files(root: Path, layout: str) -> list[Path]:
    return get_layout(layout).list_files(root)


def detect_layout(root: Path) -> str:
    """The one layout whose files are present. Layouts known by their own names win over
    those known by extension: storage-sink (its `metadata` file or its schema files: its data
    files are `.json` lines, as kcat's may be), then kafka-connect-s3 when every file another
    layout would read is one of its `<topic>+<partition>+<offset>.<ext>` objects."""
    if StorageSinkLayout().is_present(root):
        return StorageSinkLayout.name
    counts = {name: len(layout.list_files(root)) for name, layout in LAYOUT_CLASSES.items()
              if name != StorageSinkLayout.name}
    connect = set(KafkaConnectS3Layout().list_files(root))
    others = {p for name, layout in LAYOUT_CLASSES.items()
              if name not in (StorageSinkLayout.name, KafkaConnectS3Layout.name) for p in layout.list_files(root)}
    if connect and others <= connect:
        return KafkaConnectS3Layout.name
    found = [name for name, n in counts.items() if n and name != KafkaConnectS3Layout.name]
    if len(found) != 1 or connect:
        raise ValueError(
            f"cannot detect the dump layout under {root}: files per layout {counts}; "
            f"pass the layout explicitly (one of {', '.join(LAYOUTS)})"
        )
    return found[0]


def read_dump(spark: SparkSession, files: list[Path], layout: str, root: Path) -> DataFrame:
    return get_layout(layout).read(spark, files, root)


__all__ = ["LAYOUTS", "UNPARSED_TOPIC", "DumpLayout", "KafkaConnectS3Layout", "detect_layout", "get_layout", "list_dump_files", "read_dump"]
