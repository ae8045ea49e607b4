"""A layer table's window write (common/window_commits.py `WindowTable`): a window known to be
empty (a quarantine that quarantined nothing) is one pyiceberg commit that empties its
partition, with the summary properties a Spark write carries, and no Spark job."""

from __future__ import annotations

from cdc_assets.common.iceberg_tables import IcebergTable
from cdc_assets.common.spark_session import jobs_since, spark_job_ids
from cdc_assets.common.warehouse import use_catalog
from cdc_assets.common.window_commits import OUTPUT_METADATA_PROPERTY, WindowTable, window_commit

W1, W2 = 1_767_225_600_000, 1_767_229_200_000
ROWS = "id long, reason string"


def test_an_empty_window_is_committed_without_spark_and_replaces_the_windows_rows(spark, tmp_path):
    warehouse = tmp_path / "wh"
    warehouse.mkdir()  # a run makes it (the landing comes first)
    layer = WindowTable(IcebergTable(use_catalog(spark, warehouse), "src", "quarantine", "", warehouse=warehouse))
    empty = spark.createDataFrame([], ROWS)
    # No table yet: Spark creates it, and its empty window is a commit too.
    layer.write(spark, empty, W1, {OUTPUT_METADATA_PROPERTY: '{"quarantined": 0}'}, empty=True)
    assert window_commit(warehouse, "src.quarantine", W1)[OUTPUT_METADATA_PROPERTY] == '{"quarantined": 0}'
    layer.write(spark, spark.createDataFrame([(1, "a"), (2, "b")], ROWS), W1, {OUTPUT_METADATA_PROPERTY: "{}"})
    layer.write(spark, spark.createDataFrame([(3, "c")], ROWS), W2, {OUTPUT_METADATA_PROPERTY: "{}"})

    before = spark_job_ids()  # a rerun of W1 that quarantines nothing now: its rows go
    layer.write(spark, empty, W1, {OUTPUT_METADATA_PROPERTY: '{"quarantined": 0}'}, empty=True)
    assert jobs_since(before) == 0
    commit = window_commit(warehouse, "src.quarantine", W1)
    assert commit[OUTPUT_METADATA_PROPERTY] == '{"quarantined": 0}' and "spark.app.id" not in commit
    assert int(commit.get("added-records", 0)) == 0 and commit["deleted-records"] == "2"
    assert layer.read(spark, W1).count() == 0
    assert [tuple(r) for r in layer.read(spark, W2).collect()] == [(3, "c")]
