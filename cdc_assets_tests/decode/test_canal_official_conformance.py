"""Official Alibaba Canal JSON through the `canal-json` decoder with TiCDC's
`content-compatible=true`, `enable-tidb-extension=false`: ORACLES.md §4 (Flink changelogs,
Paimon table states incl. schema evolution) and §6 (RisingWave)."""

from __future__ import annotations

import base64
import struct
from decimal import Decimal

from pyspark.sql import functions as F

from cdc_assets.decode import get_decoder
from cdc_assets.snapshot.reconstruct import key_actions, reconstruct_table
from cdc_assets.snapshot.window_schema import window_table_schemas
from cdc_assets_tests.helpers import crlf_records, decode, raw_frame, reasons

OFFICIAL = {"content-compatible": "true", "enable-tidb-extension": "false"}
FLINK = "apache+flink/flink-formats/flink-json/src/test/resources/"
PAIMON = "apache+paimon/paimon-flink/paimon-flink-cdc/src/test/resources/kafka/canal/table/"
LICENSE_LINES = 17  # every Paimon file starts with a license block comment (not JSON)

# ORACLES.md §4.1: CanalJsonSerDeSchemaTest.testSerializationDeserialization.
FLINK_CHANGELOG = """\
+I(101,scooter,Small 2-wheel scooter,3.14)
+I(102,car battery,12V car battery,8.1)
+I(103,12-pack drill bits,12-pack of drill bits with sizes ranging from #40 to #3,0.8)
+I(104,hammer,12oz carpenter's hammer,0.75)
+I(105,hammer,14oz carpenter's hammer,0.875)
+I(106,hammer,null,1.0)
+I(107,rocks,box of assorted rocks,5.3)
+I(108,jacket,water resistent black wind breaker,0.1)
+I(109,spare tire,24 inch spare tire,22.2)
-U(106,hammer,null,1.0)
+U(106,hammer,18oz carpenter hammer,1.0)
-U(107,rocks,box of assorted rocks,5.3)
+U(107,rocks,box of assorted rocks,5.1)
+I(110,jacket,water resistent white wind breaker,0.2)
+I(111,scooter,Big 2-wheel scooter ,5.18)
-U(110,jacket,water resistent white wind breaker,0.2)
+U(110,jacket,new water resistent white wind breaker,0.5)
-U(111,scooter,Big 2-wheel scooter ,5.18)
+U(111,scooter,Big 2-wheel scooter ,5.17)
-D(111,scooter,Big 2-wheel scooter ,5.17)
-U(101,scooter,Small 2-wheel scooter,3.14)
+U(101,scooter,Small 2-wheel scooter,5.17)
-U(102,car battery,12V car battery,8.1)
+U(102,car battery,12V car battery,5.17)
-D(102,car battery,12V car battery,5.17)
-D(103,12-pack drill bits,12-pack of drill bits with sizes ranging from #40 to #3,0.8)""".splitlines()


def _flink_rows(events: list[dict]) -> list[str]:
    """Our row events as Flink prints its changelog (UPDATE -> -U before, +U after)."""

    def fmt(kind: str, r: dict) -> str:
        return f"{kind}({r['id']},{r['name']},{r['description'] or 'null'},{r['weight']})"

    out = []
    for e in events:
        if e["op"] == "INSERT":
            out.append(fmt("+I", e["after"]))
        elif e["op"] == "UPDATE":
            out += [fmt("-U", e["before"]), fmt("+U", e["after"])]
        else:
            out.append(fmt("-D", e["before"]))
    return out


def _snapshot_rows(changes, tables_prev=None):
    """Reconstruct every table touched in `changes` on top of the previous state."""
    prev = dict(tables_prev or {})
    schemas = window_table_schemas(changes)
    latest = key_actions(changes)
    for key, schema in schemas.items():
        if key in prev:
            schema = prev[key][0].merged_with(schema)
        result = reconstruct_table(latest, schema, prev[key][1] if key in prev else None)
        assert result.conversion_failures == 0
        prev[key] = (schema, result.frame.localCheckpoint())
    return prev


