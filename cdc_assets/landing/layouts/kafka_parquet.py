"""Parquet written by Spark's Kafka source: key, value, topic, partition, offset, timestamp.

Streaming jobs often write it with `partitionBy("topic", "partition")`: those columns are then
folder names (`topic=orders/partition=3/part-….parquet`, %-escaped), not in the files. Where
the files have no value for them, the innermost such folder gives it (anywhere in the path,
the dump root's own folder included). `topic` without either is the dump root's folder name
(one stream per partition, not one per subfolder: dated folders hold one partition's
offsets), `partition` 0. A `partition=` folder that is not a number stays part of the topic. `key` and `timestamp`
may be missing (null). Without `value` or `offset` there is nothing to read, and the landing
stops with that reason.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from urllib.parse import unquote

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession, functions as F

from cdc_assets.landing.layouts.base import DumpLayout, SampledMessage, absolute_path, percent_decoded


class KafkaParquetLayout(DumpLayout):
    name = "kafka-parquet"
    extensions = (".parquet",)
    cut_files_readable = False

    def reads_other_names(self, path: Path) -> str | None:
        """Any file that starts like Parquet (`PAR1`) is read, whatever its name."""
        with path.open("rb") as f:
            head = f.read(4)
        return None if head == b"PAR1" else f"not a Parquet file (starts with {head!r}, not b'PAR1')"

    def is_complete(self, path: Path) -> bool:
        """A Parquet file is whole once its footer is written. Spark's streaming file sink
        writes its files in place, so a landing may see one mid-write (or left by a crash)."""
        try:
            pq.read_metadata(path)
        except (OSError, ValueError):  # pyarrow's ArrowInvalid is a ValueError
            return False
        return True

    def read(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        # Files with other columns (a backfill with `partition` next to files under
        # `partition=0/`) or types (int64 partitions, string keys) are read apart, each with
        # its own schema, and cast to one: one file's schema would null or ignore the others'
        # columns, and Spark's schema merging fails on types it cannot widen.
        groups: dict[tuple, list[Path]] = {}
        for path in files:
            schema = pq.read_schema(path)
            groups.setdefault(tuple(zip(schema.names, map(str, schema.types))), []).append(path)
        return functools.reduce(DataFrame.unionByName, [self._read_alike(spark, g, root) for g in groups.values()])

    def _read_alike(self, spark: SparkSession, files: list[Path], root: Path) -> DataFrame:
        df = spark.read.parquet(*[str(p) for p in files])
        missing = [c for c in ("value", "offset") if c not in df.columns]
        if missing:
            raise ValueError(f"kafka-parquet files under {root} have no {' or '.join(missing)} column "
                             f"(columns: {', '.join(df.columns)}; e.g. {', '.join(str(p) for p in files[:3])}); "
                             "expected Spark's Kafka source schema")
        topic, partition = _column(df, "topic").cast("string"), _column(df, "partition").try_cast("int")
        # Only when a path has such folders: Spark computes the path's values for every row
        # (shared subexpressions), which cost a third of reading a dump in Spark's usual layout.
        folders = {part.split("=", 1)[0] for f in files for part in Path(f).parts if "=" in part}
        if {"topic", "partition"} & folders:
            path = absolute_path(F.col("_metadata.file_path"))
            partition_folder = _folder_value(path, "partition")
            folder_partition = partition_folder.try_cast("int")
            topic = F.coalesce(topic, _folder_value(path, "topic"))
            # a `partition=` folder that is not a number: its own stream, never partition 0's offsets
            topic = F.when(partition.isNull() & partition_folder.isNotNull() & folder_partition.isNull(),
                           F.concat(F.coalesce(topic, F.lit(root.name)), F.lit("/partition="), partition_folder)
                           ).otherwise(topic)
            partition = F.coalesce(partition, folder_partition)
        return df.select(
            F.coalesce(topic, F.lit(root.name)).alias("topic"),
            F.coalesce(partition, F.lit(0)).alias("kafka_partition"),
            F.col("offset").cast("long").alias("kafka_offset"),
            _column(df, "timestamp").cast("timestamp").alias("kafka_timestamp"),
            _column(df, "key").cast("binary").alias("key"),
            F.col("value").cast("binary").alias("value"),
            F.col("_metadata.file_path").alias("source_file"),
        )


    def sample(self, files: list[Path], root: Path) -> Iterator[SampledMessage]:
        """As `read`, with pyarrow."""
        for path in files:
            try:
                pf = pq.ParquetFile(path)
            except (OSError, ValueError) as exc:  # pyarrow's errors name no file, or not always
                raise ValueError(f"{path}: not a readable Parquet file (cut short, or not Parquet): {exc}") from exc
            names = set(pf.schema_arrow.names)
            if not {"value", "offset"} <= names:
                raise ValueError(f"{path}: kafka-parquet files need a value and an offset column "
                                 f"(columns: {', '.join(sorted(names))}); expected Spark's Kafka source schema")
            yield from self._file_messages(pf, path, root)

    def _file_messages(self, pf: pq.ParquetFile, path: Path, root: Path) -> Iterator[SampledMessage]:
        """One file's messages; a read error names the file and the last message read."""
        last = None
        try:
            for last in self._messages(pf, path, root):
                yield last
        except (OSError, ValueError) as exc:
            where = (f"after partition {last.kafka_partition} offset {last.kafka_offset}" if last
                     else "before its first message")
            raise ValueError(f"{path}: cannot read this Parquet file {where}: {exc}") from exc

    def _messages(self, pf: pq.ParquetFile, path: Path, root: Path) -> Iterator[SampledMessage]:
        names = set(pf.schema_arrow.names)
        topic_folder, partition_folder = _python_folder(path, "topic"), _python_folder(path, "partition")
        folder_partition = int(partition_folder) if partition_folder and partition_folder.isdigit() else None
        columns = [c for c in ("topic", "partition", "offset", "timestamp", "key", "value") if c in names]
        for batch in pf.iter_batches(columns=columns):
            d = batch.to_pydict()
            for i in range(batch.num_rows):
                topic, partition = _get(d, "topic", i), _get(d, "partition", i)
                topic = str(topic) if topic is not None else topic_folder
                if partition is None and partition_folder is not None and folder_partition is None:
                    topic = f"{topic or root.name}/partition={partition_folder}"
                partition = int(partition) if partition is not None else folder_partition
                ts = _get(d, "timestamp", i)
                yield SampledMessage(
                    topic or root.name, 0 if partition is None else partition, int(d["offset"][i]),
                    int(ts.timestamp() * 1000) if isinstance(ts, datetime) else ts,
                    _bytes(_get(d, "key", i)), _bytes(d["value"][i]), str(path))


def _get(d: dict, name: str, i: int):
    return d[name][i] if name in d else None


def _bytes(v) -> bytes | None:
    return v.encode() if isinstance(v, str) else v


def _python_folder(path: Path, name: str) -> str | None:
    """`_folder_value` of a plain path."""
    m = re.match(rf"^.*/{name}=([^/]*)/", str(Path(path).absolute()))
    value = m.group(1) if m else ""
    return unquote(value) if value not in ("", "__HIVE_DEFAULT_PARTITION__") else None


def _column(df: DataFrame, name: str) -> Column:
    return F.col(name) if name in df.columns else F.lit(None)


def _folder_value(path: Column, name: str) -> Column:
    """The value of the innermost `name=value` folder of the absolute `path` (Hive-style,
    %-escaped), or null (also for Spark's folder of a null value)."""
    escaped = F.regexp_extract(path, rf"^.*/{name}=([^/]*)/", 1)
    return F.when((escaped != "") & (escaped != "__HIVE_DEFAULT_PARTITION__"), percent_decoded(escaped))
