"""Shared reader for files holding one message per line (plain files, storage sink, kcat)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, functions as F

from cdc_assets.contracts.schemas import RAW_MESSAGE_SCHEMA

# Line numbers fit in the low bits of the pseudo-offset; the file number in the high bits
# keeps offsets increasing across a table's files.
LINE_BITS = 24

# One character per byte and back: lines keep their exact bytes (invalid UTF-8 included,
# which Spark's text source would silently replace with U+FFFD).
BYTES_AS_TEXT = "ISO-8859-1"


def whole_files(spark: SparkSession, files: list[Path]) -> DataFrame:
    """One row per file: `content` (binary), `source_file` (Spark's file URI)."""
    return spark.read.format("binaryFile").load([str(p) for p in files]).select(
        F.col("content"), F.col("_metadata.file_path").alias("source_file"),
    )


def file_lines(spark: SparkSession, files: list[Path]) -> DataFrame:
    """One row per non-blank line of `files`, split on LF with one trailing CR removed:
    `source_file`, `line_no` (0-based, blank lines counted), `line` (binary)."""
    return content_lines(whole_files(spark, files))


def content_lines(contents: DataFrame) -> DataFrame:
    """`file_lines` of rows of `content` (binary) and `source_file` (e.g. decompressed files)."""
    exploded = contents.select(
        "source_file",
        F.posexplode(F.split(F.decode("content", BYTES_AS_TEXT), "\n")).alias("line_no", "text"),
    )
    # `\z`, not `$`: Java's `$` also matches before a final U+0085, which is byte 0x85 here.
    text = F.regexp_replace("text", r"\r\z", "")
    return exploded.where(F.length(F.trim(text)) > 0).select(
        "source_file", "line_no", F.encode(text, BYTES_AS_TEXT).alias("line"),
    )


def read_line_files(spark: SparkSession, files: list[Path], topic: Column, partition: Column,
                    file_number: Column) -> DataFrame:
    """One row per non-empty line (LF or CRLF terminated), value = the line's bytes.

    `topic`, `partition` and `file_number` are expressions over `source_file`.
    """
    lines = file_lines(spark, files)
    return lines.select(
        topic.alias("topic"),
        partition.cast("int").alias("kafka_partition"),
        (F.shiftleft(file_number.cast("long"), LINE_BITS) + F.col("line_no")).alias("kafka_offset"),
        # No Kafka timestamp: a file's mtime tells when it was written or copied, not when its
        # messages were produced. A message without a time of its own then joins the earliest
        # window of its landing batch (and is quarantined there) instead of today's window.
        F.lit(None).cast("timestamp").alias("kafka_timestamp"),
        F.lit(None).cast("binary").alias("key"),
        F.col("line").alias("value"),
        "source_file",
    ).select(*[f.name for f in RAW_MESSAGE_SCHEMA.fields])


def python_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """`file_lines` in plain Python: (line_no, line) per non-blank line of one file."""
    for line_no, line in enumerate(path.read_bytes().split(b"\n")):
        line = line[:-1] if line.endswith(b"\r") else line
        if line.strip():
            yield line_no, line