def _good(decoded):
    return decoded.where(F.col("_reject_reason").isNull())


def test_flink_canal_data_changelog_and_metadata(spark, conformance):
    lines = crlf_records((conformance / FLINK / "canal-data.txt").read_bytes())
    good, bad = decode(spark, lines, **OFFICIAL)
    assert bad == []
    rows = [e for e in good if e["event_kind"] == "row"]
    assert _flink_rows(rows) == FLINK_CHANGELOG
    # line 10: the CREATE TABLE of another table is a DDL event (Flink skips it)
    (ddl,) = [e for e in good if e["event_kind"] == "ddl"]
    assert (ddl["ddl_type"], ddl["table"], ddl["kafka_offset"]) == ("CREATE", "user02", 9)
    # testDeserializationWithMetadata, first line
    first = [e for e in good if e["kafka_offset"] == 0]
    assert len(first) == 9
    e0 = first[0]
    assert (e0["database"], e0["table"], e0["pk_names"], len(e0["column_types"])) == (
        "inventory", "products2", ["id"], 4)
    assert e0["after"] == {"id": "101", "name": "scooter", "description": "Small 2-wheel scooter",
                           "weight": "3.14"}
    assert e0["event_time"].timestamp() * 1000 == 1589373515000
    # no TSO in official Canal: es << 18; its batch id orders ties on es
    assert (e0["commit_ts"], e0["source_position"]) == (1589373515000 << 18, 3)
    assert e0["column_types"]["name"] == "VARCHAR(255)"


def test_flink_canal_data_final_table_state(spark, conformance):
    """ORACLES.md §4.1 (derived) final table state."""
    lines = crlf_records((conformance / FLINK / "canal-data.txt").read_bytes())
    changes = _good(get_decoder("canal-json", OFFICIAL).decode(raw_frame(spark, lines)))
    ((_, frame),) = _snapshot_rows(changes).values()
    state = {r["id"]: (r["name"], r["description"], r["weight"]) for r in frame.collect()}
    assert {k: (n, d, round(w, 3)) for k, (n, d, w) in state.items()} == {
        101: ("scooter", "Small 2-wheel scooter", 5.17),
        104: ("hammer", "12oz carpenter's hammer", 0.75),
        105: ("hammer", "14oz carpenter's hammer", 0.875),
        106: ("hammer", "18oz carpenter hammer", 1.0),
        107: ("rocks", "box of assorted rocks", 5.1),
        108: ("jacket", "water resistent black wind breaker", 0.1),
        109: ("spare tire", "24 inch spare tire", 22.2),
        110: ("jacket", "new water resistent white wind breaker", 0.5),
    }


def test_flink_filter_table(spark, conformance):
    """ORACLES.md §4.2: database ^my.*, table ^prod.* -> the same 26-row changelog."""
    data = (conformance / FLINK / "canal-data-filter-table.txt").read_bytes()
    good, bad = decode(spark, crlf_records(data), **OFFICIAL)
    assert bad == []
    product = [e for e in good if e["event_kind"] == "row" and e["database"].startswith("my")
               and e["table"].startswith("prod")]
    assert _flink_rows(product) == FLINK_CHANGELOG
    first = product[0]
    assert (first["database"], first["table"], first["pk_names"][0]) == ("mydb", "product", "id")
    assert first["event_time"].timestamp() * 1000 == 1598944132000
    assert len([e for e in product if e["kafka_offset"] == first["kafka_offset"]]) == 9
    assert {e["table"] for e in good if e["event_kind"] == "ddl"} == {"orders", "projects"}


def _f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


B = lambda s: bytearray(s.encode())  # noqa: E731  (Spark returns BINARY as bytearray)

