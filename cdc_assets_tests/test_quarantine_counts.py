"""Issue 42.7: the replay's `quarantined` figure and the per-reason counts show that every
unusable message was caught, one quarantine row per message (a replay through Dagster)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from dagster import AssetKey, DagsterInstance

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.defs.resources import SPARK_JOBS_TAG
from cdc_assets.replay import replay
from cdc_assets_tests.e2e import settings_for
from cdc_assets_tests.helpers import layer_rows

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
MAX_BYTES = 2000


def canal(op: str, ms: int, rows: list[dict], **over) -> dict:
    """TiCDC's Canal-JSON DML message, as its Kafka sink writes it."""
    return {"id": 0, "database": "shop", "table": "orders", "pkNames": ["id"], "isDdl": False, "type": op,
            "es": ms, "ts": ms, "sql": "", "sqlType": {"id": 4, "note": 12},
            "mysqlType": {"id": "int", "note": "varchar"}, "data": rows, "old": None,
            "_tidb": {"commitTs": ms_to_tso(ms)}, **over}


def watermark(ms: int) -> dict:
    return {"id": 0, "database": "", "table": "", "pkNames": None, "isDdl": False, "type": "TIDB_WATERMARK",
            "es": ms, "ts": ms, "sql": "", "data": None, "old": None, "_tidb": {"watermarkTs": ms_to_tso(ms)}}


def rows(*ids: int) -> list[dict]:
    return [{"id": str(i), "note": "n"} for i in ids]


GOOD = [canal("INSERT", T0 + 1_000, rows(1, 2, 3)), canal("DELETE", T0 + 2_000, rows(2))]
# Each unusable as a whole, several holding many rows: one row each in the quarantine.
BAD = {
    "unexpected_shape": [canal("INSERT", T0 + 3_000, rows(4, 5), table=123),
                         canal("INSERT", T0 + 3_100, rows(6), database={"a": 1})],
    "missing_primary_key": [canal("INSERT", T0 + 4_000, rows(7, 8, 9, 10), pkNames=None)],
    "unknown_event_type": [canal("UPSERT", T0 + 5_000, rows(11, 12))],
    "message_too_large": [canal("INSERT", T0 + 6_000, [{"id": "13", "note": "x" * MAX_BYTES}])],
}
CUT = json.dumps(canal("INSERT", T0 + 7_000, rows(14, 15)))[:-20]  # a producer killed mid-write


def test_every_unusable_message_is_one_quarantine_row_and_the_counts_agree(tmp_path):
    dump, home = tmp_path / "dump", tmp_path / "home"
    dump.mkdir()
    messages = [json.dumps(m) for m in (*GOOD, *(m for ms in BAD.values() for m in ms))]
    (dump / "topic.txt").write_text("\n".join([*messages, CUT, json.dumps(watermark(T0 + 3_600_000))]) + "\n")
    settings = settings_for(home, dump, layout="lines", options={"max-message-bytes": str(MAX_BYTES)})
    instance = DagsterInstance.ephemeral()
    summary = replay(settings, "src", instance, progress=lambda _m: None)
    # Each window's run reports its Spark jobs (a local session): the fixed cost issue 45 cuts.
    assert len(summary.spark_jobs_per_window) == summary.windows_with_data == 1
    assert summary.spark_jobs_per_window[0] > 0
    # ... and tags its run with them (the run's page in the UI)
    window_runs = [r for r in instance.get_runs() if r.tags.get("dagster/partition")]
    assert [int(r.tags[SPARK_JOBS_TAG]) for r in window_runs] == summary.spark_jobs_per_window

    expected = Counter({reason: len(ms) for reason, ms in BAD.items()}) + Counter({"invalid_json": 1})
    quarantine = layer_rows(settings.warehouse, "src", "quarantine")
    assert Counter(r["reason"] for r in quarantine) == expected
    assert len({(r["topic"], r["kafka_partition"], r["kafka_offset"]) for r in quarantine}) == len(quarantine)
    assert summary.quarantined == sum(expected.values()) == len(quarantine) == 6

    meta = instance.get_latest_materialization_event(AssetKey(["src", "quarantine"])).asset_materialization.metadata
    assert (meta["quarantined"].value, meta["quarantined_messages"].value) == (6, 6)
    assert all(f"| {reason} | {n} |" in meta["by_reason"].value for reason, n in expected.items())
    assert (summary.events, summary.windows, summary.rows) == (4, 1, 2)  # 3 inserts and a delete: ids 1, 3
