"""Issue 42: hostile input in the decoders, message by message as a broken producer writes it.

- names of the wrong JSON type are `unexpected_shape`, never a table named after their text;
- a message that cannot be used at all is one quarantine row, however many events it holds.

Pure Python: each decoder's Arrow batch function, no Spark.
"""

from __future__ import annotations

import functools
import json

import pytest

from cdc_assets.lib.changelog_schema import REJECT_DETAIL, REJECT_REASON
from cdc_assets.lib.codecs import canal_json_events, cloudcanal_json_events, debezium_events, open_protocol
from cdc_assets.lib.codecs.key_option import NO_KEYS
from cdc_assets_tests.lib.codecs.arrow_batch import decode_values

TSO = 445566778899001122


def _debezium(batches, time_zone, derive: bool):
    return debezium_events.decode_batches(batches, debezium_events.Options(derive_commit_ts=derive, key_option=NO_KEYS))


def _open_protocol(batches, time_zone):
    return open_protocol.decode_batches(batches, time_zone)


def decoded(batch_function, *messages, keys=None) -> list[tuple]:
    """(kafka_offset, event_index, reason, detail, database, table) of every event."""
    return [(e["kafka_offset"], e["event_index"], e[REJECT_REASON], e[REJECT_DETAIL], e["database"], e["table"])
            for e in decode_values(batch_function, *messages, keys=keys)]


# -- item 2: names of the wrong JSON type --------------------------------------------------
def ticdc_canal(**names) -> dict:
    """A TiCDC Canal-JSON INSERT (`enable-tidb-extension=true`), its names as given."""
    return {"id": 0, "database": "shop", "table": "orders", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
            "es": 1_700_000_000_000, "ts": 1_700_000_000_001, "sql": "", "sqlType": {"id": 4},
            "mysqlType": {"id": "int"}, "data": [{"id": "1"}], "old": None,
            "_tidb": {"commitTs": TSO}, **names}


def official_canal(**names) -> dict:
    """Official Canal's FlatMessage of an UPDATE of two rows (its batch id, no `_tidb`)."""
    return {"data": [{"id": "1", "v": "b"}, {"id": "2", "v": "c"}], "database": "shop", "es": 1_700_000_000_000,
            "id": 7, "isDdl": False, "mysqlType": {"id": "int(11)", "v": "varchar(8)"},
            "old": [{"v": "a"}, {"v": "b"}], "pkNames": ["id"], "sql": "", "sqlType": {"id": 4, "v": 12},
            "table": "orders", "ts": 1_700_000_000_005, "type": "UPDATE", **names}


WRONG_NAMES = [("table", 123, "number"), ("table", ["orders"], "array"), ("database", {"a": 1}, "object"),
               ("table", True, "boolean"), ("database", 1.5, "number")]


@pytest.mark.parametrize("message", [ticdc_canal, official_canal])
@pytest.mark.parametrize("field, value, kind", WRONG_NAMES)
def test_canal_json_name_of_the_wrong_type_is_unexpected_shape(message, field, value, kind):
    """It used to become the table `shop.123`, `shop.["orders"]` or `{"a":1}.orders`."""
    events = decoded(canal_json_events.decode_batches, message(**{field: value}))
    assert events == [(0, 0, "unexpected_shape", f"`{field}` is a JSON {kind}, not a string", None, None)]


def test_canal_json_ddl_and_watermark_names_are_checked_too():
    ddl = {"id": 0, "database": ["shop"], "table": "orders", "pkNames": None, "isDdl": True, "type": "CREATE",
           "es": 1_700_000_000_000, "ts": 1_700_000_000_001, "sql": "CREATE TABLE orders (id INT PRIMARY KEY)",
           "sqlType": None, "mysqlType": None, "data": None, "old": None, "_tidb": {"commitTs": TSO}}
    watermark = {"id": 0, "database": "", "table": 0, "pkNames": None, "isDdl": False, "type": "TIDB_WATERMARK",
                 "es": 1_700_000_000_000, "ts": 1_700_000_000_001, "sql": "", "sqlType": None, "mysqlType": None,
                 "data": None, "old": None, "_tidb": {"watermarkTs": TSO}}
    assert [e[2:4] for e in decoded(canal_json_events.decode_batches, ddl, watermark)] == [
        ("unexpected_shape", "`database` is a JSON array, not a string"),
        ("unexpected_shape", "`table` is a JSON number, not a string")]


def test_canal_json_blank_or_absent_names_are_still_missing_table_name():
    events = decoded(canal_json_events.decode_batches, ticdc_canal(table=""), ticdc_canal(database=None))
    assert [e[2] for e in events] == ["missing_table_name", "missing_table_name"]


