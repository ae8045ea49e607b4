"""The Spark session of a run, a test or a tool: its settings (`spark_config`) and how to start
one outside Dagster (`start_spark_session`). Dagster's resource (defs/resources.py) is built
on the same settings."""

import atexit
import os
import sys

from cdc_assets.common.jvm_archive import DRIVER_DEFAULT_JAVA_OPTIONS, archive_in_place, with_archive
from cdc_assets.common.python_daemon import PYTHON_DAEMON_MODULE
from cdc_assets.common.settings import Settings
from cdc_assets.common.warehouse import CATALOG, ICEBERG_EXTENSIONS, check_spark_can_open, spark_catalog_conf, spark_jars


def spark_config(settings: Settings) -> dict[str, str]:
    """The session's settings. The master URL alone picks where Spark runs: `local[N]`, a
    standalone cluster (`spark://host:port`), or a Spark Connect server (`sc://host:port`).
    `settings.spark_conf` (CDC_ASSETS_SPARK_CONF) is applied last, so it wins. A driver JVM
    started here maps the class-data-sharing archive when there is one (common/jvm_archive.py)."""
    conf = {
        "spark.master": settings.spark_master,
        "spark.app.name": "cdc_assets",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.memory": "4g",
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        # A window is one file per layer. Spark splits a file between tasks only at row-group
        # boundaries, so Parquet's default 128 MB row group made the decode of a window run
        # on one core. Row groups of ~4 MB on disk (~25k Kafka messages) and read splits of at
        # most 32 MB let every core take a share of a window and balance a dump of many files.
        "spark.hadoop.parquet.block.size": str(4 * 1024 * 1024),
        "spark.sql.files.maxPartitionBytes": "32m",
        # The landing names every new file of a dump. Past 32 paths Spark lists them in a job
        # of its own (1-1.5 s even for a small landing); the files are local (an S3 dump is
        # mirrored first), so the driver lists them itself.
        "spark.sql.sources.parallelPartitionDiscovery.threshold": "10000",
        # Let AQE coalesce the shuffle partitions of cached plans too. Spark keeps a cached
        # plan's partitioning by default, so every cached frame (a window's marked events,
        # each table's typed actions) stayed in 8 partitions whatever its size: a 700-row
        # table was written as 10 files and its history part as 16, with a task per file.
        "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
        # PySpark's Python daemon, minus a fixed ~0.4 s per Python task (common/python_daemon.py).
        "spark.python.daemon.module": PYTHON_DAEMON_MODULE,
        # PySpark 4 records the Python call site of every Column operation for its error
        # messages: five more py4j round trips and a stack walk per `F.col`, `cast`, `alias`.
        # A window builds thousands of them (per table and column), so this alone took about
        # 3 s of a small window's driver time (docs/performance.md step 17). Errors still name
        # the failing expression, not the Python line that built it.
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # Every table of the warehouse is an Iceberg table (common/warehouse.py).
        "spark.jars": ",".join(spark_jars()),
        "spark.sql.extensions": ICEBERG_EXTENSIONS,
        **spark_catalog_conf(CATALOG, settings.iceberg_warehouse),
        **settings.spark_conf,
    }
    check_spark_can_open(settings.iceberg_warehouse, conf["spark.jars"] + "," + conf.get("spark.jars.packages", ""))
    archive = archive_in_place(settings.jvm_archive)
    if archive and not is_spark_connect(settings.spark_master):
        conf[DRIVER_DEFAULT_JAVA_OPTIONS] = with_archive(conf.get(DRIVER_DEFAULT_JAVA_OPTIONS), archive)
    if is_spark_connect(settings.spark_master):
        # A Connect client only sets session (SQL) settings; the server owns the rest.
        conf = {k: v for k, v in conf.items() if k.startswith("spark.sql.") and k != "spark.sql.extensions"}
        conf["spark.remote"] = settings.spark_master
    return conf


def is_spark_connect(master: str) -> bool:
    return master.startswith("sc://")


def use_this_python_for_workers() -> None:
    """Spark's Python workers (mapInArrow decoders) must run this interpreter, whose
    environment has pyarrow; PySpark reads PYSPARK_PYTHON when the SparkContext starts."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def start_spark_session(conf: dict[str, str]):
    """A SparkSession outside Dagster (tests, benchmarks) with the resource's settings."""
    from pyspark.sql import SparkSession

    use_this_python_for_workers()
    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def release_connect_session_on_exit(session) -> None:
    """A Spark Connect client keeps its server-side session (and anything cached in it) until
    the server's idle timeout unless told to release it when the process exits: every run is
    a process, so a long-lived server would collect one session per run. (pyspark 4.1 has no
    setting for it: the release is registered here.)"""
    atexit.register(_release, session)


def _release(session) -> None:
    try:
        session.client.release_session()
    except Exception:  # the server may be gone already: nothing left to release
        pass


def spark_job_ids() -> frozenset[int] | None:
    """The ids of the Spark jobs this process's local session has run, as its status tracker
    keeps them (the latest `spark.ui.retainedJobs`, 1,000 by default); None without a local
    session (none started yet, or Spark Connect, whose jobs run in the server). The difference
    of two calls is the jobs a step ran: each is a fixed cost, whatever the data."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None:
        return None
    # As one text: iterating the Java array (what `statusTracker().getJobIdsForGroup()` does)
    # costs a py4j round trip per id, up to 1,000 per call.
    ids = context._jvm.java.util.Arrays.toString(context._jsc.statusTracker().getJobIdsForGroup(None))
    return frozenset(int(i) for i in ids.strip("[]").split(",") if i.strip())


def jobs_since(before: frozenset[int] | None) -> int | None:
    """How many Spark jobs ran since `before = spark_job_ids()` (a session started meanwhile:
    all of its jobs); None without a local session."""
    after = spark_job_ids()
    return None if after is None else len(after - (before or frozenset()))
