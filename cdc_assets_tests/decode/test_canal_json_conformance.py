"""TiCDC Canal-JSON conformance: the real messages of shared/conformance decode to what
ORACLES.md §1 says (the upstream tests' asserted values)."""

from __future__ import annotations

import base64

import pytest

from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets_tests.helpers import crlf_records, decode, reasons

MCCC = "pingcap+ticdc/extracted/mccc_decoder_test.DataContent{}.ticdc-canal-json.crlf.txt"

NO_EXTENSION = {"enable-tidb-extension": "false"}

# ORACLES.md §1.1: (commitTs, pk values, first_name, last_name, _tidb_softdelete_time)
DATA_CONTENT_1 = [
    (464043256649875456, ["20"], "t", "TT", None),
    (464043256649875456, ["21"], "u", "UU", None),
    (464073967049113629, ["5"], "e", "E", None),
    (464073967049113629, ["6"], "f", "F", None),
    (464074440664678441, ["7"], "g", "G", None),
    (464074446196178963, ["7"], "g", "G", "2026-02-05 22:58:40.992217"),
    (464074440387592202, ["8"], "h", "H", None),
    (464074446600667164, ["8"], "h", "H", "2026-02-05 22:58:40.992217"),
]
ORIGIN_TS = [None, None, "464073966942421014", "464073966942421014", "464074440387592202", None, None,
             "464074446196178963"]


def test_data_content_1_records(spark, conformance):
    good, bad = decode(spark, crlf_records((conformance / MCCC.format(1)).read_bytes()))
    assert bad == []
    assert len(good) == 8
    for ev, (ts, pk, first, last, soft), origin in zip(good, DATA_CONTENT_1, ORIGIN_TS):
        assert ev["event_kind"] == "row"
        assert (ev["database"], ev["table"]) == ("test_active", "message")
        assert ev["commit_ts"] == ts
        assert ev["pk_names"] == ["id"] and ev["pk_values"] == pk
        a = ev["after"]
        assert (a["first_name"], a["last_name"], a["_tidb_softdelete_time"]) == (first, last, soft)
        assert a["_tidb_origin_ts"] == origin
    assert [e["op"] for e in good] == ["INSERT"] * 5 + ["UPDATE", "INSERT", "UPDATE"]
    # UPDATE carries the full old row as the before image.
    assert good[5]["before"]["_tidb_softdelete_time"] is None
    assert good[5]["before"]["_tidb_origin_ts"] == "464074440387592202"
    assert good[5]["column_types"]["_tidb_softdelete_time"] == "timestamp"


def test_data_content_2_composite_key(spark, conformance):
    good, bad = decode(spark, crlf_records((conformance / MCCC.format(2)).read_bytes()))
    assert bad == []
    assert [(e["commit_ts"], e["pk_names"], e["pk_values"], e["after"]["last_name"]) for e in good] == [
        (464085165736198159, ["id", "first_name"], ["100", "a"], "A"),
        (464085169694572575, ["id", "first_name"], ["101", "b"], "B"),
    ]


def test_invalid_json_is_quarantined_and_does_not_take_the_next_record(spark, conformance):
    first = crlf_records((conformance / MCCC.format(2)).read_bytes())[0]
    good, bad = decode(spark, [b"{invalid json}", first])
    assert len(good) == 1 and good[0]["pk_values"] == ["100", "a"]
    assert reasons(bad) == ["invalid_json"]
    assert bad[0]["kafka_offset"] == 0


def test_only_broken_records_yield_no_events(spark):
    good, bad = decode(spark, crlf_records(b"{broken}\r\n{also broken}\r\n"))
    assert good == [] and reasons(bad) == ["invalid_json", "invalid_json"]


def test_empty_lines_around_records_are_ignored(spark, conformance):
    data = b"\r\n\r\n" + (conformance / MCCC.format(2)).read_bytes() + b"\r\n\r\n"
    good, bad = decode(spark, crlf_records(data))
    assert len(good) == 2 and bad == []


def test_numeric_primary_key_value_is_accepted_as_its_text(spark):
    """Deliberate difference from TiCDC's decoder, which rejects `"id":20` (ORACLES.md §1.1):
    a JSON number is unambiguous, so we keep the event with the number's text as value."""
    msg = (b'{"id":0,"database":"d","table":"t","pkNames":["id"],"isDdl":false,"type":"INSERT",'
           b'"es":1,"ts":1,"mysqlType":{"id":"int"},"data":[{"id":20}],"old":null,'
           b'"_tidb":{"commitTs":464043256649875456}}')
    good, bad = decode(spark, [msg])
    assert bad == [] and good[0]["pk_values"] == ["20"]


