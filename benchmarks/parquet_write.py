"""How the benchmarks' Spark engine writes its plain-Parquet layers: dictionary encoding only
where it can pay (the pipeline's layers are Iceberg tables, written with Iceberg's defaults).

Parquet's writer dictionary-encodes every column until a column chunk's dictionary
outgrows its page, then falls back to plain encoding for the rest of the chunk. The
values of the change-log images (`before` / `after`) and the raw message bytes (`value`)
are nearly all distinct, so their dictionary always overflows, and with the small row
groups `spark_config` sets (see there) it does so again in every row group: on a
1M-event change log that was about a third of the write time, for files only a few
percent smaller. Those columns are written plain. Every other column keeps the
dictionary: names, kinds, the images' keys, `column_types` (a handful of type texts), the
typed snapshot columns.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, DataFrameWriter, types as T

_IMAGES = ("before", "after")
_RAW_BYTES = "value"


def _plain_paths(schema: T.StructType) -> list[str]:
    """Parquet column paths of the image values and the raw message bytes present in `schema`."""
    paths = []
    for f in schema.fields:
        if f.name in _IMAGES and isinstance(f.dataType, T.MapType):
            paths.append(f"{f.name}.key_value.value")
        elif f.name == _RAW_BYTES and isinstance(f.dataType, T.BinaryType):
            paths.append(f.name)
    return paths


def parquet_writer(df: DataFrame) -> DataFrameWriter:
    """`df.write` with dictionary encoding off for the columns that never profit from it."""
    writer = df.write
    for path in _plain_paths(df.schema):
        writer = writer.option(f"parquet.enable.dictionary#{path}", "false")
    return writer
