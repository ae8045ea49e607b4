from pyspark.sql import types as T

from benchmarks.parquet_write import parquet_writer
from cdc_assets_tests.helpers import DICTIONARY_ENCODINGS, parquet_encodings

_TEXT_MAP = T.MapType(T.StringType(), T.StringType())
_SCHEMA = T.StructType([
    T.StructField("table", T.StringType()),
    T.StructField("key", T.BinaryType()),
    T.StructField("value", T.BinaryType()),
    T.StructField("before", _TEXT_MAP),
    T.StructField("after", _TEXT_MAP),
    T.StructField("column_types", _TEXT_MAP),
])


def test_image_values_and_raw_bytes_are_written_plain_and_read_back_unchanged(spark, tmp_path):
    types = {"id": "int", "note": "varchar(20)"}
    rows = [("orders", b"k", bytes([i % 256, 0, 255]), {"id": str(i)},
             {"id": str(i), "note": None if i % 3 else f"n{i}"}, types)
            for i in range(200)]
    df = spark.createDataFrame(rows, _SCHEMA).coalesce(1)

    parquet_writer(df).parquet(str(tmp_path / "out"))

    encodings = parquet_encodings(sorted((tmp_path / "out").glob("part-*.parquet")))
    for plain in ("before.key_value.value", "after.key_value.value", "value"):
        assert not encodings[plain] & DICTIONARY_ENCODINGS, plain
    # Repetitive columns keep the dictionary: names, the images' keys, the type texts, Kafka keys.
    for repetitive in ("table", "after.key_value.key", "column_types.key_value.value", "key"):
        assert encodings[repetitive] & DICTIONARY_ENCODINGS, repetitive
    back = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r.table, bytes(r.key), bytes(r.value), r.before, r.after, r.column_types) for r in back) \
        == sorted(rows, key=lambda r: (r[0], r[1], r[2]))
