"""Values that do not convert to their column's type are quarantined per event."""

from __future__ import annotations

import json

from pyspark.sql import functions as F, types as T

from cdc_assets.common.mysql_types import typed_value
from cdc_assets.contracts.schemas import REJECT_DETAIL, REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.decode.value_conversion import quarantine_unconvertible_values
from cdc_assets.snapshot.reconstruct import TableSchema, conform_frame
from cdc_assets_tests.canal_messages import row, values
from cdc_assets_tests.helpers import raw_frame

TS = 463_000_000_000_000_000


def declared(message: bytes, **types: str) -> bytes:
    """The message with some columns' declared MySQL types replaced."""
    doc = json.loads(message)
    doc["mysqlType"] = {**doc["mysqlType"], **types}
    return json.dumps(doc).encode()


def _outcome(spark, messages):
    out = quarantine_unconvertible_values(get_decoder("canal-json").decode(raw_frame(spark, messages)))
    return [(r.kafka_offset, r[REJECT_REASON], r[REJECT_DETAIL])
            for r in out.orderBy("kafka_offset").select("kafka_offset", REJECT_REASON, REJECT_DETAIL).collect()]


def test_only_the_event_with_an_unconvertible_value_is_quarantined(spark):
    got = _outcome(spark, [
        declared(row("INSERT", TS, values(1, "ok", amount="12.50")), amount="decimal(4,2)"),
        declared(row("INSERT", TS, values(2, "too wide", amount="123.45")), amount="decimal(4,2)"),
        row("INSERT", TS, values(3, "bad unsigned", big="12abc")),
        declared(row("UPDATE", TS, values(4, "new"), old={"amount": "abc"}), amount="double"),  # old image
        row("DELETE", TS, values(5, "gone", raw="\u00ff\u0000")),                     # binary: fine
    ])
    assert got == [
        (0, None, None),
        (1, "invalid_value", "value does not convert to its column type: amount"),
        (2, "invalid_value", "value does not convert to its column type: big"),
        (3, "invalid_value", "value does not convert to its column type: amount"),
        (4, None, None),
    ]


def test_decimal_without_declared_precision_and_text_columns_are_never_rejected(spark):
    huge = "1" * 60 + ".5"  # beyond Decimal(38): the snapshot keeps it as exact text
    got = _outcome(spark, [row("INSERT", TS, values(1, "any \u00e9 text", amount=huge))])
    assert got == [(0, None, None)]


def test_a_bool_column_reads_any_integer_as_mysql_does(spark):
    """BOOL is TINYINT(1): it stores 2 or -1 too, and official Canal types the column by the
    DDL's name (`BOOLEAN`). Any non-zero integer is true, as MySQL reads it; text that is no
    truth value still does not convert."""
    flags = ["1", "0", "2", "-1", "true", "maybe"]
    got = _outcome(spark, [declared(row("INSERT", TS, values(i, "x", amount=v)), amount="BOOLEAN")
                           for i, v in enumerate(flags)])
    assert [reason for _, reason, _ in got] == [None] * 5 + ["invalid_value"]
    typed = spark.createDataFrame([(v,) for v in flags], "v string").select(
        typed_value(F.col("v"), T.BooleanType()).alias("b"))
    assert [r.b for r in typed.collect()] == [True, False, True, True, True, None]


def test_a_column_retyped_to_bool_reads_its_old_text_the_same_way(spark):
    """A DDL that makes a text column BOOL: its rows' `2` is true there too, and text that is
    no truth value is counted as a value that did not convert."""
    schema = TableSchema("db", "t", ["id", "f"], {"id": "int", "f": "boolean"}, ["id"])
    rows = spark.createDataFrame([(1, "2", 5), (2, "0", 5), (3, "x", 5)], "id int, f string, _cdc_commit_ts long")
    conformed, lost = conform_frame(rows, schema)
    assert sorted((r.id, r.f) for r in conformed.collect()) == [(1, True), (2, False), (3, None)]
    assert lost == 1


def test_a_wide_row_names_its_failing_columns_in_image_order(spark):
    """The check pairs each value with its type in one pass (`map_zip_with`, not a lookup per
    key): the failing columns are still named in the image's order, before image first, each
    once (here the before image, `old` over `data`, fails on zeta, id and c07, the after
    image on zeta, alpha and c07); a type without a value in the image fails nothing."""
    wide = {"zeta": "z", "id": "1", "name": "n", "alpha": "a", "amount": "1.5", "big": "1"}
    wide.update({f"c{i:02d}": str(i) for i in range(40)})
    wide["c07"] = "seven"
    message = json.loads(row("UPDATE", TS, wide, old={"id": "one", "alpha": "2"}))
    message["mysqlType"] = {**message["mysqlType"], "zeta": "int", "alpha": "int", "unsent": "int",
                            **{f"c{i:02d}": "smallint" for i in range(40)}}
    got = _outcome(spark, [json.dumps(message).encode()])
    assert got == [(0, "invalid_value", "value does not convert to its column type: zeta,id,c07,alpha")]
