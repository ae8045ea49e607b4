"""Debezium's own JSON envelope (`debezium-json`) conformance: ORACLES.md §5 — Flink's
changelogs, RisingWave's final tables and Paimon's table states, reached by replaying the
decoded events through the snapshot layer; plus CloudCanal's Debezium Envelope example."""

from __future__ import annotations

import json
import struct
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.snapshot.reconstruct import key_actions, reconstruct_table
from cdc_assets.snapshot.window_schema import window_table_schemas
from cdc_assets_tests.helpers import raw_frame

FLINK = "apache+flink/flink-formats/flink-json/src/test/resources"
RISINGWAVE = "risingwavelabs+risingwave/e2e_test/source_legacy/basic/scripts/test_data"
PAIMON = "apache+paimon/paimon-flink/paimon-flink-cdc/src/test/resources/kafka/debezium/table"


def json_lines(path: Path) -> list[bytes]:
    """One message per line; Paimon's files start with license comment lines."""
    return [line.strip() for line in path.read_bytes().splitlines() if line.strip().startswith(b"{")]


def decode(spark, values: list[bytes], **options):
    return get_decoder("debezium-json", options).decode(raw_frame(spark, values))


def replay(changes, previous=None):
    """Window-style replay: snapshot = previous state + the latest action per key."""
    good = changes.where(F.col(REJECT_REASON).isNull()).cache()  # decoded once, read by every action below
    (schema,) = window_table_schemas(good).values()
    if previous is not None:
        schema = previous[1].merged_with(schema)
    result = reconstruct_table(key_actions(good), schema, previous[0] if previous else None)
    frame = result.frame.cache()
    rows = {tuple(r[c] for c in schema.primary_key): r.asDict() for r in frame.collect()}
    return (frame, schema), rows


# --- Flink (§5.1): the same changelog with and without the schema envelope -------------
FLINK_CHANGELOG = [
    ("+I", 101, "scooter", "Small 2-wheel scooter", 3.14),
    ("+I", 102, "car battery", "12V car battery", 8.1),
    ("+I", 103, "12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", 0.8),
    ("+I", 104, "hammer", "12oz carpenter's hammer", 0.75),
    ("+I", 105, "hammer", "14oz carpenter's hammer", 0.875),
    ("+I", 106, "hammer", "16oz carpenter's hammer", 1.0),
    ("+I", 107, "rocks", "box of assorted rocks", 5.3),
    ("+I", 108, "jacket", "water resistent black wind breaker", 0.1),
    ("+I", 109, "spare tire", "24 inch spare tire", 22.2),
    ("-U", 106, "hammer", "16oz carpenter's hammer", 1.0),
    ("+U", 106, "hammer", "18oz carpenter hammer", 1.0),
    ("-U", 107, "rocks", "box of assorted rocks", 5.3),
    ("+U", 107, "rocks", "box of assorted rocks", 5.1),
    ("+I", 110, "jacket", "water resistent white wind breaker", 0.2),
    ("+I", 111, "scooter", "Big 2-wheel scooter ", 5.18),
    ("-U", 110, "jacket", "water resistent white wind breaker", 0.2),
    ("+U", 110, "jacket", "new water resistent white wind breaker", 0.5),
    ("-U", 111, "scooter", "Big 2-wheel scooter ", 5.18),
    ("+U", 111, "scooter", "Big 2-wheel scooter ", 5.17),
    ("-D", 111, "scooter", "Big 2-wheel scooter ", 5.17),
]


def _float32(x) -> float:
    """`weight` is a MySQL FLOAT: Debezium writes 3.140000104904175, Flink reads it as 3.14f."""
    return struct.unpack("f", struct.pack("f", float(x)))[0]


def _flink_rows(events: list[dict]) -> list[tuple]:
    """Row events -> Flink's RowKind sequence (+I / -U +U / -D)."""
    def values(image):
        return int(image["id"]), image["name"], image["description"], _float32(image["weight"])

    out = []
    for e in events:
        if e["op"] == "INSERT":
            out.append(("+I", *values(e["after"])))
        elif e["op"] == "UPDATE":
            out += [("-U", *values(e["before"])), ("+U", *values(e["after"]))]
        elif e["op"] == "DELETE":
            out.append(("-D", *values(e["before"])))
    return out