def test_watermark_message(spark, conformance):
    path = conformance / "pingcap+tiflow/extracted/canal_flat_test.TestCheckpointEventValueMarshal.expectedJSON.json"
    good, bad = decode(spark, [path.read_bytes()])
    assert bad == []
    (ev,) = good
    assert ev["event_kind"] == "watermark" and ev["watermark_ts"] == 1024
    assert ev["database"] is None and ev["table"] is None and ev["op"] is None
    assert ev["after"] is None and ev["before"] is None and ev["column_types"] is None


def test_ddl_message_with_extension(spark, conformance):
    path = conformance / "pingcap+tiflow/extracted/canal_flat_test.TestDDLEventWithExtensionValueMarshal.expectedJSON.json"
    (ev,), bad = decode(spark, [path.read_bytes()])
    assert bad == []
    assert ev["event_kind"] == "ddl" and ev["ddl_type"] == "CREATE"
    assert (ev["database"], ev["table"]) == ("cdc", "person")
    assert ev["commit_ts"] == 417318403368288260
    assert ev["ddl_sql"] == ("create table person(id int, name varchar(32), tiny tinyint unsigned, "
                             "comment text, primary key(id))")
    assert ev["event_time"].timestamp() * 1000 == 1591943372224


def test_terminated_batch_insert_update_delete(spark, conformance):
    path = conformance / ("pingcap+tiflow/extracted/canal_json_txn_event_decoder_test."
                          "TestCanalJSONBatchDecoderWithTerminator.canal-json.txt")
    # TiCDC's test encodes without the extension (its own default): declared here.
    good, bad = decode(spark, crlf_records(path.read_bytes()), **NO_EXTENSION)
    assert bad == []
    assert [(e["event_kind"], e["op"]) for e in good] == [("row", "INSERT"), ("row", "UPDATE"), ("row", "DELETE")]
    update = good[1]
    assert update["before"]["OfficeLocation"] == "New York" and update["after"]["OfficeLocation"] == "Los Angeles"
    assert good[2]["after"] is None and good[2]["before"]["id"] == "101"
    # Without `_tidb` the commit ts is derived from `es` (millisecond precision).
    assert good[0]["commit_ts"] == 1668067205238 << 18


def test_without_tidb_in_an_extension_stream_is_quarantined_never_placed_at_es(spark, conformance):
    """Issue 44 item 3: with enable-tidb-extension=true (the default) the same messages have
    no commit time; each is quarantined, none applied at a time guessed from `es`."""
    path = conformance / ("pingcap+tiflow/extracted/canal_json_txn_event_decoder_test."
                          "TestCanalJSONBatchDecoderWithTerminator.canal-json.txt")
    good, bad = decode(spark, crlf_records(path.read_bytes()))
    assert good == []
    assert [(b["op"], b["commit_ts"], b[REJECT_REASON]) for b in bad] == [
        ("INSERT", None, "missing_commit_ts"), ("UPDATE", None, "missing_commit_ts"),
        ("DELETE", None, "missing_commit_ts")]
    assert [b["kafka_offset"] for b in bad] == [0, 1, 2]


def test_mixed_case_table_name_is_kept(spark, conformance):
    path = conformance / ("tidb-incubator+TiBigData/extracted/"
                          "flink-1.14.TiDBCanalJsonDeserializationSchemaTest.testIgnoreCase.ticdc-canal.json")
    (ev,), _ = decode(spark, [path.read_bytes()])
    assert (ev["database"], ev["table"], ev["op"]) == ("test", "test_Cdc", "INSERT")
    assert ev["commit_ts"] == 437430669647544322
    assert ev["after"] == {"Name": "zs", "id": "1"}


def test_every_tidb_type_value(spark, conformance):
    path = conformance / ("tidb-incubator+TiBigData/extracted/"
                          "flink-1.14.CanalDeserializationSchemaTest.JSON_DATA.ticdc-canal.json")
    # written without `_tidb` (the extension off): declared, so `es` is its commit time
    (ev,), bad = decode(spark, [path.read_bytes()], **NO_EXTENSION)
    assert bad == []
    a = ev["after"]
    assert ev["commit_ts"] == 441735015790804992  # es << 18, as TiBigData derives it
    assert (a["c1"], a["c5"], a["c6"], a["c18"], a["c19"], a["c20"]) == (
        "1", "5", "chartype", "1.2339999675750732", "2.456789", "123.456")
    assert base64.b64decode(a["c12"]) == b"binarytype" + b"\x00" * 10
    assert base64.b64decode(a["c13"]) == b"varbinarytype"
    assert base64.b64decode(a["c17"]) == b"longblobtype"
    assert (a["c21"], a["c22"], a["c23"], a["c24"], a["c25"]) == (
        "2023-05-26", "15:15:56", "2023-05-26 15:15:56", "2023-05-26 15:15:56", "2020")
    assert (a["c27"], a["c28"], a["c29"]) == ('{"a": 1, "b": 2}', "1", "1")


