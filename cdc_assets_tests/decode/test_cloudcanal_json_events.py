"""The per-message CloudCanal JSON parser without Spark: one Arrow batch in, events out."""

import functools

import pytest

from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets.decode.cloudcanal_json.events import decode_batches
from cdc_assets_tests.decode.arrow_batch import decode_values

_decode = functools.partial(decode_values, decode_batches)
_EXEC_MS = 1_669_789_152_000


def _row(**over) -> dict:
    msg = {"action": "UPDATE", "bid": 12, "db": "shop", "schema": "shop", "table": "t", "isDdl": False,
           "entryType": "ROWDATA", "execTs": _EXEC_MS, "pks": ["id"],
           "dbValType": {"id": "int(11)", "b": "varbinary(4)", "ts": "timestamp(3)", "e": "enum('lo','hi')"},
           "data": [{"id": "1", "b": "\u00ff\u0000", "ts": "2024-03-01 08:00:00.5", "e": "2"}],
           "before": [{"b": "a"}]}
    msg.update(over)
    return msg


def test_update_with_partial_before_binary_enum_and_time_zone():
    (ev,) = _decode(_row(), time_zone="+08:00")
    assert dict(ev["after"]) == {"id": "1", "b": "/wA=", "ts": "2024-03-01 00:00:00.5", "e": "hi"}
    assert dict(ev["before"]) == {"id": "1", "b": "YQ==", "ts": "2024-03-01 00:00:00.5", "e": "hi"}
    assert (ev["op"], ev["database"], ev["commit_ts"], ev["source_position"], ev["event_ms"]) == (
        "UPDATE", "shop", _EXEC_MS << 18, 12, _EXEC_MS)
    assert (ev["pk_names"], ev["pk_values"], ev[REJECT_REASON]) == (["id"], ["1"], None)


def test_batched_rows_deletes_and_schemas():
    events = _decode(
        _row(action="insert", bid=0, db="pg", schema="public", before=[], data=[{"id": "1"}, {"id": "2"}]),
        _row(action="DELETE", data=[{"id": "3", "b": "x"}], before=[{}]),  # an empty before image: the row
        _row(action="DELETE", data=[{"id": "4", "b": "x"}], before=[{"id": "4", "b": "y"}]),
    )
    assert [(e["kafka_offset"], e["event_index"], e["op"], e["pk_values"]) for e in events] == [
        (0, 0, "INSERT", ["1"]), (0, 1, "INSERT", ["2"]), (1, 0, "DELETE", ["3"]), (2, 0, "DELETE", ["4"])]
    assert {events[0]["database"], events[0]["source_position"]} == {"pg.public", None}
    assert [dict(e["before"])["b"] for e in events[2:]] == ["eA==", "eQ=="]
    assert all(e["after"] is None for e in events[2:])


def test_markers_and_ddl():
    marker, ddl = _decode(_row(entryType="TransactionEnd", action="", data=[], pks=[]),
                          _row(isDdl=None, ddl=True, action="ALTER", sql="alter table t add c int", data=[]))
    assert (marker["event_kind"], marker["watermark_ts"], marker["commit_ts"]) == ("watermark", _EXEC_MS << 18, None)
    assert (ddl["event_kind"], ddl["ddl_type"], ddl["ddl_sql"], ddl["commit_ts"], ddl["pk_names"]) == (
        "ddl", "ALTER", "alter table t add c int", _EXEC_MS << 18, None)


