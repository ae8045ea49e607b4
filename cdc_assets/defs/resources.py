"""Resources: Spark (PySparkResource), S3 (dagster-aws), the warehouse layout, and the
Iceberg IO manager."""


import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

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
from pydantic import PrivateAttr
from pyspark.sql import DataFrame

from cdc_assets.common.iceberg_tables import IcebergTable
from cdc_assets.common.window_commits import OUTPUT_METADATA_PROPERTY, WindowTable, kept_metadata, window_commit
from cdc_assets.common.settings import Settings, env_catalog_properties
from cdc_assets.common.spark_session import (
    jobs_since, release_connect_session_on_exit, spark_config, spark_job_ids, use_this_python_for_workers,
)
from cdc_assets.common.warehouse import SECRET_KEY, Warehouse, qualified_name, table_identifier, use_catalog
from cdc_assets.defs.source_build import LAYER_TABLES


# The run tag with the Spark jobs a run ran (local sessions): what a window costs in jobs (docs/performance.md).
SPARK_JOBS_TAG = "cdc_assets/spark_jobs"


class CdcSparkResource(PySparkResource):
    """`PySparkResource` that also pins the Python workers to this interpreter, with Spark
    Connect releases the run's server-side session when the run's process exits, and tags
    the run with the Spark jobs it ran (`SPARK_JOBS_TAG`, shown on the run's page)."""

    _jobs_at_start: Optional[frozenset] = PrivateAttr(default=None)

    def setup_for_execution(self, context: InitResourceContext) -> None:
        use_this_python_for_workers()
        super().setup_for_execution(context)
        if "spark.remote" in self.spark_config:
            release_connect_session_on_exit(self.spark_session)
        self._jobs_at_start = spark_job_ids()

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        # After the run's last step (the in-process executor sets resources up once per run).
        jobs = jobs_since(self._jobs_at_start)
        run = context.run
        if jobs is not None and context.instance is not None and run is not None:
            context.instance.add_run_tags(run.run_id, {SPARK_JOBS_TAG: str(jobs)})


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
                                        warehouse.table_location(source, layer), warehouse=warehouse))

    def read_layer_window(self, spark, asset_path: list[str], window_start_ms: int) -> DataFrame:
        """A window of a windowed layer's table. Refuses a window that no commit names and that
        has no rows: never written (a commit that expired under table maintenance left its rows)."""
        table = self.layer_table(spark, asset_path)
        if (window_commit(self.iceberg, table.table.identifier, window_start_ms) is None
                and table.read(spark, window_start_ms).limit(1).count() == 0):
            raise FileNotFoundError(
                f"{'/'.join(asset_path)} has no commit of window {window_start_ms} in the Iceberg table "
                f"{table.table.identifier}: materialize that partition first")
        return table.read(spark, window_start_ms)

    def layer_commit(self, asset_path: list[str], window_start_ms: int) -> dict | None:
        """The summary of the commit that wrote a window of a windowed layer (None: never
        written, or expired by maintenance)."""
        return layer_commit(self.iceberg, asset_path, window_start_ms)


def warehouse_resource(settings: Settings) -> WarehouseResource:
    warehouse = settings.iceberg_warehouse
    shown = {k: v for k, v in warehouse.properties.items() if not SECRET_KEY.search(k)}
    return WarehouseResource(root=warehouse.location, catalog_type=warehouse.catalog_type,
                             catalog_uri=warehouse.catalog_uri, catalog_properties=shown,
                             s3_endpoint_url=warehouse.s3_endpoint, s3_region=warehouse.s3_region,
                             s3_path_style=warehouse.s3_path_style, work_dir=warehouse.work_dir)


@dataclass(frozen=True)
class ObservedOutput:
    """An output frame whose figures are observed by the job that writes it
    (`DataFrame.observe`): the IO manager writes `frame`, then adds `metadata()` to the
    output's metadata. Those figures are in Dagster's metadata only, not in the commit's
    summary (`window_output_metadata`), which is written with the data."""

    frame: DataFrame
    metadata: Callable[[], dict[str, Any]]