def cloudcanal(**names) -> dict:
    return {"action": "INSERT", "bid": 3, "db": "shop", "schema": "shop", "table": "orders", "isDdl": False,
            "entryType": "ROWDATA", "execTs": 1_669_789_152_000, "pks": ["id"], "dbValType": {"id": "int(11)"},
            "data": [{"id": "1"}], "before": [], **names}


@pytest.mark.parametrize("field, value, kind", [("table", 123, "number"), ("db", {"a": 1}, "object"),
                                                ("schema", ["public"], "array"), ("table", False, "boolean")])
def test_cloudcanal_name_of_the_wrong_type_is_unexpected_shape(field, value, kind):
    events = decoded(cloudcanal_json_events.decode_batches, cloudcanal(**{field: value}))
    assert events == [(0, 0, "unexpected_shape", f"`{field}` is a JSON {kind}, not a string", None, None)]


def debezium_connector(source: dict, op: str = "c") -> dict:
    """Debezium's MySQL connector with schemas off (`value.converter.schemas.enable=false`)."""
    return {"before": None, "after": {"id": 1, "v": "a"},
            "source": {"version": "2.7.0.Final", "connector": "mysql", "name": "dbserver1", "ts_ms": 1_700_000_000_000,
                       "snapshot": "false", "db": "shop", "sequence": None, "table": "orders", "server_id": 223344,
                       "gtid": None, "file": "mysql-bin.000003", "pos": 154, "row": 0, "thread": 7, "query": None,
                       **source},
            "op": op, "ts_ms": 1_700_000_000_100, "transaction": None}


TICDC_KEY = json.dumps({"payload": {"id": 1}, "schema": {"type": "struct", "fields": [{"field": "id"}]}}).encode()


@pytest.mark.parametrize("derive", [True, False], ids=["debezium-json", "debezium"])
@pytest.mark.parametrize("source, detail", [
    ({"table": 123}, "`source.table` is a JSON number, not a string"),
    ({"table": ["orders"]}, "`source.table` is a JSON array, not a string"),
    ({"db": {"a": 1}}, "`source.db` is a JSON object, not a string"),
])
def test_debezium_source_name_of_the_wrong_type_is_unexpected_shape(derive, source, detail):
    message = debezium_connector({**source, "commit_ts": TSO} if not derive else source)
    batch_function = functools.partial(_debezium, derive=derive)
    for m in (message, {"schema": None, "payload": message}):
        assert decoded(batch_function, m, keys=[TICDC_KEY]) == [(0, 0, "unexpected_shape", detail, None, None)]


def test_debezium_ddl_and_truncate_names_are_checked_too():
    ddl = {"source": {"db": "shop", "table": 7, "ts_ms": 1_700_000_000_000, "file": "mysql-bin.000003", "pos": 9},
           "databaseName": "shop", "ddl": "ALTER TABLE orders ADD c INT", "tableChanges": [], "ts_ms": 1}
    ddl_database = {**ddl, "source": {**ddl["source"], "table": "orders"}, "databaseName": ["shop"]}
    truncate = debezium_connector({"db": True}, op="t")
    batch_function = functools.partial(_debezium, derive=True)
    assert [e[2:4] for e in decoded(batch_function, ddl, ddl_database, truncate)] == [
        ("unexpected_shape", "`source.table` is a JSON number, not a string"),
        ("unexpected_shape", "`databaseName` is a JSON array, not a string"),
        ("unexpected_shape", "`source.db` is a JSON boolean, not a string")]


def op_message(*events) -> tuple[bytes, bytes]:
    frame = b"".join
    key = (1).to_bytes(8, "big") + frame(len(k).to_bytes(8, "big") + k for k in (json.dumps(e[0]).encode() for e in events))
    value = frame(len(v).to_bytes(8, "big") + v for v in (json.dumps(e[1]).encode() for e in events))
    return key, value


ROW = {"u": {"id": {"t": 3, "h": True, "f": 11, "v": 1}}}


@pytest.mark.parametrize("field, value, kind", [("tbl", 0, "number"), ("tbl", [], "array"),
                                                ("scm", {"a": 1}, "object"), ("scm", False, "boolean")])
def test_open_protocol_name_of_the_wrong_type_is_unexpected_shape(field, value, kind):
    """`0`, `[]` and `false` used to pass as no name at all (missing_table_name)."""
    key, value_bytes = op_message(({"ts": TSO, "scm": "shop", "tbl": "orders", "t": 1, field: value}, ROW))
    (ev,) = open_protocol.decode_message(key, value_bytes, open_protocol.zone("UTC"))
    assert (ev[REJECT_REASON], ev[REJECT_DETAIL]) == ("unexpected_shape", f"`{field}` is a JSON {kind}, not a string")