def test_ddl_declares_the_table_after_it_from_table_changes():
    """The spec's DDL example: `tableChanges.table` lists the columns after the DDL (with
    `position`) and the key; a malformed one is ignored, the SQL still read."""
    columns = [{"jdbcType": 12, "name": n, "position": p, "typeExpression": t, "typeName": t.split("(")[0]}
               for n, p, t in (("col2", 1, "varchar(22)"), ("col_pk", 2, "decimal(10,2)"), ("col1", 0, "int(11)"))]
    ddl = _row(isDdl=True, action="ALTER", sql="alter table t add col2 varchar(22) null", data=[], before=[])
    declared, as_array, no_type, bad_pk = _decode(
        {**ddl, "tableChanges": {"table": {"columns": columns, "primaryKeyColumnNames": ["col_pk"]}, "type": "ALTER"}},
        {**ddl, "tableChanges": [{"table": {"columns": columns[:1]}}]},
        {**ddl, "tableChanges": {"table": {"columns": [{"name": "c"}], "primaryKeyColumnNames": ["c"]}}},
        {**ddl, "tableChanges": {"table": {"columns": columns, "primaryKeyColumnNames": "col_pk"}}},
    )
    assert list(declared["column_types"]) == [("col1", "int(11)"), ("col2", "varchar(22)"),
                                              ("col_pk", "decimal(10,2)")]
    assert (declared["pk_names"], declared[REJECT_REASON], declared["ddl_sql"]) == (
        ["col_pk"], None, "alter table t add col2 varchar(22) null")
    assert (list(as_array["column_types"]), as_array["pk_names"]) == ([("col2", "varchar(22)")], None)
    assert (no_type["column_types"], no_type["pk_names"], no_type[REJECT_REASON]) == (None, None, None)
    assert (len(bad_pk["column_types"]), bad_pk["pk_names"], bad_pk[REJECT_REASON]) == (3, None, None)


def test_numbers_written_as_json_numbers_keep_their_text():
    """The spec writes values as strings; a number written as a JSON number must not be
    rounded through a double (a DECIMAL(38,20), a DECIMAL(65) integer)."""
    (ev,) = _decode(b'{"action":"INSERT","db":"s","table":"t","execTs":5,"pks":["id"],'
                    b'"data":[{"id":18446744073709551615,"d":0.10000000000000000555,"f":1.50,"n":7,'
                    b'"j":{"x":1.50}}]}')
    assert dict(ev["after"]) == {"id": "18446744073709551615", "d": "0.10000000000000000555", "f": "1.50", "n": "7",
                                 "j": '{"x":1.5}'}  # nested JSON as in any other message: not re-quoted
    (ev,) = _decode(b'{"action":"DELETE","db":"s","table":"t","execTs":5,"pks":["id"],'
                    b'"data":[{"id":"9"}],"before":[{"id":123456789012345678901234567890}]}')
    assert dict(ev["before"]) == {"id": "123456789012345678901234567890"}  # alone, and in `before` only
    assert ev["pk_values"] == ["123456789012345678901234567890"]


def test_images_databases_and_the_events_other_fields():
    upd, short, short2, gone, dbonly, schemaonly, marker, ddl = _decode(
        _row(before=None),  # an UPDATE without a before image
        _row(data=[{"id": "1"}, {"id": "2"}], before=[{"id": "0"}]),  # a shorter before list
        _row(action="DELETE", data=[{"id": "5"}], before=[{"note": "x"}]),  # partial before without the key
        _row(action="INSERT", schema="", before=[]),
        _row(action="INSERT", db="", schema="public", before=[]),
        _row(entryType="TRANSACTIONEND", action="", data=[], pks=[], bid=40),
        _row(isDdl=True, action="TRUNCATE", sql="truncate t", data=[], bid=41),
    )
    assert (upd["before"], upd[REJECT_REASON]) == (None, None)
    assert (dict(short["before"]), dict(short["after"])) == ({"id": "0"}, {"id": "1"})
    assert (short2["event_index"], short2["before"], short2["pk_values"]) == (1, None, ["2"])
    assert gone[REJECT_REASON] == "null_primary_key" and dict(gone["before"]) == {"note": "x"}
    assert (dbonly["database"], schemaonly["database"]) == ("shop", "public")
    assert (marker["database"], marker["table"], marker["event_ms"], marker["source_position"]) == (
        "shop", "t", _EXEC_MS, None)
    assert (ddl["source_position"], ddl["database"], ddl["op"], ddl["column_types"]) == (41, "shop", None, None)


def test_the_first_failing_rule_wins():
    (ev,) = _decode(_row(execTs=None, action="UPSERT", data=[]))
    assert ev[REJECT_REASON] == "missing_commit_ts"
    (ev,) = _decode(_row(action="UPSERT", table="", pks=[]))
    assert ev[REJECT_REASON] == "unknown_event_type"
    (ev,) = _decode(_row(isDdl=False, ddl=True, action="INSERT"))  # `isDdl` decides
    assert (ev["event_kind"], ev[REJECT_REASON]) == ("row", None)


def test_the_largest_exec_ts_that_shifts():
    (ev,) = _decode(_row(execTs=(1 << 45) - 1))
    assert ev["commit_ts"] == ((1 << 45) - 1) << 18 and ev["commit_ts"] < 1 << 63


