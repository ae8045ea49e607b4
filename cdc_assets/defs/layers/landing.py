"""Layer 0: land new dump files into the source's landing tables (an unpartitioned asset, incremental)."""


from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetsDefinition,
    MaterializeResult,
    MetadataValue,
    asset,
)
from dagster_aws.s3 import S3Resource
from dagster_pyspark import PySparkResource

from cdc_assets.common.tso import tso_to_datetime
from cdc_assets.defs.metadata import watermark_lag_chart, watermark_table
from cdc_assets.defs.partitions import partition_key_for_ms
from cdc_assets.defs.resources import WarehouseResource
from cdc_assets.defs.source_build import LANDED, SourceBuild
from cdc_assets.landing.input_files import sync_s3_source
from cdc_assets.landing.land import land
from cdc_assets.landing.layouts import AUTO_LAYOUT
from cdc_assets.landing.routing import unroutable_line

WATERMARK_CHECK = "watermarks_trusted"
FILES_COMPLETE_CHECK = "files_complete"
ROUTABLE_CHECK = "messages_routable"
_LISTED_FILES = 20


def build_landed_dump(b: SourceBuild) -> AssetsDefinition:
    @asset(
        key=b.key(LANDED),
        group_name=b.group,
        kinds={"spark", "parquet"},
        tags=b.tags,
        check_specs=[AssetCheckSpec(
            WATERMARK_CHECK, asset=b.key(LANDED),
            description="warns when this landing ignored watermarks that moved backwards (a replayed "
            "resolved ts) or had an implausible time; they are never trusted",
        ), AssetCheckSpec(
            FILES_COMPLETE_CHECK, asset=b.key(LANDED),
            description="warns when new dump files were cut short: still being written (a Parquet file "
            f"without its footer, a kcat file ending in part of a record, changed in the last "
            f"{b.settings.settle_seconds} s), "
            "so nothing was landed and the next landing tries again; or Parquet files left so longer "
            "ago by a writer that died, which cannot be read and are left out",
        ), AssetCheckSpec(
            ROUTABLE_CHECK, asset=b.key(LANDED),
            description=f"fails when new messages carry no usable time of the `{b.source.protocol}` "
            "protocol (wrong protocol or encoding, e.g. base64 text instead of bytes; records the "
            "layout could not read): ERROR when no message of a file has one, WARN otherwise. Counts by reason, "
            "file and Kafka partition in the metadata",
        )],
        description=(
            f"New files of the `{b.source.protocol}` dump at {b.source.input_path}, landed into "
            "the Iceberg table `landed_messages` (one commit per landing, partitioned by window). Idempotent: a file already landed (same content) is skipped. "
            "An s3:// dump is first mirrored locally, downloading only new or changed objects."
        ),
    )
    def landed_dump(
        context: AssetExecutionContext, pyspark: PySparkResource, warehouse: WarehouseResource, s3: S3Resource
    ) -> MaterializeResult:
        s3_metadata = {}
        if b.is_s3:
            mirrored = sync_s3_source(b.source, warehouse.iceberg, s3.get_client())
            context.log.info(
                f"{b.source.input_path}: {mirrored.objects} object(s), downloaded {mirrored.downloaded} "
                f"({mirrored.bytes_downloaded} bytes), {mirrored.unchanged} unchanged"
            )
            s3_metadata = {"s3_objects": mirrored.objects, "s3_objects_downloaded": mirrored.downloaded,
                           "s3_bytes_downloaded": mirrored.bytes_downloaded}
        if not b.dump_root.exists():
            raise FileNotFoundError(f"dump folder {b.dump_root} does not exist (source {b.source.name!r})")
        result = land(
            pyspark.spark_session,
            dump_root=b.dump_root,
            layout=b.layout(),
            layout_options=b.source.layout_options,
            layout_named=b.source.layout != AUTO_LAYOUT,
            decoder=b.decoder(),
            warehouse=warehouse.iceberg,
            source=b.source.name,
            window_ms=b.settings.window_ms,
            settle_seconds=b.settings.settle_seconds,
        )
        state = result.state
        policy = b.completeness()
        wm = state.global_watermark_ts(policy)
        complete = state.complete_windows(b.settings.window_ms, policy)
        context.log.info(
            f"landed {result.new_files} new file(s), {result.messages} message(s); "
            f"skipped {result.skipped_files}; {len(complete)} complete window(s)"
        )
        regressed, implausible = result.regressed_watermarks, result.implausible_watermarks
        if regressed or implausible:
            context.log.warning(f"ignored watermarks: moved backwards {regressed}, implausible {implausible}")
        waiting, unreadable = result.waiting_files, result.unreadable_files
        if waiting:
            context.log.warning(f"landed nothing: {len(waiting)} new file(s) still being written, e.g. "
                                f"{', '.join(waiting[:3])}")
        if unreadable:
            context.log.warning(f"left out {len(unreadable)} file(s) cut short by a writer that stopped, e.g. "
                                f"{', '.join(unreadable[:3])}")
        ignored = result.ignored_files
        if ignored:
            context.log.warning(f"did not read {len(ignored)} file(s) as {b.layout()}: "
                                + "; ".join(f"{n}: {why}" for n, why in list(ignored.items())[:3]))
        unroutable = result.unroutable_files
        whole = state.whole_unroutable_files(list(unroutable))
        if unroutable:
            context.log.warning(unroutable_line(state, b.source.protocol))
        return MaterializeResult(
            check_results=[AssetCheckResult(
                check_name=WATERMARK_CHECK, passed=not regressed and not implausible,
                severity=AssetCheckSeverity.WARN,
                metadata={"regressed_watermarks": MetadataValue.json(regressed),
                          "implausible_watermarks": MetadataValue.json(implausible)},
            ), AssetCheckResult(
                check_name=FILES_COMPLETE_CHECK, passed=not waiting and not unreadable,
                severity=AssetCheckSeverity.WARN,
                metadata={"waiting_files": len(waiting), "unreadable_files": len(unreadable),
                          "first_waiting_files": MetadataValue.json(waiting[:_LISTED_FILES]),
                          "first_unreadable_files": MetadataValue.json(unreadable[:_LISTED_FILES])},
            ), AssetCheckResult(
                check_name=ROUTABLE_CHECK, passed=not unroutable,
                severity=AssetCheckSeverity.ERROR if whole else AssetCheckSeverity.WARN,
                metadata={"unroutable_messages": sum(sum(f.unroutable.values()) for f in unroutable.values()),
                          "files_wholly_unroutable": MetadataValue.json(whole[:_LISTED_FILES]),
                          "unroutable_by_file": MetadataValue.json(
                              {name: f.to_json() for name, f in list(unroutable.items())[:_LISTED_FILES]}),
                          "first_unroutable": MetadataValue.json(state.first_unroutable or {})},
            )],
            metadata={
                "waiting_files": len(waiting),
                "unreadable_files": len(unreadable),
                "regressed_watermarks": sum(regressed.values()),
                "implausible_watermarks": sum(implausible.values()),
                "new_files": result.new_files,
                "ignored_files": len(ignored),
                "first_ignored_files": MetadataValue.json(dict(list(ignored.items())[:_LISTED_FILES])),
                "unroutable_messages": state.unroutable_messages(),
                "skipped_files": result.skipped_files,
                "messages_landed": result.messages,
                "global_watermark_ts": wm if wm is not None else -1,
                "global_watermark_time": str(tso_to_datetime(wm)) if wm is not None else "none yet",
                "completeness_mode": policy.mode.value,
                "complete_windows": len(complete),
                "latest_complete_window": (
                    partition_key_for_ms(b.partitions_def, complete[-1]) if complete else "none"
                ),
                "kafka_partitions": MetadataValue.md(watermark_table(state)),
                "watermark_lag_chart": MetadataValue.md(watermark_lag_chart(state)),
                **s3_metadata,
            }
        )

    return landed_dump
