"""Build the Definitions: one group of assets, checks, jobs, schedules and a sensor per source."""

from __future__ import annotations

from dagster import Definitions, in_process_executor

from cdc_assets.common.settings import Settings
from cdc_assets.defs.automation import build_hourly_schedules, build_jobs, build_landing_sensor
from cdc_assets.defs.layers.change_table import build_change_table
from cdc_assets.defs.layers.landing import build_landed_dump
from cdc_assets.defs.layers.snapshots import build_snapshots
from cdc_assets.defs.landing_view_io import LandingViewIOManager
from cdc_assets.defs.maintenance import build_maintenance
from cdc_assets.defs.partitions import window_partitions
from cdc_assets.defs.resources import (
    IcebergIOManager, make_s3_resource, make_spark_resource, warehouse_resource,
)
from cdc_assets.defs.source_build import ICEBERG_IO_MANAGER, LANDING_VIEW_IO_MANAGER, SourceBuild


def source_builds(settings: Settings) -> list[SourceBuild]:
    partitions_def = window_partitions(settings)
    builds = [SourceBuild(settings, s, partitions_def) for s in settings.sources]
    for b in builds:
        b.decoder()  # a wrong decoder option fails when the definitions load, not in a run
        b.check_layout_options()  # so does a layout option no layout takes
    return builds


def build_definitions(settings: Settings) -> Definitions:
    assets, jobs, schedules, sensors = [], [], [], []
    for b in source_builds(settings):
        assets += [build_landed_dump(b), build_change_table(b), build_snapshots(b)]
        windows_job, land_job = build_jobs(b)
        jobs += [windows_job, land_job]
        schedules += build_hourly_schedules(b, windows_job, land_job)
        sensors.append(build_landing_sensor(b, windows_job, land_job))
        maintenance_job, maintenance_schedule = build_maintenance(b)
        jobs.append(maintenance_job)
        schedules.append(maintenance_schedule)
    pyspark = make_spark_resource(settings)
    warehouse = warehouse_resource(settings)
    return Definitions(
        assets=assets,
        jobs=jobs,
        schedules=schedules,
        sensors=sensors,
        resources={
            "pyspark": pyspark,
            "warehouse": warehouse,
            "s3": make_s3_resource(settings),
            ICEBERG_IO_MANAGER: IcebergIOManager(warehouse=warehouse, pyspark=pyspark),
            LANDING_VIEW_IO_MANAGER: LandingViewIOManager(warehouse=warehouse, pyspark=pyspark),
        },
        # One Spark driver per run: steps share its session in one process.
        executor=in_process_executor,
    )
