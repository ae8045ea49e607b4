"""Aliyun DTS Avro: no real record exists (ORACLES.md §7), so records are written with the
public `Record` schema (the simulator's encoder) and must decode back to the exact values.
Schema facts are checked against the SDK's and the demo's .avsc files."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from decimal import Decimal

import fastavro
import pytest
from fastavro.schema import to_parsing_canonical_form
from pyspark.sql import functions as F

from cdc_assets.decode import get_decoder
from cdc_assets.decode.dts_avro.events import Reject, decode_value, read_header
from cdc_assets.decode.dts_avro.schema import parsed_record_schema
from cdc_assets.simulator.dts_avro import TYPE_CODES, encode_record, record
from cdc_assets.simulator.protocols import make_encoder
from cdc_assets.simulator.schema import ColumnDef, TableDef
from cdc_assets.simulator.tso import make_tso
from cdc_assets.simulator.workload import DdlEvent, RowChange
from cdc_assets.snapshot.reconstruct import key_actions, reconstruct_table
from cdc_assets.snapshot.window_schema import window_table_schemas
from cdc_assets_tests.helpers import decode, raw_frame, reasons

SDK = "aliyun+aliyun-dts-subscribe-sdk-java/extracted/Record.SCHEMA$.avsc"
DEMO = "aliyun+aliyun-dts-subscribe-demo/python/dts_record_avsc/com.alibaba.dts.formats.avro.Record.avsc"
NS = "com.alibaba.dts.formats.avro."
TS = 1700000000  # sourceTimestamp, seconds
PK = {"pk_uk_info": json.dumps({"PRIMARY": ["id"], "uk_code": ["code"]})}


def v(name, **fields):
    return NS + name, fields


# (column, MySQL type code, Avro value, canonical text, column type)
EVERY_TYPE = [
    ("id", 8, v("Integer", precision=20, value="18446744073709551615"), "18446744073709551615", "decimal(20,0)"),
    ("i", 3, v("Integer", precision=11, value="-2147483648"), "-2147483648", "bigint"),
    ("dec", 246, v("Decimal", value="-12345.678", precision=10, scale=3), "-12345.678", "decimal"),
    ("f", 4, v("Float", value=9.899999618530273, precision=12, scale=-1), "9.9", "float"),
    ("d", 5, v("Float", value=9.00000000009, precision=22, scale=-1), "9.00000000009", "double"),
    ("s", 253, v("Character", charset="utf8mb4", value="héllo 😀".encode()), "héllo 😀", "varchar"),
    ("gbk", 254, v("Character", charset="gbk", value="中文".encode("gbk")), "中文", "char"),
    ("l1", 253, v("Character", charset="latin1", value=b"caf\xe9 \x80"), "café €", "varchar"),
    ("vb", 253, v("Character", charset="binary", value=b"\x00\xff"), "AP8=", "varbinary"),
    ("blob", 252, v("BinaryObject", type="BLOB", value=bytes(range(256))),
     base64.b64encode(bytes(range(256))).decode(), "blob"),
    ("txt", 252, v("TextObject", type="TEXT", value="long text"), "long text", "text"),
    ("js", 245, v("TextObject", type="JSON", value='{"a": 1}'), '{"a": 1}', "json"),
    ("ts", 17, v("Timestamp", timestamp=1644913016, millis=350000), "2022-02-15 08:16:56.350000", "timestamp"),
    ("dt", 18, v("DateTime", year=2022, month=2, day=15, hour=16, minute=16, second=56, millis=35),
     "2022-02-15 16:16:56.000035", "datetime"),
    ("dt0", 18, v("DateTime", year=2022, month=2, day=15, hour=16, minute=16, second=56, millis=None),
     "2022-02-15 16:16:56", "datetime"),
    ("da", 10, v("DateTime", year=2024, month=2, day=29, hour=None, minute=None, second=None, millis=None),
     "2024-02-29", "date"),
    ("tm", 19, v("DateTime", year=None, month=None, day=None, hour=23, minute=59, second=1, millis=None),
     "23:59:01", "time"),
    ("yr", 13, v("DateTime", year=2020, month=None, day=None, hour=None, minute=None, second=None, millis=None),
     "2020", "year"),
    ("tz", 18, v("TimestampWithTimeZone", value={"year": 2022, "month": 2, "day": 15, "hour": 16, "minute": 16,
                                                 "second": 56, "millis": 350000}, timezone="+08:00"),
     "2022-02-15 08:16:56.350000", "timestamp"),
    ("geo", 255, v("BinaryGeometry", type="POINT", value=b"\x01\x01\x00\x00\x00"), "AQEAAAA=", "geometry"),
    ("wkt", 255, v("TextGeometry", type="POINT", value="POINT(1 1)"), "POINT(1 1)", "geometry"),
    ("nul", 3, (NS + "EmptyObject", "NULL"), None, "bigint"),
    ("none", 253, None, None, "varchar"),
]
FIELDS = [{"name": c, "dataTypeNumber": code} for c, code, *_ in EVERY_TYPE]
AFTER = [val for _, _, val, *_ in EVERY_TYPE]


def test_schema_matches_the_sdk_and_reads_demo_records(conformance):
    sdk = fastavro.parse_schema(json.loads((conformance / SDK).read_text()))
    assert to_parsing_canonical_form(sdk) == to_parsing_canonical_form(parsed_record_schema())
    # The demo's Record.avsc has a 15th field (bornTimestamp): its records still decode.
    demo = fastavro.schema.load_schema(str(conformance / DEMO))
    import io

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, demo, {**record("INSERT", TS, "2196@4", object_name="d.t", tags=PK,
                                                    fields=FIELDS[:1], after=AFTER[:1]), "bornTimestamp": 5})
    assert decode_value(buf.getvalue(), parsed_record_schema())["after_vals"] == ["18446744073709551615"]


def test_every_value_type_round_trips():
    rec = record("UPDATE", TS, "2196@4", object_name="shop.items", tags=PK, fields=FIELDS,
                 before=[v("Integer", precision=20, value="18446744073709551615")] + [None] * (len(FIELDS) - 1),
                 after=AFTER)
    out = decode_value(encode_record(rec), parsed_record_schema())
    assert (out["operation"], out["database"], out["table"]) == ("UPDATE", "shop", "items")
    assert out["pk_names"] == ["id"] and out["source_position"] == (4 << 32) | 2196
    assert dict(zip(out["col_names"], out["after_vals"])) == {c: text for c, _, _, text, _ in EVERY_TYPE}
    assert dict(zip(out["col_names"], out["col_types"])) == {
        c: typ if text is not None else None for c, _, _, text, typ in EVERY_TYPE}
    assert (out["code_types"][-2], out["code_types"][-1]) == ("bigint", "varchar")
    assert out["before_vals"][0] == "18446744073709551615" and out["before_vals"][1:] == [None] * (len(FIELDS) - 1)
    assert read_header(encode_record(rec)) == (TS, "UPDATE")


def _table() -> TableDef:
    cols = (ColumnDef("id", "bigint unsigned", primary_key=True), ColumnDef("name", "varchar(20)", nullable=True),
            ColumnDef("amount", "decimal(12,2)", nullable=True), ColumnDef("raw", "varbinary(8)", nullable=True),
            ColumnDef("at", "datetime", nullable=True))
    return TableDef("shop", "items", cols)


def test_simulator_records_decode_to_snapshot(spark):
    """Encoder -> Kafka values -> decoder -> snapshot; plus every quarantine reason."""
    enc = make_encoder("dts-avro", [_table()])
    t0 = make_tso(1700000000123)
    big = 18446744073709551615
    a = {"id": big, "name": "a", "amount": Decimal("1.50"), "raw": b"\xff\x00", "at": datetime(2024, 2, 29, 1, 2, 3, 4)}
    b = {"id": 2, "name": "b", "amount": None, "raw": None, "at": None}
    a2 = {**a, "name": "a2"}
    values = [
        enc.encode_ddl(DdlEvent(t0, "shop", "items", "create table", "CREATE TABLE items (...)"), build_ms=0)[1],
        enc.encode_row(RowChange("shop", "items", "INSERT", None, a), t0 + 1, build_ms=0)[1],
        enc.encode_row(RowChange("shop", "items", "INSERT", None, b), t0 + 2, build_ms=0)[1],
        enc.encode_row(RowChange("shop", "items", "UPDATE", a, a2), t0 + 3, build_ms=0)[1],
        # same second as the INSERT of 2: the binlog position orders them (DELETE wins)
        enc.encode_row(RowChange("shop", "items", "DELETE", b, None), t0 + 4, build_ms=0)[1],
        enc.encode_watermark(t0 + 5, build_ms=0)[1],
        # quarantine
        b"",
        b"\x02\x04",
        encode_record(record("INSERT", TS, "1@1", object_name="shop.items", tags={}, fields=FIELDS[:1],
                             after=AFTER[:1])),
        encode_record(record("INSERT", TS, "1@1", object_name="shop", tags=PK, fields=FIELDS[:1], after=AFTER[:1])),
        encode_record(record("INSERT", TS, "1@1", object_name="shop.items", tags=PK, fields=FIELDS[:2],
                             after=AFTER[:1])),
        encode_record(record("INSERT", TS, "1@1", object_name="shop.items", tags=PK, fields=FIELDS[:1],
                             after=[(NS + "EmptyObject", "NULL")])),
        encode_record(record("INSERT", TS, "1@1", object_name="shop.items", tags=PK, fields=FIELDS[:1] + FIELDS[5:6],
                             after=AFTER[:1] + [v("Character", charset="utf8mb4", value=b"\xff")])),
        encode_record(record("DELETE", TS, "1@1", object_name="shop.items", tags=PK, fields=FIELDS[:1])),
    ]
    good, bad = decode(spark, values, protocol="dts-avro")
    assert reasons(bad) == ["empty_message", "invalid_avro", "missing_primary_key", "missing_table_name",
                            "image_field_mismatch", "null_primary_key", "invalid_character_value",
                            "missing_row_data"]
    assert all(x["value"] == values[x["kafka_offset"]] and x["topic"] == "t" for x in bad)
    ddl, ins_a, ins_b, upd, dele, hb = good
    sec = (1700000000123 // 1000) * 1000
    assert (ddl["event_kind"], ddl["ddl_type"], ddl["ddl_sql"], ddl["table"]) == (
        "ddl", "DDL", "CREATE TABLE items (...)", "items")
    assert ins_a["after"] == {"id": str(big), "name": "a", "amount": "1.50", "raw": "/wA=",
                              "at": "2024-02-29 01:02:03.000004"}
    assert ins_a["column_types"] == {"id": "decimal(20,0)", "name": "varchar", "amount": "decimal",
                                     "raw": "varbinary", "at": "datetime"}
    assert (ins_a["commit_ts"], ins_a["source_position"], ins_a["pk_values"]) == (sec << 18, t0 + 1, [str(big)])
    assert ins_a["event_time"].timestamp() == sec / 1000
    assert upd["before"]["name"] == "a" and upd["after"]["name"] == "a2"
    assert dele["after"] is None and dele["before"]["id"] == "2" and dele["op"] == "DELETE"
    # NULLs take the type the column's values show elsewhere in the input
    assert (dele["column_types"]["raw"], dele["column_types"]["amount"]) == ("varbinary", "decimal")
    assert (hb["event_kind"], hb["watermark_ts"], hb["commit_ts"]) == ("watermark", sec << 18, None)

    changes = get_decoder("dts-avro").decode(raw_frame(spark, values[:6])).where(F.col("_reject_reason").isNull())
    (schema,) = window_table_schemas(changes).values()
    result = reconstruct_table(key_actions(changes), schema, None)
    (row,) = result.frame.collect()
    assert (row["id"], row["name"], row["amount"], bytes(row["raw"]), str(row["at"])) == (
        Decimal(big), "a2", Decimal("1.50"), b"\xff\x00", "2024-02-29 01:02:03.000004")
    assert result.conversion_failures == 0

    routed = get_decoder("dts-avro").route(raw_frame(spark, values[:8])).orderBy("kafka_offset").collect()
    assert [r.routing_ms for r in routed[:6]] == [sec] * 6 and routed[6].routing_ms is not None
    assert [r.watermark_ts for r in routed] == [None] * 8
    opted = get_decoder("dts-avro", {"heartbeat-as-watermark": "true"})
    assert opted.emits_watermarks() and not get_decoder("dts-avro").emits_watermarks()
    opted = opted.route(raw_frame(spark, values[:6]))
    assert [r.watermark_ts for r in opted.orderBy("kafka_offset").collect()] == [None] * 5 + [sec << 18]


@pytest.mark.parametrize("text, expected", [("2196@4", (4 << 32) | 2196), ("mysql-bin.4:2196", None), ("", None)])
def test_source_position(text, expected):
    from cdc_assets.decode.dts_avro.events import source_position

    assert source_position(text) == expected


def test_type_codes_cover_the_simulator_types():
    assert {TYPE_CODES[t] for t in ("int", "bigint", "decimal", "varchar", "varbinary", "datetime")} == {
        3, 8, 246, 253, 18}


def test_null_values_have_no_type_of_their_own():
    """DTS's type code is shared by VARCHAR and VARBINARY (253) and a NULL Decimal has no
    scale: the record-level decode leaves such types open (the Spark side fills them from
    the column's other values, else the code's text default)."""
    rec = record("DELETE", TS, "1@1", object_name="d.t", tags=PK, fields=[FIELDS[0], FIELDS[8]],
                 before=[AFTER[0], None])
    out = decode_value(encode_record(rec), parsed_record_schema())
    assert (out["col_types"], out["code_types"]) == (["decimal(20,0)", None], ["decimal(20,0)", "varchar"])


def test_records_without_a_pk_tag_take_the_primary_key_option(spark):
    """`primary-key` names the key of records whose `pk_uk_info` tag has none; a tag wins."""
    fields, after = FIELDS[:2], AFTER[:2]  # id, i

    def rec(object_name: str, tags: dict) -> bytes:
        return encode_record(record("INSERT", TS, "1@1", object_name=object_name, tags=tags, fields=fields,
                                    after=after))

    to_null = encode_record(record("UPDATE", TS, "1@1", object_name="shop.items", tags={}, fields=fields,
                                   before=after, after=[AFTER[0], (NS + "EmptyObject", "NULL")]))
    values = [rec("shop.items", {}), rec("shop.orders", {}), rec("shop.items", PK), rec("shop.other", {}), to_null]
    decoded = {
        option: [(e["pk_names"], e["pk_values"], e["_reject_reason"])
                 for e in sorted(sum(decode(spark, values, protocol="dts-avro", **{"primary-key": option}), []),
                                 key=lambda e: e["kafka_offset"])]
        for option in ("shop.items:i,id;shop.orders:i", "shop.items:i")
    }
    big, i = "18446744073709551615", "-2147483648"
    assert decoded["shop.items:i,id;shop.orders:i"] == [
        (["i", "id"], [i, big], None), (["i"], [i], None), (["id"], [big], None),
        (None, None, "missing_primary_key"),
        (["i", "id"], [None, big], "null_primary_key")]  # an UPDATE setting a configured key column to NULL
    assert decoded["shop.items:i"][1] == (None, None, "missing_primary_key")


NOT_LOGGED = (NS + "EmptyObject", "NONE")  # the SDK's NoneValue: a column the binlog did not log
# fastavro writes (and reads) the enum bare in beforeImages, where the schema defines it inline
NOT_LOGGED_BEFORE, NULL_BEFORE = "NONE", "NULL"
KEY_FIRST, KEY_SECOND = FIELDS[:2], FIELDS[1::-1]  # (id, i), (i, id); the key is id
ID, I = AFTER[0], AFTER[1]


@pytest.mark.parametrize("op, fields, before, after, outcome", [
    # MINIMAL / NOBLOB images: an after-image without every value cannot be the row
    ("INSERT", KEY_FIRST, None, [ID, NOT_LOGGED], "column_not_logged"),
    ("UPDATE", KEY_FIRST, [ID, I], [ID, NOT_LOGGED], "column_not_logged"),
    # a before-image without its key: which row was it?
    ("UPDATE", KEY_SECOND, [I, NOT_LOGGED_BEFORE], [I, ID], "column_not_logged"),
    ("DELETE", KEY_FIRST, [NOT_LOGGED_BEFORE, I], None, "column_not_logged"),
    # only the key of a before-image is read: a non-key column not logged there is no loss
    ("UPDATE", KEY_FIRST, [ID, NOT_LOGGED_BEFORE], [ID, I], (["18446744073709551615", None],
                                                             ["18446744073709551615", "-2147483648"])),
    ("DELETE", KEY_FIRST, [ID, NOT_LOGGED_BEFORE], None, (["18446744073709551615", None], None)),
    # EmptyObject.NULL is SQL NULL, in either image
    ("INSERT", KEY_FIRST, None, [ID, (NS + "EmptyObject", "NULL")], (None, ["18446744073709551615", None])),
    ("DELETE", KEY_FIRST, [ID, NULL_BEFORE], None, (["18446744073709551615", None], None)),
])
def test_columns_the_binlog_did_not_log_are_not_read_as_null(op, fields, before, after, outcome):
    rec = encode_record(record(op, TS, "1@1", object_name="shop.items", tags=PK, fields=fields, before=before,
                               after=after))
    if isinstance(outcome, str):
        with pytest.raises(Reject) as raised:
            decode_value(rec, parsed_record_schema())
        assert raised.value.reason == outcome and "EmptyObject.NONE" in raised.value.detail
    else:
        out = decode_value(rec, parsed_record_schema())
        assert (out["before_vals"], out["after_vals"]) == outcome


def test_a_row_image_without_a_logged_value_is_quarantined(spark):
    """...and a before-image's non-key column without one is left out of the change log's
    `before` (a NULL there would say the column was NULL)."""
    values = [encode_record(record("UPDATE", TS, "1@1", object_name="shop.items", tags=PK, fields=FIELDS[:2],
                                   before=AFTER[:2], after=[AFTER[0], NOT_LOGGED])),
              encode_record(record("INSERT", TS, "1@1", object_name="shop.items", tags=PK, fields=FIELDS[:2],
                                   after=AFTER[:2])),
              encode_record(record("DELETE", TS, "1@1", object_name="shop.items", tags=PK, fields=FIELDS[:2],
                                   before=[AFTER[0], NOT_LOGGED_BEFORE])),
              encode_record(record("DELETE", TS, "1@1", object_name="shop.items", tags=PK, fields=FIELDS[:2],
                                   before=[AFTER[0], NULL_BEFORE]))]
    good, bad = decode(spark, values, protocol="dts-avro")
    assert reasons(bad) == ["column_not_logged"] and bad[0]["value"] == values[0]
    assert "for i:" in bad[0]["_reject_detail"]
    big = "18446744073709551615"
    assert [(g["op"], g["before"], g["after"]) for g in good] == [
        ("INSERT", None, {"id": big, "i": "-2147483648"}),
        ("DELETE", {"id": big}, None),
        ("DELETE", {"id": big, "i": None}, None)]


@pytest.mark.parametrize("segments, text", [
    ({"hour": -1, "minute": 2, "second": 3}, "-01:02:03"),  # the sign on the hour
    ({"hour": -1, "minute": -2, "second": -3, "millis": -500000}, "-01:02:03.500000"),  # on every segment
    ({"hour": 0, "minute": 0, "second": -1}, "-00:00:01"),  # the SDK: any negative segment
    ({"hour": 838, "minute": 59, "second": 59}, "838:59:59"),
])
def test_a_time_is_negative_when_any_segment_is(segments, text):
    from cdc_assets.decode.dts_avro.events import render

    value = v("DateTime", **{"year": None, "month": None, "day": None, "hour": None, "minute": None, "second": None,
                             "millis": None, **segments})
    assert render(value, 19) == (text, "time")


def test_latin1_is_mysqls_and_decimals_take_no_type_from_one_value():
    from cdc_assets.decode.dts_avro.events import render

    undefined_in_cp1252 = bytes([0x81, 0x8D, 0x8F, 0x90, 0x9D])
    assert render(v("Character", charset="latin1", value=undefined_in_cp1252 + b" caf\xe9 \x80"), 253) == (
        "\x81\x8d\x8f\x90\x9d café €", "varchar")
    with pytest.raises(Reject):  # other charsets stay strict
        render(v("Character", charset="utf8mb4", value=b"\x81"), 253)
    # DTS gives each value its own precision: 1.11 is (3,2) in a DECIMAL(8,2) column
    assert render(v("Decimal", value="1.11", precision=3, scale=2), 246) == ("1.11", "decimal")


@pytest.mark.parametrize("zone, text", [
    ("+08:00", "2022-02-15 08:16:56.350000"), ("+0800", "2022-02-15 08:16:56.350000"),
    ("+8", "2022-02-15 08:16:56.350000"), ("GMT+08:00", "2022-02-15 08:16:56.350000"),
    ("UTC+8", "2022-02-15 08:16:56.350000"), ("Asia/Shanghai", "2022-02-15 08:16:56.350000"),
    ("+08", "2022-02-15 08:16:56.350000"), ("+08:00:30", "2022-02-15 08:16:26.350000"),
    ("-05:30", "2022-02-15 21:46:56.350000"), ("UTC", "2022-02-15 16:16:56.350000"),
])
def test_timestamp_with_time_zone_reads_the_sdks_zone_forms(zone, text):
    from cdc_assets.decode.dts_avro.events import render

    local = {"year": 2022, "month": 2, "day": 15, "hour": 16, "minute": 16, "second": 56, "millis": 350000}
    assert render(v("TimestampWithTimeZone", value=local, timezone=zone), 18) == (text, "timestamp")


@pytest.mark.parametrize("zone", ["Asia", "Mars/Olympus", "x" * 300, "28800", "-18000", "+08:99", "+123", "+19:00",
                                  "0800", "CST"])
def test_zones_that_are_no_offset_or_zone_are_rejected(zone):
    """Seconds or minutes without a sign would silently move the time: not read as offsets."""
    from cdc_assets.decode.dts_avro.events import _zone

    with pytest.raises(Reject) as raised:
        _zone(zone)
    assert raised.value.reason == "invalid_timestamp_value"


@pytest.mark.parametrize("written, text", [("1.000E-7", "0.0000001000"), ("0E-10", "0.0000000000"),
                                           ("-1.5e3", "-1500"), ("12.50", "12.50")])
def test_decimal_text_is_plain_digits_with_its_scale(written, text):
    from cdc_assets.decode.dts_avro.events import render

    assert render(v("Decimal", value=written, precision=0, scale=0), 246) == (text, "decimal")


def test_an_unknown_zone_or_a_source_that_is_not_mysql_is_quarantined(spark):
    local = {"year": 2022, "month": 2, "day": 15, "hour": 16, "minute": 16, "second": 56, "millis": None}
    tz_field = [f for f in FIELDS if f["name"] == "tz"]
    bad_zone = record("INSERT", TS, "1@1", object_name="shop.items", tags=PK, fields=FIELDS[:1] + tz_field,
                      after=AFTER[:1] + [v("TimestampWithTimeZone", value=local, timezone="Mars/Olympus")])
    oracle = record("INSERT", TS, "1@1", object_name="shop.items", tags=PK, fields=FIELDS[:1], after=AFTER[:1])
    oracle["source"] = {"sourceType": "Oracle", "version": "19c"}
    drds = {**oracle, "source": {"sourceType": "DRDS", "version": "5.4"}}
    good, bad = decode(spark, [encode_record(r) for r in (bad_zone, oracle, drds)], protocol="dts-avro")
    assert reasons(bad) == ["invalid_timestamp_value", "unsupported_source_type"]
    assert "Oracle" in bad[1]["_reject_detail"]
    assert [g["after"] for g in good] == [{"id": "18446744073709551615"}]  # DRDS is MySQL-family
