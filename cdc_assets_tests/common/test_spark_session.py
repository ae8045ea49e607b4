"""Which Spark a session runs on and with which settings, from the settings alone."""

from __future__ import annotations

from cdc_assets.common.settings import load_settings
from cdc_assets.common.spark_session import spark_config


def test_the_master_url_alone_picks_local_standalone_or_spark_connect():
    local = spark_config(load_settings({}))
    assert local["spark.master"] == "local[2]" and "spark.remote" not in local

    standalone = spark_config(load_settings({"CDC_ASSETS_SPARK_MASTER": "spark://10.0.0.5:7077",
                                             "CDC_ASSETS_SPARK_CONF": "spark.executor.memory=8g"}))
    assert standalone["spark.master"] == "spark://10.0.0.5:7077"
    assert standalone["spark.executor.memory"] == "8g" and standalone["spark.driver.memory"] == "4g"

    # Spark Connect: no master, only session (SQL) settings; the server owns the rest.
    connect = spark_config(load_settings({"CDC_ASSETS_SPARK_MASTER": "sc://connect:15002",
                                          "CDC_ASSETS_SPARK_CONF": "spark.sql.shuffle.partitions=32"}))
    assert connect["spark.remote"] == "sc://connect:15002" and "spark.master" not in connect
    assert connect["spark.sql.shuffle.partitions"] == "32"
    assert all(k.startswith("spark.sql.") for k in connect if k != "spark.remote")


def test_one_window_file_is_read_by_several_tasks(spark, tmp_path):
    """Layers write one file per window; Spark splits a file only at row groups, so the
    session's small row groups are what let both cores decode one window."""
    from pyspark.sql import functions as F

    incompressible = F.unhex(F.sha2(F.col("id").cast("string"), 512))  # 64 bytes each
    spark.range(200_000).select(incompressible.alias("value")).coalesce(1).write.parquet(str(tmp_path / "w"))
    [written] = list((tmp_path / "w").glob("*.parquet"))
    rows_per_task = spark.read.parquet(str(written)).rdd.glom().map(len).collect()
    assert sum(rows_per_task) == 200_000
    assert len([n for n in rows_per_task if n]) >= 2


def test_a_local_driver_jvm_maps_the_class_archive_only_when_the_file_exists(tmp_path):
    archive = tmp_path / "driver.jsa"
    mine = "spark.driver.extraJavaOptions=-Dmine=1"
    env = {"CDC_ASSETS_JVM_ARCHIVE": str(archive), "CDC_ASSETS_SPARK_CONF": mine}
    assert "spark.driver.defaultJavaOptions" not in spark_config(load_settings(env))

    archive.write_bytes(b"written by `cdc-assets jvm-archive`")
    # In the default options, which Spark puts before the extra ones: the user's stay as they are.
    conf = spark_config(load_settings(env))
    assert conf["spark.driver.defaultJavaOptions"] == f"-XX:SharedArchiveFile={archive}"
    assert conf["spark.driver.extraJavaOptions"] == "-Dmine=1"
    standalone = spark_config(load_settings({**env, "CDC_ASSETS_SPARK_MASTER": "spark://10.0.0.5:7077"}))
    assert standalone["spark.driver.defaultJavaOptions"] == f"-XX:SharedArchiveFile={archive}"

    # A Connect client starts no driver JVM; `none` turns the archive off.
    connect = spark_config(load_settings({**env, "CDC_ASSETS_SPARK_MASTER": "sc://connect:15002"}))
    assert "spark.driver.defaultJavaOptions" not in connect
    off = spark_config(load_settings({"CDC_ASSETS_JVM_ARCHIVE": "none"}))
    assert "spark.driver.defaultJavaOptions" not in off


def test_column_operations_do_not_record_their_python_call_site(spark):
    """Recording it costs five py4j round trips per Column operation (docs/performance.md step
    17); CDC_ASSETS_SPARK_CONF can turn it back on for debugging."""
    from pyspark.errors.utils import is_debugging_enabled

    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert not is_debugging_enabled()
    on = spark_config(load_settings({"CDC_ASSETS_SPARK_CONF": "spark.python.sql.dataFrameDebugging.enabled=true"}))
    assert on["spark.python.sql.dataFrameDebugging.enabled"] == "true"


def test_a_landing_of_many_files_lists_them_without_a_job(spark, tmp_path):
    """Spark lists more than 32 paths in a job of its own (1-1.5 s); the landing's files are
    local, so the driver lists them (`parallelPartitionDiscovery.threshold`)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cdc_assets.common.spark_session import jobs_since, spark_job_ids

    paths = []
    for i in range(40):
        paths.append(str(tmp_path / f"part-{i}.parquet"))
        pq.write_table(pa.table({"offset": [i]}), paths[-1])
    before = spark_job_ids()
    frame = spark.read.schema("offset long").parquet(*paths)
    assert jobs_since(before) == 0
    assert sorted(r.offset for r in frame.collect()) == list(range(40))
