"""Database, table and column names come from untrusted messages: path traversal and
names that are not identifiers are stored safely, exactly, and inside the warehouse."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance

from cdc_assets.lib.export import export_snapshot
from cdc_assets.lib.storage import table_id
from cdc_assets.lib.tso import ms_to_tso
from cdc_assets.replay import replay
from cdc_assets_tests.e2e import settings_for

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
HOSTILE_DB, HOSTILE_TABLE = "../..", "../../etc"
COLUMNS = {"id": "int", "x.y": "varchar", "a`b": "int", "sp ace,;{}()=": "varchar", "ünï 表": "varchar"}


def _message(op: str, ts_ms: int, db: str, table: str, data: dict) -> str:
    return json.dumps({
        "id": 0, "database": db, "table": table, "pkNames": ["id"], "isDdl": False, "type": op,
        "es": ts_ms, "ts": ts_ms, "sql": "", "sqlType": {}, "mysqlType": COLUMNS, "data": [data],
        "old": None, "_tidb": {"commitTs": ms_to_tso(ts_ms)},
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
        _message("INSERT", T0 + 4_000, "/abs", "nul\u0000byte", _row(3)),
        _watermark(T0 + 3_600_000),
    ]
    (dump / "topic.txt").write_text("\n".join(lines) + "\n")
    settings = settings_for(home, dump, layout="lines")
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    assert summary.ok and summary.windows == 1 and summary.quarantined == 0

    snapshots = settings.warehouse / "src" / "snapshots"
    exported = {(e.database, e.table): e for e in export_snapshot(snapshots, out)}
    assert set(exported) == {(HOSTILE_DB, HOSTILE_TABLE), ("/abs", "nul\u0000byte")}

    hostile = exported[(HOSTILE_DB, HOSTILE_TABLE)]
    assert hostile.path.parent == out and hostile.path.name == f"{table_id(HOSTILE_DB, HOSTILE_TABLE)}.parquet"
    assert "/" not in table_id(HOSTILE_DB, HOSTILE_TABLE) and ".." not in table_id(HOSTILE_DB, HOSTILE_TABLE)
    rows = pq.read_table(hostile.path).to_pylist()
    assert [{c: r[c] for c in COLUMNS} for r in rows] == [
        {"id": 1, "x.y": "dot 1", "a`b": 10, "sp ace,;{}()=": "s", "ünï 表": "ü"}]

    # Nothing escaped: every file written is inside the dump, the warehouse or the export.
    assert _files_outside(tmp_path, [dump, settings.warehouse, out]) == []
    assert not any(p.name == "etc" for p in tmp_path.rglob("*"))
