"""TiCDC Open Protocol conformance: the binary vectors and documented examples of
shared/conformance decode to what ORACLES.md §2 says. All messages are decoded in one
Spark job (module fixture); each test looks at its own messages."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path

import pytest

from cdc_assets.contracts.schemas import DECODED_COLUMNS, RAW_MESSAGE_SCHEMA, REJECT_REASON
from cdc_assets.decode import get_decoder

TIBIGDATA = "tidb-incubator+TiBigData/ticdc/src/test/resources/json"
TIFLOW = "pingcap+tiflow/examples/java/src/test/resources/data"
DOCS = "pingcap+docs/ticdc/ticdc-open-protocol.md.event-stream.jsonl"
NAMES = [f"{kind}_{n}" for kind in ("ddl", "rts", "row") for n in range(3)]


def frame(*payloads: bytes) -> bytes:
    return b"".join(len(p).to_bytes(8, "big") + p for p in payloads)


def message(*events: tuple[dict, dict | None]) -> tuple[bytes, bytes]:
    """(key JSON, value JSON or None for a resolved event) pairs -> one framed message."""
    key = (1).to_bytes(8, "big") + frame(*(json.dumps(k).encode() for k, _ in events))
    value = frame(*(b"" if v is None else json.dumps(v, ensure_ascii=False).encode() for _, v in events))
    return key, value


def _row_json(conformance: Path, handle: set[str] | None = None, binary: set[str] = frozenset()) -> bytes:
    doc = json.loads((conformance / TIBIGDATA / "row.json").read_text(encoding="utf-8"))
    for name, col in doc["u"].items():
        if handle is not None:
            col["h"] = name in handle
        if name in binary:
            col["f"] = 1
    return json.dumps(doc, ensure_ascii=False).encode()


def _messages(conformance: Path) -> dict[str, list[tuple[int, bytes | None, bytes | None]]]:
    """name -> [(kafka partition, key, value)]."""
    out = {}
    for name in NAMES:
        for source, key_name, value_name in (
            ("tibigdata", f"{TIBIGDATA}/key/{name}", f"{TIBIGDATA}/value/{name}"),
            ("tiflow", f"{TIFLOW}/key/{name.replace('_', '_key_')}", f"{TIFLOW}/value/{name.replace('_', '_value_')}"),
        ):
            out[f"{source}/{name}"] = [(0, (conformance / key_name).read_bytes(), (conformance / value_name).read_bytes())]
    row_key = {"ts": 5, "scm": "a", "tbl": "b", "t": 1}
    for name, value in {
        "row.json": _row_json(conformance),
        "row.json/c1-handle": _row_json(conformance, handle={"c1"}),
        "row.json/binary": _row_json(conformance, handle={"c1"}, binary={"c21", "c22", "c23", "c24", "c25", "c26"}),
    }.items():
        out[name] = [(0, (1).to_bytes(8, "big") + frame(json.dumps(row_key).encode()), frame(value))]
    lines = [json.loads(x) for x in (conformance / DOCS).read_text(encoding="utf-8").splitlines() if x.strip()]
    # The docs log prints one event per line; frame each (`[value=]` = no value at all).
    out["docs"] = []
    for line in lines:
        key, value = message((line["key"], line["value"]))
        out["docs"].append((line["partition"], key, b"" if line["value"] is None else value))
    # TiCDC batches events of one partition into one message: partition 0's rows.
    out["docs/batched"] = [(0, *message(*((x["key"], x["value"]) for x in lines if x["n"] in (5, 7, 8, 9, 11, 12))))]
    return out


@pytest.fixture(scope="module")
def decoded(spark, conformance) -> dict[str, list[dict]]:
    """name -> its events (quarantined ones included) in (offset, event_index) order."""
    msgs = _messages(conformance)
    ts = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    rows, owner = [], {}
    for name, items in msgs.items():
        for partition, key, value in items:
            owner[len(rows)] = name
            rows.append(("t", partition, len(rows), ts, key, value, name))
    out = get_decoder("open-protocol").decode(spark.createDataFrame(rows, RAW_MESSAGE_SCHEMA))
    assert out.columns == DECODED_COLUMNS
    result: dict[str, list[dict]] = {name: [] for name in msgs}
    for r in out.orderBy("kafka_offset", "event_index").collect():
        result[owner[r["kafka_offset"]]].append(r.asDict(recursive=True))
    return result


def _summary(events: list[dict]) -> list[tuple]:
    return [(e["event_kind"], e["ddl_type"], e["database"], e["table"], e["ddl_sql"]) for e in events]


@pytest.mark.parametrize("source", ["tibigdata", "tiflow"])
def test_resolved_files(decoded, source):
    """rts_0: 1 RESOLVED, rts_1: 3, rts_2: 0; no schema/table; ts 1, 2, 3 (non-decreasing)."""
    for name, expected in (("rts_0", [1]), ("rts_1", [1, 2, 3]), ("rts_2", [])):
        events = decoded[f"{source}/{name}"]
        assert [e[REJECT_REASON] for e in events] == [None] * len(expected)
        assert [(e["event_kind"], e["watermark_ts"]) for e in events] == [("watermark", t) for t in expected]
        assert all(e["database"] is None and e["table"] is None and e["commit_ts"] is None for e in events)


def test_tibigdata_ddl_files(decoded):
    create = ("ddl", "create schema", "a", None, "create database a;")
    assert _summary(decoded["tibigdata/ddl_0"]) == [create]
    assert _summary(decoded["tibigdata/ddl_1"]) == [
        create,
        ("ddl", "drop schema", "a", None, "drop database a;"),
        create,
        ("ddl", "create table", "a", "c", "create table c(id int primary key);"),
    ]
    assert decoded["tibigdata/ddl_2"] == []
    ts = [e["commit_ts"] for e in decoded["tibigdata/ddl_0"] + decoded["tibigdata/ddl_1"]]
    assert ts == [423497695015731209, 423497695015731209, 423497695015731210, 423497695015731211,
                  423497714284101642]
    assert all(e[REJECT_REASON] is None for e in decoded["tibigdata/ddl_1"])
    assert decoded["tibigdata/ddl_1"][3]["commit_time"] == dt.datetime(2021, 3, 12, 2, 19, 32, 678000)


def test_tiflow_ddl_files(decoded):
    """ORACLES.md §2.2 (derived): ddl type codes 1/2/3 with the same scm a, tbl b."""
    assert _summary(decoded["tiflow/ddl_0"]) == [("ddl", "create schema", "a", "b", "create table a")]
    assert [(e["commit_ts"], e["ddl_type"], e["ddl_sql"]) for e in decoded["tiflow/ddl_1"]] == [
        (1, "create schema", "create table a"), (2, "drop schema", "create table b"), (3, "create table", "create table c"),
    ]
    assert decoded["tiflow/ddl_2"] == []


@pytest.mark.parametrize("source", ["tibigdata", "tiflow"])
def test_row_files_decode_but_have_no_primary_key(decoded, source):
    """ORACLES.md §2.1: row_0 = 1 INSERT a.b; row_1 = INSERT a.b x3 + INSERT a.c; row_2 = none.

    Deliberate difference: these synthetic columns carry neither `h` nor a key flag, and
    the snapshot layer upserts by primary key, so every event is decoded (same kinds,
    tables, ts and values as the oracle) but quarantined as `missing_primary_key`.
    """
    row_0, row_1 = decoded[f"{source}/row_0"], decoded[f"{source}/row_1"]
    got = [(e["event_kind"], e["op"], e["database"], e["table"], e["commit_ts"], e["after"]) for e in row_0 + row_1]
    assert got == [
        ("row", "INSERT", "a", "b", 1, {"col1": "aa"}),
        ("row", "INSERT", "a", "b", 1, {"col1": "aa"}),
        ("row", "INSERT", "a", "b", 2, {"col1": "bb"}),
        ("row", "INSERT", "a", "b", 3, {"col1": "bb"}),
        ("row", "INSERT", "a", "c", 4, {"col1": "cc"}),
    ]
    assert {e[REJECT_REASON] for e in row_0 + row_1} == {"missing_primary_key"}
    assert [e["event_index"] for e in row_1] == [0, 1, 2, 3]
    assert row_0[0]["column_types"] == {"col1": "tinyint"}
    assert decoded[f"{source}/row_2"] == []


EXPECTED_ROW_JSON = {
    "c1": ("1", "tinyint"), "c2": ("1", "smallint"), "c3": ("123", "int"), "c4": ("153.123", "float"),
    "c5": ("153.123", "double"), "c6": (None, "null"), "c7": ("1973-12-30 15:30:00", "timestamp"),
    "c8": ("123", "bigint"), "c9": ("123", "mediumint"), "c10": ("2000-01-01", "date"),
    "c11": ("23:59:59", "time"), "c12": ("2015-12-20 23:58:58", "datetime"), "c13": ("1970", "year"),
    "c14": ("2000-01-01", "date"), "c15": ("测试", "varchar"), "c16": ("81", "bit"),
    "c17": ('{"key1": "value1"}', "json"), "c18": ("129012.1230000", "decimal"), "c19": ("1", "enum"),
    "c20": ("3", "set"), "c21": ("测试text", "tinytext"), "c22": ("测试text", "mediumtext"),
    "c23": ("测试text", "longtext"), "c24": ("测试text", "text"),
    # Without the binary flag a varchar is plain UTF-8 text: the escapes stay literal.
    "c25": ("\\x89PNG\\r\\n\\x1a\\n", "varchar"), "c26": ("测试", "char"), "c27": (None, "geometry"),
}


def test_row_json_every_type_code(decoded):
    """RowColumnTest: one INSERT, 27 columns, c1 = TINYINT 1; blob codes are base64."""
    (ev,) = decoded["row.json/c1-handle"]
    assert ev[REJECT_REASON] is None
    assert (ev["event_kind"], ev["op"], ev["database"], ev["table"], ev["commit_ts"]) == ("row", "INSERT", "a", "b", 5)
    assert len(ev["after"]) == 27
    assert {c: (ev["after"][c], ev["column_types"][c]) for c in ev["after"]} == EXPECTED_ROW_JSON
    assert (ev["pk_names"], ev["pk_values"], ev["before"]) == (["c1"], ["1"], None)


def test_row_json_as_is_has_null_handle_columns(decoded):
    """Deliberate difference: row.json marks all 27 columns `h: true`, c6 and c27 among them
    with null values. A null key cannot identify a row, so the event is quarantined
    (`null_primary_key`), with every column still decoded."""
    (ev,) = decoded["row.json"]
    assert ev[REJECT_REASON] == "null_primary_key"
    assert len(ev["pk_names"]) == 27 and len(ev["after"]) == 27 and ev["after"]["c1"] == "1"


def test_row_json_with_binary_flag(decoded):
    """Binary flag: blob codes keep the base64 bytes (canonical), char/varchar codes are
    Go-quoted text unquoted to the exact bytes; types become blob/varbinary/binary."""
    (ev,) = decoded["row.json/binary"]
    assert ev[REJECT_REASON] is None
    a, t = ev["after"], ev["column_types"]
    for c, typ in (("c21", "tinyblob"), ("c22", "mediumblob"), ("c23", "longblob"), ("c24", "blob")):
        assert (a[c], t[c]) == ("5rWL6K+VdGV4dA==", typ)
        assert base64.b64decode(a[c]) == "测试text".encode()
    assert t["c25"] == "varbinary" and base64.b64decode(a["c25"]) == b"\x89PNG\r\n\x1a\n"
    assert t["c26"] == "binary" and base64.b64decode(a["c26"]) == "测试".encode()


def test_docs_event_stream(decoded):
    """ORACLES.md §2.3: 14 events; DDL broadcast (1, 3), resolved (2, 4, 13, 14), DELETEs
    carry only the handle column, the PK change id 2 -> 4 is DELETE 2 + upsert 4."""
    events = decoded["docs"]
    assert [e[REJECT_REASON] for e in events] == [None] * 14
    kinds = [e["event_kind"] for e in events]
    assert kinds == ["ddl", "watermark", "ddl", "watermark"] + ["row"] * 8 + ["watermark"] * 2
    ddl = events[0]
    assert (ddl["ddl_type"], ddl["database"], ddl["table"], ddl["commit_ts"]) == (
        "create table", "test", "t1", 415508856908021766)
    assert ddl["ddl_sql"] == "CREATE TABLE test.t1(id int primary key, val varchar(16))"
    assert [e["watermark_ts"] for e in events if e["event_kind"] == "watermark"] == [
        415508856908021766, 415508856908021766, 415508881038376963, 415508881038376963]
    rows = events[4:12]
    assert [(e["op"], e["pk_values"], e["commit_ts"]) for e in rows] == [
        ("INSERT", ["1"], 415508878783938562), ("INSERT", ["2"], 415508878783938562),
        ("INSERT", ["3"], 415508878783938562), ("INSERT", ["3"], 415508878783938562),
        ("DELETE", ["1"], 415508881418485761), ("DELETE", ["2"], 415508881418485761),
        ("INSERT", ["3"], 415508881418485761), ("INSERT", ["4"], 415508881418485761),
    ]
    assert rows[4]["before"] == {"id": "1"} and rows[4]["after"] is None
    assert all(e["pk_names"] == ["id"] and e["column_types"]["id"] == "int" for e in rows)


def test_docs_varchar_values_are_text(decoded):
    """Deliberate difference: the docs example predates TiCDC v5 and shows varchar values
    base64-encoded (`YWE=` = "aa"); today's TiCDC writes char/varchar as UTF-8 text (the
    spec's type table, row.json c15), so `val` is kept as the text it carries. Decoding
    that text as base64 gives the documented final state {3: 'dd', 4: 'ee'}."""
    state = {}
    for e in sorted((e for e in decoded["docs"] if e["event_kind"] == "row"), key=lambda e: e["commit_ts"]):
        if e["op"] == "DELETE":
            state.pop(e["pk_values"][0], None)
        else:
            state[e["pk_values"][0]] = e["after"]["val"]
    assert state == {"3": "ZGQ=", "4": "ZWU="}
    assert {k: base64.b64decode(v).decode() for k, v in state.items()} == {"3": "dd", "4": "ee"}


def test_docs_batched_message(decoded):
    """Six events of one partition in one message: i-th key pairs with i-th value."""
    events = decoded["docs/batched"]
    assert [e[REJECT_REASON] for e in events] == [None] * 6
    assert [e["event_index"] for e in events] == list(range(6))
    assert len({e["kafka_offset"] for e in events}) == 1
    assert [(e["op"], e["pk_values"], e["after"] and e["after"]["val"]) for e in events] == [
        ("INSERT", ["1"], "YWE="), ("INSERT", ["3"], "Y2M="), ("INSERT", ["3"], "Y2M="),
        ("DELETE", ["1"], None), ("INSERT", ["3"], "ZGQ="), ("INSERT", ["4"], "ZWU="),
    ]
