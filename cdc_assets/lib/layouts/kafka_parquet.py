"""Parquet written by Spark's Kafka source: key, value, topic, partition, offset, timestamp.

Streaming jobs often write it with `partitionBy("topic", "partition")`: those columns are then
folder names (`topic=orders/partition=3/part-….parquet`), not in the files. A column missing
from the files is taken from such a folder; `topic` without one is the file's folder below the
root, `partition` 0; `key` and `timestamp` may be missing (null). Without `value` or `offset`
there is nothing to read, and the landing stops with that reason.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession, functions as F

from cdc_assets.lib.layouts.base import DumpLayout, relative_path


class KafkaParquetLayout(DumpLayout):
    name = "kafka-parquet"
    extensions = (".parquet",)

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        df = spark.read.parquet(*[str(p) for p in files])
        missing = [c for c in ("value", "offset") if c not in df.columns]
        if missing:
            raise ValueError(f"kafka-parquet files under {root} have no {' or '.join(missing)} column "
                             f"(columns: {', '.join(df.columns)}); expected Spark's Kafka source schema")
        rel = relative_path(F.col("_metadata.file_path"), root)
        folder = F.regexp_extract(rel, r"^(.*)/[^/]+$", 1)
        topic = _column_or_folder(df, rel, "topic", folder)
        partition = _column_or_folder(df, rel, "partition", F.lit(0))
        optional = lambda c: F.col(c) if c in df.columns else F.lit(None)  # noqa: E731
        return df.select(
            topic.cast("string").alias("topic"),
            F.coalesce(partition.try_cast("int"), F.lit(0)).alias("kafka_partition"),
            F.col("offset").cast("long").alias("kafka_offset"),
            optional("timestamp").cast("timestamp").alias("kafka_timestamp"),
            optional("key").cast("binary").alias("key"),
            F.col("value").cast("binary").alias("value"),
            F.col("_metadata.file_path").alias("source_file"),
        )


def _column_or_folder(df: DataFrame, rel: Column, name: str, otherwise: Column) -> Column:
    """The column, else the value of a `name=value` folder (Hive-style, %-escaped), else `otherwise`."""
    if name in df.columns:
        return F.col(name)
    escaped = F.regexp_extract(rel, rf"(?:^|/){name}=([^/]*)/", 1)
    value = F.coalesce(F.try_url_decode(F.replace(escaped, F.lit("+"), F.lit("%2B"))), escaped)
    return F.when(escaped != "", value).otherwise(otherwise)