# ORACLES.md §4.3 schemaevolution: (pt, _id, v1, v2, v3, v4, v5) after each file.
SCHEMA_EVOLUTION = {
    1: [(1, 1, "one"), (1, 2, "two"), (2, 4, "four")],
    2: [(1, 1, "one", None), (1, 2, "second", None), (2, 3, "three", 30), (2, 4, "four", None),
        (1, 5, "five", 50), (1, 6, "six", 60)],
    3: [(1, 1, "one", None), (1, 2, "second", None), (2, 3, "three", 30000000000), (2, 4, "four", None),
        (1, 6, "six", 60), (2, 7, "seven", 70000000000), (2, 8, "eight", 80000000000)],
    4: [(1, 1, "one", None, None, None, None), (1, 2, "second", None, None, None, None),
        (2, 3, "three", 30000000000, None, None, None), (2, 4, "four", None, None, None, None),
        (1, 6, "six", 60, None, None, None), (2, 7, "seven", 70000000000, None, None, None),
        (2, 8, "very long string", 80000000000, None, None, None),
        (1, 9, "nine", 90000000000, Decimal("99999.999"), B("nine.bin"), _f32(9.9))],
    5: [(1, 1, "one", None, None, None, None), (1, 2, "second", None, None, None, None),
        (2, 3, "three", 30000000000, None, None, None),
        (2, 4, "four", None, None, B("four.bin.long"), 4.00000000004),
        (1, 6, "six", 60, None, None, None), (2, 7, "seven", 70000000000, None, None, None),
        (2, 8, "very long string", 80000000000, None, None, None),
        (1, 9, "nine", 90000000000, Decimal("99999.999"), B("nine.bin.long"), 9.00000000009)],
}
COLUMNS = ["pt", "_id", "v1", "v2", "v3", "v4", "v5"]


def _merged_table(tables, width):
    """Paimon merges every source table of the topic into one table (keys are disjoint)."""
    rows = [r.asDict() for _, frame in tables.values() for r in frame.collect()]
    return sorted((tuple(r.get(c) for c in COLUMNS[:width]) for r in rows), key=lambda t: t[1])


def test_paimon_schema_evolution_states(spark, conformance):
    """One window per file, each snapshot built on the previous one (new columns appended,
    INT -> BIGINT, FLOAT -> DOUBLE, VARBINARY(10) -> (20)). The license header lines are
    quarantined as invalid JSON."""
    tables = {}
    for n, expected in SCHEMA_EVOLUTION.items():
        lines = crlf_records((conformance / PAIMON / f"schemaevolution/canal-data-{n}.txt").read_bytes())
        decoded = get_decoder("canal-json", OFFICIAL).decode(raw_frame(spark, lines)).localCheckpoint()
        rejected = [r._reject_reason for r in decoded.where("_reject_reason is not null").collect()]
        assert rejected == ["invalid_json"] * LICENSE_LINES
        tables = _snapshot_rows(_good(decoded), tables)
        assert _merged_table(tables, len(expected[0])) == sorted(expected, key=lambda t: t[1]), n
    se1_types = tables[("paimon_sync_table", "schema_evolution_1")][0].mysql_types
    assert (se1_types["v2"], se1_types["v3"], se1_types["v4"], se1_types["v5"]) == (
        "BIGINT", "NUMERIC(8,3)", "VARBINARY(20)", "DOUBLE")


def test_paimon_event_files(spark, conformance):
    """ORACLES.md §4.3 event/*: row, insert, update, delete windows. Deliberate difference:
    Paimon merges the topic's tables (`event`, `schema_evolution_1/2`) into one table keyed
    on `_id`, so its update/delete of key 2/1 hit the row `event` inserted; here every
    source table keeps its own snapshot, and the oracle's merged state is only reached for
    the rows each table really owns."""
    tables = {}
    states = []
    for name in ("event-row", "event-insert", "event-update", "event-delete"):
        lines = crlf_records((conformance / PAIMON / f"event/{name}.txt").read_bytes())
        decoded = get_decoder("canal-json", OFFICIAL).decode(raw_frame(spark, lines))
        tables = _snapshot_rows(_good(decoded), tables)
        states.append({t: sorted(r["_id"] for r in f.collect()) for (_, t), (_, f) in tables.items()})
    assert states[0] == {"schema_evolution_1": [9]}  # after event-row: +I[1, 9, nine, ...]
    assert states[1] == {"schema_evolution_1": [9], "event": [1, 2, 4]}
    assert states[2] == {"schema_evolution_1": [9], "event": [1, 2, 4], "schema_evolution_2": [2]}
    # DELETE of se_1 key 1: se_1 never had it; `event`'s row 1 stays (Paimon drops it)
    assert states[3] == states[2]
    nine = tables[("paimon_sync_table", "schema_evolution_1")][1].first().asDict()
    assert [nine[c] for c in COLUMNS] == [1, 9, "nine", 90000000000, Decimal("99999.999"), B("nine.bin"),
                                          _f32(9.9)]
    second = tables[("paimon_sync_table", "schema_evolution_2")][1].first().asDict()
    assert (second["v1"], second["v2"]) == ("second", None)


