"""Resources: Spark (PySparkResource), S3 (dagster-aws), the warehouse layout, and the
Iceberg IO manager."""


import atexit
import json
import os
import sys
from pathlib import Path
from typing import Optional

from dagster import (
    ConfigurableIOManager,
    ConfigurableResource,
    EnvVar,
    InitResourceContext,
    InputContext,
    OutputContext,
    ResourceDependency,
    TableColumn,
    TableColumnConstraints,
    TableSchema,
)
from dagster_aws.s3 import S3Resource
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame

from cdc_assets.common.warehouse import (
    CATALOG, ICEBERG_EXTENSIONS, SECRET_KEY, Warehouse, check_spark_can_open, spark_catalog_conf, spark_jars,
    use_catalog,
)
from cdc_assets.common.iceberg_tables import OUTPUT_METADATA_PROPERTY, IcebergTable, WindowTable, window_commit
from cdc_assets.common.jvm_archive import DRIVER_DEFAULT_JAVA_OPTIONS, archive_in_place, with_archive
from cdc_assets.common.settings import Settings, env_catalog_properties


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
        # Let AQE coalesce the shuffle partitions of cached plans too. Spark keeps a cached
        # plan's partitioning by default, so every cached frame (a window's marked events,
        # each table's typed actions) stayed in 8 partitions whatever its size: a 700-row
        # table was written as 10 files and its history part as 16, with a task per file.
        "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
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


class CdcSparkResource(PySparkResource):
    """`PySparkResource` that also pins the Python workers to this interpreter and, with Spark
    Connect, releases the run's server-side session when the run's process exits."""

    def setup_for_execution(self, context: InitResourceContext) -> None:
        use_this_python_for_workers()
        super().setup_for_execution(context)
        if "spark.remote" in self.spark_config:
            release_connect_session_on_exit(self.spark_session)


def make_spark_resource(settings: Settings) -> PySparkResource:
    return CdcSparkResource(spark_config=spark_config(settings))


# Only the names of the variables reach Dagster's config; unset ones are left to boto3's own
# chain (instance profile, IRSA, ~/.aws), so no key is ever written in a settings file.
_AWS_CREDENTIAL_VARIABLES = {
    "aws_access_key_id": "AWS_ACCESS_KEY_ID",
    "aws_secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "aws_session_token": "AWS_SESSION_TOKEN",
}


def make_s3_resource(settings: Settings) -> S3Resource:
    credentials = {field: EnvVar(var) for field, var in _AWS_CREDENTIAL_VARIABLES.items() if os.environ.get(var)}
    return S3Resource(endpoint_url=settings.s3_endpoint_url, region_name=settings.s3_region, **credentials)


class WarehouseResource(ConfigurableResource):
    """Where each source's landing area and layers live (a local folder by default), and the
    Iceberg catalog of its tables (`warehouse.Warehouse`, from the settings:
    `warehouse_resource`). No credential is part of it."""

    root: str  # a local folder or s3://bucket/prefix
    catalog_type: str = "jdbc"
    catalog_uri: Optional[str] = None
    # Shown in Dagster's UI: no property that may hold a secret (a REST token). Those are read
    # from the environment (CDC_ASSETS_CATALOG_PROPERTIES) when the catalog is opened (`iceberg`).
    catalog_properties: dict[str, str] = {}
    s3_endpoint_url: Optional[str] = None
    s3_region: Optional[str] = None
    s3_path_style: Optional[bool] = None
    work_dir: Optional[str] = None  # local folder of an s3 warehouse's input mirror (Warehouse.work_dir)

    @property
    def iceberg(self) -> Warehouse:
        """The warehouse as Spark and pyiceberg open it (`use_catalog`, `window_commit`, ...)."""
        secret = {k: v for k, v in env_catalog_properties(os.environ).items() if SECRET_KEY.search(k)}
        return Warehouse(self.root, catalog_type=self.catalog_type, catalog_uri=self.catalog_uri,
                         catalog_properties=tuple({**self.catalog_properties, **secret}.items()),
                         s3_endpoint=self.s3_endpoint_url, s3_region=self.s3_region,
                         s3_path_style=self.s3_path_style, work_dir=self.work_dir)

    def layer_table(self, spark, asset_path: list[str]) -> WindowTable:
        """The Iceberg table of a windowed layer: `<source>.<layer>` (asset key [source, layer])."""
        source, layer = asset_path
        warehouse = self.iceberg
        return WindowTable(IcebergTable(use_catalog(spark, warehouse), source, layer,
                                        warehouse.table_location(source, layer)))