@pytest.fixture(scope="module")
def flink(spark, conformance):
    include = json_lines(conformance / FLINK / "debezium-data-schema-include.txt")
    exclude = json_lines(conformance / FLINK / "debezium-data-schema-exclude.txt")
    decoded = decode(spark, include + exclude, **{"primary-key": "id"}).cache()
    rows = [r.asDict(recursive=True) for r in decoded.orderBy("kafka_offset").collect()]
    return decoded, rows[: len(include)], rows[len(include):]


@pytest.mark.parametrize("variant", [1, 2], ids=["schema-include", "schema-exclude"])
def test_flink_changelog(flink, variant):
    events = flink[variant]
    assert len(events) == 16 and all(e[REJECT_REASON] is None for e in events)
    assert _flink_rows(events) == [(*r[:4], _float32(r[4])) for r in FLINK_CHANGELOG]
    first = events[0]
    assert (first["database"], first["table"], first["event_time"]) == ("inventory", "products", None)


def test_flink_schema_and_schemaless_decode_to_the_same_images(flink):
    _, include, exclude = flink
    assert [(e["op"], e["before"], e["after"], e["commit_ts"]) for e in include] == [
        (e["op"], e["before"], e["after"], e["commit_ts"]) for e in exclude]
    assert include[0]["column_types"] == {"id": "int", "name": "varchar", "description": "varchar",
                                          "weight": "double"}
    assert exclude[0]["column_types"] == {"id": "decimal", "name": "varchar", "description": "varchar",
                                          "weight": "decimal"}


def test_flink_ordering_keys(flink):
    _, include, _ = flink
    # Snapshot rows have source.ts_ms 0: commit_ts falls back to payload.ts_ms.
    assert include[0]["commit_ts"] == 1589355606100 << 18
    assert include[9]["commit_ts"] == 1589361987000 << 18
    assert include[9]["source_position"] == (3 << 32) | 362  # mysql-bin.000003 pos 362


def test_flink_final_table(spark, flink):
    """(derived) 101-110 present with the last values; 111 deleted."""
    decoded, include, _ = flink
    _, rows = replay(decoded.where(F.col("kafka_offset") < len(include)))
    assert set(rows) == {(i,) for i in range(101, 111)}
    assert (rows[(106,)]["description"], _float32(rows[(107,)]["weight"]), rows[(110,)]["weight"]) == (
        "18oz carpenter hammer", _float32(5.1), 0.5)
    assert rows[(110,)]["description"] == "new water resistent white wind breaker"


# --- RisingWave (§5.2): final table with and without the schema envelope ---------------
RISINGWAVE_TABLE = {
    1001: ("Sally", "Thomas", "sally.thomas@acme.com"),
    1002: ("George", "Bailey", "gbailey@foobar.com"),
    1003: ("Edward", "Walker", "ed@walker.com"),
    1004: ("Anne1", "Kretchmar", "annek@noanswer.org"),
    1005: ("add", "add2", "add"),
}


@pytest.mark.parametrize("name", ["debezium_log.1", "debezium_log_no_schema_field.1"])
def test_risingwave_final_table(spark, conformance, name):
    decoded = decode(spark, json_lines(conformance / RISINGWAVE / name), **{"primary-key": "id"})
    _, rows = replay(decoded)
    assert {int(k[0]): (r["first_name"], r["last_name"], r["email"]) for k, r in rows.items()} == RISINGWAVE_TABLE


# --- Paimon (§5.3): table state after each file ----------------------------------------
def _state(rows: dict, columns: list[str]) -> dict:
    return {int(k[0]): tuple(r.get(c) for c in columns) for k, r in rows.items()}


def test_paimon_schemaless_schema_evolution(spark, conformance):
    """Partial before image (`{"address": "Shanghai"}`) on u 105 is tolerated."""
    files = [json_lines(conformance / PAIMON / f"schemaevolution/debezium-data-{i}.txt") for i in (1, 2, 3)]
    columns = ["name", "description", "weight", "age", "address"]
    expected = [
        {101: ("scooter", "Small 2-wheel scooter", Decimal("3.14"), None, None),
         102: ("car battery", "12V car battery", Decimal("8.1"), None, None)},
        {103: ("12-pack drill bits", "12-pack of drill bits with sizes ranging from #40 to #3", Decimal("0.8"),
               Decimal(18), None),
         104: ("hammer", "12oz carpenter's hammer", Decimal("0.75"), Decimal(24), None)},
        {105: ("hammer", "14oz carpenter's hammer", Decimal("0.875"), None, "Beijing"),
         107: ("rocks", "box of assorted rocks", Decimal("5.3"), None, None)},
    ]
    previous, state = None, {}
    for lines, new_rows in zip(files, expected):
        previous, rows = replay(decode(spark, lines, **{"primary-key": "id"}), previous)
        state.update(new_rows)
        if new_rows is expected[2]:
            del state[101]
        assert _state(rows, columns) == state


