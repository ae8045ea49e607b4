"""Schema inference over a window's row events grouped into shapes (snapshot/window_schema.py)."""

from __future__ import annotations

import json

from pyspark.sql import functions as F

from cdc_assets.decode import get_decoder
from cdc_assets.snapshot.window_schema import window_table_schemas
from cdc_assets_tests.helpers import raw_frame

T0 = 1767225600000 << 18


def _msg(table: str, op: str, ts: int, data: dict, types: dict, pk: list[str]) -> bytes:
    return json.dumps({
        "id": 0, "database": "db", "table": table, "pkNames": pk, "isDdl": False, "type": op,
        "es": ts >> 18, "ts": ts >> 18, "sql": "", "sqlType": {}, "mysqlType": types,
        "data": [data], "old": None, "_tidb": {"commitTs": ts},
    }).encode()


def _schemas(spark, msgs):
    decoded = get_decoder("canal-json").decode(raw_frame(spark, msgs))
    return window_table_schemas(decoded.where(F.col("_reject_reason").isNull()))


def test_many_rows_of_few_shapes_give_each_tables_columns_types_and_newest_key(spark):
    narrow = {"id": "int", "name": "varchar(8)"}
    wide = {"id": "int", "name": "varchar(20)", "price": "decimal", "note": "text"}
    msgs = [
        # Shape 1, many rows: the newer shape's later columns come after these.
        *[_msg("t", "INSERT", T0 + 10 + i, {"id": str(i), "name": "n"}, narrow, ["id"]) for i in range(20)],
        # Shape 2: new columns, wider types, a decimal without parameters.
        _msg("t", "INSERT", T0 + 50, {"id": "100", "name": "w", "price": "12.345", "note": "x"}, wide, ["id"]),
        _msg("t", "INSERT", T0 + 51, {"id": "101", "name": "w", "price": "-0001234.5", "note": None}, wide,
             ["id"]),
        # Shape 3, the newest event: another key, the same columns as shape 1.
        _msg("t", "UPDATE", T0 + 60, {"id": "1", "name": "z"}, narrow, ["name"]),
        # Another table in the same window, its own shape.
        _msg("u", "INSERT", T0 + 5, {"k": "a", "v": "1.5"}, {"k": "char(1)", "v": "decimal(4,1)"}, ["k"]),
    ]
    schemas = _schemas(spark, msgs)
    t, u = schemas[("db", "t")], schemas[("db", "u")]

    assert t.columns == ["id", "name", "price", "note"]
    # Where each column first appeared (a schema grown by images is recorded at that commit_ts).
    assert t.first_commit_ts == {"id": T0 + 10, "name": T0 + 10, "price": T0 + 50, "note": T0 + 50}
    # Newest non-null type per column: name's newest type comes from shape 3 (T0 + 60).
    assert t.mysql_types == {"id": "int", "name": "varchar(8)", "price": "decimal", "note": "text"}
    assert t.primary_key == ["name"]
    assert (t.decimal_scales, t.decimal_integer_digits) == ({"price": 3}, {"price": 4})

    assert (u.columns, u.primary_key, u.mysql_types) == (["k", "v"], ["k"], {"k": "char(1)", "v": "decimal(4,1)"})
    assert (u.decimal_scales, u.decimal_integer_digits) == ({}, {})


def test_decimal_digits_come_only_from_rows_that_type_the_column_without_parameters(spark):
    msgs = [
        # Typed with parameters: its digits must not count.
        _msg("t", "INSERT", T0 + 1, {"id": "1", "amount": "123456.12345"}, {"id": "int", "amount": "decimal(12,5)"},
             ["id"]),
        _msg("t", "INSERT", T0 + 2, {"id": "2", "amount": "7.5"}, {"id": "int", "amount": "DECIMAL UNSIGNED"}, ["id"]),
    ]
    (s,) = _schemas(spark, msgs).values()
    assert s.mysql_types["amount"] == "DECIMAL UNSIGNED"
    assert (s.decimal_scales, s.decimal_integer_digits) == ({"amount": 1}, {"amount": 1})
