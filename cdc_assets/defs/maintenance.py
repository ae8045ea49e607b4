"""Table maintenance as a scheduled Dagster job per source: expire the Iceberg snapshots older
than the retention (every window-end tag and `main` are kept) and remove unreferenced files
(common/iceberg_maintenance.py)."""


from datetime import timedelta

from dagster import (
    MetadataValue,
    OpExecutionContext,
    Output,
    RunRequest,
    ScheduleEvaluationContext,
    in_process_executor,
    job,
    op,
    schedule,
)
from dagster_pyspark import PySparkResource

from cdc_assets.common.iceberg_maintenance import maintain_source
from cdc_assets.defs.automation import SOURCE_TAG
from cdc_assets.defs.resources import WarehouseResource
from cdc_assets.defs.source_build import SourceBuild


def maintenance_job_name(b: SourceBuild) -> str:
    return f"{b.source.name}__maintenance"


def build_maintenance(b: SourceBuild):
    retention_days = b.settings.snapshot_retention_days

    @op(name=f"{b.source.name}__maintain_tables",
        description=f"Expire Iceberg snapshots older than {retention_days} days (tags and main kept) "
        "and remove files no snapshot references, on every table of the source.")
    def maintain_tables(context: OpExecutionContext, pyspark: PySparkResource, warehouse: WarehouseResource):
        done = maintain_source(pyspark.spark_session, warehouse.iceberg, b.source.name, timedelta(days=retention_days))
        context.log.info(f"maintained {len(done)} Iceberg tables of {b.source.name}")
        totals = {k: sum(t[k] for t in done.values()) for k in next(iter(done.values()), {})}
        return Output(done, metadata={"tables": len(done), "retention_days": retention_days, **totals,
                                      "by_table": MetadataValue.json(done)})

    @job(name=maintenance_job_name(b), tags={SOURCE_TAG: b.source.name}, executor_def=in_process_executor,
         description="Iceberg table maintenance: snapshot expiry and orphan files (window-end tags kept).")
    def maintenance():
        maintain_tables()

    @schedule(name=f"{b.source.name}__maintenance_daily", cron_schedule="30 3 * * *", execution_timezone="UTC",
              job=maintenance, description="Runs the source's Iceberg table maintenance every day.")
    def maintenance_daily(context: ScheduleEvaluationContext):
        return RunRequest(run_key=f"maintenance-{context.scheduled_execution_time.isoformat()}")

    return maintenance, maintenance_daily
