"""SQL text for the snapshot's per-table expressions (common/sql_text, docs/performance.md
step 28): names and values from the data read back exactly, and `typed_value_sql` types
every value as `typed_value` does."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F, types as T

from cdc_assets.common.mysql_types import typed_value, typed_value_sql
from cdc_assets.common.sql_text import ident, string, strings

HOSTILE = ["plain", "O'Brien", "back\\slash", "\\u0041 not an escape", "tick`s", "订单表", "new\nline", "", "'", "\\"]

TYPES = [T.BooleanType(), T.ByteType(), T.ShortType(), T.IntegerType(), T.LongType(), T.DecimalType(20, 0),
         T.DecimalType(10, 2), T.DecimalType(38, 7), T.FloatType(), T.DoubleType(), T.BinaryType(), T.DateType(),
         T.TimestampNTZType(), T.TimestampType(), T.StringType()]
VALUES = [None, "", "0", "1", "2", "-1", "true", "false", "12.345", "-0.005", "1e3", "99999999999999999999",
          "18446744073709551615", "2026-01-02", "2026-01-02 03:04:05.123456", "0000-00-00 00:00:00",
          "10:11:12", "AAEC/w==", "not base64!", " 7 ", "NaN", "Infinity", "订单"]


def test_strings_from_the_data_read_back_exactly(spark):
    got = spark.range(1).selectExpr(*[f"{string(v)} AS {ident(f'c{i}')}" for i, v in enumerate(HOSTILE)]).first()
    assert list(got) == HOSTILE
    inside = spark.range(1).selectExpr(*[f"{string(v)} IN ({strings(HOSTILE)}) AS {ident(f'c{i}')}"
                                         for i, v in enumerate(HOSTILE)], f"'OBrien' IN ({strings(HOSTILE)}) AS no")
    assert list(inside.first()) == [True] * len(HOSTILE) + [False]

@pytest.mark.parametrize("name", HOSTILE[:7])
def test_any_column_name_is_one_identifier(spark, name):
    frame = spark.range(1).select(F.lit(42).alias(name))
    assert frame.selectExpr(f"{ident(name)} + 1 AS v").first().v == 43


def test_typed_value_sql_types_every_value_as_typed_value_does(spark):
    frame = spark.createDataFrame([(v,) for v in VALUES], "v string")
    rows = frame.select("v", *[typed_value(F.col("v"), t).alias(f"c{i}") for i, t in enumerate(TYPES)],
                        *[F.expr(f"{typed_value_sql('v', t)} AS d{i}") for i, t in enumerate(TYPES)]).collect()
    assert len(rows) == len(VALUES)
    for r in rows:
        for i, t in enumerate(TYPES):
            a, b = r[f"c{i}"], r[f"d{i}"]
            assert a == b or (a != a and b != b), (r.v, t)  # NaN is NaN
    some = {t.simpleString(): sum(r[f"c{i}"] is not None for r in rows) for i, t in enumerate(TYPES)}
    assert all(some.values()), some  # every type converts some of the values: the comparison means something
