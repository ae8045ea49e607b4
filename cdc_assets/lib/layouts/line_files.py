"""Shared reader for files holding one message per line (plain files, storage sink)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, functions as F

from cdc_assets.lib.changelog_schema import RAW_MESSAGE_SCHEMA

# Line numbers fit in the low bits of the pseudo-offset; the file number in the high bits
# keeps offsets increasing across a table's files.
LINE_BITS = 24


def read_line_files(spark: SparkSession, files: list[Path], topic: Column, partition: Column,
                    file_number: Column) -> DataFrame:
    """One row per non-empty line (LF or CRLF terminated), value = the line's bytes.

    `topic`, `partition` and `file_number` are expressions over `source_file`.
    """
    whole = spark.read.text([str(p) for p in files], wholetext=True).select(
        F.col("value").alias("content"), F.col("_metadata.file_path").alias("source_file"),
        F.col("_metadata.file_modification_time").alias("mtime"),
    )
    lines = whole.select(
        "source_file", "mtime", F.posexplode(F.split("content", "\r?\n")).alias("line_no", "line")
    ).where(F.length(F.trim("line")) > 0)
    return lines.select(
        topic.alias("topic"),
        partition.cast("int").alias("kafka_partition"),
        (F.shiftleft(file_number.cast("long"), LINE_BITS) + F.col("line_no")).alias("kafka_offset"),
        F.col("mtime").cast("timestamp").alias("kafka_timestamp"),
        F.lit(None).cast("binary").alias("key"),
        F.encode("line", "UTF-8").alias("value"),
        "source_file",
    ).select(*[f.name for f in RAW_MESSAGE_SCHEMA.fields])