def test_paimon_schema_evolution_with_schema(spark, conformance):
    files = [json_lines(conformance / PAIMON / f"schema/schemaevolution/debezium-data-{i}.txt") for i in (1, 2, 3, 4)]
    previous, rows = None, {}
    for lines in files:
        previous, rows = replay(decode(spark, lines, **{"primary-key": "id"}), previous)
    assert _state(rows, ["name", "weight", "age"]) == {
        101: ("scooter", 3.14, None), 103: ("12-pack drill bits", 0.8, 18), 104: ("hammer", 0.75, 24),
        105: ("hammer", 0.875, 24),
    }


def test_paimon_float_declared_column(spark, conformance):
    lines = json_lines(conformance / PAIMON / "schema/include/debezium-data-1.txt")
    _, rows = replay(decode(spark, lines, **{"primary-key": "id"}))
    assert _state(rows, ["name", "description", "weight"]) == {
        101: ("scooter", "Small 2-wheel scooter", 3.140000104904175)}


def test_paimon_all_types_snapshot_read(spark, conformance):
    """The `op: r` record of `all_types_table` (PK (pt, _id)). Paimon's own expectations
    that differ by design are not ours: its TIMESTAMP values are shifted by its test's
    time zones, and it keeps BIT(64) as bytes — here BIT is the unsigned integer."""
    (line,) = json_lines(conformance / PAIMON / "schema/alltype/debezium-data-1.txt")
    (ev,) = [r.asDict(recursive=True) for r in decode(spark, [line], **{"primary-key": "pt,_id"}).collect()]
    assert ev[REJECT_REASON] is None and ev["op"] == "READ"
    assert (ev["pk_names"], ev["pk_values"]) == (["pt", "_id"], ["1.1", "1"])
    a, t = ev["after"], ev["column_types"]
    assert (a["_bit1"], a["_bit"], a["_tinyint1"], a["_bigint_unsigned"], a["_serial"]) == (
        "1", str(0b11111000111), "1", "20000000000", "40000000000")
    assert (a["_numeric"], a["_fixed"], a["_big_decimal"]) == (
        "12345.11", "123456789876543212345678987654321.11", "2222222222222222300000001111.123456789")
    assert (a["_date"], a["_datetime"], a["_datetime3"], a["_datetime6"], a["_datetime_p2"]) == (
        "2023-03-23", "2023-03-23 14:30:05", "2023-03-23 14:30:05.123000", "2023-03-23 14:30:05.123456",
        "2023-03-24 14:30:05.120000")
    assert (a["_timestamp"], a["_timestamp0"], a["_time"], a["_year"]) == (
        "2023-03-23 22:00:10.123456", "2023-03-23 07:10:00", "10:13:23", "2023")
    assert (a["_bin"], a["_varbin"], a["_json"], a["_enum"], a["_set"]) == (
        "Ynl0ZXMAAAAAAA==", "bW9yZSBieXRlcw==", '{"a": "b"}', "value1", "a,b")
    assert json.loads(a["_point"])["wkb"] == "AQEAAAAAAAAAAADwPwAAAAAAAPA/"
    assert (t["pt"], t["_numeric"], t["_bigint_unsigned"], t["_bit"], t["_bin"], t["_timestamp"]) == (
        "decimal(2,1)", "decimal(8,3)", "decimal", "bit", "varbinary", "timestamp")
    assert (t["_point"], t["_year"], t["_time"], t["_datetime6"]) == ("geometry", "year", "time", "datetime")
    # Source ts_ms 0 in a snapshot: commit_ts comes from payload.ts_ms.
    assert ev["commit_ts"] == 1706167086275 << 18


# --- CloudCanal's Debezium Envelope (cloudcanal-message-formats.txt examples) ----------
CLOUDCANAL_SOURCE = {"ts_ms": 1669796261933, "db": "db_test", "table": "table_test", "connector": "MySQL",
                     "gtid": None, "file": "mysql-bin.000003", "pos": 154, "server_id": 223344}
CLOUDCANAL_DML = {"schema": {}, "payload": {"op": "i", "ts_ms": 1669796261933,
                                            "after": {"col1": "11", "col2": "11", "col_pk": "11"}, "before": {},
                                            "source": CLOUDCANAL_SOURCE}}