def test_paimon_all_types(spark, conformance):
    """ORACLES.md §4.3 alltype. Deliberate differences from Paimon: TINYINT(1) stays a
    tinyint (MySQL's type, Paimon maps it to BOOLEAN); geometry columns hold base64 of
    MySQL's internal bytes (Paimon renders GeoJSON); SET is the comma-joined text."""
    lines = crlf_records((conformance / PAIMON / "alltype/canal-data.txt").read_bytes())
    changes = _good(get_decoder("canal-json", OFFICIAL).decode(raw_frame(spark, lines))).localCheckpoint()
    after = changes.orderBy("event_index").first()["after"]
    assert (after["_enum"], after["_set"]) == ("value1", "a,b")
    point = base64.b64decode(after["_point"])
    assert point[:4] == b"\0\0\0\0" and struct.unpack("<Bidd", point[4:]) == (1, 1, 1.0, 1.0)
    ((schema, frame),) = _snapshot_rows(changes).values()
    rows = {r["_id"]: r.asDict() for r in frame.collect()}
    r1 = rows[1]
    assert r1["pt"] == Decimal("1.1") and rows[2]["pt"] == Decimal("2.2")
    assert (r1["_tinyint1"], r1["_boolean"], r1["_bool"]) == (1, True, False)
    assert (r1["_tinyint_unsigned_zerofill"], r1["_mediumint_unsigned"], r1["_int_unsigned_zerofill"]) == (
        3, 200000, 3000000)
    assert (r1["_bigint_unsigned"], r1["_serial"], rows[2]["_serial"]) == (
        Decimal(20000000000), Decimal(40000000000), Decimal(50000000000))
    assert (r1["_float_unsigned_zerofill"], r1["_real_unsigned_zerofill"], r1["_double_precision"]) == (
        3.5, 3.000003, 1.000111)
    assert (r1["_numeric"], r1["_decimal_unsigned_zerofill"]) == (Decimal("12345.110"), Decimal(33333))
    assert r1["_fixed"] == "123456789876543212345678987654321.110"  # wider than Spark's 38 digits
    assert str(r1["_date"]) == "2023-03-23" and r1["_year"] == 2023 and r1["_time"] == "10:13:23"
    assert [str(r1[c]) for c in ("_datetime3", "_datetime6", "_datetime_p2")] == [
        "2023-03-23 14:30:05.123000", "2023-03-23 14:30:05.123456", "2023-03-24 14:30:05.120000"]
    assert r1["_timestamp"].isoformat() == "2023-03-23T15:00:10.123456"
    assert [bytes(r1[c]) for c in ("_bin", "_varbin", "_longblob")] == [
        b"bytes", b"more bytes", b"LONGBLOB  bytes test data"]
    assert (r1["_json"], r1["_char"], r1["_longtext"]) == (
        '{"a": "b"}', "Paimon", "Apache Paimon MySQL Long Test Data")
    assert all(v is None for k, v in rows[2].items() if k not in ("_id", "pt", "_serial", "_cdc_commit_ts"))


