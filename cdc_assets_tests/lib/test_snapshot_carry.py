"""Quiet windows carried forward follow a rerun of the window they were carried from."""

from __future__ import annotations

from cdc_assets.lib.snapshot_store import (
    _recarry_followers, carry_forward_window, manifest_path, read_manifest,
)
from cdc_assets.lib.storage import write_json_atomic

HOUR = 3_600_000
W1 = 1_767_225_600_000


def _manifest(start: int, rows: int, failed: dict) -> dict:
    entry = {"database": "db", "table": "t", "path": f"db.t/window_start_ms={start}/run=x", "rows": rows}
    return {"window_start_ms": start, "window_end_ms": start + HOUR, "tables": {"db.t": entry},
            "ddl": {"applied": 0, "dropped_tables": {}, "unparsed": [], "history_versions_ended": {}},
            "failed_tables": failed}


def test_a_rerun_window_carries_its_quiet_followers_again(tmp_path):
    failed = {"db.u": {"database": "db", "table": "u", "reason": "table db.u: applying its rows failed: X"}}
    first = _manifest(W1, 1, failed)
    write_json_atomic(manifest_path(tmp_path, W1), first)
    carried = carry_forward_window(tmp_path, W1 + HOUR, W1 + 2 * HOUR, first)
    carry_forward_window(tmp_path, W1 + 2 * HOUR, W1 + 3 * HOUR, carried)
    assert read_manifest(tmp_path, W1 + 2 * HOUR)["failed_tables"] == failed

    repaired = _manifest(W1, 2, {})  # the rerun of W1 built every table
    write_json_atomic(manifest_path(tmp_path, W1), repaired)
    _recarry_followers(tmp_path, repaired)
    for start in (W1 + HOUR, W1 + 2 * HOUR):
        m = read_manifest(tmp_path, start)
        assert m["carried_forward"] and m["failed_tables"] == {} and m["tables"]["db.t"]["rows"] == 2
