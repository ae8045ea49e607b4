"""Quiet windows: a window in which nothing landed is the previous window's snapshot. It is
committed without Spark: every table keeps its snapshot and gets the window's end tag, and the
window's manifest row refers to the window with data it carries (snapshot/manifests.py)."""

from __future__ import annotations

from cdc_assets.common.iceberg_refs import tag_snapshots
from cdc_assets.common.iceberg_tables import end_tag
from cdc_assets.snapshot import manifests
from cdc_assets.snapshot.manifests import DdlRecord, WindowManifest


def carry_forward_windows(warehouse, source: str, starts: list[int], window_ms: int,
                          previous: WindowManifest) -> WindowManifest:
    """Commit consecutive windows in which nothing landed, after `previous`: every table keeps
    the previous window's snapshot and gets each window's end tag (one catalog commit per
    table for the whole run of windows, no Spark), then the windows' manifest rows, which refer
    to the window with data they carry, in one commit. A quiet hour costs a tag per table and
    a small row, so a dump whose commits lie years apart is not thousands of runs.
    `carried_forward` tells readers that the window has no change table (point in time needs
    none). Returns the last manifest."""
    expected = [previous.window_end_ms + i * window_ms for i in range(len(starts))]
    if starts != expected:
        raise RuntimeError(f"windows {starts[:3]}…: the previous manifest ends at "
                           f"{previous.window_end_ms}, not where they start, or they are not consecutive")
    since = manifests.begin(warehouse, source)
    tables = {tid: e.carried() for tid, e in previous.tables.items()}
    # Tags first: a crash before the manifests leaves tags of windows the next tick carries again.
    tag_snapshots(warehouse, {t.identifier: t.snapshot_id for t in tables.values()},
                  [end_tag(s + window_ms) for s in starts])
    carried = [WindowManifest(start, start + window_ms, end_tag(start + window_ms), tables, DdlRecord(),
                              # a table that failed to build stays failed until its window is materialized again
                              previous.failed_tables, carried_forward=True,
                              carried_from_window_start_ms=previous.data_window_start_ms)
               for start in starts]
    manifests.commit(warehouse, source, since, carried)
    return carried[-1]


def recarry_followers(warehouse, source: str, manifest: WindowManifest) -> None:
    """Quiet windows carried forward from an earlier run of this window point at its old state
    (a table it failed to build, say): carry them again from this one."""
    later = manifests.carried_after(warehouse, source, manifest.window_start_ms)
    followers, start = [], manifest.window_end_ms
    while later.get(start):
        followers.append(start)
        start += manifest.window_ms
    if followers:
        carry_forward_windows(warehouse, source, followers, manifest.window_ms, manifest)
