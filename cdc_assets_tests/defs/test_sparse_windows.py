"""Commit times months apart: the quiet windows between them carry the previous snapshot
forward without a run, so the replay's cost follows the windows with data."""

from __future__ import annotations

from dagster import DagsterInstance

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.replay import replay
from cdc_assets.snapshot.point_in_time import plan
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.canal_messages import row, values, watermark
from cdc_assets_tests.e2e import settings_for

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z
HOUR = 3_600_000
LATER = T0 + 200 * 24 * HOUR  # 200 days on: 4,800 hourly windows between


def test_quiet_windows_cost_no_run(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    messages = [
        row("INSERT", ms_to_tso(T0 + 1000), values(1, "a")),
        row("INSERT", ms_to_tso(LATER + 1000), values(2, "b")),
        row("UPDATE", ms_to_tso(LATER + 2000), values(1, "a2"), old=values(1, "a")),
        watermark(ms_to_tso(LATER + HOUR)),  # completes LATER's window (and lands in the next one)
    ]
    (dump / "topic.txt").write_bytes(b"\n".join(messages) + b"\n")
    settings = settings_for(tmp_path / "home", dump, layout="lines")
    instance = DagsterInstance.ephemeral()
    lines: list[str] = []
    summary = replay(settings, "src", instance, progress=lines.append)

    windows = 200 * 24 + 1  # from T0's window to LATER's
    assert (summary.ok, summary.windows, summary.windows_with_data, summary.quiet_windows, summary.window_runs) == (
        True, windows, 2, windows - 2, 2)
    assert f"[src] {windows} window(s) to materialize, 2 with data (in 2 run(s), one per range of consecutive " \
           f"windows with data); {windows - 2} quiet, " \
           "carried forward without Spark" in lines
    # one landing and one run per range of windows with data (here two lone ones), nothing per quiet window
    assert len(instance.get_run_records()) == 1 + 2
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    assert len(list_manifests(*snapshots)) == windows
    quiet = read_manifest(*snapshots, T0 + 5 * HOUR)
    first = read_manifest(*snapshots, T0)
    [(tid, entry)] = quiet.tables.items()
    assert quiet.carried_forward and entry.snapshot_id == first.tables[tid].snapshot_id
    assert (entry.rows, entry.inserted_keys, quiet.window_end_ms) == (1, 0, T0 + 6 * HOUR)
    last = read_manifest(*snapshots, LATER)
    assert (last.tables[tid].rows, last.tables[tid].previous_rows, summary.rows) == (2, 1, 2)
    # an instant inside a quiet window reads the snapshot before it, with no change table
    inside = ms_to_tso(T0 + 100 * HOUR + 1234)
    p = plan(*snapshots, inside)
    assert (p.base, p.replay) == (T0 + 99 * HOUR, None)