def test_risingwave_data_types(spark, conformance):
    path = conformance / "risingwavelabs+risingwave/extracted/test_data_types.ticdc-canal.json"
    (ev,), _ = decode(spark, [path.read_bytes()], **NO_EXTENSION)  # no `_tidb` in it
    a = ev["after"]
    assert base64.b64decode(a["binary"]) == b"Joseph\x00\x00\x00\x00"
    assert (a["date"], a["datetime"], a["time"], a["timestamp"], a["char"]) == (
        "2023-04-20", "2023-02-15 13:01:36", "20:23:41", "2022-10-13 12:12:54", "Kathleen")
    assert a["json"] == '{"a": 1, "b": 2}'


def test_docs_examples(spark, conformance):
    lines = crlf_records((conformance / "pingcap+docs/ticdc/ticdc-canal-json.md.examples.stripped.jsonl").read_bytes())
    good, bad = decode(spark, lines)
    assert bad == []
    ddl, dml, wm = good
    assert (ddl["event_kind"], ddl["ddl_sql"], ddl["commit_ts"]) == ("ddl", "drop database if exists test",
                                                                    429918007904436226)
    assert ddl["database"] == "test" and ddl["table"] is None
    assert dml["after"]["c_bigint"] == "9223372036854775807" and dml["after"]["c_tinyint"] == "127"
    assert (wm["event_kind"], wm["watermark_ts"]) == ("watermark", 429918007904436226)


def test_docs_varbinary_bytes_round_trip(spark):
    """ORACLES.md §1.8: TiCDC's documented binary encoding decodes back to the exact bytes."""
    value = "\\u0005\\u0007\\n\\u000f$2+cx\\u003c\\u0026\u00ff\u00fe-7F"
    msg = ('{"database":"d","table":"t","pkNames":["id"],"isDdl":false,"type":"INSERT","es":1,'
           '"mysqlType":{"id":"int","c_varbinary":"varbinary"},'
           '"data":[{"id":"1","c_varbinary":"' + value + '"}],"_tidb":{"commitTs":5}}').encode()
    (ev,), _ = decode(spark, [msg])
    assert list(base64.b64decode(ev["after"]["c_varbinary"])) == [5, 7, 10, 15, 36, 50, 43, 99, 120, 60, 38, 255,
                                                                 254, 45, 55, 70]


@pytest.mark.parametrize(
    "message, reason",
    [
        (b"", "empty_message"),
        (b"\xff\xfe{}", "invalid_utf8"),
        (b'{"data": 5}', "unexpected_shape"),
        (b'{"database":"d","table":"t","pkNames":["id"],"isDdl":false,"type":"UPSERT","data":[{"id":"1"}],'
         b'"_tidb":{"commitTs":5}}', "unknown_event_type"),
        (b'{"database":"d","table":"t","pkNames":["id"],"isDdl":false,"type":"INSERT","data":[],'
         b'"_tidb":{"commitTs":5}}', "missing_row_data"),
        (b'{"database":"d","table":"t","pkNames":["id"],"isDdl":false,"type":"INSERT","data":[{"id":"1"}]}',
         "missing_commit_ts"),
        (b'{"database":"d","table":"t","pkNames":null,"isDdl":false,"type":"INSERT","data":[{"id":"1"}],'
         b'"_tidb":{"commitTs":5}}', "missing_primary_key"),
        (b'{"database":"d","table":"t","pkNames":["id"],"isDdl":false,"type":"INSERT","data":[{"id":null}],'
         b'"_tidb":{"commitTs":5}}', "null_primary_key"),
        (b'{"database":"d","table":"t","pkNames":["id"],"isDdl":false,"type":"INSERT",'
         b'"mysqlType":{"id":"int","b":"blob"},"data":[{"id":"1","b":"\xe6\xb5\x8b"}],"_tidb":{"commitTs":5}}',
         "invalid_binary_value"),
        (b'{"database":"","table":"","isDdl":false,"type":"TIDB_WATERMARK","_tidb":{}}', "missing_watermark_ts"),
    ],
)
def test_unusable_messages_get_a_reason(spark, message, reason):
    good, bad = decode(spark, [message])
    assert good == [] and reasons(bad) == [reason]
    assert bad[0]["value"] == message
