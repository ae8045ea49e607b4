"""TiCDC Debezium (`debezium`) conformance: ORACLES.md §3 — TiCDC's codec_test vectors and
the real Debezium `datatype.dbz.json` row (inputs: datatype.ddl.sql / datatype.dml.sql)."""

from __future__ import annotations

import base64
import json

import pytest

from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.snapshot.ddl.parse import TruncateTable, parse_ddl
from cdc_assets_tests.helpers import raw_frame

VECTORS = "pingcap+ticdc/extracted/debezium_codec_test"
TESTDATA = "pingcap+ticdc/pkg/sink/codec/debezium/testdata"
NAMES = [
    "TestEncodeInsert.1", "TestEncodeInsert.2", "TestEncodeUpdate.1", "TestEncodeUpdate.2", "TestEncodeUpdate.3",
    "TestEncodeDelete.1", "TestEncodeDelete.2", "TestDDLEvent.1", "TestDDLEvent.2", "TestDDLEvent.3",
    "TestCheckPointEvent.1",
]


def decode_all(spark, values, keys=None, protocol="debezium", **options) -> list[dict]:
    out = get_decoder(protocol, options or None).decode(raw_frame(spark, values, keys=keys))
    return [r.asDict(recursive=True) for r in out.orderBy("kafka_offset").collect()]


@pytest.fixture(scope="module")
def vectors(spark, conformance) -> dict[str, dict]:
    keys = [(conformance / VECTORS / f"{n}.key.json").read_bytes() for n in NAMES]
    values = [(conformance / VECTORS / f"{n}.value.json").read_bytes() for n in NAMES]
    return dict(zip(NAMES, decode_all(spark, values, keys)))


def test_every_vector_decodes(vectors):
    assert {n: e[REJECT_REASON] for n, e in vectors.items()} == {n: None for n in NAMES}


@pytest.mark.parametrize("name", ["TestEncodeInsert.1", "TestEncodeInsert.2"])
def test_insert(vectors, name):
    ev = vectors[name]
    assert (ev["event_kind"], ev["op"], ev["database"], ev["table"], ev["commit_ts"]) == (
        "row", "INSERT", "test", "table1", 1)
    assert (ev["pk_names"], ev["pk_values"], ev["before"], ev["after"]) == (["tiny"], ["1"], None, {"tiny": "1"})
    assert ev["source_position"] is None  # TiCDC: file "" — commit_ts is the total order


def test_column_types_come_from_the_schema_when_present(vectors):
    assert vectors["TestEncodeInsert.2"]["column_types"] == {"tiny": "smallint"}  # Connect int16
    # Schema disabled: only the JSON kind of the value is known.
    assert vectors["TestEncodeInsert.1"]["column_types"] == {"tiny": "decimal"}


@pytest.mark.parametrize("name", ["TestEncodeUpdate.1", "TestEncodeUpdate.2"])
def test_update_with_old_value(vectors, name):
    ev = vectors[name]
    assert (ev["op"], ev["before"], ev["after"], ev["pk_values"], ev["commit_ts"]) == (
        "UPDATE", {"tiny": "2"}, {"tiny": "1"}, ["1"], 1)


def test_update_without_old_value(vectors):
    """debezium-output-old-value=false: no `before` field; the key comes from `after`."""
    ev = vectors["TestEncodeUpdate.3"]
    assert (ev["op"], ev["before"], ev["after"], ev["pk_values"]) == ("UPDATE", None, {"tiny": "1"}, ["1"])


@pytest.mark.parametrize("name", ["TestEncodeDelete.1", "TestEncodeDelete.2"])
def test_delete(vectors, name):
    ev = vectors[name]
    assert (ev["op"], ev["before"], ev["after"], ev["pk_values"], ev["table"]) == (
        "DELETE", {"tiny": "2"}, None, ["2"], "table1")


def test_ddl_events(vectors):
    got = [(vectors[n]["event_kind"], vectors[n]["ddl_type"], vectors[n]["database"], vectors[n]["table"],
            vectors[n]["commit_ts"], vectors[n]["ddl_sql"], vectors[n]["pk_names"])
           for n in ("TestDDLEvent.1", "TestDDLEvent.2", "TestDDLEvent.3")]
    assert got == [
        ("ddl", "ALTER", "test", "table2", 1, "RENAME TABLE test.table1 to test.table2", ["id"]),
        ("ddl", "CREATE", "test", "table1", 1, "CREATE TABLE test.table1(id int(10) primary key)", ["id"]),
        ("ddl", "DROP", "test", "table2", 1, "DROP TABLE test.table2", None),
    ]
    assert all(vectors[n]["after"] is None and vectors[n]["op"] is None for n in ("TestDDLEvent.1", "TestDDLEvent.3"))