class IcebergIOManager(ConfigurableIOManager):
    """Partitioned Spark DataFrames <-> the Iceberg table `<source>.<layer>` of the warehouse's
    catalog, partitioned by `window_start_ms` (`window_commits.WindowTable`).

    A window's output replaces that window's partition in one commit, so a reader sees the
    old window or the new one, never half of one; the commit's summary names the window and
    keeps the output's metadata (`window_output_metadata`). An `ObservedOutput` adds the
    figures its write observed to the output's metadata after the write."""

    warehouse: ResourceDependency[WarehouseResource]
    pyspark: ResourceDependency[PySparkResource]

    @staticmethod
    def _start_ms(context: InputContext | OutputContext) -> int:
        return int(context.asset_partitions_time_window.start.timestamp() * 1000)

    def handle_output(self, context: OutputContext, obj: DataFrame | ObservedOutput) -> None:
        context.add_output_metadata(write_layer_window(
            self.warehouse, self.pyspark.spark_session, list(context.asset_key.path), obj, self._start_ms(context),
            context.output_metadata or {}))

    def load_input(self, context: InputContext) -> DataFrame:
        return self.warehouse.read_layer_window(self.pyspark.spark_session, list(context.asset_key.path),
                                                self._start_ms(context))


def write_layer_window(warehouse: WarehouseResource, spark, asset_path: list[str], obj: DataFrame | ObservedOutput,
                       start_ms: int, metadata: dict, empty: bool = False) -> dict:
    """Replace the window's partition of the layer's table with `obj` in one commit that keeps
    `metadata`'s plain figures (`window_output_metadata`); returns the figures the write adds:
    rows, table, snapshot, columns, and an `ObservedOutput`'s observed figures. `empty`: the
    frame is known to have no rows (counted before), so no Spark job writes it."""
    observed = obj.metadata if isinstance(obj, ObservedOutput) else None
    frame = obj.frame if isinstance(obj, ObservedOutput) else obj
    table = warehouse.layer_table(spark, asset_path)
    table.write(spark, frame, start_ms, {OUTPUT_METADATA_PROPERTY: kept_metadata(metadata)},
                empty=empty and observed is None)  # an observed frame's job is its figures
    commit = window_commit(warehouse.iceberg, table.table.identifier, start_ms) or {}
    return {
        "rows": int(commit.get("added-records", 0)),
        "dagster/table_name": qualified_name(table.table.identifier),
        "iceberg_snapshot_id": str(commit.get("snapshot_id")),
        # from the frame's schema: no Spark job
        "dagster/column_schema": column_schema(frame),
        **(observed() if observed is not None else {}),
    }


def column_schema(frame: DataFrame) -> TableSchema:
    """The UI's column list of a layer: Spark's type names and nullability."""
    return TableSchema(columns=[
        TableColumn(name=f.name, type=f.dataType.simpleString(),
                    constraints=TableColumnConstraints(nullable=f.nullable))
        for f in frame.schema.fields])


def layer_commit(warehouse: Warehouse | str | Path, asset_path: list[str], window_start_ms: int) -> dict | None:
    """The newest commit that wrote the window to the layer's table (the raw layer's: its
    record of the window's read, `source_build.LAYER_TABLES`)."""
    source, layer = asset_path
    return window_commit(warehouse, table_identifier(source, LAYER_TABLES.get(layer, layer)), window_start_ms)


def window_output_metadata(warehouse: Warehouse | str | Path, asset_path: list[str], window_start_ms: int) -> dict:
    """The metadata a window's output was written with ({} if none)."""
    commit = layer_commit(warehouse, asset_path, window_start_ms)
    return json.loads(commit.get(OUTPUT_METADATA_PROPERTY, "{}")) if commit else {}
