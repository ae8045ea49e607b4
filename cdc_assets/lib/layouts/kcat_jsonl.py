"""`kcat -C -J` output: one JSON record per line with topic, partition, offset, ts, key, payload.

kcat prints the payload as text, so only text protocols survive it (binary Open
Protocol frames or Avro need the Parquet layout). A line that is not a kcat record is
kept (value = the line's exact bytes) under partition -1 and quarantined downstream.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, functions as F, types as T

from cdc_assets.lib.changelog_schema import RAW_MESSAGE_SCHEMA
from cdc_assets.lib.layouts.base import UNPARSED_TOPIC, DumpLayout
from cdc_assets.lib.layouts.line_files import file_lines

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

# A Kafka timestamp outside 1970..2200 is garbage (and a huge one overflows Spark's
# timestamp): the message is kept with a null timestamp.
_MIN_TS_MS = 0
_END_TS_MS = int(dt.datetime(2201, 1, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)


class KcatJsonlLayout(DumpLayout):
    name = "kcat-jsonl"
    extensions = (".jsonl", ".json")

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        # Binary -> string keeps the bytes; the JSON parser would replace invalid UTF-8 with
        # U+FFFD, so such a line is not a (text) kcat record: it is kept as is, unparsed.
        text = F.col("line").cast("string")
        parsed = file_lines(spark, files).select("*", F.from_json(text, _KCAT_SCHEMA).alias("r"))
        r = F.col("r")
        ok = (F.is_valid_utf8(text) & r.isNotNull() & r["topic"].isNotNull() & r["partition"].isNotNull()
              & r["offset"].isNotNull())
        ts_ok = ok & (r["ts"] >= _MIN_TS_MS) & (r["ts"] < _END_TS_MS)
        return parsed.select(
            F.when(ok, r["topic"]).otherwise(F.lit(UNPARSED_TOPIC)).alias("topic"),
            F.when(ok, r["partition"]).otherwise(F.lit(-1)).alias("kafka_partition"),
            # An unparsable line gets a stable pseudo-offset (re-landing stays idempotent) that
            # includes its position, so identical garbage lines are not taken for redeliveries.
            F.when(ok, r["offset"]).otherwise(F.xxhash64("source_file", "line_no", "line")).alias("kafka_offset"),
            F.when(ts_ok, F.timestamp_millis(r["ts"])).alias("kafka_timestamp"),
            F.when(ok, F.encode(r["key"], "UTF-8")).alias("key"),
            F.when(ok, F.encode(r["payload"], "UTF-8")).otherwise(F.col("line")).alias("value"),
            "source_file",
        ).select(*[f.name for f in RAW_MESSAGE_SCHEMA.fields])