def test_checkpoint_event_is_a_watermark(vectors):
    ev = vectors["TestCheckPointEvent.1"]
    assert (ev["event_kind"], ev["watermark_ts"], ev["commit_ts"], ev["database"], ev["table"], ev["op"]) == (
        "watermark", 3, None, None, None, None)


def test_route(spark, conformance):
    values = [(conformance / VECTORS / f"{n}.value.json").read_bytes() for n in NAMES]
    routed = get_decoder("debezium").route(raw_frame(spark, values)).orderBy("kafka_offset").collect()
    assert [r.watermark_ts for r in routed] == [None] * 10 + [3]
    assert [r.routing_ms for r in routed] == [0] * 11  # commit_ts 1 and 3 are in millisecond 0


# ORACLES.md §3.1: datatype.dml.sql as real Debezium 2.4 wrote it (payload.after), decoded.
DATATYPE_AFTER = {
    "pk": "1",
    "col_d_2023": "2023-11-30", "col_d_1000": "1000-01-01", "col_d_9999": "9999-12-31", "col_d_0000": None,
    "col_dt": "2023-11-30 12:34:56", "col_dt_fsp_0": "2023-11-30 12:34:56",
    "col_dt_fsp_1": "2023-11-30 12:34:56.100000", "col_dt_fsp_4": "2023-11-30 12:34:56.123500",
    "col_dt_fsp_6": "2023-11-30 12:34:56.123456", "col_dt_0000": None,
    "col_t": "12:34:56", "col_t_fsp_0": "12:34:56", "col_t_fsp_1": "12:34:56.100000",
    "col_t_fsp_4": "12:34:56.123500", "col_t_fsp_6": "12:34:56.123456", "col_t_neg": "-12:34:56.123456",
    "col_ts": "2023-11-30 12:34:56", "col_ts_fsp_0": "2023-11-30 12:34:56",
    "col_ts_fsp_1": "2023-11-30 12:34:56.100000", "col_ts_fsp_5": "2023-11-30 12:34:56.123460",
    "col_ts_fsp_6": "2023-11-30 12:34:56.123456",
    "col_y": "2023",
    "col_bit_1": "1", "col_bit_5": "16", "col_bit_6": "16", "col_bit_60": "16",
    "col_varchar": "foo", "col_char": "foo",
    # binary.handling.mode=base64 makes them Connect strings: see the pinned test below.
    "col_varbinary": "Zm9v", "col_binary": base64.b64encode(b"foo" + b"\x00" * 97).decode(), "col_blob": "Zm9v",
    "col_decimal": "12345.12345", "col_numeric": "12345.12345", "col_float": "12345.123", "col_double": "12345.12345",
    "col_int": "-2147483648", "col_int_unsigned": "4294967295", "col_tinyint": "-128", "col_tinyint_unsigned": "255",
    "col_smallint": "-32768", "col_smallint_unsigned": "65535", "col_mediumint": "-8388608",
    "col_mediumint_unsigned": "16777215", "col_bigint": "-9223372036854775808",
    "col_bigint_unsigned": "-1",  # no tidb_type: the wrapped int64 is all there is
    "col_enum": "a", "col_enum_invalid": "", "col_set": "a,b", "col_set_invalid": "", "col_json": '["foo"]',
}
DATATYPE_TYPES = {
    "pk": "int", "col_d_2023": "date", "col_dt": "datetime", "col_dt_fsp_6": "datetime", "col_t": "time",
    "col_ts": "timestamp", "col_y": "year", "col_bit_1": "boolean", "col_bit_5": "bit", "col_varchar": "varchar",
    "col_varbinary": "varchar", "col_decimal": "double", "col_float": "float", "col_int_unsigned": "bigint",
    "col_tinyint": "smallint", "col_bigint_unsigned": "bigint", "col_enum": "enum", "col_set": "set",
    "col_json": "json",
}


