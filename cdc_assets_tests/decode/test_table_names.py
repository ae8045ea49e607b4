"""Names that cannot be MySQL / TiDB database or table names are quarantined after decoding."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from cdc_assets.contracts.schemas import REJECT_DETAIL, REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.decode.table_names import name_problem, name_problem_column, quarantine_invalid_table_names
from cdc_assets_tests.canal_messages import row, values, watermark
from cdc_assets_tests.helpers import raw_frame

TS = 463_000_000_000_000_000
CHINESE_40 = "客户订单明细历史归档" * 4

NAMES = [
    ("orders", None),
    (CHINESE_40, None),  # 40 characters (120 UTF-8 bytes): the limit counts characters
    ("x" * 64, None),
    ("表" * 64, None),
    (" leading space and a.dot/slash", None),  # quoted identifiers take them
    ("x" * 65, "is longer than 64 characters (65)"),
    ("x" * 300, "is longer than 64 characters (300)"),
    ("x" * 10_000, "is longer than 64 characters (10000)"),
    ("", "is empty"),
    ("nul\0byte", "contains NUL"),
    ("trailing ", "ends with a space"),
]


@pytest.mark.parametrize(("name", "problem"), NAMES, ids=lambda v: repr(v)[:20])
def test_the_identifier_rules(name, problem):
    assert name_problem(name) == problem


def test_the_spark_rule_agrees_with_the_python_rule(spark):
    df = spark.createDataFrame([(n,) for n, _ in NAMES] + [(None,)], "name string")
    got = [r.p for r in df.select(name_problem_column(df["name"]).alias("p")).collect()]
    assert got == [p for _, p in NAMES] + [None]


def _ddl(database: str, table: str, sql: str) -> bytes:
    return json.dumps({"id": 0, "database": database, "table": table, "pkNames": None, "isDdl": True,
                       "type": "CREATE", "es": TS >> 18, "ts": TS >> 18, "sql": sql, "sqlType": None,
                       "mysqlType": None, "data": None, "old": None, "_tidb": {"commitTs": TS}}).encode()


def _named(message: bytes, database: str) -> bytes:
    return json.dumps({**json.loads(message), "database": database}).encode()


def test_only_events_naming_a_table_that_cannot_exist_are_quarantined(spark):
    messages = [
        row("INSERT", TS, values(1, "ok"), table=CHINESE_40),
        row("INSERT", TS, values(2, "long"), table="x" * 300),
        row("INSERT", TS, values(3, "longer"), table="x" * 10_000),
        _named(row("INSERT", TS, values(4, "bad database")), "trailing "),
        row("INSERT", TS, values(5, "empty table"), table=""),  # the decoder's own reject stands
        _ddl("db", "y" * 65, "CREATE TABLE t (id INT PRIMARY KEY)"),
        _ddl("db", "", "CREATE DATABASE db"),  # a DDL without a table: fine
        watermark(TS),  # no names at all: fine
    ]
    out = quarantine_invalid_table_names(get_decoder("canal-json").decode(raw_frame(spark, messages)))
    got = [(r.kafka_offset, r[REJECT_REASON], r[REJECT_DETAIL])
           for r in out.orderBy("kafka_offset").select("kafka_offset", REJECT_REASON, REJECT_DETAIL).collect()]
    assert got == [
        (0, None, None),
        (1, "invalid_table_name", "table name is longer than 64 characters (300)"),
        (2, "invalid_table_name", "table name is longer than 64 characters (10000)"),
        (3, "invalid_table_name", "database name ends with a space"),
        (4, "missing_table_name", "DML message without database or table"),
        (5, "invalid_table_name", "table name is longer than 64 characters (65)"),
        (6, None, None),
        (7, None, None),
    ]



def test_schema_qualified_debezium_names_are_judged_part_by_part(spark):
    from cdc_assets.decode.table_names import quarantine_invalid_table_names

    long_db, long_schema, long_table = "d" * 40, "s" * 30, "t" * 100
    rows = [("row", f"{long_db}.{long_schema}", long_table, None),  # PostgreSQL / SQL Server: fine
            ("row", f"{'d' * 65}.{'s' * 130}", "t", None),  # longer than both parts can be
            ("row", "shop", long_table, None)]  # a MySQL table of 100 characters
    df = spark.createDataFrame(rows, f"event_kind string, database string, table string, {REJECT_REASON} string")
    df = df.withColumn(REJECT_DETAIL, F.lit(None).cast("string"))
    got = [r[REJECT_REASON] for r in quarantine_invalid_table_names(df).collect()]
    assert got == [None, "invalid_table_name", "invalid_table_name"]
