"""CloudCanal JSON: the spec's examples (shared/specs/cloudcanal-message-formats.txt; no real
sample or upstream test exists, ORACLES.md §8) and hand-written messages in its shape."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from cdc_assets.decode import get_decoder
from cdc_assets.snapshot.reconstruct import key_actions, reconstruct_table
from cdc_assets.snapshot.window_schema import window_table_schemas
from cdc_assets_tests.helpers import decode, raw_frame, reasons

SPEC = Path(__file__).resolve().parents[3] / "shared" / "specs" / "cloudcanal-message-formats.txt"


def _spec_examples() -> list[dict]:
    """The CloudCanal Json section's two JSON examples, `//` comments stripped."""
    text = SPEC.read_text()
    section = text[text.index("CloudCanal Json\n\nParameter"):text.index("\nCanal Json\n\nParameter")]
    out, depth, start = [], 0, None
    for i, ch in enumerate(section):
        if ch == "{" and depth == 0 and section[i + 1] == "\n":
            start = i
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "}" and depth == 0 and start is not None:
            out.append(json.loads(re.sub(r"//[^\n]*", "", section[start:i + 1])))
            start = None
    return out


def msg(**fields) -> bytes:
    base = {"bid": 0, "db": "shop", "schema": "shop", "table": "orders", "isDdl": False,
            "entryType": "ROWDATA", "execTs": 1669789152000, "sendTs": 1669789153377, "sql": "",
            "pks": ["id"], "before": [], "jdbcType": {"id": 4, "note": 12, "amount": 3, "raw": -3},
            "dbValType": {"id": "int(11)", "note": "varchar(22)", "amount": "decimal(10,2)", "raw": "varbinary(8)"}}
    return json.dumps({**base, **fields}).encode()


def test_spec_examples(spark):
    """The DML example has placeholder `action` and empty `pks`: quarantined. The DDL
    example decodes to its statement."""
    dml, ddl = _spec_examples()
    assert dml["action"] == "INSERT/DELETE/UPDATE" and ddl["action"] == "ALTER"
    fixed = {**dml, "action": "UPDATE", "pks": ["col_pk"]}
    good, bad = decode(spark, [json.dumps(dml).encode(), json.dumps(ddl).encode(), json.dumps(fixed).encode()],
                       protocol="cloudcanal-json")
    assert reasons(bad) == ["unknown_event_type"]
    d, u = good
    assert (d["event_kind"], d["ddl_type"], d["database"], d["table"]) == ("ddl", "ALTER", "db_test", "table_test")
    assert d["ddl_sql"] == "alter table table_test add col2 varchar(22) null"
    assert d["commit_ts"] == 1669789188000 << 18
    assert (u["op"], u["pk_names"], u["pk_values"]) == ("UPDATE", ["col_pk"], ["11"])
    assert u["before"] == {"col1": "22", "col2": "22", "col_pk": "22"}
    assert u["after"] == {"col1": "11", "col2": "11", "col_pk": "11"}
    assert u["column_types"]["col1"] == "varchar(22)"
    assert u["event_time"].timestamp() * 1000 == 1669789152000 and u["source_position"] is None


def test_batches_images_markers_and_snapshot(spark):
    msgs = [
        msg(action="INSERT", bid=7, data=[{"id": "1", "note": "a", "amount": "1.50", "raw": "\u00ff\u0000"},
                                          {"id": "2", "note": "b", "amount": "2.00", "raw": None}]),
        # partial before image: only the changed column
        msg(action="UPDATE", bid=8, execTs=1669789153000, data=[{"id": "1", "note": "a2", "amount": "1.50", "raw": "\u00ff\u0000"}],
            before=[{"note": "a"}]),
        msg(action="DELETE", bid=9, execTs=1669789154000, data=[{"id": "2", "note": "b", "amount": "2.00", "raw": None}]),
        msg(entryType="TRANSACTIONEND", action="", execTs=1669789154000, pks=[]),
        msg(action="INSERT", db="pg", schema="public", data=[{"id": "5", "note": "p"}]),
    ]
    good, bad = decode(spark, msgs, protocol="cloudcanal-json")
    assert bad == []
    ins1, ins2, upd, dele, marker, pg = good
    assert [(e["kafka_offset"], e["event_index"], e["pk_values"]) for e in (ins1, ins2)] == [(0, 0, ["1"]), (0, 1, ["2"])]
    assert ins1["after"]["raw"] == "/wA=" and ins1["source_position"] == 7
    assert upd["before"] == {"id": "1", "note": "a", "amount": "1.50", "raw": "/wA="}
    assert upd["after"]["note"] == "a2" and upd["commit_ts"] == 1669789153000 << 18
    assert dele["before"]["note"] == "b" and dele["after"] is None and dele["pk_values"] == ["2"]
    assert (marker["event_kind"], marker["watermark_ts"], marker["commit_ts"]) == ("watermark", 1669789154000 << 18, None)
    assert (pg["database"], pg["table"]) == ("pg.public", "orders")

    decoder = get_decoder("cloudcanal-json")
    changes = decoder.decode(raw_frame(spark, msgs[:3])).where(F.col("_reject_reason").isNull())
    (schema,) = window_table_schemas(changes).values()
    frame = reconstruct_table(key_actions(changes), schema, None).frame
    (row,) = frame.collect()
    assert (row["id"], row["note"], str(row["amount"]), bytes(row["raw"])) == (1, "a2", "1.50", b"\xff\x00")

    # markers feed the landing watermark only when asked to
    routed = [r.watermark_ts for r in decoder.route(raw_frame(spark, msgs)).collect()]
    assert routed == [None] * 5
    opted = get_decoder("cloudcanal-json", {"transaction-end-as-watermark": "true"})
    assert [r.watermark_ts for r in opted.route(raw_frame(spark, msgs)).collect()][3] == 1669789154000 << 18


def test_ddl_flag_spelled_ddl(spark):
    """ORACLES.md §8: the doc's example once spells the flag `ddl`."""
    good, _ = decode(spark, [msg(action="CREATE", ddl=True, isDdl=None, sql="create table t(id int)", pks=[])],
                     protocol="cloudcanal-json")
    assert (good[0]["event_kind"], good[0]["ddl_sql"]) == ("ddl", "create table t(id int)")


@pytest.mark.parametrize(
    "message, reason",
    [
        (b"", "empty_message"),
        (b"{nope", "invalid_json"),
        (b'{"data": 3}', "unexpected_shape"),
        (msg(action="INSERT", data=[{"id": "1"}], execTs=None), "missing_commit_ts"),
        (msg(action="UPSERT", data=[{"id": "1"}]), "unknown_event_type"),
        (msg(action="INSERT", data=[]), "missing_row_data"),
        (msg(action="INSERT", table="", data=[{"id": "1"}]), "missing_table_name"),
        (msg(action="INSERT", pks=[], data=[{"id": "1"}]), "missing_primary_key"),
        (msg(action="INSERT", data=[{"id": None}]), "null_primary_key"),
        (msg(action="INSERT", data=[{"id": "1", "raw": "\u6d4b"}]), "invalid_binary_value"),
    ],
)
def test_unusable_messages_get_a_reason(spark, message, reason):
    good, bad = decode(spark, [message], protocol="cloudcanal-json")
    assert good == [] and reasons(bad) == [reason]
    assert bad[0]["value"] == message
