"""TiCDC's storage sink writes DDL only as schema files (`<schema>[/<table>]/meta/schema_<v>_<c>.json`):
they are read as DDL messages, so a TRUNCATE, RENAME or DROP reaches the snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.contracts.schemas import REJECT_REASON
from cdc_assets.decode import get_decoder
from cdc_assets.landing.layouts import list_dump_files, read_dump
from cdc_assets.replay import replay
from cdc_assets.snapshot.export import export_snapshot
from cdc_assets_tests.e2e import settings_for

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
CHECKSUM = "0785427252"


def _ts(seconds: int) -> int:
    return ms_to_tso(T0 + seconds * 1_000)


def _schema_file(root: Path, version: int, schema: str, table: str = "", query: str = "", action: int = 0,
                 columns: tuple[str, ...] = ("id", "name")) -> Path:
    """As TiCDC writes it (pkg/sink/cloudstorage/table_definition.go), indented JSON."""
    cols = [{"ColumnName": c, "ColumnType": "INT" if c == "id" else "VARCHAR", "ColumnPrecision": "11",
             **({"ColumnNullable": "false", "ColumnIsPk": "true"} if c == "id" else {})} for c in columns]
    definition = {"Table": table, "Schema": schema, "Version": 1, "TableVersion": version, "Query": query,
                  "Type": action, "TableColumns": cols if table else None,
                  "TableColumnsTotal": len(cols) if table else 0}
    folder = root / schema / table / "meta" if table else root / schema / "meta"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"schema_{version}_{CHECKSUM}.json"
    path.write_text(json.dumps(definition, indent=4))
    return path


def _row(seconds: int, table: str, op: str, data: dict, old: dict | None = None) -> str:
    types = {c: "int" if c == "id" else "varchar" for c in data}
    return json.dumps({
        "id": 0, "database": "shop", "table": table, "pkNames": ["id"], "isDdl": False, "type": op,
        "es": T0 + seconds * 1_000, "ts": T0 + seconds * 1_000, "sql": "", "sqlType": None, "mysqlType": types,
        "data": [{k: None if v is None else str(v) for k, v in data.items()}],
        "old": [{k: None if v is None else str(v) for k, v in old.items()}] if old else None,
        "_tidb": {"commitTs": _ts(seconds)},
    })


def _data_file(root: Path, table: str, version: int, lines: list[str]) -> Path:
    folder = root / "shop" / table / str(version)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "CDC000001.json"
    path.write_text("\r\n".join(lines) + "\r\n")
    return path


@pytest.fixture()
def sink(tmp_path) -> Path:
    """shop.t: three rows, TRUNCATE, a row, ADD COLUMN, rows, RENAME to shop.u, a row;
    shop.gone: a row, then DROP TABLE; shop.p and shop.q swapped by one RENAME TABLE. Every DDL
    only in a schema file, as the sink writes it."""
    root = tmp_path / "sink"
    v1, v2, v3, v4 = _ts(1), _ts(10), _ts(20), _ts(30)
    _schema_file(root, _ts(0), "shop", query="CREATE DATABASE `shop`", action=1)
    _schema_file(root, v1, "shop", "t")  # the table existed when the changefeed started: no statement
    _data_file(root, "t", v1, [_row(2, "t", "INSERT", {"id": 1, "name": "a"}),
                               _row(3, "t", "INSERT", {"id": 2, "name": "b"}),
                               _row(4, "t", "INSERT", {"id": 3, "name": "c"})])
    _schema_file(root, v2, "shop", "t", "TRUNCATE TABLE `shop`.`t`", 11)
    _data_file(root, "t", v2, [_row(11, "t", "INSERT", {"id": 4, "name": "d"})])
    _schema_file(root, v3, "shop", "t", "ALTER TABLE `shop`.`t` ADD COLUMN `note` VARCHAR(10)", 5,
                 columns=("id", "name", "note"))
    _data_file(root, "t", v3, [_row(21, "t", "UPDATE", {"id": 4, "name": "d", "note": "x"},
                                    {"id": 4, "name": "d", "note": None}),
                               _row(22, "t", "INSERT", {"id": 5, "name": "e", "note": "y"})])
    _schema_file(root, v4, "shop", "u", "RENAME TABLE `shop`.`t` TO `shop`.`u`", 14, columns=("id", "name", "note"))
    _data_file(root, "u", v4, [_row(31, "u", "INSERT", {"id": 6, "name": "f", "note": "z"})])
    _schema_file(root, _ts(1), "shop", "gone")
    _data_file(root, "gone", _ts(1), [_row(5, "gone", "INSERT", {"id": 9, "name": "g"})])
    _schema_file(root, _ts(40), "shop", "gone", "DROP TABLE `shop`.`gone`", 4)
    # RENAME TABLE p TO tmp, q TO p, tmp TO q: TiCDC writes one file per table, one version
    for table, key in (("p", 7), ("q", 8)):
        _schema_file(root, _ts(1), "shop", table)
        _data_file(root, table, _ts(1), [_row(6, table, "INSERT", {"id": key, "name": table})])
    for old, new in (("tmp", "q"), ("q", "p"), ("p", "tmp")):
        _schema_file(root, _ts(50), "shop", new, f"RENAME TABLE `shop`.`{old}` TO `shop`.`{new}`", 14)
    (root / "metadata").write_text(json.dumps({"checkpoint-ts": ms_to_tso(T0 + 3_600_000)}))
    return root


def test_schema_files_are_listed_and_read_as_ddl_messages(sink, spark):
    files = list_dump_files(sink, "storage-sink")
    schema_files = sorted(f.relative_to(sink).as_posix() for f in files
                          if f.parent.name == "meta" and f.parent.parent.name in ("shop", "t", "u", "gone"))
    assert schema_files == [
        f"shop/gone/meta/schema_{_ts(1)}_{CHECKSUM}.json", f"shop/gone/meta/schema_{_ts(40)}_{CHECKSUM}.json",
        f"shop/meta/schema_{_ts(0)}_{CHECKSUM}.json",
        f"shop/t/meta/schema_{_ts(1)}_{CHECKSUM}.json", f"shop/t/meta/schema_{_ts(10)}_{CHECKSUM}.json",
        f"shop/t/meta/schema_{_ts(20)}_{CHECKSUM}.json", f"shop/u/meta/schema_{_ts(30)}_{CHECKSUM}.json",
    ]
    ddl = (read_dump(spark, files, "storage-sink", sink).where("topic like '%meta'")
           .where("topic not in ('shop/p/meta', 'shop/q/meta', 'shop/tmp/meta')").orderBy("kafka_offset").collect())
    # The definitions without a statement (tables present at the changefeed's start) are not events.
    assert [(r.topic, r.kafka_partition, r.kafka_offset) for r in ddl] == [
        ("shop/meta", 0, _ts(0)), ("shop/t/meta", 0, _ts(10)), ("shop/t/meta", 0, _ts(20)),
        ("shop/u/meta", 0, _ts(30)), ("shop/gone/meta", 0, _ts(40)),
    ]
    messages = [json.loads(bytes(r.value)) for r in ddl]
    assert messages[1] == {"id": 0, "database": "shop", "table": "t", "isDdl": True, "type": "truncate table",
                           "es": T0 + 10_000, "ts": T0 + 10_000, "sql": "TRUNCATE TABLE `shop`.`t`",
                           "_tidb": {"commitTs": _ts(10)}}
    assert (messages[0]["table"], messages[0]["type"]) == ("", "create schema")

    decoded = get_decoder("canal-json", None).decode(read_dump(spark, files, "storage-sink", sink))
    events = (decoded.where("event_kind = 'ddl' and coalesce(table, '') in ('', 't', 'u', 'gone')")
              .orderBy("commit_ts").collect())
    assert [(e.database, e.table, e.commit_ts, e.ddl_type) for e in events] == [
        ("shop", None, _ts(0), "create schema"), ("shop", "t", _ts(10), "truncate table"),
        ("shop", "t", _ts(20), "add column"), ("shop", "u", _ts(30), "rename table"),
        ("shop", "gone", _ts(40), "drop table"),
    ]
    assert all(e[REJECT_REASON] is None for e in events)


def test_a_schema_file_that_is_not_a_definition_is_quarantined_not_dropped(tmp_path, spark):
    root = tmp_path / "sink"
    contents = {5: b"{not json", 6: b'{"Schema": "shop", "Query": "TRUNCATE TABLE t\xff"}', 7: b"{}"}
    for seconds, content in contents.items():
        path = root / "shop" / "t" / "meta" / f"schema_{_ts(seconds)}_{CHECKSUM}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    (root / "metadata").write_text(json.dumps({"checkpoint-ts": _ts(60)}))
    files = list_dump_files(root, "storage-sink")
    rows = read_dump(spark, files, "storage-sink", root).orderBy("kafka_offset").collect()
    assert [(r.topic, r.kafka_offset, bytes(r.value)) for r in rows] == [
        ("shop/t/meta", _ts(s), content) for s, content in contents.items()]
    events = get_decoder("canal-json", None).decode(read_dump(spark, files, "storage-sink", root))
    # Not JSON, not UTF-8 (which must not fail the landing), not a definition.
    assert [e[REJECT_REASON] for e in events.orderBy("kafka_offset").collect()] == [
        "invalid_json", "invalid_utf8", "unknown_event_type"]


def test_schema_json_of_ticdc_v6_5_and_statements_of_blanks(tmp_path, spark):
    """Up to v6.5.2 TiCDC wrote a table's DDL to `<schema>/<table>/<version>/schema.json`."""
    root = tmp_path / "sink"
    folder = root / "shop" / "t" / str(_ts(8))
    folder.mkdir(parents=True)
    (folder / "schema.json").write_text(json.dumps(
        {"Table": "t", "Schema": "shop", "Version": 1, "TableVersion": _ts(8), "Query": "TRUNCATE TABLE t",
         "Type": 11, "TableColumns": [], "TableColumnsTotal": 0}, indent=4))
    _data_file(root, "t", _ts(8), [_row(9, "t", "INSERT", {"id": 1, "name": "a"})])
    _schema_file(root, _ts(3), "shop", "t", query=" \n\t")  # blanks: no statement
    (root / "shop" / "x" / "v1").mkdir(parents=True)
    (root / "shop" / "x" / "v1" / "schema.json").write_text("{}")  # not a version folder: not read
    (root / "metadata").write_text(json.dumps({"checkpoint-ts": _ts(60)}))
    files = list_dump_files(root, "storage-sink")
    assert sorted(f.relative_to(root).as_posix() for f in files) == [
        f"shop/t/{_ts(8)}/CDC000001.json", f"shop/t/{_ts(8)}/schema.json",
        f"shop/t/meta/schema_{_ts(3)}_{CHECKSUM}.json"]
    ddl = read_dump(spark, files, "storage-sink", root).where("topic like '%meta'").collect()
    assert [(r.topic, r.kafka_offset, json.loads(bytes(r.value))["sql"]) for r in ddl] == [
        ("shop/t/meta", _ts(8), "TRUNCATE TABLE t")]


@pytest.mark.slow
def test_ddl_of_schema_files_reaches_the_snapshots(sink, tmp_path):
    settings = settings_for(tmp_path / "home", sink, layout="storage-sink")
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    assert (summary.ok, summary.windows, summary.quarantined, summary.checks_failed) == (True, 1, 0, [])
    assert summary.checks_warned == []  # every DDL applied

    exported = {f"{t.database}.{t.table}": pq.read_table(t.path).to_pylist()
                for t in export_snapshot(settings.warehouse, "src", tmp_path / "out")}
    # TRUNCATE removed 1-3; the column added later is NULL for nothing left; RENAME moved t to u;
    # DROP TABLE removed shop.gone; p and q swapped.
    assert sorted(exported) == ["shop.p", "shop.q", "shop.u"]
    assert sorted((r["id"], r["name"], r["note"]) for r in exported["shop.u"]) == [
        (4, "d", "x"), (5, "e", "y"), (6, "f", "z")]
    assert [(r["id"], r["name"]) for t in ("shop.p", "shop.q") for r in exported[t]] == [(8, "q"), (7, "p")]
