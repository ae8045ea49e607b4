"""A REST catalog by configuration (`CDC_ASSETS_CATALOG_TYPE=rest`): Iceberg's own REST catalog
fixture runs in a JVM of its own (no Docker; jars/rest-fixture/pom.xml); Spark writes a layer's
windows and a snapshot table's window through it, pyiceberg reads them through it, and the
warehouse holds no catalog file of ours."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import types as T

from cdc_assets.common.iceberg_refs import publish
from cdc_assets.common.iceberg_tables import IcebergTable, branch_name, end_tag
from cdc_assets.common.window_commits import WindowTable, window_commit
from cdc_assets.common.settings import load_settings
from cdc_assets.common.warehouse import CATALOG_FILE, load_pyiceberg_catalog, use_catalog
from cdc_assets.common.warehouse_listing import tables_json
from cdc_assets_tests.servers import rest_catalog

HOUR = 3_600_000
W1 = 1_767_225_600_000  # 2026-01-01T00:00Z
W2 = W1 + HOUR
ROWS = T.StructType([T.StructField("id", T.LongType()), T.StructField("name", T.StringType())])


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rest_catalog")
    with rest_catalog(tmp) as uri:
        settings = load_settings({"CDC_ASSETS_HOME": str(tmp / "home"), "CDC_ASSETS_WAREHOUSE": str(tmp / "lake"),
                                  "CDC_ASSETS_CATALOG_TYPE": "rest", "CDC_ASSETS_CATALOG_URI": uri})
        yield settings.iceberg_warehouse


def test_windows_written_by_spark_are_read_by_pyiceberg_through_rest(spark, warehouse):
    assert (warehouse.catalog_type, warehouse.catalog_uri.startswith("http://127.0.0.1:")) == ("rest", True)
    catalog = use_catalog(spark, warehouse)
    assert spark.conf.get("spark.sql.catalog.cdc.type") == "rest"
    assert spark.conf.get("spark.sql.catalog.cdc.jdbc.schema-version", None) is None  # the previous one's, unset
    layer = WindowTable(IcebergTable(catalog, "src", "change_table", warehouse.table_location("src", "change_table")))
    layer.write(spark, spark.createDataFrame([(1, "a"), (2, "b")], ROWS), W1, {"cdc.output-metadata": "{}"})
    layer.write(spark, spark.createDataFrame([(3, "c")], ROWS), W2, {"cdc.output-metadata": "{}"})
    layer.write(spark, spark.createDataFrame([(4, "d")], ROWS), W2, {"cdc.output-metadata": "{}"})  # a rerun

    table = load_pyiceberg_catalog(warehouse).load_table(("src", "change_table"))
    # the server qualifies the local path (`file:/…`)
    assert table.location().removeprefix("file:") == f"{warehouse.location}/src/change_table"
    rows = sorted(tuple(r.values()) for r in table.scan().to_arrow().to_pylist())
    assert rows == [(1, "a", W1), (2, "b", W1), (4, "d", W2)]
    assert window_commit(warehouse, "src.change_table", W2)["added-records"] == "1"
    assert not (Path(warehouse.location) / CATALOG_FILE).exists()  # the catalog is the server's


def test_a_snapshot_table_is_published_through_rest_and_listed(spark, warehouse):
    name = "snapshots__db__t"
    table = IcebergTable(use_catalog(spark, warehouse), "src", name, warehouse.table_location("src", name),
                         warehouse=warehouse)  # refs and summaries read with pyiceberg
    table.ensure_namespace(spark)
    table.ensure(spark, ROWS)
    first = table.write_window(spark, branch_name(W1), None, spark.createDataFrame([(1, "a")], ROWS), key=["id"])
    second = table.write_window(spark, branch_name(W2), first, spark.createDataFrame([(1, "A"), (2, "b")], ROWS),
                                key=["id"])
    publish(warehouse, {table.identifier: second}, {}, end_tag(W2 + HOUR), branch_name(W2), newest=True)

    loaded = load_pyiceberg_catalog(warehouse).load_table(("src", name))
    assert loaded.metadata.refs[end_tag(W2 + HOUR)].snapshot_id == second == loaded.current_snapshot().snapshot_id
    assert table.ref_snapshot(spark, "main") == second and table.total_records(spark, second) == 2
    assert branch_name(W2) not in loaded.metadata.refs
    assert sorted(tuple(r.values()) for r in loaded.scan().to_arrow().to_pylist()) == [(1, "A"), (2, "b")]
    document = tables_json(warehouse)
    assert document["catalog"]["properties"] == {"type": "rest", "warehouse": Path(warehouse.location).as_uri(),
                                                 "uri": warehouse.catalog_uri}
    assert {t["identifier"]: t["tags"] for t in document["tables"]} == {
        "src.change_table": [], f"src.{name}": [end_tag(W2 + HOUR)]}
