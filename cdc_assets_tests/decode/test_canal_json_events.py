"""The per-message Canal-JSON parser without Spark: one Arrow batch in, events out."""

import functools
import json

import pytest

from cdc_assets.contracts.schemas import REJECT_DETAIL, REJECT_REASON
from cdc_assets.decode.canal_json.events import decode_batches
from cdc_assets_tests.decode.arrow_batch import decode_values

_decode = functools.partial(decode_values, decode_batches)


def _row(**over) -> dict:
    msg = {"id": 0, "database": "db", "table": "t", "pkNames": ["id"], "isDdl": False, "type": "UPDATE",
           "es": 1_700_000_000_000, "mysqlType": {"id": "int", "b": "varbinary(4)", "ts": "timestamp"},
           "data": [{"id": "1", "b": "\u00ff\u0000", "ts": "2024-03-01 08:00:00"}],
           "old": [{"b": "a"}], "_tidb": {"commitTs": 445566778899001122}}
    msg.update(over)
    return msg


def test_update_with_partial_old_binary_and_time_zone():
    (ev,) = _decode(_row(), time_zone="+08:00")
    after, before = dict(ev["after"]), dict(ev["before"])
    assert after == {"id": "1", "b": "/wA=", "ts": "2024-03-01 00:00:00"}
    assert before == {"id": "1", "b": "YQ==", "ts": "2024-03-01 00:00:00"}
    assert (ev["op"], ev["commit_ts"], ev["pk_values"], ev["event_ms"]) == (
        "UPDATE", 445566778899001122, ["1"], 1_700_000_000_000)
    assert ev[REJECT_REASON] is None


def test_batched_rows_without_extension_use_es_and_the_batch_id():
    msg = _row(type="insert", id=7, old=None, _tidb=None, data=[{"id": "1"}, {"id": "2"}])
    events = _decode(msg)
    assert [(e["event_index"], e["op"], e["pk_values"]) for e in events] == [(0, "INSERT", ["1"]), (1, "INSERT", ["2"])]
    assert {e["commit_ts"] for e in events} == {1_700_000_000_000 << 18}
    assert {e["source_position"] for e in events} == {7}


_EXTENSION = functools.partial(decode_values, functools.partial(decode_batches, tidb_extension=True))


def test_with_the_extension_a_row_without_tidb_is_quarantined_never_placed_at_es():
    """Issue 44 item 3: a stream that carries `_tidb` (enable-tidb-extension=true): one
    message without it has no commit time; `es` would be a guess."""
    with_ts, without, empty = _row(), _row(_tidb=None, id=3), _row(_tidb={})
    events = _EXTENSION(with_ts, without, empty)
    assert [(e["kafka_offset"], e["commit_ts"], e[REJECT_REASON]) for e in events] == [
        (0, 445566778899001122, None), (1, None, "missing_commit_ts"), (2, None, "missing_commit_ts")]
    assert "enable-tidb-extension" in events[1][REJECT_DETAIL]
    assert events[1]["event_ms"] == 1_700_000_000_000  # es kept as the event's time only


def test_with_the_extension_a_ddl_without_tidb_is_quarantined():
    ddl = {"id": 0, "database": "db", "table": "t", "isDdl": True, "type": "ALTER", "es": 1_700_000_000_000,
           "sql": "ALTER TABLE t ADD COLUMN c INT"}
    (ev,) = _EXTENSION(ddl)
    assert (ev["event_kind"], ev["commit_ts"], ev[REJECT_REASON]) == ("ddl", None, "missing_commit_ts")
    (ok,) = _EXTENSION({**ddl, "_tidb": {"commitTs": 445566778899001122}})
    assert (ok["commit_ts"], ok[REJECT_REASON]) == (445566778899001122, None)


def test_with_the_extension_watermarks_are_unchanged():
    (ev,) = _EXTENSION({"id": 0, "isDdl": False, "type": "TIDB_WATERMARK", "es": 1,
                        "_tidb": {"watermarkTs": 445566778899001122}})
    assert (ev["event_kind"], ev["watermark_ts"], ev[REJECT_REASON]) == ("watermark", 445566778899001122, None)


def test_a_commit_ts_of_zero_is_kept_never_replaced_by_es():
    """A `_tidb.commitTs` that is there is the commit time: the window step quarantines 0
    (implausible_commit_ts) instead of guessing one from `es`."""
    (ev,) = _decode(_row(_tidb={"commitTs": 0}, id=9))
    assert (ev["commit_ts"], ev["source_position"], ev[REJECT_REASON]) == (0, None, None)


