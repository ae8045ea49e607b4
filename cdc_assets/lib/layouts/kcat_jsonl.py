"""`kcat -C -J` output: one JSON record per line with topic, partition, offset, ts, key, payload.

kcat prints the payload as text, so only text protocols survive it (binary Open
Protocol frames or Avro need the Parquet layout). A line that is not a kcat record is
kept (value = the line) under partition -1 and quarantined downstream.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F, types as T

from cdc_assets.lib.changelog_schema import RAW_MESSAGE_SCHEMA
from cdc_assets.lib.layouts.base import UNPARSED_TOPIC, DumpLayout

_KCAT_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("ts", T.LongType()),
        T.StructField("key", T.StringType()),
        T.StructField("payload", T.StringType()),
    ]
)


class KcatJsonlLayout(DumpLayout):
    name = "kcat-jsonl"
    extensions = (".jsonl", ".json")

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        lines = spark.read.text([str(p) for p in files]).select(
            F.col("value").alias("line"), F.col("_metadata.file_path").alias("source_file")
        )
        rec = F.from_json("line", _KCAT_SCHEMA)
        ok = rec.isNotNull() & rec["topic"].isNotNull() & rec["partition"].isNotNull() & rec["offset"].isNotNull()
        parsed = lines.select("*", rec.alias("r")).where(F.length("line") > 0)
        return parsed.select(
            F.when(ok, F.col("r.topic")).otherwise(F.lit(UNPARSED_TOPIC)).alias("topic"),
            F.when(ok, F.col("r.partition")).otherwise(F.lit(-1)).alias("kafka_partition"),
            # An unparsable line gets a stable pseudo-offset so re-landing stays idempotent.
            F.when(ok, F.col("r.offset")).otherwise(F.xxhash64("source_file", "line")).alias("kafka_offset"),
            F.when(ok, F.timestamp_millis(F.col("r.ts"))).alias("kafka_timestamp"),
            F.when(ok, F.encode(F.col("r.key"), "UTF-8")).alias("key"),
            F.when(ok, F.encode(F.col("r.payload"), "UTF-8")).otherwise(F.encode("line", "UTF-8")).alias("value"),
            "source_file",
        ).select(*[f.name for f in RAW_MESSAGE_SCHEMA.fields])
