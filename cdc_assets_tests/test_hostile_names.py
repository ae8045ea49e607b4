"""Database, table and column names come from untrusted messages: path traversal and
names that are not identifiers are stored safely, exactly, and inside the warehouse; a long
legal name (40 Chinese characters) is stored under a bounded name; a name no MySQL table can
have is quarantined, and the window's other tables are written."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance

from cdc_assets.common.names import MAX_PART_BYTES, table_id
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.replay import replay
from cdc_assets.snapshot.export import REAL_NAME_KEYS, export_snapshot
from cdc_assets.snapshot.history import END_OP, VALID_FROM, VALID_TO
from cdc_assets.snapshot.history_read import full_history
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.e2e import settings_for
from cdc_assets_tests.helpers import layer_rows

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
HOSTILE_DB, HOSTILE_TABLE = "../..", "../../etc"
COLUMNS = {"id": "int", "x.y": "varchar", "a`b": "int", "sp ace,;{}()=": "varchar", "ünï 表": "varchar"}


def _message(op: str, ts_ms: int, db: str, table: str, data: dict, old: dict | None = None,
             types: dict = COLUMNS) -> str:
    return json.dumps({
        "id": 0, "database": db, "table": table, "pkNames": ["id"], "isDdl": False, "type": op,
        "es": ts_ms, "ts": ts_ms, "sql": "", "sqlType": {}, "mysqlType": types, "data": [data],
        "old": [old] if old else None, "_tidb": {"commitTs": ms_to_tso(ts_ms)},
    })


def _watermark(ts_ms: int) -> str:
    return json.dumps({"id": 0, "database": "", "table": "", "pkNames": None, "isDdl": False,
                       "type": "TIDB_WATERMARK", "es": ts_ms, "ts": ts_ms, "sql": "", "data": None,
                       "old": None, "_tidb": {"watermarkTs": ms_to_tso(ts_ms)}})


def _row(i: int) -> dict:
    return {"id": str(i), "x.y": f"dot {i}", "a`b": str(i * 10), "sp ace,;{}()=": "s", "ünï 表": "ü"}


def _files_outside(root: Path, allowed: list[Path]) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and not any(a in p.parents for a in allowed)]


def test_traversal_and_odd_names_stay_inside_the_warehouse_and_keep_their_values(tmp_path):
    jail = tmp_path / "jail"  # everything the pipeline writes must stay below jail/
    dump, home, out = jail / "dump", jail / "home", jail / "export"
    dump.mkdir(parents=True)
    lines = [
        _message("INSERT", T0 + 1_000, HOSTILE_DB, HOSTILE_TABLE, _row(1)),
        _message("INSERT", T0 + 2_000, HOSTILE_DB, HOSTILE_TABLE, _row(2)),
        _message("DELETE", T0 + 3_000, HOSTILE_DB, HOSTILE_TABLE, _row(2)),
        _message("INSERT", T0 + 4_000, "/abs", "back\\slash*?[glob]:", _row(3)),
        _watermark(T0 + 3_600_000),
    ]
    (dump / "topic.txt").write_text("\n".join(lines) + "\n")
    settings = settings_for(home, dump, layout="lines")
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    assert summary.ok and summary.windows == 1 and summary.quarantined == 0

    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    exported = {(e.database, e.table): e for e in export_snapshot(*snapshots, out)}
    assert set(exported) == {(HOSTILE_DB, HOSTILE_TABLE), ("/abs", "back\\slash*?[glob]:")}

    hostile = exported[(HOSTILE_DB, HOSTILE_TABLE)]
    assert hostile.path.parent == out and hostile.path.name == f"{table_id(HOSTILE_DB, HOSTILE_TABLE)}.parquet"
    assert "/" not in table_id(HOSTILE_DB, HOSTILE_TABLE) and ".." not in table_id(HOSTILE_DB, HOSTILE_TABLE)
    rows = pq.read_table(hostile.path).to_pylist()
    assert [{c: r[c] for c in COLUMNS} for r in rows] == [
        {"id": 1, "x.y": "dot 1", "a`b": 10, "sp ace,;{}()=": "s", "ünï 表": "ü"}]

    # Nothing escaped: every file written is inside the dump, the warehouse or the export.
    assert _files_outside(tmp_path, [dump, settings.warehouse, out]) == []
    assert not any(p.name == "etc" for p in tmp_path.rglob("*"))


CHINESE_40 = "客户订单明细历史归档" * 4  # 40 characters: legal (MySQL and TiDB allow 64), 360 bytes encoded
NOT_NAMES = ["x" * 300, "x" * 10_000]
ORDER_COLUMNS = {"id": "int", "状态": "varchar"}


def _order(op: str, ts_ms: int, db: str, table: str, i: int, state: str, old: str | None = None) -> str:
    return _message(op, ts_ms, db, table, {"id": str(i), "状态": state}, {"状态": old} if old else None,
                    types=ORDER_COLUMNS)


def test_a_long_legal_name_is_stored_bounded_and_a_name_no_table_can_have_is_quarantined(tmp_path, spark):
    dump, home, out = tmp_path / "dump", tmp_path / "home", tmp_path / "export"
    dump.mkdir()
    lines = [
        _order("INSERT", T0 + 1_000, "shop", CHINESE_40, 1, "新"),
        *[_order("INSERT", T0 + 1_200, "shop", name, 9, "x") for name in NOT_NAMES],
        _order("INSERT", T0 + 1_300, "/abs", "nul\u0000byte", 9, "x"),
        _order("INSERT", T0 + 1_500, "shop", "orders", 5, "新"),
        _order("UPDATE", T0 + 2_000, "shop", CHINESE_40, 1, "已发货", old="新"),
        _order("INSERT", T0 + 3_000, "shop", CHINESE_40, 2, "新"),
        _watermark(T0 + 3_600_000),
    ]
    (dump / "topic.txt").write_text("\n".join(lines) + "\n")
    settings = settings_for(home, dump, layout="lines")
    source = dataclasses.replace(settings.sources[0], max_quarantine_rate=1.0)  # 3 of 8 messages are bad
    settings = settings.with_overrides(sources=(source,))
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    assert summary.ok and summary.windows == 1 and summary.quarantined == 3

    quarantined = layer_rows(settings.warehouse, "src", "quarantine", ("reason", "detail", "value"))
    assert sorted((q["reason"], q["detail"], q["value"]) for q in quarantined) == sorted([
        ("invalid_table_name", "table name is longer than 64 characters (300)", lines[1].encode()),
        ("invalid_table_name", "table name is longer than 64 characters (10000)", lines[2].encode()),
        ("invalid_table_name", "table name contains NUL", lines[3].encode()),
    ])

    # The snapshot: both tables, the Chinese one under a bounded storage name, real names in the entry.
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    manifest = read_manifest(*snapshots, list_manifests(*snapshots)[-1])
    chinese_id = table_id("shop", CHINESE_40)
    assert chinese_id.startswith("shop.%E5%AE%A2%E6%88%B7") and len(chinese_id) <= 2 * MAX_PART_BYTES + 1
    assert sorted(manifest.tables) == sorted([chinese_id, "shop.orders"])
    entry = manifest.tables[chinese_id]
    assert (entry.database, entry.table, entry.rows) == ("shop", CHINESE_40, 2)
    assert entry.identifier == f"src.snapshots__shop__{CHINESE_40}"  # CJK letters are kept as they are
    assert manifest.tables["shop.orders"].rows == 1
    assert not any("x" * 100 in p.name for p in settings.warehouse.rglob("*"))  # nothing of the bad names

    # The history: the version the UPDATE ended, and the open ones.
    history = full_history(spark, *snapshots, "shop", CHINESE_40)
    assert sorted((r["id"], r["状态"], r[VALID_FROM], r[VALID_TO], r[END_OP]) for r in history.collect()) == [
        (1, "已发货", ms_to_tso(T0 + 2_000), None, None),
        (1, "新", ms_to_tso(T0 + 1_000), ms_to_tso(T0 + 2_000), "UPDATE"),
        (2, "新", ms_to_tso(T0 + 3_000), None, None),
    ]

    # Export, latest and inside the window: real names back, bounded file names.
    for as_of, rows in [("latest", [(1, "已发货"), (2, "新")]), ("2026-01-01T00:00:02.500Z", [(1, "已发货")])]:
        exported = {(e.database, e.table): e for e in export_snapshot(*snapshots, out / as_of[:6], as_of,
                                                                      spark=lambda: spark)}
        assert set(exported) == {("shop", CHINESE_40), ("shop", "orders")}, as_of
        chinese = exported[("shop", CHINESE_40)]
        assert chinese.path.name == f"{chinese_id}.parquet" and len(chinese.path.name.encode()) <= 255
        data = pq.read_table(chinese.path)
        assert [data.schema.metadata[k].decode() for k in REAL_NAME_KEYS] == ["shop", CHINESE_40]
        assert sorted((r["id"], r["状态"]) for r in data.to_pylist()) == rows, as_of
        assert pq.read_table(exported[("shop", "orders")].path).num_rows == 1
