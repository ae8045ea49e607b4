"""The TiCDC Debezium encoder against TiCDC's own expected JSON (ORACLES.md §3.2: the
codec_test literals, cluster `test_cluster`, now = 1701326309000)."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from decimal import Decimal

from cdc_assets.simulator.debezium import DebeziumEncoder
from cdc_assets.simulator.schema import DEMO_TABLES, ColumnDef, TableDef
from cdc_assets.simulator.workload import DdlEvent, RowChange

VECTORS = "pingcap+ticdc/extracted/debezium_codec_test"
NOW = 1701326309000
TABLE1 = TableDef("test", "table1", (ColumnDef("tiny", "tinyint", primary_key=True),))
ID_TABLE = TableDef("test", "table1", (ColumnDef("id", "int(10)", primary_key=True),))


def _vector(conformance, name: str, part: str) -> dict:
    return json.loads((conformance / VECTORS / f"{name}.{part}.json").read_text())


def _without_extension(msg: dict) -> dict:
    """TiCDC's codec_test runs without enable-tidb-extension: no `tidb_type`, and the
    source schema has no commit_ts / cluster_id fields (the payload always has them)."""
    out = copy.deepcopy(msg)
    for field in out["schema"]["fields"]:
        for f in field.get("fields", []):
            f.pop("tidb_type", None)
        if field["field"] == "source":
            field["fields"] = [f for f in field["fields"] if f["field"] not in ("commit_ts", "cluster_id")]
    return out


def _decoded(kv) -> tuple[dict, dict]:
    return json.loads(kv[0]), json.loads(kv[1])


def test_checkpoint_event_matches_ticdc(conformance):
    key, value = _decoded(DebeziumEncoder([], cluster_id="test_cluster").encode_watermark(3, build_ms=NOW))
    assert key == _vector(conformance, "TestCheckPointEvent.1", "key")
    assert _without_extension(value) == _vector(conformance, "TestCheckPointEvent.1", "value")


def test_insert_with_schema_matches_ticdc(conformance):
    enc = DebeziumEncoder([TABLE1], cluster_id="test_cluster")
    key, value = _decoded(enc.encode_row(RowChange("test", "table1", "INSERT", None, {"tiny": 1}), 1, build_ms=NOW))
    assert value["schema"]["fields"][1]["fields"] == [
        {"tidb_type": "tinyint", "type": "int16", "optional": False, "field": "tiny"}]
    assert _without_extension(value) == _vector(conformance, "TestEncodeInsert.2", "value")
    key["schema"]["fields"][0].pop("tidb_type")
    assert key == _vector(conformance, "TestEncodeInsert.2", "key")


def test_update_and_delete_without_schema_match_ticdc(conformance):
    enc = DebeziumEncoder([TABLE1], cluster_id="test_cluster", disable_schema=True)
    update = enc.encode_row(RowChange("test", "table1", "UPDATE", {"tiny": 2}, {"tiny": 1}), 1, build_ms=NOW)
    delete = enc.encode_row(RowChange("test", "table1", "DELETE", {"tiny": 2}, None), 1, build_ms=NOW)
    assert _decoded(update) == (_vector(conformance, "TestEncodeUpdate.1", "key"),
                                _vector(conformance, "TestEncodeUpdate.1", "value"))
    assert _decoded(delete) == (_vector(conformance, "TestEncodeDelete.1", "key"),
                                _vector(conformance, "TestEncodeDelete.1", "value"))


def test_create_table_without_schema_matches_ticdc(conformance):
    enc = DebeziumEncoder([ID_TABLE], cluster_id="test_cluster", disable_schema=True)
    ddl = DdlEvent(1, "test", "table1", "create table", "CREATE TABLE test.table1(id int(10) primary key)")
    assert _decoded(enc.encode_ddl(ddl, build_ms=NOW)) == (_vector(conformance, "TestDDLEvent.2", "key"),
                                                           _vector(conformance, "TestDDLEvent.2", "value"))


def test_ticdc_value_encodings():
    enc = DebeziumEncoder(DEMO_TABLES)
    row = {"order_id": 2**64 - 1, "customer_id": -7, "amount": Decimal("12.50"), "status": "Zoë <&>",
           "payload": b"\x00\xff", "updated_at": datetime(1000, 1, 1, 0, 0, 1)}
    key, value = enc.encode_row(RowChange("shop", "orders", "INSERT", None, row), 5 << 18, build_ms=6)
    assert b"\\u003c\\u0026\\u003e" in value  # Go's HTML-safe escapes
    msg = json.loads(value)
    assert msg["payload"]["after"] == {"order_id": -1, "customer_id": -7, "amount": 12.5, "status": "Zoë <&>",
                                       "payload": "AP8=", "updated_at": -30610223999000}
    assert json.loads(key)["payload"] == {"order_id": -1}
    types = {f["field"]: (f["tidb_type"], f["type"], f.get("name")) for f in msg["schema"]["fields"][1]["fields"]}
    assert types == {"order_id": ("bigint unsigned", "int64", None), "customer_id": ("int", "int32", None),
                     "amount": ("decimal", "double", None), "status": ("varchar", "string", None),
                     "payload": ("varbinary", "string", None),
                     "updated_at": ("datetime", "int64", "io.debezium.time.Timestamp")}
    assert msg["payload"]["source"]["commit_ts"] == 5 << 18 and msg["payload"]["source"]["ts_ms"] == 5
