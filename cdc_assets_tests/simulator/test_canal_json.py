"""The Canal-JSON encoder against TiCDC's documented shape (spec: ticdc-canal-json.txt)."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

from cdc_assets.simulator.canal_json import CanalJsonEncoder
from cdc_assets.simulator.go_json import go_json_dumps
from cdc_assets.simulator.schema import DEMO_TABLES
from cdc_assets.simulator.tso import make_tso
from cdc_assets.simulator.workload import DdlEvent, RowChange

ENC = CanalJsonEncoder(DEMO_TABLES)
TS = make_tso(1_767_225_600_123, 5)
ORDER = {
    "order_id": 2**64 - 1, "customer_id": -7, "amount": Decimal("12.50"), "status": "Zoë <&>",
    "payload": bytes(range(256))[:32], "updated_at": datetime(2026, 1, 1, 0, 0, 1),
}


def _decode(value: bytes) -> tuple[str, dict]:
    text = value.decode("utf-8")
    return text, json.loads(text)


def test_insert_has_ticdc_shape_key_order_and_types():
    key, value = ENC.encode_row(RowChange("shop", "orders", "INSERT", None, ORDER), TS, build_ms=1_767_225_601_000)
    assert key is None
    text, m = _decode(value)
    assert list(m) == ["id", "database", "table", "pkNames", "isDdl", "type", "es", "ts", "sql",
                       "sqlType", "mysqlType", "old", "data", "_tidb"]
    assert m["id"] == 0 and m["pkNames"] == ["order_id"] and m["isDdl"] is False and m["sql"] == ""
    assert (m["type"], m["es"], m["ts"], m["_tidb"]) == ("INSERT", 1_767_225_600_123, 1_767_225_601_000, {"commitTs": TS})
    assert m["mysqlType"] == {"order_id": "bigint unsigned", "customer_id": "int", "amount": "decimal",
                              "status": "varchar", "payload": "varbinary", "updated_at": "datetime"}
    # bigint unsigned above 2^63-1 is promoted to DECIMAL (3), as TiCDC does per value.
    assert m["sqlType"] == {"order_id": 3, "customer_id": 4, "amount": 3, "status": 12, "payload": 2004, "updated_at": 93}
    assert m["old"] is None
    row = m["data"][0]
    assert row["order_id"] == "18446744073709551615" and row["customer_id"] == "-7" and row["amount"] == "12.50"
    assert row["updated_at"] == "2026-01-01 00:00:01" and row["status"] == "Zoë <&>"
    assert '", "' not in text and '": ' not in text  # compact separators
    assert "<" not in text and "&" not in text  # Go escapes HTML characters
    assert "\\u003c\\u0026\\u003e" in text and "Zoë" in text


def test_small_unsigned_stays_bigint_java_type():
    _, m = _decode(ENC.encode_row(RowChange("shop", "orders", "INSERT", None, {**ORDER, "order_id": 2**63 - 1}), TS, build_ms=0)[1])
    assert m["sqlType"]["order_id"] == -5


def test_binary_is_iso_8859_1_text_with_go_escapes_and_round_trips():
    blob = bytes(range(256))
    for chunk in (blob[i : i + 16] for i in range(0, 256, 16)):
        after = {"sku": "x", "qty": 1, "price": None, "blob_col": chunk}
        text, m = _decode(ENC.encode_row(RowChange("inventory", "stock", "INSERT", None, after), TS, build_ms=0)[1])
        assert m["data"][0]["blob_col"].encode("latin-1") == chunk
        assert m["data"][0]["price"] is None
    text, _ = _decode(ENC.encode_row(RowChange("inventory", "stock", "INSERT", None,
                                                {"sku": "x", "qty": 1, "price": None, "blob_col": bytes([0, 8, 9, 12, 38, 60, 62, 0x80, 0xFF])}),
                                      TS, build_ms=0)[1])
    assert '"blob_col":"\\u0000\\u0008\\t\\u000c\\u0026\\u003c\\u003e\u0080ÿ"' in text


def test_update_carries_all_old_columns_and_delete_puts_the_row_in_data():
    before = dict(ORDER)
    after = {**ORDER, "status": "PAID"}
    _, m = _decode(ENC.encode_row(RowChange("shop", "orders", "UPDATE", before, after), TS, build_ms=0)[1])
    assert m["type"] == "UPDATE" and m["data"][0]["status"] == "PAID"
    assert len(m["old"]) == 1 and set(m["old"][0]) == set(ORDER) and m["old"][0]["status"] == "Zoë <&>"
    _, m = _decode(ENC.encode_row(RowChange("shop", "orders", "DELETE", before, None), TS, build_ms=0)[1])
    assert m["type"] == "DELETE" and m["old"] is None and m["data"][0]["order_id"] == "18446744073709551615"


def test_ddl_and_watermark_messages():
    ddl = DdlEvent(TS, "shop", "customers", "create table", "CREATE TABLE `shop`.`customers` (`id` int)")
    text, m = _decode(ENC.encode_ddl(ddl, build_ms=5)[1])
    assert m == {"id": 0, "database": "shop", "table": "customers", "pkNames": None, "isDdl": True, "type": "CREATE",
                 "es": 1_767_225_600_123, "ts": 5, "sql": ddl.sql, "sqlType": None, "mysqlType": None,
                 "data": None, "old": None, "_tidb": {"commitTs": TS}}
    _, m = _decode(ENC.encode_ddl(DdlEvent(TS, "shop", "", "create schema", "CREATE DATABASE `shop`"), build_ms=5)[1])
    assert m["type"] == "QUERY" and m["table"] == ""
    key, value = ENC.encode_watermark(TS, build_ms=7)
    assert key is None
    assert value.decode() == (
        '{"id":0,"database":"","table":"","pkNames":null,"isDdl":false,"type":"TIDB_WATERMARK",'
        f'"es":1767225600123,"ts":7,"sql":"","sqlType":null,"mysqlType":null,"data":null,"old":null,'
        f'"_tidb":{{"watermarkTs":{TS}}}}}'
    )


def test_go_json_escapes_like_go():
    s = "a\\b\b\f<>&\u2028\u2029\x01é\x7f"
    out = go_json_dumps({"k": s})
    assert out == '{"k":"a\\\\b\\u0008\\u000c\\u003c\\u003e\\u0026\\u2028\\u2029\\u0001é\x7f"}'
    assert json.loads(out) == {"k": s}
