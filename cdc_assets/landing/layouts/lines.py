"""Plain files with one message per line (LF or CRLF): topic = the file's path below the
dump root, partition 0, offset = (line number) — each file is its own ordered stream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F

from cdc_assets.landing.layouts.base import DumpLayout, SampledMessage, relative_path
from cdc_assets.landing.layouts.line_files import python_lines, read_line_files


class LinesLayout(DumpLayout):
    name = "lines"
    extensions = (".txt", ".ndjson", ".log")

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        # The relative path, not the name: a/2026-01-01/events.log and b/.../events.log differ.
        topic = relative_path(F.col("source_file"), root)
        return read_line_files(spark, files, topic=topic, partition=F.lit(0), file_number=F.lit(0))

    def sample(self, files: list[Path], root: Path) -> Iterator[SampledMessage]:
        for path in files:
            topic = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
            for line_no, line in python_lines(path):
                yield SampledMessage(topic, 0, line_no, None, None, line, str(path))