def test_risingwave_samples_without_pk_names_are_quarantined(spark, conformance):
    """Deliberate difference from RisingWave (ORACLES.md §6), which upserts rows without
    `pkNames`: a snapshot needs a key, so they are quarantined, one row per message (the
    batch of two rows too: issue 42.7). The next test reads their values, keyed by the option."""
    rw = conformance / "risingwavelabs+risingwave/extracted"
    lines = [(rw / "test_json_parser.canal.json").read_bytes().strip(),
             (rw / "test_parse_multi_rows.canal.json").read_bytes().strip()]
    good, bad = decode(spark, lines, **OFFICIAL)
    assert good == [] and reasons(bad) == ["missing_primary_key"] * 2
    assert [(b["kafka_offset"], b["event_index"], b["op"], b["table"]) for b in bad] == [
        (0, 0, "UPDATE", "demo"), (1, 0, "INSERT", "demo")]
    assert all(b["value"] == line for b, line in zip(bad, lines))


def test_risingwave_samples_with_the_primary_key_option_match_its_rows(spark, conformance):
    """ORACLES.md §6 with the key RisingWave's table declares, given as `primary-key`: the
    UPDATE's row (RisingWave upserts it) and both rows of the batch."""
    rw = conformance / "risingwavelabs+risingwave/extracted"
    (upd,), bad = decode(spark, [(rw / "test_json_parser.canal.json").read_bytes().strip()],
                         **OFFICIAL, **{"primary-key": "id"})
    assert bad == [] and (upd["op"], upd["pk_names"], upd["pk_values"]) == ("UPDATE", ["id"], ["1"])
    assert upd["after"] == {"id": "1", "name": "mike", "is_adult": "0", "balance": "1500.62",
                            "reg_time": "2018-01-01 00:00:01", "win_rate": "0.65"}
    batch = [(rw / "test_parse_multi_rows.canal.json").read_bytes().strip()]
    rows, bad = decode(spark, batch, **OFFICIAL, **{"primary-key": "demo.demo:v1"})
    assert bad == [] and [(r["pk_values"], r["after"]) for r in rows] == [
        (["1"], {"v1": "1", "v2": "2"}), (["3"], {"v1": "3", "v2": "4"})]
    # and into a snapshot keyed by it
    changes = get_decoder("canal-json", {**OFFICIAL, "primary-key": "demo.demo:v1"}).decode(raw_frame(spark, batch))
    (schema,) = window_table_schemas(changes).values()
    snapshot = reconstruct_table(key_actions(changes), schema, None).frame
    assert schema.primary_key == ["v1"]
    assert sorted(map(tuple, snapshot.select("v1", "v2").collect())) == [(1, 2), (3, 4)]


def test_enum_and_set_codes_and_batch_id_ordering(spark):
    """Official Canal sends the ENUM index / SET bit mask, even where a member is a number
    (index 1 of enum('2','x') is '2'); a SET written as names (not Canal's own form) is kept.
    A later batch id breaks an `es` tie: INSERT then DELETE in the same second."""
    def msg(typ, mid, row):
        return ('{"data":[' + row + '],"database":"d","table":"t","es":1000,"id":' + str(mid) +
                ',"isDdl":false,"mysqlType":{"id":"int","e":"enum(\'2\',\'x\')","s":"set(\'a\',\'b\',\'c\')"},'
                '"old":null,"pkNames":["id"],"type":"' + typ + '"}').encode()
    msgs = [msg("INSERT", 5, '{"id":"1","e":"2","s":"5"}'), msg("INSERT", 6, '{"id":"2","e":"1","s":"a,c"}'),
            msg("DELETE", 7, '{"id":"1","e":"2","s":"5"}')]
    decoded = get_decoder("canal-json", OFFICIAL).decode(raw_frame(spark, list(reversed(msgs))))
    good = sorted((r.asDict() for r in decoded.collect()), key=lambda r: r["source_position"])
    assert [(r["after"] or r["before"])["e"] for r in good] == ["x", "2", "x"]
    assert [(r["after"] or r["before"])["s"] for r in good] == ["a,c", "a,c", "a,c"]
    ((_, frame),) = _snapshot_rows(_good(decoded)).values()
    assert [r["id"] for r in frame.collect()] == [2]
