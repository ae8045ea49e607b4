"""Plain files with one message per line (LF or CRLF): topic = the file's name, partition 0,
offset = (line number) — each file is its own ordered stream."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F

from cdc_assets.lib.layouts.base import DumpLayout
from cdc_assets.lib.layouts.line_files import read_line_files


class LinesLayout(DumpLayout):
    name = "lines"
    extensions = (".txt", ".ndjson", ".log")

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        file_name = F.regexp_extract(F.col("source_file"), r"([^/]+)$", 1)
        return read_line_files(spark, files, topic=file_name, partition=F.lit(0), file_number=F.lit(0))
