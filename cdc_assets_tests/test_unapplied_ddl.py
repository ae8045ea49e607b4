"""DDL that cannot be applied is never silent: through Dagster, the snapshot's `ddl_applied`
check warns and lists the statements, while the window is still written."""

from __future__ import annotations

import json

import pytest
from dagster import AssetCheckKey, AssetKey, DagsterEventType, DagsterInstance

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.replay import replay
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.e2e import settings_for

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z


def _message(ms: int, **fields) -> str:
    msg = {"id": 0, "database": "shop", "table": "t", "pkNames": ["id"], "isDdl": False, "es": ms, "ts": ms,
           "sql": "", "mysqlType": {"id": "int", "v": "int"}, "data": None, "old": None,
           "_tidb": {"commitTs": ms_to_tso(ms)}}
    return json.dumps({**msg, **fields})


def test_unapplied_ddl_warns_with_the_statements(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    truncate = "ALTER TABLE t TRUNCATE PARTITION p0"  # rows removed without row events
    lines = [
        _message(T0 + 1_000, isDdl=True, type="CREATE", sql="CREATE TABLE t (id INT PRIMARY KEY, v INT) "
                 "PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20))"),
        _message(T0 + 2_000, type="INSERT", data=[{"id": "1", "v": "1"}]),
        _message(T0 + 3_000, type="INSERT", data=[{"id": "15", "v": "2"}]),
        _message(T0 + 4_000, isDdl=True, type="ALTER", sql=truncate),
        _message(T0 + 3_600_000, type="TIDB_WATERMARK", table="", _tidb={"watermarkTs": ms_to_tso(T0 + 3_600_000)}),
    ]
    (dump / "topic.txt").write_text("\n".join(lines) + "\n")
    settings = settings_for(tmp_path / "home", dump, layout="lines")
    instance = DagsterInstance.ephemeral()
    summary = replay(settings, "src", instance, progress=lambda _m: None)
    assert summary.ok and summary.windows == 1 and summary.checks_failed == []
    assert [c.split("@")[0] for c in summary.checks_warned] == ["src/snapshots:ddl_applied"]

    check = AssetCheckKey(AssetKey(["src", "snapshots"]), "ddl_applied")
    (evaluation,) = [e.dagster_event.event_specific_data for run in instance.get_runs()
                     for e in instance.all_logs(run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION)
                     if e.dagster_event.event_specific_data.asset_check_key == check]
    assert not evaluation.passed and evaluation.metadata["ddl_unparsed"].value == 1
    (statement,) = evaluation.metadata["statements"].value
    assert (statement["sql"], statement["table"]) == (truncate, "shop.t") and statement["error"]
    assert (statement["commit_ts"], statement["commit_time"]) == (str(ms_to_tso(T0 + 4_000)),
                                                                  "2026-01-01T00:00:04+00:00")

    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    (window,) = list_manifests(*snapshots)
    manifest = read_manifest(*snapshots, window)
    assert manifest.tables["shop.t"].rows == 2  # kept as they were: the warning says why to look
    assert [u["sql"] for u in manifest.ddl.unparsed] == [truncate]

