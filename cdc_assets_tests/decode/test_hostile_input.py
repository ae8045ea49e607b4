"""Issue 42: hostile input in the decoders, message by message as a broken producer writes it.

- names of the wrong JSON type are `unexpected_shape`, never a table named after their text;
- a message above `max-message-bytes` is `message_too_large`, with its size and digests;
- a message that cannot be used at all is one quarantine row, however many events it holds.

Pure Python: each decoder's Arrow batch function, no Spark.
"""

from __future__ import annotations

import functools
import hashlib
import json

import pytest

from cdc_assets.contracts.schemas import REJECT_DETAIL, REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.decode.canal_json import events as canal_json_events
from cdc_assets.decode.cloudcanal_json import events as cloudcanal_json_events
from cdc_assets.decode.common import arrow_events
from cdc_assets.decode.common.key_option import NO_KEYS
from cdc_assets.decode.debezium import events as debezium_events
from cdc_assets.decode.dts_avro import decoder as dts_avro
from cdc_assets.decode.open_protocol import events as open_protocol
from cdc_assets_tests.decode.arrow_batch import decode_values

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
    """TiCDC's Open Protocol batch: the version, then a frame per key; a frame per value."""
    def frames(docs) -> bytes:
        return b"".join(len(d).to_bytes(8, "big") + d for d in (json.dumps(x).encode() for x in docs))
    return (1).to_bytes(8, "big") + frames(e[0] for e in events), frames(e[1] for e in events)


ROW = {"u": {"id": {"t": 3, "h": True, "f": 11, "v": 1}}}


@pytest.mark.parametrize("field, value, kind", [("tbl", 0, "number"), ("tbl", [], "array"),
                                                ("scm", {"a": 1}, "object"), ("scm", False, "boolean")])
def test_open_protocol_name_of_the_wrong_type_is_unexpected_shape(field, value, kind):
    """`0`, `[]` and `false` used to pass as no name at all (missing_table_name)."""
    key, value_bytes = op_message(({"ts": TSO, "scm": "shop", "tbl": "orders", "t": 1, field: value}, ROW))
    (ev,) = open_protocol.decode_message(key, value_bytes, open_protocol.zone("UTC"))
    assert (ev[REJECT_REASON], ev[REJECT_DETAIL]) == ("unexpected_shape", f"`{field}` is a JSON {kind}, not a string")


# -- item 5: a message above max-message-bytes ----------------------------------------------
def _dts(batches, time_zone, max_bytes):
    return dts_avro._decode_batches(batches, NO_KEYS, max_bytes=max_bytes)


def _debezium_max(batches, time_zone, max_bytes):
    return debezium_events.decode_batches(
        batches, debezium_events.Options(derive_commit_ts=True, key_option=NO_KEYS, max_message_bytes=max_bytes))


GUARDED = {
    "canal-json": lambda b, time_zone, max_bytes: canal_json_events.decode_batches(b, time_zone, max_bytes=max_bytes),
    "cloudcanal-json": lambda b, time_zone, max_bytes: cloudcanal_json_events.decode_batches(
        b, time_zone, max_bytes=max_bytes),
    "debezium-json": _debezium_max,
    "open-protocol": lambda b, time_zone, max_bytes: open_protocol.decode_batches(b, time_zone, max_bytes=max_bytes),
    "dts-avro": _dts,
}


@pytest.mark.parametrize("name", sorted(GUARDED))
def test_a_message_above_max_message_bytes_is_one_reject_with_its_size_and_digest(name, monkeypatch):
    """Key and value count, as landed. The quarantine keeps a prefix of each (here 10 bytes)."""
    monkeypatch.setattr(arrow_events, "KEPT_PREFIX_BYTES", 10)
    key, value = op_message(({"ts": TSO, "scm": "shop", "tbl": "orders", "t": 1}, ROW), ({"ts": TSO, "t": 3}, {}))
    limit = len(key) + len(value) - 1
    small_key, small_value = op_message(({"ts": TSO, "t": 3}, {}))
    batch_function = functools.partial(GUARDED[name], max_bytes=limit)
    events = decode_values(batch_function, value, small_value, keys=[key, small_key])
    big = events[0]
    reason, detail = (big["reject_reason"], big["reject_detail"]) if name == "dts-avro" else (
        big[REJECT_REASON], big[REJECT_DETAIL])
    assert (big["kafka_offset"], big.get("event_index", 0), reason) == (0, 0, "message_too_large")
    assert detail.startswith(
        f"{len(key) + len(value)} bytes (key {len(key)}, value {len(value)}), above max-message-bytes {limit}")
    assert f"value SHA-256 {hashlib.sha256(value).hexdigest()}, key SHA-256 {hashlib.sha256(key).hexdigest()}" \
        in detail
    assert (big["key"], big["value"]) == (key[:10], value[:10])
    assert all(e.get(REJECT_REASON, e.get("reject_reason")) != "message_too_large" for e in events[1:])  # read


