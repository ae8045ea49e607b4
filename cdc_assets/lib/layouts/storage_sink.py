"""TiCDC storage sink (canal-json):

  <root>/metadata                                   {"checkpoint-ts": <tso>}
  <root>/<schema>/<table>/<table-version>[/<partition>][/<date>]/CDC<n>.json
  <root>/<schema>/<table>/<table-version>/meta/schema_<version>_<hash>.json   (not needed: canal-json
                                                                               carries its types)

Each data folder is one ordered stream: topic = its path below the root (without the
partition folder), partition = the partition folder's number (0 without one), offset =
(file number << 24) | line. The checkpoint-ts is a watermark for every stream.
"""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F

from cdc_assets.lib.layouts.base import DumpLayout
from cdc_assets.lib.layouts.line_files import read_line_files

_DATA_FILE = r"^CDC(\d+)\.json$"


class StorageSinkLayout(DumpLayout):
    name = "storage-sink"
    extensions = (".json",)

    def is_present(self, root: Path) -> bool:
        return (root / "metadata").is_file()

    def list_files(self, root: Path) -> list[Path]:
        return [p for p in super().list_files(root) if p.name.startswith("CDC") and "meta" not in p.parts]

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        prefix = str(root.absolute()).rstrip("/") + "/"
        rel = F.regexp_replace(F.regexp_replace(F.col("source_file"), r"^file:", ""), "^" + _escape(prefix), "")
        folder = F.regexp_extract(rel, r"^(.*)/[^/]+$", 1)
        # <schema>/<table>/<version>[/<partition>][/<date>]: a purely numeric 4th part is the partition.
        parts = F.split(folder, "/")
        has_partition = (F.size(parts) >= 4) & F.element_at(parts, 4).rlike(r"^\d+$")
        partition = F.when(has_partition, F.element_at(parts, 4).cast("int")).otherwise(F.lit(0))
        topic = F.when(
            has_partition,
            F.concat_ws("/", F.slice(parts, 1, 3), F.slice(parts, 5, 100)),
        ).otherwise(folder)
        number = F.regexp_extract(F.regexp_extract(rel, r"([^/]+)$", 1), _DATA_FILE, 1).cast("long")
        return read_line_files(spark, files, topic=topic, partition=partition, file_number=number)

    def checkpoint_ts(self, root: Path) -> int | None:
        meta = root / "metadata"
        if not meta.is_file():
            return None
        try:
            return int(json.loads(meta.read_text())["checkpoint-ts"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{meta}: expected {{\"checkpoint-ts\": <tso>}} ({exc})") from None


def _escape(text: str) -> str:
    return "".join("\\" + c if c in r".^$*+?()[]{}|\\" else c for c in text)