@pytest.fixture(scope="module")
def datatype(spark, conformance):
    value = (conformance / TESTDATA / "datatype.dbz.json").read_bytes()
    key = (conformance / TESTDATA / "datatype.dbz.key.json").read_bytes()
    (plain,) = decode_all(spark, [value], [key], protocol="debezium-json")
    (ticdc,) = decode_all(spark, [value], [key], protocol="debezium")
    return plain, ticdc


def test_datatype_values(datatype):
    ev, _ = datatype
    assert ev[REJECT_REASON] is None
    assert (ev["op"], ev["database"], ev["table"], ev["pk_names"], ev["pk_values"]) == (
        "INSERT", "test", "foo", ["pk"], ["1"])
    assert ev["after"] == DATATYPE_AFTER
    assert {c: ev["column_types"][c] for c in DATATYPE_TYPES} == DATATYPE_TYPES


def test_datatype_order_comes_from_the_binlog(datatype):
    ev, _ = datatype
    assert ev["commit_ts"] == 1701673705000 << 18  # source.ts_ms << 18
    assert ev["source_position"] == (5 << 32) | 10394  # mysql-bin.000005, pos 10394
    assert ev["event_time"].timestamp() * 1000 == 1701673705000


def test_real_debezium_message_needs_debezium_json(datatype):
    """The TiCDC decoder requires source.commit_ts: deriving it from ts_ms would silently
    lose TiDB's ordering, so a plain Debezium message is quarantined with a hint."""
    _, ev = datatype
    assert ev[REJECT_REASON] == "missing_commit_ts" and "debezium-json" in ev["_reject_detail"]


def _ticdc(op: str, after: dict | None, fields: list[dict], before: dict | None = None,
           key: dict | None = None) -> tuple[bytes, bytes]:
    source = {"db": "d", "table": "t", "commit_ts": 449, "ts_ms": 0, "file": "", "pos": 0}
    image = {"type": "struct", "optional": True, "fields": fields}
    value = {"payload": {"source": source, "op": op, "before": before, "after": after},
             "schema": {"type": "struct", "fields": [{**image, "field": "before"}, {**image, "field": "after"}]}}
    return json.dumps({"payload": key or {"id": 1}}).encode(), json.dumps(value).encode()


def _field(column: str, type_: str, tidb_type: str | None = None, **extra) -> dict:
    f = {"type": type_, "optional": True, "field": column, **extra}
    return {**f, "tidb_type": tidb_type} if tidb_type else f


def _twos_complement(n: int, size: int) -> str:
    return base64.b64encode(n.to_bytes(size, "big", signed=True)).decode()


def test_unsigned_bigint_and_connect_logical_types(spark):
    with_ext = [_field("id", "int32", "int"), _field("u", "int64", "bigint unsigned"),
                _field("v", "int64", "bigint unsigned"), _field("w", "int64", "bigint unsigned"),
                _field("b", "string", "varbinary"), _field("x", "string", "blob")]
    without_ext = [_field("id", "int32"), _field("u", "int64")]
    dec = {"name": "org.apache.kafka.connect.data.Decimal"}
    connect = [_field("id", "int32"),
               _field("d1", "bytes", **dec, parameters={"scale": "2", "connect.decimal.precision": "10"}),
               _field("d2", "bytes", **dec, parameters={"scale": "0"}),
               _field("d3", "bytes", **dec, parameters={"scale": "3"}),
               _field("d4", "bytes", **dec, parameters={"scale": "1"}),
               _field("vs", "struct", name="io.debezium.data.VariableScaleDecimal"),
               _field("bits", "bytes", name="io.debezium.data.Bits", parameters={"length": "64"}),
               _field("raw", "bytes"), _field("ns", "int64", name="io.debezium.time.NanoTimestamp"),
               _field("ms", "int32", name="io.debezium.time.Time"),
               _field("src", "string", parameters={"__debezium.source.column.type": "VARBINARY"})]
    messages = [
        _ticdc("c", {"id": 1, "u": -1, "v": -9223372036854775808, "w": 5, "b": "AP8=", "x": "YWJj"}, with_ext),
        _ticdc("c", {"id": 1, "u": -1}, without_ext),
        _ticdc("c", {"id": 1, "d1": _twos_complement(-12345, 2), "d2": _twos_complement(128, 2),
                     "d3": _twos_complement(1, 1), "d4": -0.5, "vs": {"scale": 2, "value": _twos_complement(314, 2)},
                     "bits": "xwcAAAAAAAA=", "raw": "AAEC", "ns": 1_500_000_001, "ms": 3_723_004,
                     "src": "Zm9v"}, connect),
    ]
    keys, values = zip(*messages)
    unsigned, wrapped, logical = decode_all(spark, list(values), list(keys))
    assert unsigned["after"] == {"id": "1", "u": "18446744073709551615", "v": "9223372036854775808", "w": "5",
                                 "b": "AP8=", "x": "YWJj"}
    assert unsigned["column_types"]["u"] == "bigint unsigned" and unsigned["column_types"]["b"] == "varbinary"
    # Pinned: without tidb_type nothing says the column is unsigned — the wrapped int64 stays.
    assert (wrapped["after"]["u"], wrapped["column_types"]["u"]) == ("-1", "bigint")
    assert logical[REJECT_REASON] is None, (logical["_reject_detail"], logical["after"])
    assert logical["after"] == {"id": "1", "d1": "-123.45", "d2": "128", "d3": "0.001", "d4": "-0.5", "vs": "3.14",
                                "bits": "1991", "raw": "AAEC", "ns": "1970-01-01 00:00:01.500000",
                                "ms": "01:02:03.004000", "src": "Zm9v"}
    assert logical["column_types"]["d1"] == "decimal(10,2)" and logical["column_types"]["d2"] == "decimal"
    assert logical["column_types"]["src"] == "varbinary" and logical["column_types"]["vs"] == "decimal"


