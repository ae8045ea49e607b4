"""Layer 1: the raw messages of one commitTs window, with lineage."""


from dagster import AssetExecutionContext, AssetsDefinition, Output, asset
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, Window, functions as F

from cdc_assets.defs.partitions import window_bounds_ms
from cdc_assets.defs.resources import WarehouseResource
from cdc_assets.defs.source_build import LANDED, RAW, SourceBuild
from cdc_assets.landing.land import load_state, read_window_messages


def build_raw_messages(b: SourceBuild) -> AssetsDefinition:
    @asset(
        key=b.key(RAW),
        deps=[b.key(LANDED)],
        partitions_def=b.partitions_def,
        group_name=b.group,
        kinds={"spark", "iceberg"},
        tags=b.tags,
        io_manager_key="iceberg_io_manager",
        description=(
            "Kafka messages whose routing time (commitTs, watermark ts, else event time) falls in "
            "the window; key/value bytes untouched; one row per (topic, partition, offset)."
        ),
    )
    def raw_messages(
        context: AssetExecutionContext, pyspark: PySparkResource, warehouse: WarehouseResource
    ) -> Output[DataFrame]:
        start_ms, end_ms = window_bounds_ms(b.partitions_def, context.partition_key)
        # The messages read are those of the batches this state lists (a landing commits its
        # state last), so the completeness it shows covers exactly what is read.
        state, policy = load_state(warehouse.iceberg, b.source.name), b.completeness()
        wm = state.global_watermark_ts(policy)
        landed = read_window_messages(pyspark.spark_session, warehouse.iceberg, b.source.name, start_ms, state)
        # The same offset landed twice (overlapping or re-written dump files) is one
        # message: the newest landing wins. Counted on the offsets alone (no value bytes
        # read); the sort that picks the winners runs only when there is a copy.
        copies = landed.groupBy("topic", "kafka_partition", "kafka_offset").agg(F.count(F.lit(1)).alias("n"))
        counts = copies.agg(
            F.coalesce(F.sum("n"), F.lit(0)).alias("landed"), F.coalesce(F.sum(F.col("n") - 1), F.lit(0)).alias(
                "redelivered")
        ).first()
        if counts.redelivered:
            newest = Window.partitionBy("topic", "kafka_partition", "kafka_offset").orderBy(
                F.desc_nulls_last("landing_seq"), F.desc("source_file")
            )
            landed = landed.withColumn("_n", F.row_number().over(newest)).where("_n = 1").drop("_n")
        return Output(
            landed.drop("landing_seq"),
            metadata={
                "messages_in": int(counts.landed),
                "messages_out": int(counts.landed - counts.redelivered),
                "redelivered_offsets_dropped": int(counts.redelivered),
                "window_complete_at_read": state.is_complete(end_ms, policy),
                "global_watermark_ts_at_read": wm if wm is not None else -1,
            },
        )

    return raw_messages