CLOUDCANAL_DDL = {"schema": {}, "payload": {
    "databaseName": "db_test", "ddl": "alter table table_test add col2 varchar(22) null", "ts_ms": 1669797213247,
    "source": CLOUDCANAL_SOURCE,
    "tableChanges": {"type": "ALTER", "table": {"columns": [
        {"jdbcType": 12, "name": n, "position": i, "typeExpression": "varchar(22)", "typeName": "varchar"}
        for i, n in enumerate(["col1", "col2", "col_pk"])], "primaryKeyColumnNames": ["col_pk"]}}}}


def test_cloudcanal_envelope(spark):
    messages = [json.dumps(m).encode() for m in (CLOUDCANAL_DML, CLOUDCANAL_DDL, {**CLOUDCANAL_DDL, "payload": {
        **CLOUDCANAL_DDL["payload"], "op": "a"}})]
    dml, ddl, altered = [r.asDict(recursive=True) for r in
                         decode(spark, messages, **{"primary-key": "col_pk"}).orderBy("kafka_offset").collect()]
    assert (dml[REJECT_REASON], dml["op"], dml["before"], dml["after"]) == (
        None, "INSERT", None, {"col1": "11", "col2": "11", "col_pk": "11"})
    assert (dml["pk_values"], dml["commit_ts"], dml["source_position"]) == (
        ["11"], 1669796261933 << 18, (3 << 32) | 154)
    for ev in (ddl, altered):
        assert (ev[REJECT_REASON], ev["event_kind"], ev["ddl_type"], ev["database"], ev["table"]) == (
            None, "ddl", "ALTER", "db_test", "table_test")
        assert ev["ddl_sql"] == "alter table table_test add col2 varchar(22) null" and ev["pk_names"] == ["col_pk"]


def test_isostring_time_mode_reads_typed_values(spark):
    """`time.precision.mode=isostring` (Debezium 3): dates, times and DATETIMEs as ISO text
    labelled UTC; they reach the snapshot as DATE, TIME and DATETIME values."""
    fields = [{"type": "int32", "optional": False, "field": "id"},
              {"type": "string", "optional": True, "name": "io.debezium.time.IsoDate", "field": "d"},
              {"type": "string", "optional": True, "name": "io.debezium.time.IsoTime", "field": "t"},
              {"type": "string", "optional": True, "name": "io.debezium.time.IsoTimestamp", "field": "dt"}]
    schema = {"type": "struct", "fields": [{"type": "struct", "fields": fields, "optional": True, "field": f}
                                           for f in ("before", "after")]}
    after = {"id": 1, "d": "2024-02-29Z", "t": "23:59:01.5Z", "dt": "2024-02-29T23:59:01.000001Z"}
    payload = {"before": None, "after": after, "op": "c", "ts_ms": 1709251141000,
               "source": {"ts_ms": 1709251141000, "db": "shop", "table": "t", "file": "binlog.000001", "pos": 4}}
    changes = decode(spark, [json.dumps({"schema": schema, "payload": payload}).encode()],
                     **{"primary-key": "shop.t:id"})
    (event,) = [r.asDict(recursive=True) for r in changes.collect()]
    assert event[REJECT_REASON] is None
    assert event["after"] == {"id": "1", "d": "2024-02-29", "t": "23:59:01.500000", "dt": "2024-02-29 23:59:01.000001"}
    assert event["column_types"] == {"id": "int", "d": "date", "t": "time", "dt": "datetime"}
    (frame, _), rows = replay(changes)
    assert [f.dataType.simpleString() for f in frame.schema.fields[1:4]] == ["date", "string", "timestamp_ntz"]
    assert (str(rows[(1,)]["d"]), rows[(1,)]["t"], str(rows[(1,)]["dt"])) == (
        "2024-02-29", "23:59:01.500000", "2024-02-29 23:59:01.000001")


