"""One table's failure never stops the others: the window commits every other table, the
failed one keeps its previous snapshot marked failed (the `tables_built` check fails), later
windows do not build it on that stale state, and a rerun once the cause is gone repairs it."""

from __future__ import annotations

import json

import pytest
from dagster import DagsterInstance

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.replay import replay
from cdc_assets.snapshot import timeline as table_timeline
from cdc_assets.snapshot.export import export_snapshot
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.e2e import settings_for

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
HOUR = 3_600_000


def _row(ts_ms: int, table: str, i: int) -> str:
    return json.dumps({
        "id": 0, "database": "db", "table": table, "pkNames": ["id"], "isDdl": False, "type": "INSERT",
        "es": ts_ms, "ts": ts_ms, "sql": "", "mysqlType": {"id": "int", "v": "varchar"},
        "data": [{"id": str(i), "v": f"{table} {i}"}], "old": None, "_tidb": {"commitTs": ms_to_tso(ts_ms)},
    })


def _watermark(ts_ms: int) -> str:
    return json.dumps({"id": 0, "database": "", "table": "", "pkNames": None, "isDdl": False,
                       "type": "TIDB_WATERMARK", "es": ts_ms, "ts": ts_ms, "sql": "", "data": None,
                       "old": None, "_tidb": {"watermarkTs": ms_to_tso(ts_ms)}})


def test_a_failing_table_leaves_the_others_committed_and_is_repaired_by_a_rerun(tmp_path, monkeypatch):
    dump = tmp_path / "dump"
    dump.mkdir()
    lines = [_row(T0 + 1_000, "good", 1), _row(T0 + 2_000, "bad", 1), _watermark(T0 + HOUR),
             _row(T0 + HOUR + 1_000, "good", 2), _row(T0 + HOUR + 2_000, "bad", 2), _watermark(T0 + 2 * HOUR)]
    (dump / "topic.txt").write_text("\n".join(lines) + "\n")
    settings = settings_for(tmp_path / "home", dump, layout="lines")
    snapshots = (settings.warehouse, "src")  # (warehouse, source)

    original = table_timeline._Run._rebuild_table
    calls = {"bad": 0}

    def failing(self, actions, state, schema, checkpoint):
        if schema.id == "db.bad":
            calls["bad"] += 1
            raise RuntimeError("a fault no rule foresaw")
        return original(self, actions, state, schema, checkpoint)

    monkeypatch.setattr(table_timeline._Run, "_rebuild_table", failing)
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    assert not summary.ok and summary.windows == 2
    assert sorted(summary.checks_failed) == [f"src/snapshots:tables_built@{k}"
                                             for k in ("2026-01-01-00:00", "2026-01-01-01:00")]
    first, second = (read_manifest(*snapshots, w) for w in list_manifests(*snapshots))
    assert first.tables["db.good"].rows == 1 and second.tables["db.good"].rows == 2
    assert "db.bad" not in first.tables and "db.bad" not in second.tables
    assert first.failed_tables["db.bad"].reason.startswith(
        "table db.bad: applying its rows failed: RuntimeError: a fault no rule foresaw")
    assert second.failed_tables["db.bad"].reason.startswith("not built: an earlier window failed to build it")
    assert calls["bad"] == 1  # window 2 never built it on the stale state
    with pytest.raises(ValueError, match=r"failed to build \(db\.bad: table db\.bad: applying its rows failed"):
        export_snapshot(*snapshots, tmp_path / "out", "2026-01-01T01:00:00Z")

    monkeypatch.setattr(table_timeline._Run, "_rebuild_table", original)
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    assert summary.ok, summary.checks_failed
    last = read_manifest(*snapshots, list_manifests(*snapshots)[-1])
    assert last.failed_tables == {} and last.tables["db.bad"].rows == 2
