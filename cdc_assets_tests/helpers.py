"""Test helpers: raw message frames from bytes, decoding to plain dicts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, functions as F

from cdc_assets.align.change_table import AlignmentCounts, alignment_counts, alignment_metrics
from cdc_assets.contracts.schemas import RAW_MESSAGE_SCHEMA, REJECT_REASON
from cdc_assets.decode import get_decoder


def raw_frame(spark: SparkSession, values: list[bytes | None], topic: str = "t", partition: int = 0,
              keys: list[bytes | None] | None = None) -> DataFrame:
    keys = keys or [None] * len(values)
    ts = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    rows = [(topic, partition, i, ts, k, v, "test") for i, (k, v) in enumerate(zip(keys, values))]
    return spark.createDataFrame(rows, RAW_MESSAGE_SCHEMA)


def crlf_records(data: bytes) -> list[bytes]:
    """Split a TiCDC storage-style file on its terminator, ignoring empty lines."""
    return [line for line in data.replace(b"\r\n", b"\n").split(b"\n") if line.strip()]


def decode(spark: SparkSession, values: list[bytes], protocol: str = "canal-json", **options):
    out = get_decoder(protocol, options or None).decode(raw_frame(spark, values))
    rows = out.orderBy("kafka_offset", "event_index").collect()
    good = [r.asDict(recursive=True) for r in rows if r[REJECT_REASON] is None]
    bad = [r.asDict(recursive=True) for r in rows if r[REJECT_REASON] is not None]
    return good, bad


def reasons(bad: list[dict]) -> list[str]:
    return [b[REJECT_REASON] for b in bad]


def count_alignment(marked: DataFrame) -> AlignmentCounts:
    """The alignment counts in a job of their own: the reference for what the pipeline
    observes (`alignment_metrics`) on the change table's write."""
    return alignment_counts(marked.agg(*alignment_metrics()).first().asDict())


# Parquet's names for a dictionary-encoded column chunk (v1 and v2 pages).
DICTIONARY_ENCODINGS = frozenset({"PLAIN_DICTIONARY", "RLE_DICTIONARY"})


def parquet_encodings(files: Iterable[Path]) -> dict[str, set[str]]:
    """Parquet column path -> every encoding its chunks use, over these files."""
    found: dict[str, set[str]] = {}
    for part in files:
        meta = pq.ParquetFile(part).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                column = meta.row_group(g).column(c)
                found.setdefault(column.path_in_schema, set()).update(column.encodings)
    return found


__all__ = ["raw_frame", "crlf_records", "decode", "reasons", "parquet_encodings",
           "DICTIONARY_ENCODINGS", "F"]


def layer_rows(warehouse: Path, source: str, layer: str, columns: tuple[str, ...] = ("*",)) -> list[dict]:
    """Every row of a windowed layer's Iceberg table (`<source>.<layer>`), read with pyiceberg."""
    from cdc_assets.common.warehouse import load_pyiceberg_catalog

    table = load_pyiceberg_catalog(warehouse).load_table((source, layer))
    return table.scan(selected_fields=columns).to_arrow().to_pylist()


def layer_commits(warehouse: Path, source: str, layer: str) -> list[dict]:
    """The newest commit summary of every window of a layer (its output metadata included)."""
    import json

    from cdc_assets.common.warehouse import load_pyiceberg_catalog
    from cdc_assets.common.window_commits import OUTPUT_METADATA_PROPERTY, WINDOW_PROPERTY

    table = load_pyiceberg_catalog(warehouse).load_table((source, layer))
    newest: dict[str, dict] = {}
    for s in sorted(table.metadata.snapshots, key=lambda s: s.sequence_number):
        props = s.summary.additional_properties if s.summary else {}
        if WINDOW_PROPERTY in props:
            newest[props[WINDOW_PROPERTY]] = {**props, "metadata": json.loads(props.get(OUTPUT_METADATA_PROPERTY, "{}"))}
    return [newest[w] for w in sorted(newest, key=int)]