def test_binary_handling_mode_hex_with_propagated_source_types(spark):
    """`binary.handling.mode=hex` + `column.propagate.source.type`: the option says the
    binary strings are hex; without it they would be read as base64 (other bytes)."""
    fields = [{"type": "int32", "optional": False, "field": "id"},
              {"type": "string", "optional": True, "field": "b",
               "parameters": {"__debezium.source.column.type": "VARBINARY", "__debezium.source.column.length": "4"}}]
    schema = {"type": "struct", "fields": [{"type": "struct", "fields": fields, "optional": True, "field": f}
                                           for f in ("before", "after")]}
    payload = {"before": None, "after": {"id": 1, "b": "00ff10ab"}, "op": "c", "ts_ms": 1709251141000,
               "source": {"ts_ms": 1709251141000, "db": "shop", "table": "t", "file": "binlog.000001", "pos": 4}}
    message = json.dumps({"schema": schema, "payload": payload}).encode()
    options = {"primary-key": "shop.t:id"}
    (hexed,) = decode(spark, [message], **options, **{"binary-handling-mode": "HEX"}).collect()
    assert (hexed[REJECT_REASON], hexed["after"]["b"], hexed["column_types"]["b"]) == (None, "AP8Qqw==", "varbinary")
    (_, _), rows = replay(decode(spark, [message], **options, **{"binary-handling-mode": "hex"}))
    assert bytes(rows[(1,)]["b"]) == b"\x00\xff\x10\xab"
    (as_base64,) = decode(spark, [message], **options).collect()
    assert as_base64["after"]["b"] == "00ff10ab"  # valid base64 of other bytes: why the option exists
    with pytest.raises(ValueError, match="binary-handling-mode"):
        get_decoder("debezium-json", {"binary-handling-mode": "base32"})


def _source(**over) -> dict:
    return {"ts_ms": 1709251141000, "db": "shop", "table": "t", "file": "binlog.000003", "pos": 157,
            "snapshot": "false", **over}


def test_control_records_snapshot_schema_and_multi_table_renames(spark):
    """Records of Debezium's other topics carry no change (`control_record`), nor does a
    snapshot's `DROP TABLE IF EXISTS` (schema-history setup, also sent by snapshots that send
    no rows after it); a snapshot's other schema events are marked READ (their rows follow
    them: ddl_barriers), a streamed DROP applies; the events of a two-table RENAME name no
    table (`source.table` lists both: the SQL names them), so they stay copies of one statement."""
    rename = {"source": _source(table="_t_del,t"), "ts_ms": 1709251142000, "databaseName": "shop",
              "ddl": "RENAME TABLE `t` TO `_t_del`, `_t_gho` TO `t`",
              "tableChanges": [{"type": "ALTER", "id": '"shop"."_t_del"', "table": {"columns": []}}]}
    snapshot_ddl = {"source": _source(snapshot="true"), "ts_ms": 1709251141750, "databaseName": "shop",
                    "ddl": "DROP TABLE IF EXISTS `shop`.`t`",
                    "tableChanges": [{"type": "DROP", "id": '"shop"."t"', "table": {"columns": []}}]}
    messages = [
        {"status": "BEGIN", "id": "571:53195829", "ts_ms": 1709251141000, "event_count": None,
         "data_collections": None},
        {"schema": {"type": "struct", "fields": [{"type": "int64", "field": "ts_ms"}],
                    "name": "io.debezium.connector.common.Heartbeat"}, "payload": {"ts_ms": 1709251141000}},
        {"status": "END", "id": "571:53195829", "ts_ms": 1709251141000, "event_count": 2,
         "data_collections": [{"data_collection": "shop.t", "event_count": 2}]},
        snapshot_ddl, {**snapshot_ddl, "source": _source(snapshot="false")}, rename,
        {**snapshot_ddl, "ddl": "DROP DATABASE IF EXISTS `shop`", "source": _source(snapshot="last")},
        {**snapshot_ddl, "ddl": "CREATE TABLE `t` (`id` INT PRIMARY KEY)",
         "tableChanges": [{"type": "CREATE", "id": '"shop"."t"', "table": {"columns": []}}]},
    ]
    values = [json.dumps(m).encode() for m in messages]
    events = [r.asDict(recursive=True) for r in decode(spark, values).orderBy("kafka_offset").collect()]
    assert [(e[REJECT_REASON], e["_reject_detail"]) for e in events[:3]] == [
        ("control_record", "Debezium transaction metadata (BEGIN): no change"),
        ("control_record", "Debezium heartbeat: no change"),
        ("control_record", "Debezium transaction metadata (END): no change")]
    assert [(e[REJECT_REASON], e["event_kind"], e["op"], e["table"]) for e in events[3:]] == [
        ("control_record", "ddl", "READ", "t"), (None, "ddl", None, "t"), (None, "ddl", None, None),
        ("control_record", "ddl", "READ", "t"), (None, "ddl", "READ", "t")]
    assert events[3]["_reject_detail"].startswith("Debezium snapshot's schema setup (DROP ... IF EXISTS)")
    # With apply-snapshot-drops=true (snapshot.mode=always: a re-snapshot replaces the tables)
    # they apply, before the snapshot's rows.
    applied = [r.asDict() for r in decode(spark, values, **{"apply-snapshot-drops": "true"})
               .orderBy("kafka_offset").collect()][3:]
    assert [(e[REJECT_REASON], e["op"], e["ddl_type"]) for e in applied] == [
        (None, "READ", "DROP"), (None, None, "DROP"), (None, None, "RENAME"), (None, "READ", "DROP"),
        (None, "READ", "CREATE")]


