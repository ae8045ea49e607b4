"""CI materializes the shipped sample pipeline (exactly what `make demo` runs) and fails when
any asset check fails: ERROR checks make the replay not ok, WARN checks are reported in
`checks_warned`. The sample has exactly one expected warning: its changefeed restarts and
replays resolved timestamps, so landing ignores the watermarks that moved backwards
(`watermarks_trusted`, docs/reliability.md). Any other failed check fails CI."""

from __future__ import annotations

import json

import pytest

from cdc_assets.demo import run_demo
from cdc_assets.simulator.compare import load_truth
from cdc_assets.snapshot.store import list_manifests

pytestmark = pytest.mark.slow


def test_sample_pipeline_materializes_with_every_check_passing(tmp_path, monkeypatch, capsys, spark):
    monkeypatch.setenv("CDC_ASSETS_HOME", str(tmp_path))
    for name in ("CDC_ASSETS_SOURCES", "CDC_ASSETS_WAREHOUSE", "CDC_ASSETS_INPUT", "CDC_ASSETS_SOURCE"):
        monkeypatch.delenv(name, raising=False)
    code = run_demo()
    out = capsys.readouterr().out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["checks_failed"] == [], summary["checks_failed"]
    assert summary["checks_warned"] == ["sample/landed_dump:watermarks_trusted@landing"], summary["checks_warned"]
    assert load_truth(tmp_path / "sample" / "truth.json")["restart"] is not None
    assert summary["ignored_watermarks"] > 0
    assert summary["ok"] is True and code == 0
    assert "matches the simulator's truth: yes" in out
    # Every window with data was materialized, and its events counted.
    assert summary["windows"] >= 3 and summary["incomplete_windows"] == 1
    assert len(list_manifests(tmp_path / "warehouse", "sample")) == summary["windows"]
    assert summary["events"] > 0 and summary["duplicates"] > 0 and summary["late"] > 0