def test_a_message_at_the_limit_is_read_and_its_true_reason_kept():
    """At max-message-bytes or below, a broken message gets its own reason and all its bytes."""
    cut = json.dumps(ticdc_canal()).encode()[:-2]
    (ev,) = decode_values(functools.partial(GUARDED["canal-json"], max_bytes=len(cut)), cut)
    assert (ev[REJECT_REASON], ev["value"]) == ("invalid_json", cut)
    key, value = op_message(({"ts": TSO, "scm": "shop", "tbl": "orders", "t": 1}, ROW))
    (ev,) = decode_values(functools.partial(GUARDED["open-protocol"], max_bytes=len(key) + len(value)),
                          value[:-3], keys=[key])
    assert (ev[REJECT_REASON], ev["key"], ev["value"]) == ("truncated_frame", key, value[:-3])


@pytest.mark.parametrize("value", ["0", "-1", "16MiB", ""])
def test_max_message_bytes_is_a_positive_number_of_bytes(value):
    with pytest.raises(ValueError, match="max-message-bytes"):
        get_decoder("canal-json", {"max-message-bytes": value})
    assert get_decoder("dts-avro").max_message_bytes == 16 << 20
    assert get_decoder("debezium", {"max-message-bytes": 1000}).max_message_bytes == 1000


# -- item 7: an unusable message is one quarantine row ----------------------------------------
def test_a_canal_message_unusable_as_a_whole_is_one_row_whatever_its_rows():
    """Official Canal batches rows: a message without pkNames used to be a reject per row."""
    rows = [{"id": str(i), "v": "x"} for i in range(5)]
    no_key = official_canal(pkNames=None, data=rows, old=None, type="INSERT")
    xa = official_canal(type="XACOMMIT", data=rows, old=None)
    unknown = official_canal(type="UPSERT", data=rows, old=None)
    events = decoded(canal_json_events.decode_batches, no_key, xa, unknown)
    assert [(e[0], e[1], e[2]) for e in events] == [
        (0, 0, "missing_primary_key"), (1, 0, "control_record"), (2, 0, "unknown_event_type")]
    # a row's own fault still costs that row only: the others are applied
    mixed = official_canal(data=[{"id": "1", "v": "b"}, {"id": None, "v": "c"}, {"id": "3", "v": "d"}],
                           old=[{"v": "a"}, {"v": "b"}, {"v": "c"}])
    assert [(e[1], e[2]) for e in decoded(canal_json_events.decode_batches, mixed)] == [
        (0, None), (1, "null_primary_key"), (2, None)]


def test_a_cloudcanal_message_unusable_as_a_whole_is_one_row_whatever_its_rows():
    rows = [{"id": str(i)} for i in range(3)]
    events = decoded(cloudcanal_json_events.decode_batches, cloudcanal(pks=[], data=rows),
                     cloudcanal(execTs=None, data=rows))
    assert [(e[0], e[1], e[2]) for e in events] == [(0, 0, "missing_primary_key"), (1, 0, "missing_commit_ts")]


def test_a_broken_open_protocol_batch_is_one_row_and_a_broken_event_costs_one():
    good = ({"ts": TSO, "scm": "shop", "tbl": "orders", "t": 1}, ROW)
    bad = (good[0], {"u": {"id": {"t": 3, "h": True, "f": 11, "v": [1]}}})
    key, value = op_message(good, good, good)
    _, one_bad = op_message(bad, good, good)
    events = decode_values(open_protocol.decode_batches, value[:-1], one_bad, keys=[key, key])
    assert [(e["kafka_offset"], e["event_index"], e[REJECT_REASON]) for e in events] == [
        (0, 0, "truncated_frame"), (1, 0, "unexpected_shape"), (1, 1, None), (1, 2, None)]


def test_open_protocol_decoder_passes_its_max_message_bytes_option(spark):
    from cdc_assets_tests.helpers import raw_frame

    key = (1).to_bytes(8, "big") + len(b'{"ts":1,"t":1}').to_bytes(8, "big") + b'{"ts":1,"t":1}'
    value = len(b'{"u":{}}').to_bytes(8, "big") + b'{"u":{}}'
    decoder = get_decoder("open-protocol", {"max-message-bytes": "10"})
    rows = decoder.decode(raw_frame(spark, [value], keys=[key])).collect()
    assert [r[REJECT_REASON] for r in rows] == ["message_too_large"]
