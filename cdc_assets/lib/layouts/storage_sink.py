"""TiCDC storage sink (canal-json):

  <root>/metadata                                   {"checkpoint-ts": <tso>}
  <root>/<schema>/<table>/<table-version>[/<partition>][/<date>]/CDC<n>.json
  <root>/<schema>/<table>/<table-version>/meta/schema_<version>_<hash>.json   (not needed: canal-json
                                                                               carries its types)
  .../meta/CDC.index                                (not needed)

Only `CDC<n>.json` files are data; only the `meta` folder directly under a table version is
skipped (a database or table may itself be named `meta`, or start with `_`).

Each data folder is one ordered stream: topic = its path below the root (without the
partition folder), partition = the partition folder's number (0 without one), offset =
(file number << 24) | line. The checkpoint-ts is a watermark for every stream.
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePath

from pyspark.sql import DataFrame, SparkSession, functions as F

from cdc_assets.lib.layouts.base import DumpLayout, relative_path
from cdc_assets.lib.layouts.line_files import read_line_files

_DATA_FILE = r"^CDC(\d+)\.json$"
_DATA_FILE_NAME = re.compile(r"CDC\d+\.json")


class StorageSinkLayout(DumpLayout):
    name = "storage-sink"
    extensions = (".json",)

    def is_present(self, root: Path) -> bool:
        return (root / "metadata").is_file()

    def is_data_file(self, relative: PurePath) -> bool:
        parts = relative.parts
        in_version_meta = len(parts) > 4 and parts[3] == "meta"  # <schema>/<table>/<version>/meta/...
        return (super().is_data_file(relative) and _DATA_FILE_NAME.fullmatch(relative.name) is not None
                and not in_version_meta)

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        rel = relative_path(F.col("source_file"), root)
        folder = F.regexp_extract(rel, r"^(.*)/[^/]+$", 1)
        # <schema>/<table>/<version>[/<partition>][/<date>]: a purely numeric 4th part is the partition.
        parts = F.split(folder, "/")
        fourth = F.try_element_at(parts, F.lit(4))
        fourth_number = F.when(fourth.rlike(r"^[0-9]+$"), fourth.try_cast("int"))
        has_partition = fourth_number.isNotNull()
        partition = F.coalesce(fourth_number, F.lit(0))
        topic = F.when(
            has_partition,
            F.concat_ws("/", F.slice(parts, 1, 3), F.slice(parts, 5, 100)),
        ).otherwise(folder)
        number = F.regexp_extract(F.regexp_extract(rel, r"([^/]+)$", 1), _DATA_FILE, 1).try_cast("long")
        return read_line_files(spark, files, topic=topic, partition=partition, file_number=number)

    def checkpoint_ts(self, root: Path) -> int | None:
        meta = root / "metadata"
        if not meta.is_file():
            return None
        try:
            return int(json.loads(meta.read_text())["checkpoint-ts"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{meta}: expected {{\"checkpoint-ts\": <tso>}} ({exc})") from None

