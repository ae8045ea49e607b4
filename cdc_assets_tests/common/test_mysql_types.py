"""MySQL/TiDB type text -> Spark type (pure Python, no Spark session)."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from cdc_assets.common.mysql_types import is_decimal_without_params, parse_mysql_type, spark_type

GARBAGE = [None, "", "   ", "???", "123", "(((", "decimal(10,2", "decimal((10,2))", "décimal(10,2)", "\n\t"]

CASES = [
    ("int", T.IntegerType()),
    ("INT(11)", T.IntegerType()),
    ("int(11) unsigned", T.LongType()),
    ("int unsigned", T.LongType()),
    ("integer unsigned zerofill", T.LongType()),
    ("tinyint", T.ByteType()),
    ("tinyint(1)", T.ByteType()),
    ("tinyint(3) unsigned", T.ShortType()),
    ("smallint", T.ShortType()),
    ("smallint unsigned", T.IntegerType()),
    ("mediumint unsigned", T.IntegerType()),
    ("bigint", T.LongType()),
    ("bigint unsigned", T.DecimalType(20, 0)),
    ("BIGINT(20) UNSIGNED ZEROFILL", T.DecimalType(20, 0)),
    ("serial", T.DecimalType(20, 0)),
    ("decimal(10,2)", T.DecimalType(10, 2)),
    ("DECIMAL(10, 2) UNSIGNED", T.DecimalType(10, 2)),
    ("numeric(5)", T.DecimalType(5, 0)),
    ("dec(8,2)", T.DecimalType(8, 2)),
    ("decimal(38,38)", T.DecimalType(38, 38)),
    ("decimal(38,0)", T.DecimalType(38, 0)),
    ("decimal(39,0)", T.StringType()),  # wider than Spark: exact text
    ("fixed(40,3)", T.StringType()),
    ("decimal(65,30)", T.StringType()),
    ("decimal(10,x)", T.StringType()),  # invalid parameters: never raise
    ("decimal(5,10)", T.StringType()),  # scale > precision
    ("decimal(0)", T.StringType()),
    ("decimal(0,0)", T.StringType()),
    ("decimal(66,0)", T.StringType()),  # beyond MySQL's limit
    ("decimal(-1,2)", T.StringType()),
    ("decimal(1,2,3)", T.StringType()),
    ("decimal(99999999999999999999,2)", T.StringType()),
    ("decimal", T.DecimalType(38, 0)),
    ("decimal unsigned", T.DecimalType(38, 0)),
    ("float", T.FloatType()),
    ("float(10,2) unsigned", T.FloatType()),
    ("float(24)", T.FloatType()),
    ("float(25)", T.DoubleType()),  # MySQL: FLOAT(p) with p > 24 is a DOUBLE
    ("float(53)", T.DoubleType()),
    ("double", T.DoubleType()),
    ("double precision", T.DoubleType()),
    ("real", T.DoubleType()),
    ("varchar(255)", T.StringType()),
    ("enum('a','b)')", T.StringType()),
    ("json", T.StringType()),
    ("time(3)", T.StringType()),
    ("binary(16)", T.BinaryType()),
    ("longblob", T.BinaryType()),
    ("date", T.DateType()),
    ("datetime(6)", T.TimestampNTZType()),
    ("timestamp", T.TimestampType()),
    ("year", T.ShortType()),
    ("bit(1)", T.DecimalType(20, 0)),
    ("boolean", T.BooleanType()),
    *[(g, T.StringType()) for g in GARBAGE],
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_spark_type_of_type_text(text, expected):
    assert spark_type(parse_mysql_type(text)) == expected


@pytest.mark.parametrize("text", GARBAGE + ["decimal(10,x)", "decimal(5,10)", "decimal(0)", "decimal(,)"])
def test_garbage_type_text_never_raises(text):
    mtype = parse_mysql_type(text)
    assert not is_decimal_without_params(mtype) or mtype.params == ()
    assert mtype.decimal_params is None


def test_decimal_parameters_and_flags():
    assert parse_mysql_type("decimal(10, 2)").decimal_params == (10, 2)
    assert parse_mysql_type("numeric(7)").decimal_params == (7, 0)
    assert is_decimal_without_params(parse_mysql_type("decimal"))
    assert is_decimal_without_params(parse_mysql_type("DECIMAL unsigned"))
    assert not is_decimal_without_params(parse_mysql_type("decimal(10,2)"))
    assert not is_decimal_without_params(parse_mysql_type("decimal(10,2"))  # unclosed: unknown type
    assert parse_mysql_type("int(11) unsigned").unsigned


@pytest.mark.parametrize(("scale", "integer_digits", "expected"), [
    (0, 0, T.DecimalType(38, 0)),
    (5, 33, T.DecimalType(38, 5)),  # 33 + 5 = 38 digits: still exact as a decimal
    (5, 34, T.StringType()),  # 39 digits would not fit: exact text instead of rounding
    (38, 0, T.DecimalType(38, 38)),
    (39, 0, T.StringType()),
    (0, 39, T.StringType()),
])
def test_decimal_without_parameters_is_inferred_from_the_data(scale, integer_digits, expected):
    assert spark_type(parse_mysql_type("decimal"), scale, integer_digits) == expected