def test_without_the_extension_es_is_used():
    """Official Canal (no extension): commit_ts from `es`, ties ordered by the batch `id`."""
    (ev,) = decode_values(functools.partial(decode_batches, tidb_extension=False), _row(_tidb=None, id=9))
    assert (ev["commit_ts"], ev["source_position"], ev[REJECT_REASON]) == (1_700_000_000_000 << 18, 9, None)


def test_non_text_values_are_kept_as_their_json_text():
    (ev,) = _decode(_row(type="INSERT", old=None, data=[{"id": 5, "b": None, "ts": {"x": [1, True]}}]))
    assert dict(ev["after"]) == {"id": "5", "b": None, "ts": '{"x":[1,true]}'}
    assert ev["pk_values"] == ["5"]


def test_numbers_written_as_json_numbers_keep_their_text():
    """Flink's canal-json format writes values as JSON numbers: a DECIMAL(38,20) or a
    DECIMAL(65) integer must not be rounded through a double, in `data` or in `old`."""
    (ev,) = _decode(b'{"database":"db","table":"t","pkNames":["id"],"type":"UPDATE","es":1700000000000,'
                    b'"mysqlType":{"id":"decimal(65,0)","d":"decimal(38,20)","w":"double","n":"int","j":"json"},'
                    b'"data":[{"id":123456789012345678901234567890,"d":0.10000000000000000555,"w":5.18,"n":7,'
                    b'"j":{"x":1.50}}],"old":[{"d":1.50}]}')
    assert dict(ev["after"]) == {"id": "123456789012345678901234567890", "d": "0.10000000000000000555",
                                 "w": "5.18", "n": "7", "j": '{"x":1.5}'}
    assert dict(ev["before"])["d"] == "1.50"
    assert ev["pk_values"] == ["123456789012345678901234567890"] and ev[REJECT_REASON] is None


def test_only_the_messages_holding_a_rounded_number_are_decoded_again():
    """A batch: a plain message, a two-row message with numbers and a binary column (the
    values `canonical` changes), a rejected message; events keep their order and sources."""
    types = {"id": "int", "d": "decimal(30,20)", "b": "varbinary(2)"}
    numbers = (b'{"database":"db","table":"t","pkNames":["id"],"type":"INSERT","es":1700000000000,'
               b'"mysqlType":{"id":"int","d":"decimal(30,20)","b":"varbinary(2)"},'
               b'"data":[{"id":2,"d":1.00000000000000000001,"b":"\u00ff"},{"id":3,"d":2.5,"b":null}]}')
    events = _decode(_row(type="INSERT", old=None, mysqlType=types, data=[{"id": "1", "d": "0.5", "b": "a"}]),
                     numbers, _row(type="INSERT", old=None, data=[{"id": None}]))
    assert [(e["kafka_offset"], e["event_index"], e[REJECT_REASON]) for e in events] == [
        (0, 0, None), (1, 0, None), (1, 1, None), (2, 0, "null_primary_key")]
    assert [dict(e["after"]) for e in events[:3]] == [
        {"id": "1", "d": "0.5", "b": "YQ=="}, {"id": "2", "d": "1.00000000000000000001", "b": "/w=="},
        {"id": "3", "d": "2.5", "b": None}]
    assert [e["pk_values"] for e in events[:3]] == [["1"], ["2"], ["3"]]


def test_numbers_in_columns_whose_text_is_converted_are_exact_too():
    """Binary, ENUM and (outside UTC) TIMESTAMP values are rewritten from their text: a double's
    text would be the wrong one. An int elsewhere is what makes Arrow refuse the batch."""
    (ev,) = _decode(b'{"database":"db","table":"t","pkNames":["id"],"type":"INSERT","es":1700000000000,'
                    b'"mysqlType":{"id":"int","b":"varbinary(30)","e":"enum(\'a\',\'b\')"},'
                    b'"data":[{"id":1,"b":0.10000000000000000555,"e":1.00000000000000000001}]}')
    assert dict(ev["after"]) == {"id": "1", "b": "MC4xMDAwMDAwMDAwMDAwMDAwMDU1NQ==", "e": "1.00000000000000000001"}


def test_a_message_too_deep_to_read_its_numbers_exactly_is_invalid_json():
    """orjson reads 1,000 levels, the standard parser (the exact second read) fewer."""
    nested = "[" * 1000 + "]" * 1000
    (ev,) = _decode(('{"database":"db","table":"t","pkNames":["id"],"type":"INSERT","es":1700000000000,'
                     f'"x":{nested},"mysqlType":{{"id":"int","d":"decimal(30,20)"}},'
                     '"data":[{"id":"1","d":1.00000000000000000001}]}').encode())
    assert (ev[REJECT_REASON], ev[REJECT_DETAIL]) == (
        "invalid_json", "the value's JSON nests too deeply to read its numbers exactly")