def test_schema_disabled_simulator_message_is_plain_json(spark):
    """debezium-disable-schema: values are JSON scalars only (DATETIME stays epoch ms,
    binary stays base64 text, DECIMAL the float64 text) — pinned."""
    from datetime import datetime
    from decimal import Decimal

    from cdc_assets.simulator.debezium import DebeziumEncoder
    from cdc_assets.simulator.schema import DEMO_TABLES
    from cdc_assets.simulator.workload import RowChange

    enc = DebeziumEncoder(DEMO_TABLES, disable_schema=True)
    row = {"order_id": 2**64 - 1, "customer_id": -7, "amount": Decimal("12.50"), "status": "Zoë <&>",
           "payload": b"\x00\xff", "updated_at": datetime(2026, 1, 1, 0, 0, 1)}
    key, value = enc.encode_row(RowChange("shop", "orders", "INSERT", None, row), 5 << 18, build_ms=6)
    (ev,) = decode_all(spark, [value], [key])
    assert ev["after"] == {"order_id": "-1", "customer_id": "-7", "amount": "12.5", "status": "Zoë <&>",
                           "payload": "AP8=", "updated_at": "1767225601000"}
    assert ev["column_types"] == {"order_id": "decimal", "customer_id": "decimal", "amount": "decimal",
                                  "status": "varchar", "payload": "varchar", "updated_at": "decimal"}


def _bare(payload: dict) -> bytes:
    return json.dumps(payload).encode()


def test_ddl_truncate_without_table_changes_keeps_the_sql(spark):
    msg = _bare({"payload": {"source": {"db": "d", "table": "t", "commit_ts": 77}, "databaseName": "d",
                             "ddl": "TRUNCATE TABLE d.t", "tableChanges": []}})
    (ev,) = decode_all(spark, [msg])
    assert (ev["event_kind"], ev["ddl_type"], ev["ddl_sql"], ev["table"], ev["commit_ts"]) == (
        "ddl", "TRUNCATE", "TRUNCATE TABLE d.t", "t", 77)


def test_a_truncate_op_is_the_truncate_table_ddl_of_its_source_table(spark):
    """Debezium's MySQL connector sends TRUNCATE as `op: t` on the table's topic (its
    `skipped.operations` default skips it); it names the table in `source` only."""
    msg = _bare({"payload": {"source": {"db": "d", "table": "we`ird", "ts_ms": 1_700_000_000_000,
                                        "file": "mysql-bin.000003", "pos": 484}, "op": "t", "ts_ms": 1}})
    (ev,) = decode_all(spark, [msg], protocol="debezium-json")
    assert (ev[REJECT_REASON], ev["event_kind"], ev["ddl_type"], ev["ddl_sql"], ev["database"], ev["table"]) == (
        None, "ddl", "TRUNCATE", "TRUNCATE TABLE `d`.`we``ird`", "d", "we`ird")
    assert (ev["commit_ts"], ev["source_position"]) == (1_700_000_000_000 << 18, (3 << 32) | 484)
    assert parse_ddl(ev["ddl_sql"], "d") == [TruncateTable(("d", "we`ird"))]


