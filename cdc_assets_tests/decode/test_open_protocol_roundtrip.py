"""Cross-format equivalence: the simulator's Open Protocol dump, decoded, holds the same row
events as the Canal-JSON dump of the same seed decoded by the Canal-JSON decoder."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from decimal import Decimal

import pytest

from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.landing.layouts import read_dump
from cdc_assets.simulator import generate
from cdc_assets.simulator.open_protocol import OpenProtocolEncoder
from cdc_assets.simulator.schema import DEMO_TABLES
from cdc_assets.simulator.workload import DdlEvent, RowChange


def _decode_dump(spark, tmp_path, protocol: str):
    # watermarks on the same boundaries (Open Protocol's default moves them off the window ends)
    dump = generate(tmp_path / protocol, row_changes=300, protocol=protocol, watermark_phase_ms=0)
    raw = read_dump(spark, dump.files, dump.layout, dump.dump_dir)
    events = [r.asDict(recursive=True) for r in get_decoder(protocol).decode(raw).collect()]
    return dump, events


@pytest.fixture(scope="module")
def both(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("open-vs-canal")
    return {p: _decode_dump(spark, tmp, p) for p in ("open-protocol", "canal-json")}


def _row_set(events: list[dict]) -> set[tuple]:
    # pk order is not compared: Open Protocol columns come in Go map (name) order.
    return {
        (e["database"], e["table"], e["op"], e["commit_ts"],
         tuple(sorted(zip(e["pk_names"], e["pk_values"]))), tuple(sorted((e["after"] or {}).items())),
         tuple(sorted((e["before"] or {}).items())))
        for e in events if e["event_kind"] == "row"
    }


def test_same_row_events_as_canal_json(both):
    (op_dump, op_events), (cj_dump, cj_events) = both["open-protocol"], both["canal-json"]
    assert [e[REJECT_REASON] for e in op_events if e[REJECT_REASON]] == []
    assert [e[REJECT_REASON] for e in cj_events if e[REJECT_REASON]] == []
    op_rows, cj_rows = _row_set(op_events), _row_set(cj_events)
    assert len(op_rows) == op_dump.counts["row_changes"] == 300
    assert op_rows == cj_rows
    # Re-sent duplicates are there in both, one event per row message.
    kinds = Counter(e["event_kind"] for e in op_events)
    assert kinds["row"] == op_dump.counts["row_events"] == cj_dump.counts["row_events"]
    assert kinds["watermark"] == op_dump.counts["watermarks"]


def test_same_column_types_as_canal_json(both):
    def types(events):
        return {(e["table"], k, v) for e in events if e["event_kind"] == "row" for k, v in e["column_types"].items()}

    assert types(both["open-protocol"][1]) == types(both["canal-json"][1])


def test_ddl_is_broadcast_and_watermarks_match(both):
    (op_dump, op_events), (_, cj_events) = both["open-protocol"], both["canal-json"]
    op_ddl = [e for e in op_events if e["event_kind"] == "ddl"]
    assert len(op_ddl) == op_dump.counts["ddl"] == 3 * len([e for e in cj_events if e["event_kind"] == "ddl"])
    assert {e["ddl_type"] for e in op_ddl} == {"create schema", "create table"}
    assert {e["ddl_sql"] for e in op_ddl} == {e["ddl_sql"] for e in cj_events if e["event_kind"] == "ddl"}
    wm = lambda evs: Counter((e["kafka_partition"], e["watermark_ts"]) for e in evs if e["event_kind"] == "watermark")
    assert wm(op_events) == wm(cj_events)


def test_encoder_message_shape():
    enc = OpenProtocolEncoder(DEMO_TABLES)
    before = {"order_id": (1 << 64) - 1, "customer_id": 3, "amount": Decimal("1.50"), "status": "<NEW>",
              "payload": b"\x00\xff\"", "updated_at": datetime(2026, 1, 1, 0, 0, 1)}
    after = {**before, "status": "PAID", "payload": None}
    key, value = enc.encode_row(RowChange("shop", "orders", "UPDATE", before, after), 12345, build_ms=0)
    assert key[:8] == (1).to_bytes(8, "big") and int.from_bytes(key[8:16], "big") == len(key) - 16
    assert key[16:] == b'{"ts":12345,"scm":"shop","tbl":"orders","t":1}'
    assert int.from_bytes(value[:8], "big") == len(value) - 8
    body = value[8:].decode()
    assert body.startswith('{"u":{"amount":{"t":246,"f":1,"v":"1.50"},"customer_id":{"t":3,"f":1,"v":3},'
                           '"order_id":{"t":8,"h":true,"f":139,"v":18446744073709551615},"payload":{"t":15,"f":65,"v":null},'
                           '"status":{"t":15,"f":0,"v":"PAID"}')
    assert json.loads(body)["p"]["payload"]["v"] == '\\x00\\xff\\"' and "\\u003cNEW\\u003e" in body
    wkey, wvalue = enc.encode_watermark(99, build_ms=0)
    assert wkey[16:] == b'{"ts":99,"t":3}' and wvalue == b"\x00" * 8
    dkey, dvalue = enc.encode_ddl(DdlEvent(7, "shop", "", "create schema", "CREATE DATABASE `shop`"), build_ms=0)
    assert dkey[16:] == b'{"ts":7,"scm":"shop","t":2}' and dvalue[8:] == b'{"q":"CREATE DATABASE `shop`","t":1}'
