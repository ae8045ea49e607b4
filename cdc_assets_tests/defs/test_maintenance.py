"""Iceberg table maintenance: snapshots past the retention expire, every window-end tag stays
readable and equal to the truth, and a window can still be materialized again afterwards."""

from __future__ import annotations

import pytest
from dagster import DagsterInstance

from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.defs.automation import window_job_name
from cdc_assets.defs.factory import build_definitions, source_builds
from cdc_assets.defs.maintenance import maintenance_job_name
from cdc_assets.defs.partitions import partition_key_for_ms
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.e2e import differences_from_truth, simulate_and_replay

pytestmark = pytest.mark.slow
HOUR = 3_600_000


def _snapshot_counts(warehouse) -> dict[str, int]:
    catalog = load_pyiceberg_catalog(warehouse)
    return {t[-1]: len(catalog.load_table(t).metadata.snapshots) for t in catalog.list_tables(("src",))}


def test_maintenance_expires_untagged_snapshots_and_keeps_every_window_end(tmp_path, spark):
    # Two complete windows (2.5 hours): the first window's tags and files must outlive the
    # expiry, and the second window, materialized again, must find its inputs once the commits
    # that named the first expired. A third window proves nothing more and costs a window more.
    dump, summary, settings = simulate_and_replay(tmp_path, seed=5, layout="kafka-parquet", row_changes=300,
                                                  duration_ms=int(2.5 * HOUR), snapshot_retention_days=0)
    assert summary.ok and len(list_manifests(settings.warehouse, "src")) == 2
    warehouse = settings.warehouse
    before = _snapshot_counts(warehouse)
    defs = build_definitions(settings)
    (b,) = source_builds(settings)
    result = defs.resolve_job_def(maintenance_job_name(b)).execute_in_process(instance=DagsterInstance.ephemeral())
    assert result.success
    done = result.output_for_node(f"{b.source.name}__maintain_tables")
    assert set(done) == set(before)  # every table of the source, the windowed layers too
    after = _snapshot_counts(warehouse)
    # The layers keep their newest snapshot; a snapshot table keeps the snapshots its tags name.
    assert all(after[t] == 1 for t in after if not t.startswith("snapshots__"))
    assert sum(after.values()) < sum(before.values())
    # Each window was written once: every data file is still some tagged or current snapshot's.
    assert sum(t["data_files_deleted"] for t in done.values()) == 0
    assert sum(t["orphan_files_removed"] for t in done.values()) == 0  # none older than a day
    snapshots = (warehouse, "src")  # (warehouse, source)
    catalog = load_pyiceberg_catalog(warehouse)
    for window in list_manifests(*snapshots):
        manifest = read_manifest(*snapshots, window)
        for entry in manifest.tables.values():
            table = catalog.load_table(tuple(entry.identifier.split(".", 1)))
            assert table.metadata.refs[manifest.tag].snapshot_id == entry.snapshot_id
    assert differences_from_truth(settings, dump.truth_path) == {}

    # The window commits that named old windows expired: materializing the last window again
    # still finds its inputs and gives the same snapshot.
    last = list_manifests(*snapshots)[-1]
    again = defs.resolve_job_def(window_job_name(b)).execute_in_process(
        partition_key=partition_key_for_ms(b.partitions_def, last), instance=DagsterInstance.ephemeral())
    assert again.success
    assert differences_from_truth(settings, dump.truth_path) == {}