@pytest.mark.parametrize("value, reason", [
    (None, "empty_message"),
    (b"\xff{}", "invalid_utf8"),
    (b'{"data": [', "invalid_json"),
    ([1, 2], "unexpected_shape"),
    (_row(es="soon"), "unexpected_shape"),
    (_row(_tidb={"commitTs": 1 << 64}), "unexpected_shape"),
    (_row(data=["not an object"]), "unexpected_shape"),
    (_row(type="UPSERT"), "unknown_event_type"),
    # official Canal's records that are not row events: XA COMMIT changes nothing (its rows
    # came at XA PREPARE); a QUERY may be the only trace of DML, a rollback takes rows back
    (_row(type="XACOMMIT", _tidb=None, id=3, data=None, table=""), "control_record"),
    (_row(type="QUERY", _tidb=None, id=3, data=None, sql="UPDATE t SET b = 1"), "query_event"),
    (_row(type="XAROLLBACK", _tidb=None, id=3, data=None), "xa_rollback"),
    # a STATEMENT / MIXED binlog's DML can also come with its own type, its text and no rows
    (_row(type="INSERT", _tidb=None, id=3, data=None, sql="INSERT INTO t VALUES (1, 'a')"), "query_event"),
    (_row(type="DELETE", _tidb=None, id=3, data=[], sql="DELETE FROM t"), "query_event"),
    (_row(data=[]), "missing_row_data"),
    (_row(data=None, sql=" "), "missing_row_data"),
    (_row(_tidb=None, es=None), "missing_commit_ts"),
    (_row(_tidb=None, es=0), "missing_commit_ts"),
    (_row(_tidb=None, es=1 << 45), "missing_commit_ts"),  # es << 18 would not be a positive long
    ({"isDdl": True, "type": "ALTER", "sql": "x", "es": -1}, "missing_commit_ts"),
    (_row(table=""), "missing_table_name"),
    (_row(pkNames=[]), "missing_primary_key"),
    (_row(data=[{"id": None}]), "null_primary_key"),
    (_row(data=[{"id": "1", "b": "\u4e2d"}]), "invalid_binary_value"),
    ({"isDdl": True, "type": "ALTER", "sql": "  ", "_tidb": {"commitTs": 5}}, "missing_ddl_sql"),
    ({"isDdl": False, "type": "TIDB_WATERMARK", "_tidb": {}}, "missing_watermark_ts"),
    ({"isDdl": False, "type": "TIDB_WATERMARK", "_tidb": {"watermarkTs": 0}}, "missing_watermark_ts"),
])
def test_each_unusable_message_gets_one_reason(value, reason):
    (ev,) = _decode(value)
    assert ev[REJECT_REASON] == reason


def test_a_value_too_deep_to_write_as_text_rejects_only_its_message():
    deep = json.loads("[" * 600 + "]" * 600)
    plain = {"id": "int", "j": "json"}  # no conversions: the value reaches the Arrow batch as is
    events = _decode(_row(mysqlType=plain, type="INSERT", old=None, data=[{"id": "1", "j": [2]}, {"id": "2", "j": deep}]),
                     _row(mysqlType=plain, type="INSERT", old=None, data=[{"id": "1", "j": [1]}]))
    assert [(e["kafka_offset"], e["event_index"], e[REJECT_REASON]) for e in events] == [
        (0, 0, "unexpected_shape"), (1, 0, None)]  # the whole first message, as a decoder reject
    assert events[0][REJECT_DETAIL].startswith("a value cannot be read as text: ")
    assert dict(events[1]["after"]) == {"id": "1", "j": "[1]"}


def test_a_message_is_decoded_whole_or_rejected_whole():
    deep = json.loads("[" * 600 + "]" * 600)  # too deep to write back as text
    msg = _row(type="INSERT", old=None, data=[{"id": "1", "b": "a"}, {"id": "2", "b": deep}])
    (ev,) = _decode(msg)
    assert (ev["event_index"], ev[REJECT_REASON]) == (0, "unexpected_shape")
    assert ev[REJECT_DETAIL].startswith("a value cannot be read as text: ")


