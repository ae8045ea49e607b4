"""The warehouse's catalog by configuration: the settings and the `Warehouse` they make (a local
folder keeps the embedded JDBC catalog exactly as before; bad combinations fail at load), and
an `s3://` warehouse on moto's S3 server: windows written by Spark through Iceberg's S3FileIO
read back by pyiceberg, a snapshot table's window write, tag and publish, and a listing that
opens the catalog with the reader's own environment credentials and prints none."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from pyiceberg.catalog import load_catalog
from pyspark.sql import types as T

from cdc_assets.cli import main as cli_main
from cdc_assets.common.iceberg_refs import publish, tag_snapshots
from cdc_assets.common.iceberg_tables import IcebergTable, branch_name, end_tag
from cdc_assets.common.window_commits import WindowTable, window_commit
from cdc_assets.common.settings import load_settings
from cdc_assets.common.spark_session import spark_config
from cdc_assets.common.warehouse import (
    CATALOG, Warehouse, as_warehouse, identifier_parts, load_pyiceberg_catalog, pyiceberg_properties, qualified_name,
    spark_catalog_conf, table_identifier, use_catalog,
)
from cdc_assets.common.warehouse_listing import tables_json
from cdc_assets.defs.resources import warehouse_resource
from cdc_assets_tests.servers import moto_s3

HOUR = 3_600_000
W1 = 1_767_225_600_000  # 2026-01-01T00:00Z
W2, W3 = W1 + HOUR, W1 + 2 * HOUR
KEY_ID = "AKIACATALOGTEST"
SECRET = "catalog-s3cr3t-that-must-never-leak"
TOKEN = "rest-t0ken-that-must-never-leak"
ROWS = T.StructType([T.StructField("id", T.LongType()), T.StructField("name", T.StringType())])


# settings -> Warehouse ---------------------------------------------------------------------------


def test_a_local_warehouse_keeps_the_embedded_jdbc_catalog(tmp_path):
    settings = load_settings({"CDC_ASSETS_HOME": str(tmp_path)})
    warehouse = settings.iceberg_warehouse
    assert warehouse == as_warehouse(settings.warehouse) == as_warehouse(str(settings.warehouse))
    root = tmp_path / "warehouse"
    assert spark_catalog_conf(CATALOG, settings.warehouse) == {  # exactly the settings of before
        "spark.sql.catalog.cdc": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.cdc.type": "jdbc",
        "spark.sql.catalog.cdc.uri": f"jdbc:sqlite:{root / 'catalog.db'}",
        "spark.sql.catalog.cdc.jdbc.schema-version": "V1",
        "spark.sql.catalog.cdc.jdbc.busy_timeout": "60000",
        "spark.sql.catalog.cdc.cache-enabled": "false",
        "spark.sql.catalog.cdc.warehouse": str(root),
    }
    assert pyiceberg_properties(warehouse) == {"type": "sql", "uri": f"sqlite:///{root / 'catalog.db'}?timeout=60&check_same_thread=false",
                                               "warehouse": root.as_uri()}
    assert Path(warehouse) == root and warehouse.table_location("src", "change_log") == f"{root}/src/change_log"
    assert warehouse_resource(settings).iceberg == warehouse


def test_a_reader_left_in_a_transaction_holds_back_no_catalog_writer(tmp_path):
    """The embedded catalog is in WAL mode: a connection left in a read (a cursor not run out)
    no longer blocks a commit for SQLite's whole busy timeout (in rollback-journal mode it did,
    and every reader queued behind the waiting writer: "database is locked" in CI)."""
    import sqlite3
    import time

    import pyarrow as pa

    catalog = load_pyiceberg_catalog(tmp_path)
    catalog.create_namespace("src")
    path = tmp_path / "catalog.db"
    reader = sqlite3.connect(path, isolation_level=None)
    assert reader.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    reader.execute("BEGIN")
    assert reader.execute("SELECT count(*) FROM iceberg_namespace_properties").fetchone()[0] >= 1
    started = time.monotonic()
    catalog.create_table("src.t", schema=pa.schema([("id", pa.int64())]))  # a write while the read is open
    load_pyiceberg_catalog(tmp_path).load_table("src.t")  # and a new reader
    assert time.monotonic() - started < 10
    reader.execute("COMMIT")
    reader.close()

def test_an_embedded_catalog_is_opened_once_per_file(tmp_path):
    """Kept per catalog file: the same warehouse gets the same catalog; one removed and made
    again at the same place gets a new one (the old one's connections held the removed file)."""
    import shutil

    first = load_pyiceberg_catalog(tmp_path / "w")
    first.create_namespace("src")
    assert load_pyiceberg_catalog(tmp_path / "w") is first
    assert load_pyiceberg_catalog(str(tmp_path / "w")) is first
    shutil.rmtree(tmp_path / "w")
    again = load_pyiceberg_catalog(tmp_path / "w")
    assert again is not first and again.list_namespaces() == []
    others = [load_pyiceberg_catalog(tmp_path / f"o{i}") for i in range(5)]  # the oldest are let go
    assert load_pyiceberg_catalog(tmp_path / "w") is not again
    assert load_pyiceberg_catalog(tmp_path / "o4") is others[4]

def test_the_warehouse_names_every_location_and_identifier(tmp_path):
    local = Warehouse(str(tmp_path / "wh"))
    s3 = Warehouse("s3://lake/cdc", catalog_uri="jdbc:sqlite:/x/catalog.db", work_dir=str(tmp_path / "work"))
    assert s3.table_location("src", "landed_messages") == "s3://lake/cdc/src/landed_messages"
    assert s3.snapshot_location("src", "shop.orders-1a2b3c4d") == "s3://lake/cdc/src/snapshots/shop.orders-1a2b3c4d"
    assert local.local_folder("src", "landing", "s3_mirror") == tmp_path / "wh" / "src" / "landing" / "s3_mirror"
    assert s3.local_folder("src", "landing") == tmp_path / "work" / "src" / "landing"
    assert table_identifier("src", "snapshots__shop__orders") == "src.snapshots__shop__orders"
    assert identifier_parts("src.snapshots__sh.op__orders") == ("src", "snapshots__sh.op__orders")
    assert qualified_name(table_identifier("src", "change_log")) == "cdc.src.change_log"


def test_an_s3_warehouse_keeps_its_sqlite_catalog_in_home_and_credentials_out(tmp_path):
    settings = load_settings({"CDC_ASSETS_HOME": str(tmp_path), "CDC_ASSETS_WAREHOUSE": "s3://lake/cdc/",
                              "CDC_ASSETS_S3_ENDPOINT_URL": "http://127.0.0.1:9000",
                              "CDC_ASSETS_S3_REGION": "eu-west-1", "AWS_SECRET_ACCESS_KEY": SECRET})
    warehouse = settings.iceberg_warehouse
    assert (settings.warehouse, warehouse.location, warehouse.catalog_uri) == (
        "s3://lake/cdc", "s3://lake/cdc", f"jdbc:sqlite:{tmp_path / 'catalog.db'}")
    assert warehouse.table_location("src", "raw_messages") == "s3://lake/cdc/src/raw_messages"
    conf = spark_catalog_conf(CATALOG, warehouse)
    assert {k: conf[f"spark.sql.catalog.cdc.{k}"] for k in
            ("warehouse", "io-impl", "s3.endpoint", "s3.path-style-access", "client.region")} == {
        "warehouse": "s3://lake/cdc", "io-impl": "org.apache.iceberg.aws.s3.S3FileIO",
        "s3.endpoint": "http://127.0.0.1:9000", "s3.path-style-access": "true", "client.region": "eu-west-1"}
    assert pyiceberg_properties(warehouse) == {
        "type": "sql", "uri": f"sqlite:///{tmp_path / 'catalog.db'}?timeout=60&check_same_thread=false", "warehouse": "s3://lake/cdc",
        "s3.endpoint": "http://127.0.0.1:9000", "s3.force-virtual-addressing": "false", "s3.region": "eu-west-1"}
    everything = json.dumps([spark_config(settings), pyiceberg_properties(warehouse)])
    assert SECRET not in everything and "secret" not in everything.lower()
    with pytest.raises(TypeError, match="not a local path"):
        Path(warehouse)
    with pytest.raises(ValueError, match="needs its catalog and S3 settings"):
        as_warehouse("s3://lake/cdc")


def test_catalog_settings_from_the_sources_file_and_the_environment(tmp_path):
    path = tmp_path / "sources.yaml"
    path.write_text("warehouse: s3://lake/wh\ncatalog_type: rest\ncatalog_uri: http://catalog:8181\n"
                    "catalog_properties: {prefix: prod, header.X-Client: cdc}\ns3_path_style: false\n"
                    "sources: [{name: src, protocol: canal-json, location: dump}]\n")
    env = {"CDC_ASSETS_SOURCES": str(path), "CDC_ASSETS_HOME": str(tmp_path / "h")}
    warehouse = load_settings(env).iceberg_warehouse
    assert (warehouse.catalog_type, warehouse.catalog_uri, warehouse.properties, warehouse.path_style) == (
        "rest", "http://catalog:8181", {"prefix": "prod", "header.X-Client": "cdc"}, False)
    assert pyiceberg_properties(warehouse) == {"type": "rest", "warehouse": "s3://lake/wh",
                                               "uri": "http://catalog:8181", "s3.force-virtual-addressing": "true",
                                               "prefix": "prod", "header.X-Client": "cdc"}
    # the environment wins over the file
    glue = load_settings({**env, "CDC_ASSETS_CATALOG_TYPE": "glue", "CDC_ASSETS_CATALOG_URI": "",
                          "CDC_ASSETS_S3_REGION": "us-east-2", "CDC_ASSETS_CATALOG_PROPERTIES": "glue.id=123"})
    conf = spark_catalog_conf(CATALOG, glue.iceberg_warehouse)
    assert (conf["spark.sql.catalog.cdc.type"], conf["spark.sql.catalog.cdc.client.region"],
            conf["spark.sql.catalog.cdc.glue.id"], conf["spark.sql.catalog.cdc.prefix"]) == (
        "glue", "us-east-2", "123", "prod")
    assert "spark.sql.catalog.cdc.uri" not in conf


@pytest.mark.parametrize("env, error", [
    ({"CDC_ASSETS_CATALOG_TYPE": "nessie"}, "not one of jdbc, rest, glue, hive"),
    ({"CDC_ASSETS_CATALOG_TYPE": "rest"}, "REST catalog needs its server's URL"),
    ({"CDC_ASSETS_CATALOG_TYPE": "hive"}, "metastore's thrift://host:port"),
    ({"CDC_ASSETS_CATALOG_TYPE": "glue", "CDC_ASSETS_CATALOG_URI": "http://x"}, "Glue catalog has no URI"),
    ({"CDC_ASSETS_CATALOG_URI": "sqlite:///x.db"}, "must start with jdbc:"),
    ({"CDC_ASSETS_CATALOG_PROPERTIES": f"s3.secret-access-key={SECRET}"}, "only from the environment"),
    ({"CDC_ASSETS_CATALOG_PROPERTIES": "io-impl=x.Y"}, "set from the warehouse's settings"),
    ({"CDC_ASSETS_WAREHOUSE": "s3a://lake/wh"}, "s3a:// is Hadoop's scheme"),
    ({"CDC_ASSETS_S3_PATH_STYLE": "maybe"}, "s3_path_style must be true or false"),
])
def test_an_invalid_catalog_setting_fails_at_load(tmp_path, env, error):
    with pytest.raises(ValueError, match=error) as raised:
        load_settings({"CDC_ASSETS_HOME": str(tmp_path), **env})
    assert SECRET not in str(raised.value)


def test_a_secret_catalog_property_comes_from_the_environment_only(tmp_path, monkeypatch):
    path = tmp_path / "sources.yaml"
    path.write_text(f"catalog_properties: {{token: {TOKEN}}}\n"
                    "sources: [{name: src, protocol: canal-json, location: dump}]\n")
    with pytest.raises(ValueError, match=r"\['token'\] may hold secrets: set them in the environment") as raised:
        load_settings({"CDC_ASSETS_SOURCES": str(path), "CDC_ASSETS_HOME": str(tmp_path)})
    assert TOKEN not in str(raised.value)
    env = {"CDC_ASSETS_HOME": str(tmp_path), "CDC_ASSETS_CATALOG_TYPE": "rest",
           "CDC_ASSETS_CATALOG_URI": "http://catalog:8181", "CDC_ASSETS_CATALOG_PROPERTIES": f"token={TOKEN},prefix=p"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = load_settings()
    resource = warehouse_resource(settings)
    # Dagster shows a resource's config: the token is not in it, but the catalog opened gets it.
    assert resource.catalog_properties == {"prefix": "p"} and TOKEN not in json.dumps(resource.model_dump())
    assert resource.iceberg.properties == {"prefix": "p", "token": TOKEN} == settings.iceberg_warehouse.properties
    # a REST server's own name for its warehouse (Polaris, Lakekeeper); the tables stay in ours
    named = settings.with_overrides(catalog_properties={"warehouse": "prod_catalog"}).iceberg_warehouse
    assert spark_catalog_conf(CATALOG, named)["spark.sql.catalog.cdc.warehouse"] == "prod_catalog"
    assert named.table_location("src", "change_log") == f"{tmp_path}/warehouse/src/change_log"


def test_a_hive_catalog_without_hive_jars_is_a_clear_error(tmp_path):
    settings = load_settings({"CDC_ASSETS_HOME": str(tmp_path), "CDC_ASSETS_CATALOG_TYPE": "hive",
                              "CDC_ASSETS_CATALOG_URI": "thrift://metastore:9083"})
    with pytest.raises(ValueError, match="Hive metastore client jars .* which cdc_assets does not ship"):
        spark_config(settings)
    with_jars = settings.with_overrides(spark_conf={"spark.jars.packages": "org.apache.hive:hive-metastore:3.1.3"})
    assert spark_config(with_jars)["spark.sql.catalog.cdc.uri"] == "thrift://metastore:9083"


# an s3:// warehouse on moto -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3(tmp_path_factory, spark):
    """moto's S3 with the bucket `lake`; credentials only in the environment (Python's, and the
    driver JVM's system properties: the session's JVM started before this test set them)."""
    tmp = tmp_path_factory.mktemp("catalog_s3")
    system = spark._jvm.java.lang.System
    with pytest.MonkeyPatch.context() as env, moto_s3(tmp) as endpoint:
        env.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
        env.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        env.delenv("AWS_SESSION_TOKEN", raising=False)
        system.setProperty("aws.accessKeyId", KEY_ID)
        system.setProperty("aws.secretAccessKey", SECRET)
        try:
            client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
            client.create_bucket(Bucket="lake")
            settings = load_settings({"CDC_ASSETS_HOME": str(tmp / "home"), "CDC_ASSETS_WAREHOUSE": "s3://lake/wh",
                                      "CDC_ASSETS_S3_ENDPOINT_URL": endpoint, "CDC_ASSETS_S3_REGION": "us-east-1"})
            (tmp / "home").mkdir()
            yield settings, client
        finally:
            system.clearProperty("aws.accessKeyId")
            system.clearProperty("aws.secretAccessKey")


def _keys(client, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket="lake", Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_windows_written_by_spark_on_s3_are_read_by_pyiceberg(spark, s3):
    settings, client = s3
    warehouse = settings.iceberg_warehouse
    layer = WindowTable(IcebergTable(use_catalog(spark, warehouse), "src", "change_table",
                                     warehouse.table_location("src", "change_table")))
    layer.write(spark, spark.createDataFrame([(1, "a"), (2, "b")], ROWS), W1, {"cdc.output-metadata": '{"n": 2}'})
    layer.write(spark, spark.createDataFrame([(3, "c")], ROWS), W2, {"cdc.output-metadata": '{"n": 1}'})

    table = load_pyiceberg_catalog(warehouse).load_table(("src", "change_table"))
    assert table.location() == "s3://lake/wh/src/change_table"
    rows = sorted(tuple(r.values()) for r in table.scan().to_arrow().to_pylist())
    assert rows == [(1, "a", W1), (2, "b", W1), (3, "c", W2)]
    assert sorted(tuple(r) for r in layer.read(spark, W2).collect()) == [(3, "c")]
    commit = window_commit(warehouse, "src.change_table", W1)
    assert (commit["cdc.output-metadata"], commit["added-records"]) == ('{"n": 2}', "2")
    files = _keys(client, "wh/src/change_table/")
    assert any(k.endswith(".parquet") for k in files) and any(k.endswith(".metadata.json") for k in files)
    assert not (settings.home / "wh").exists()  # nothing of the tables on the local disk


def test_a_snapshot_table_on_s3_is_written_tagged_and_published(spark, s3):
    settings, _ = s3
    warehouse = settings.iceberg_warehouse
    name = "snapshots__db__t"
    table = IcebergTable(use_catalog(spark, warehouse), "src", name, warehouse.table_location("src", name),
                         warehouse=warehouse)  # refs and summaries read with pyiceberg
    table.ensure_namespace(spark)
    table.ensure(spark, ROWS)
    first = table.write_window(spark, branch_name(W1), None,
                               spark.createDataFrame([(1, "a"), (2, "b")], ROWS), key=["id"])
    publish(warehouse, {table.identifier: first}, {}, end_tag(W2), branch_name(W1), newest=True)
    changed = spark.createDataFrame([(2, "B"), (3, "c")], ROWS)  # 2 updated, 3 new, 1 deleted
    keys = spark.createDataFrame([(1,), (2,), (3,)], "id long")
    second = table.write_window(spark, branch_name(W2), first, changed, key=["id"], keys=keys)
    publish(warehouse, {table.identifier: second}, {}, end_tag(W3), branch_name(W2), newest=True)
    tag_snapshots(warehouse, {table.identifier: second}, [end_tag(W3 + HOUR)])

    loaded = load_pyiceberg_catalog(warehouse).load_table(("src", name))
    refs = loaded.metadata.refs
    assert {t: refs[t].snapshot_id for t in (end_tag(W2), end_tag(W3), end_tag(W3 + HOUR))} == {
        end_tag(W2): first, end_tag(W3): second, end_tag(W3 + HOUR): second}
    assert branch_name(W2) not in refs and loaded.current_snapshot().snapshot_id == second

    def at(snapshot_id):
        return sorted(tuple(r.values()) for r in loaded.scan(snapshot_id=snapshot_id).to_arrow().to_pylist())

    assert at(first) == [(1, "a"), (2, "b")]
    assert at(second) == [(2, "B"), (3, "c")]
    assert (table.total_records(spark, first), table.total_records(spark, second)) == (2, 2)
    assert sorted(tuple(r) for r in table.read(spark, first, ROWS).collect()) == [(1, "a"), (2, "b")]


def test_the_listing_of_an_s3_warehouse_opens_it_with_env_credentials_and_prints_none(s3, capsys, monkeypatch):
    settings, _ = s3
    for key, value in {"CDC_ASSETS_HOME": str(settings.home), "CDC_ASSETS_WAREHOUSE": settings.warehouse,
                       "CDC_ASSETS_S3_ENDPOINT_URL": settings.s3_endpoint_url, "CDC_ASSETS_S3_REGION": "us-east-1",
                       "CDC_ASSETS_CATALOG_PROPERTIES": f"token={TOKEN}"}.items():
        monkeypatch.setenv(key, value)
    capsys.readouterr()
    assert cli_main(["tables", "--json"]) == 0
    out, err = capsys.readouterr()
    for secret in (SECRET, TOKEN, KEY_ID):
        assert secret not in out and secret not in err
    document = json.loads(out)
    assert "token" not in document["catalog"]["properties"]
    assert sorted(t["identifier"] for t in document["tables"]) == ["src.change_table", "src.snapshots__db__t"]
    # A reader opens the catalog with exactly the printed properties; S3 keys from its environment
    # (moto's server refuses unsigned requests: ACCESS_DENIED, so the read proves pyarrow signed
    # with AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY).
    catalog = load_catalog(document["catalog"]["name"], **document["catalog"]["properties"])
    rows = catalog.load_table(("src", "change_table")).scan().to_arrow().num_rows
    assert rows == 3
    assert tables_json(settings.iceberg_warehouse)["catalog"] == document["catalog"]


def test_maintenance_runs_on_s3_listing_files_with_the_tables_own_file_io(spark, s3):
    """Orphan files of an s3 table are listed by S3FileIO (prefix listing): without it, Iceberg
    lists through Hadoop's file system, which has no `s3` scheme here. A file younger than a
    day is never an orphan (a write may be in flight; Iceberg refuses a shorter interval)."""
    from datetime import timedelta

    from cdc_assets.common.iceberg_maintenance import maintain_source

    settings, client = s3
    warehouse = settings.iceberg_warehouse
    layer = WindowTable(IcebergTable(use_catalog(spark, warehouse), "maint", "change_table",
                                     warehouse.table_location("maint", "change_table")))
    layer.write(spark, spark.createDataFrame([(1, "a")], ROWS), W1, {})
    layer.write(spark, spark.createDataFrame([(2, "b")], ROWS), W1, {})  # replaces the window: a file unreferenced
    fresh = "wh/maint/change_table/data/left-by-a-writer-in-flight.parquet"
    client.put_object(Bucket="lake", Key=fresh, Body=b"not referenced by any snapshot yet")

    done = maintain_source(spark, warehouse, "maint", timedelta(0))["change_table"]
    assert done["orphan_files_removed"] == 0 and fresh in _keys(client, "wh/maint/change_table/data/")
    assert done["snapshots_kept"] == 1 and done["data_files_deleted"] == 1  # the replaced window's file
    assert sorted(tuple(r) for r in layer.read(spark, W1).collect()) == [(2, "b")]
