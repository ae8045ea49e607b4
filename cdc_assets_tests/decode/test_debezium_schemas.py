"""Debezium connectors whose tables live in a schema (PostgreSQL, SQL Server, Oracle, Db2):
`source.schema` stays in the change log's database (`<db>.<schema>`), so two schemas' same-named
tables never share a snapshot; their DDL (not MySQL's SQL) is quarantined, never misapplied."""

from __future__ import annotations

import functools
import json

from cdc_assets.decode.common.key_option import NO_KEYS, parse_key_option
from cdc_assets.decode.debezium.events import Options, decode_batches
from cdc_assets_tests.decode.arrow_batch import decode_values

DECODE = functools.partial(decode_batches, options=Options(derive_commit_ts=True, key_option=NO_KEYS))


def _pg_source(schema: str, table: str, **extra) -> dict:
    """`source` as Debezium 2.x's PostgreSQL connector writes it."""
    return {"version": "2.5.0.Final", "connector": "postgresql", "name": "pgserver", "ts_ms": 1700000000123,
            "snapshot": "false", "db": "inventory", "sequence": '["24023119","24023128"]', "schema": schema,
            "table": table, "txId": 555, "lsn": 24023128, "xmin": None, **extra}


def _pg_row(schema: str, table: str, op: str, before, after) -> dict:
    return {"before": before, "after": after, "source": _pg_source(schema, table), "op": op,
            "ts_ms": 1700000000456, "transaction": None}


def _key(**cols) -> bytes:
    return json.dumps({"schema": {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": k}
                                                               for k in cols]}, "payload": cols}).encode()


def test_postgresql_schema_is_kept_in_the_database_name():
    events = decode_values(
        lambda b, _tz: DECODE(b),
        _pg_row("public", "customers", "c", None, {"id": 1, "name": "a"}),
        _pg_row("sales", "customers", "c", None, {"id": 1, "name": "b"}),
        keys=[_key(id=1), _key(id=1)],
    )
    assert [(e["database"], e["table"], e["op"], e["_reject_reason"]) for e in events] == [
        ("inventory.public", "customers", "INSERT", None),
        ("inventory.sales", "customers", "INSERT", None),
    ]
    assert [e["after"] for e in events] == [[("id", "1"), ("name", "a")], [("id", "1"), ("name", "b")]]
    assert [e["commit_ts"] for e in events] == [1700000000123 << 18] * 2


def test_mysql_connector_names_stay_as_they_are():
    source = {"version": "2.5.0.Final", "connector": "mysql", "name": "m", "ts_ms": 1700000000123,
              "snapshot": "false", "db": "inventory", "table": "customers", "file": "mysql-bin.000003", "pos": 154}
    [e] = decode_values(lambda b, _tz: DECODE(b), {"before": None, "after": {"id": 1}, "source": source, "op": "c",
                                                  "ts_ms": 1700000000456}, keys=[_key(id=1)])
    assert (e["database"], e["table"], e["_reject_reason"]) == ("inventory", "customers", None)


def test_postgresql_truncate_names_the_schema_qualified_table():
    msg = {"before": None, "after": None, "source": _pg_source("sales", "orders"), "op": "t", "ts_ms": 1700000000456}
    [e] = decode_values(lambda b, _tz: DECODE(b), msg)
    assert (e["event_kind"], e["database"], e["table"], e["ddl_sql"], e["_reject_reason"]) == (
        "ddl", "inventory.sales", "orders", "TRUNCATE TABLE `inventory.sales`.`orders`", None)


def test_primary_key_option_names_a_schema_qualified_table():
    decode = functools.partial(decode_batches, options=Options(
        derive_commit_ts=True, key_option=parse_key_option("inventory.sales.customers:id")))
    events = decode_values(lambda b, _tz: decode(b), _pg_row("sales", "customers", "c", None, {"id": 7}),
                           _pg_row("public", "customers", "c", None, {"id": 7}))
    assert [(e["database"], e["pk_names"], e["_reject_reason"]) for e in events] == [
        ("inventory.sales", ["id"], None), ("inventory.public", None, "missing_primary_key")]


def test_sql_server_schema_change_is_quarantined_with_its_dialect():
    """A SQL Server connector's schema-change event (`databaseName`, `schemaName`, T-SQL)."""
    msg = {"source": {"version": "2.5.0.Final", "connector": "sqlserver", "name": "server1", "ts_ms": 1700000000123,
                      "snapshot": "false", "db": "testDB", "sequence": None, "schema": "dbo", "table": "customers",
                      "change_lsn": None, "commit_lsn": "00000025:00000d98:00a2", "event_serial_no": None},
           "ts_ms": 1700000000456, "databaseName": "testDB", "schemaName": "dbo",
           "ddl": "ALTER TABLE dbo.customers ADD email nvarchar(255)",
           "tableChanges": [{"type": "ALTER", "id": '"testDB"."dbo"."customers"',
                             "table": {"primaryKeyColumnNames": ["id"], "columns": []}}]}
    [e] = decode_values(lambda b, _tz: DECODE(b), msg)
    assert (e["event_kind"], e["database"], e["table"], e["_reject_reason"]) == (
        "ddl", "testDB.dbo", "customers", "unsupported_ddl_dialect")
    assert e["_reject_detail"].startswith("a sqlserver connector's schema change")