def test_values_the_binlog_did_not_log_are_never_applied(spark):
    """binlog_row_image=NOBLOB: Debezium fills the BLOB / TEXT columns a row image left out
    with its placeholder (`unavailable.value.placeholder`), as text or as its bytes. An after
    image with one is `column_not_logged`; a before image's is left out."""
    fields = [{"type": "int32", "optional": False, "field": "id"},
              {"type": "string", "optional": True, "field": "name"},
              {"type": "bytes", "optional": True, "field": "description"},
              {"type": "string", "optional": True, "field": "notes"}]
    schema = {"type": "struct", "fields": [{"type": "struct", "fields": fields, "optional": True, "field": f}
                                           for f in ("before", "after")]}
    unavailable, blob = "__debezium_unavailable_value", "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="

    def update(before, after, pos):
        payload = {"before": before, "after": after, "op": "u", "ts_ms": 1709251142000, "source": _source(pos=pos)}
        return json.dumps({"schema": schema, "payload": payload}).encode()

    row = {"id": 1, "name": "scooter", "description": blob, "notes": unavailable}
    messages = [update(row, {**row, "name": "updated-scooter"}, 10),  # both images hold placeholders
                update(row, {**row, "description": "AQI=", "notes": "n"}, 20)]  # the after image is whole
    key = json.dumps({"id": 1}).encode()
    events = [r.asDict(recursive=True) for r in get_decoder("debezium-json").decode(
        raw_frame(spark, messages, keys=[key, key])).orderBy("kafka_offset").collect()]
    assert [(e[REJECT_REASON], e["_reject_detail"]) for e in events] == [
        ("column_not_logged", "the binlog did not log these columns (binlog_row_image NOBLOB / MINIMAL; "
                              "Debezium's unavailable-value placeholder): description,notes"), (None, None)]
    assert events[1]["before"] == {"id": "1", "name": "scooter"}
    assert events[1]["after"] == {"id": "1", "name": "scooter", "description": "AQI=", "notes": "n"}
    # Another placeholder; none at all
    custom = [update(row, {**row, "notes": "<n/a>"}, 30)]
    (e,) = get_decoder("debezium-json", {"unavailable-value-placeholder": "<n/a>"}).decode(
        raw_frame(spark, custom, keys=[key])).collect()
    assert (e[REJECT_REASON], e["_reject_detail"].rsplit(": ", 1)[1]) == ("column_not_logged", "notes")
    (e,) = get_decoder("debezium-json", {"unavailable-value-placeholder": ""}).decode(
        raw_frame(spark, messages[:1], keys=[key])).collect()
    assert e[REJECT_REASON] is None and e["after"]["notes"] == unavailable


def test_float_53_with_propagated_source_type_is_a_double(spark):
    """MySQL's FLOAT(p) for p > 24 is a DOUBLE (Debezium sends float64 and the type FLOAT(53))."""
    fields = [{"type": "int32", "optional": False, "field": "id"},
              {"type": "double", "optional": True, "field": "f",
               "parameters": {"__debezium.source.column.type": "FLOAT", "__debezium.source.column.length": "53"}}]
    schema = {"type": "struct", "fields": [{"type": "struct", "fields": fields, "optional": True, "field": f}
                                           for f in ("before", "after")]}
    payload = {"before": None, "after": {"id": 1, "f": 1.2345678901234567}, "op": "c", "ts_ms": 1709251141000,
               "source": _source(pos=4)}
    changes = decode(spark, [json.dumps({"schema": schema, "payload": payload}).encode()],
                     **{"primary-key": "shop.t:id"})
    assert changes.first()["column_types"]["f"] == "float(53)"
    (frame, _), rows = replay(changes)
    assert frame.schema["f"].dataType.simpleString() == "double" and rows[(1,)]["f"] == 1.2345678901234567