@pytest.mark.parametrize("value, reason", [
    (None, "empty_message"),
    (b"\xff{}", "invalid_utf8"),
    (b'{"data": [', "invalid_json"),
    (b'{"action": "INSERT", "data": [{"id": NaN}]}', "invalid_json"),
    (b'{"action": "INSERT", "data": [{"id": 1e400}]}', "invalid_json"),  # beyond a double
    ([1, 2], "unexpected_shape"),
    (_row(execTs="soon"), "unexpected_shape"),
    (_row(isDdl="false"), "unexpected_shape"),
    (_row(pks="id"), "unexpected_shape"),
    (_row(data=["not an object"]), "unexpected_shape"),
    (_row(entryType="TRANSACTIONEND", data=3), "unexpected_shape"),  # a bad field, whatever the kind
    (_row(execTs=None), "missing_commit_ts"),
    (_row(execTs=-1), "missing_commit_ts"),
    (_row(execTs=0), "missing_commit_ts"),
    (_row(execTs=1 << 45), "missing_commit_ts"),  # execTs << 18 would not be a positive long
    (_row(action="UPSERT"), "unknown_event_type"),
    (_row(action=None), "unknown_event_type"),
    (_row(data=[]), "missing_row_data"),
    (_row(table=""), "missing_table_name"),
    (_row(pks=[]), "missing_primary_key"),
    (_row(data=[{"id": None}]), "null_primary_key"),
    (_row(data=[{"id": "1", "b": "\u4e2d"}]), "invalid_binary_value"),
    (_row(isDdl=True, action="ALTER", sql="  "), "missing_ddl_sql"),
    (_row(entryType="TRANSACTIONEND", execTs=None), "missing_commit_ts"),
])
def test_each_unusable_message_gets_one_reason(value, reason):
    (ev,) = _decode(value)
    assert ev[REJECT_REASON] == reason


def test_a_batch_keeps_going_past_unusable_messages():
    events = _decode(b"{", _row(action="INSERT", before=[]), keys=[b"k0", b"k1"])
    assert [(e["kafka_offset"], e[REJECT_REASON], e["key"]) for e in events] == [
        (0, "invalid_json", b"k0"), (1, None, None)]


def test_a_value_nested_too_deep_to_write_as_text_is_unexpected_shape():
    """orjson writes at most 254 levels back as text: such a message is quarantined as a shape
    no CloudCanal producer writes, not as a decoder error."""
    deep = "[" * 600 + "]" * 600
    (ev,) = _decode(('{"action":"INSERT","db":"s","table":"t","execTs":5,"pks":["id"],'
                     f'"dbValType":{{"id":"int","j":"json"}},"data":[{{"id":"1","j":{deep}}}]}}').encode())
    assert ev[REJECT_REASON] == "unexpected_shape"


def test_numbers_in_binary_enum_and_zoned_timestamp_columns_keep_their_text():
    (ev,) = _decode(b'{"action":"INSERT","db":"s","table":"t","execTs":5,"pks":["id"],'
                    b'"dbValType":{"id":"int","b":"varbinary(30)","e":"enum(\'lo\',\'hi\')","ts":"timestamp"},'
                    b'"data":[{"id":"1","b":0.10000000000000000555,"e":1.00000000000000000001,"ts":1.5}]}',
                    time_zone="+08:00")
    assert dict(ev["after"])["b"] == "MC4xMDAwMDAwMDAwMDAwMDAwMDU1NQ=="
    assert dict(ev["after"])["e"] == "1.00000000000000000001"  # not an integer index: kept as written
    # not a wall clock: left as written, for the value conversion to quarantine (`invalid_value`)
    assert (dict(ev["after"])["ts"], ev[REJECT_REASON]) == ("1.5", None)


def test_an_enum_value_that_is_a_member_stays_that_name():
    """CloudCanal documents no ENUM / SET form and might write names: a value that is a member
    stays one (unlike Canal-JSON, whose values are always codes); other integers are codes."""
    events = _decode(b'{"action":"INSERT","db":"s","table":"t","execTs":5,"pks":["id"],'
                     b'"dbValType":{"id":"int","e":"enum(\'0\',\'1\')"},'
                     b'"data":[{"id":"1","e":"1"},{"id":"2","e":"2"}]}')
    assert [dict(e["after"])["e"] for e in events] == ["1", "1"]
