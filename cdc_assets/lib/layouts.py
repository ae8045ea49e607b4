"""Readers for the dump layouts users land Kafka topics in, all to `RAW_MESSAGE_SCHEMA`.

- `kafka-parquet`: Parquet written by Spark's Kafka source (key, value, topic, partition,
  offset, timestamp, timestampType).
- `kcat-jsonl`: `kcat -C -J` lines (topic, partition, offset, ts, key, payload). A line
  that is not a kcat record is kept (value = the line) under partition -1, so it is
  quarantined downstream instead of being dropped.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F, types as T

from cdc_assets.lib.changelog_schema import RAW_MESSAGE_SCHEMA

LAYOUT_EXTENSIONS = {"kafka-parquet": (".parquet",), "kcat-jsonl": (".jsonl", ".json")}
LAYOUTS = tuple(LAYOUT_EXTENSIONS)
UNPARSED_TOPIC = "__unparsed__"

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


def list_dump_files(root: Path, layout: str) -> list[Path]:
    exts = LAYOUT_EXTENSIONS[layout]
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.suffix in exts and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)
    )


def detect_layout(root: Path) -> str:
    counts = {layout: len(list_dump_files(root, layout)) for layout in LAYOUTS}
    found = [layout for layout, n in counts.items() if n]
    if len(found) != 1:
        raise ValueError(
            f"cannot detect the dump layout under {root}: files per layout {counts}; "
            f"pass the layout explicitly (one of {', '.join(LAYOUTS)})"
        )
    return found[0]


def read_dump(spark: SparkSession, files: list[Path], layout: str) -> DataFrame:
    paths = [str(p) for p in files]
    if layout == "kafka-parquet":
        df = spark.read.parquet(*paths)
        return df.select(
            F.col("topic").cast("string").alias("topic"),
            F.col("partition").cast("int").alias("kafka_partition"),
            F.col("offset").cast("long").alias("kafka_offset"),
            F.col("timestamp").cast("timestamp").alias("kafka_timestamp"),
            F.col("key").cast("binary").alias("key"),
            F.col("value").cast("binary").alias("value"),
            F.col("_metadata.file_path").alias("source_file"),
        )
    if layout == "kcat-jsonl":
        lines = spark.read.text(paths).select(
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
    raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