ROW = {"source": {"db": "d", "table": "t", "commit_ts": 5}, "op": "c", "after": {"id": 1}}
UNUSABLE = [
    (b'{"payload":{"id":1}}', None, "tombstone"),
    (b'{"payload":{"id":1}}', b"", "tombstone"),
    (None, b"", "empty_message"),
    (None, None, "tombstone"),  # after a delete in a table without a key
    (None, b"\xff\xfe{}", "invalid_utf8"),
    (None, b"{not json", "invalid_json"),
    (None, b"[1, 2]", "unexpected_shape"),
    (None, _bare({"status": "BEGIN", "id": "571"}), "control_record"),  # transaction metadata: no change
    (None, _bare({"status": "BEGUN", "id": "571"}), "unexpected_shape"),
    (b'{"id":1}', _bare({**ROW, "op": "x"}), "unknown_event_type"),
    (None, _bare({"source": {"commit_ts": None}, "op": "m"}), "missing_watermark_ts"),
    (None, _bare({"source": {"db": "d", "commit_ts": 5}, "op": "a"}), "missing_ddl_sql"),
    (None, _bare({"source": {"db": "d", "commit_ts": 5}, "op": "t"}), "missing_table_name"),
    (b'{"id":1}', _bare({**ROW, "source": {"db": "d", "table": "t", "ts_ms": 5}}), "missing_commit_ts"),
    (b'{"id":1}', _bare({**ROW, "source": {"db": "d", "commit_ts": 5}}), "missing_table_name"),
    (b'{"id":1}', _bare({**ROW, "op": "d"}), "missing_row_data"),
    (None, _bare(ROW), "missing_primary_key"),
    (b'{"payload":{"id":1},"schema":{"fields":[{"field":"id"}]}}', _bare({**ROW, "after": {"x": 1}}),
     "null_primary_key"),
    (b'{"id":1}', _bare({"payload": {**ROW, "after": {"id": 1, "id2": 2}},
                        "schema": {"fields": [{"field": "after", "fields": [{"field": "id", "type": "int32"},
                                                                             {"field": "id", "type": "int64"}]}]}}),
     "invalid_schema"),
    (b'{"id":1}', _bare({"payload": {**ROW, "after": {"id": 1, "b": "!!not base64"}},
                        "schema": {"fields": [{"field": "after", "fields": [{"field": "id", "type": "int32"},
                                                                             {"field": "b", "type": "bytes"}]}]}}),
     "invalid_value"),
]


@pytest.fixture(scope="module")
def unusable(spark) -> list[dict]:
    keys, values, _ = zip(*UNUSABLE)
    return decode_all(spark, list(values), list(keys))


@pytest.mark.parametrize("i", range(len(UNUSABLE)), ids=[f"{r}-{i}" for i, (_, _, r) in enumerate(UNUSABLE)])
def test_unusable_messages_get_a_reason(unusable, i):
    key, value, reason = UNUSABLE[i]
    ev = unusable[i]
    assert ev[REJECT_REASON] == reason, ev["_reject_detail"]
    assert (ev["value"], ev["key"], ev["kafka_offset"], ev["topic"]) == (value, key, i, "t")


def test_bad_message_does_not_take_the_next_one(spark):
    good = _bare(ROW)
    events = decode_all(spark, [b"{broken", good, None], [None, b'{"id":1}', b'{"id":1}'])
    assert [e[REJECT_REASON] for e in events] == ["invalid_json", None, "tombstone"]
    assert events[1]["after"] == {"id": "1"} and events[1]["pk_names"] == ["id"]


def test_primary_key_option_is_the_fallback_for_keyless_messages(spark):
    (ev,) = decode_all(spark, [_bare(ROW)], [None], **{"primary-key": "id"})
    assert (ev[REJECT_REASON], ev["pk_names"], ev["pk_values"]) == (None, ["id"], ["1"])


def test_watermarks_come_with_the_tidb_extension():
    """TiCDC sends checkpoint events only with enable-tidb-extension; Debezium never."""
    assert get_decoder("debezium").emits_watermarks()
    assert not get_decoder("debezium", {"enable-tidb-extension": "false"}).emits_watermarks()
    assert not get_decoder("debezium-json").emits_watermarks()
