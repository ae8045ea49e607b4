"""Parquet written by Spark's Kafka source: key, value, topic, partition, offset, timestamp."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F

from cdc_assets.lib.layouts.base import DumpLayout


class KafkaParquetLayout(DumpLayout):
    name = "kafka-parquet"
    extensions = (".parquet",)

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        df = spark.read.parquet(*[str(p) for p in files])
        return df.select(
            F.col("topic").cast("string").alias("topic"),
            F.col("partition").cast("int").alias("kafka_partition"),
            F.col("offset").cast("long").alias("kafka_offset"),
            F.col("timestamp").cast("timestamp").alias("kafka_timestamp"),
            F.col("key").cast("binary").alias("key"),
            F.col("value").cast("binary").alias("value"),
            F.col("_metadata.file_path").alias("source_file"),
        )