def warehouse_resource(settings: Settings) -> WarehouseResource:
    warehouse = settings.iceberg_warehouse
    shown = {k: v for k, v in warehouse.properties.items() if not SECRET_KEY.search(k)}
    return WarehouseResource(root=warehouse.location, catalog_type=warehouse.catalog_type,
                             catalog_uri=warehouse.catalog_uri, catalog_properties=shown,
                             s3_endpoint_url=warehouse.s3_endpoint, s3_region=warehouse.s3_region,
                             s3_path_style=warehouse.s3_path_style, work_dir=warehouse.work_dir)


class IcebergIOManager(ConfigurableIOManager):
    """Partitioned Spark DataFrames <-> the Iceberg table `<source>.<layer>` of the warehouse's
    catalog, partitioned by `window_start_ms` (`iceberg_tables.WindowTable`).

    A window's output replaces that window's partition in one commit, so a reader sees the
    old window or the new one, never half of one; the commit's summary names the window and
    keeps the output's metadata (`window_output_metadata`)."""

    warehouse: ResourceDependency[WarehouseResource]
    pyspark: ResourceDependency[PySparkResource]

    def _table(self, context: InputContext | OutputContext) -> tuple[WindowTable, int]:
        window = context.asset_partitions_time_window
        spark = self.pyspark.spark_session
        return (self.warehouse.layer_table(spark, list(context.asset_key.path)),
                int(window.start.timestamp() * 1000))

    def handle_output(self, context: OutputContext, obj: DataFrame) -> None:
        table, start_ms = self._table(context)
        plain = {k: getattr(v, "value", v) for k, v in (context.output_metadata or {}).items()}
        kept = json.dumps({k: v for k, v in plain.items() if isinstance(v, (bool, int, float, str))})
        table.write(self.pyspark.spark_session, obj, start_ms, {OUTPUT_METADATA_PROPERTY: kept})
        commit = window_commit(self.warehouse.iceberg, table.table.identifier, start_ms) or {}
        context.add_output_metadata({
            "rows": int(commit.get("added-records", 0)),
            "dagster/table_name": f"{CATALOG}.{table.table.identifier}",
            "iceberg_snapshot_id": str(commit.get("snapshot_id")),
            # from the frame's schema: no Spark job
            "dagster/column_schema": column_schema(obj),
        })

    def load_input(self, context: InputContext) -> DataFrame:
        table, start_ms = self._table(context)
        spark = self.pyspark.spark_session
        # No commit names the window: never written, or its commit expired (table maintenance)
        # and then its rows are still there.
        if (window_commit(self.warehouse.iceberg, table.table.identifier, start_ms) is None
                and table.read(spark, start_ms).limit(1).count() == 0):
            raise FileNotFoundError(
                f"{context.asset_key.to_user_string()} has no commit of window {start_ms} in the Iceberg table "
                f"{table.table.identifier}: materialize that partition first")
        return table.read(spark, start_ms)


def column_schema(frame: DataFrame) -> TableSchema:
    """The UI's column list of a layer: Spark's type names and nullability."""
    return TableSchema(columns=[
        TableColumn(name=f.name, type=f.dataType.simpleString(),
                    constraints=TableColumnConstraints(nullable=f.nullable))
        for f in frame.schema.fields])


def window_output_metadata(warehouse: Warehouse | str | Path, asset_path: list[str], window_start_ms: int) -> dict:
    """The metadata a window's output was written with ({} if none)."""
    commit = window_commit(warehouse, ".".join(asset_path), window_start_ms)
    return json.loads(commit.get(OUTPUT_METADATA_PROPERTY, "{}")) if commit else {}
