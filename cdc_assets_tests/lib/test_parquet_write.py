import pyarrow.parquet as pq
from pyspark.sql import types as T

from cdc_assets.lib.parquet_write import parquet_writer

_SCHEMA = T.StructType([
    T.StructField("table", T.StringType()),
    T.StructField("value", T.BinaryType()),
    T.StructField("after", T.MapType(T.StringType(), T.StringType())),
])


def _encodings(folder) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for part in sorted(folder.glob("part-*.parquet")):
        meta = pq.ParquetFile(part).metadata
        for g in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                col = meta.row_group(g).column(c)
                found.setdefault(col.path_in_schema, set()).update(col.encodings)
    return found


def test_map_values_and_bytes_are_written_plain_and_read_back_unchanged(spark, tmp_path):
    rows = [("orders", bytes([i % 256, 0, 255]), {"id": str(i), "note": None if i % 3 else f"n{i}"})
            for i in range(200)]
    df = spark.createDataFrame(rows, _SCHEMA).coalesce(1)

    parquet_writer(df).parquet(str(tmp_path / "out"))

    encodings = _encodings(tmp_path / "out")
    dictionary = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}
    assert not encodings["after.key_value.value"] & dictionary
    assert not encodings["value"] & dictionary
    # Low-cardinality columns keep the dictionary: the table name and the image's keys.
    assert encodings["table"] & dictionary
    assert encodings["after.key_value.key"] & dictionary
    back = spark.read.parquet(str(tmp_path / "out")).orderBy("value").collect()
    assert sorted((r.table, bytes(r.value), r.after) for r in back) == sorted(rows)