def test_raw_bytes_come_back_on_rejected_events_only():
    """The quarantine needs a message's raw key / value; decoded events do not carry them."""
    batched = _row(type="INSERT", old=None, data=[{"id": "1"}, {"id": None}])  # the second row has no key
    fine = _row(type="INSERT", old=None, data=[{"id": "3"}])
    events = _decode(batched, fine, keys=[b"k0", b"k1"])
    assert [(e["kafka_offset"], e["event_index"], e[REJECT_REASON], e["key"], e["value"]) for e in events] == [
        (0, 0, None, None, None),
        (0, 1, "null_primary_key", b"k0", json.dumps(batched).encode()),
        (1, 0, None, None, None),
    ]
    assert all(e["key"] is None and e["value"] is None for e in _decode(fine, fine))


_KEY_ONLY = {"mysqlType": {"id": "int"}, "data": [{"id": "7"}], "old": None}


@pytest.mark.parametrize("tidb, reason", [
    ({"onlyHandleKey": True}, "handle_key_only"),
    ({"claimCheckLocation": "s3://b/x.json"}, "claim_check_not_supported"),
    ({"onlyHandleKey": True, "claimCheckLocation": "s3://b/x.json"}, "claim_check_not_supported"),
])
@pytest.mark.parametrize("op", ["INSERT", "UPDATE"])
def test_a_large_row_sent_as_its_handle_key_is_never_applied_as_the_row(tidb, reason, op):
    """TiCDC's large-message handling sends the key columns only: as a row they would null
    every other column, so an INSERT / UPDATE is quarantined."""
    (ev,) = _decode(_row(type=op, **_KEY_ONLY, _tidb={"commitTs": 445566778899001122, **tidb}))
    assert ev[REJECT_REASON] == reason


@pytest.mark.parametrize("tidb", [{"onlyHandleKey": True}, {"claimCheckLocation": "s3://b/x.json"}])
def test_a_large_delete_sent_as_its_handle_key_is_usable(tidb):
    (ev,) = _decode(_row(type="DELETE", **_KEY_ONLY, _tidb={"commitTs": 445566778899001122, **tidb}))
    assert (ev[REJECT_REASON], ev["op"], ev["pk_values"], dict(ev["before"])) == (None, "DELETE", ["7"], {"id": "7"})


def test_old_ticdc_claim_check_message_names_its_reason():
    """Older TiCDC's claim-check message holds nothing but `_tidb`."""
    (ev,) = _decode({"_tidb": {"commitTs": 445566778899001122, "claimCheckLocation": "s3://b/x.json"}})
    assert (ev[REJECT_REASON], ev[REJECT_DETAIL]) == (
        "claim_check_not_supported", "row stored externally at 's3://b/x.json'")


def test_enum_and_set_values_are_always_codes_even_when_members_are_numbers():
    """Canal and TiCDC write an ENUM's 1-based index and a SET's bit mask, never the name:
    in `enum('0','1')` the value "1" is '0'. Index 0 is MySQL's '' for an invalid value."""
    types = {"id": "int", "e": "enum('0','1')", "s": "set('2','1')"}
    rows = [{"id": "1", "e": "1", "s": "1"}, {"id": "2", "e": "2", "s": "2"}, {"id": "3", "e": "0", "s": "0"},
            {"id": "4", "e": "9", "s": "3"}]
    events = _decode(_row(type="INSERT", old=None, mysqlType=types, data=rows))
    assert [(dict(e["after"])["e"], dict(e["after"])["s"]) for e in events] == [
        ("0", "2"), ("1", "1"), ("", ""), ("9", "2,1")]  # index 9 is no member: kept as written
    beyond = _decode(_row(type="INSERT", old=None, mysqlType=types, data=[{"id": "5", "e": "-1", "s": "4"},
                                                                         {"id": "6", "e": "1", "s": "-1"}]))
    assert [(dict(e["after"])["e"], dict(e["after"])["s"]) for e in beyond] == [("-1", "4"), ("0", "-1")]


def test_a_set_of_64_members_reads_its_top_bit():
    """A SET mask is a uint64: bit 63 is the 64th member (Canal and TiCDC write it unsigned)."""
    members = ",".join(f"'m{i}'" for i in range(1, 65))
    msg = _row(type="INSERT", old=None, mysqlType={"id": "int", "s": f"set({members})"},
               data=[{"id": "1", "s": str((1 << 63) | 1)}])
    (ev,) = _decode(msg)
    assert (ev[REJECT_REASON], dict(ev["after"])["s"]) == (None, "m1,m64")
    (beyond,) = _decode(_row(type="INSERT", old=None, mysqlType={"id": "int", "s": "set('a','b')"},
                             data=[{"id": "1", "s": "4"}]))
    assert dict(beyond["after"])["s"] == "4"  # a mask beyond the members keeps its text
