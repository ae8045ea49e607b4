"""Layer 2: decode raw messages into the unified change log; unusable ones to quarantine."""


from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetIn,
    AssetOut,
    AssetsDefinition,
    MetadataValue,
    Output,
    multi_asset,
)
from pyspark.sql import DataFrame, functions as F

from cdc_assets.defs.check_results import contract_check
from cdc_assets.defs.partitions import window_bounds_ms
from cdc_assets.defs.source_build import CHANGE_LOG, QUARANTINE, RAW, SourceBuild
from cdc_assets.contracts.schemas import (
    CHANGE_LOG_SCHEMA,
    NO_CHANGE_REASONS,
    QUARANTINE_COLUMNS,
    REJECT_DETAIL,
    REJECT_REASON,
    conform,
)
from cdc_assets.defs.metadata import counts_table
from cdc_assets.decode.common.raw_bytes import MESSAGE_KEY, refill_raw_bytes
from cdc_assets.decode.table_names import INVALID_TABLE_NAME, quarantine_invalid_table_names
from cdc_assets.contracts.checks import ChangeLogModel, validate
from cdc_assets.decode.value_conversion import INVALID_VALUE, quarantine_unconvertible_values
from cdc_assets.decode.window_events import IMPLAUSIBLE_COMMIT_TS, events_of_window

SCHEMA_CHECK = "change_log_contract"
QUARANTINE_CHECK = "nothing_quarantined"
QUARANTINE_RATE_CHECK = "quarantine_rate_within_limit"


def build_change_log(b: SourceBuild) -> AssetsDefinition:
    log_key, quarantine_key = b.key(CHANGE_LOG), b.key(QUARANTINE)

    @multi_asset(
        name=f"{b.source.name}__decode",
        ins={"raw_messages": AssetIn(key=b.key(RAW))},
        outs={
            "change_log": AssetOut(
                key=log_key, io_manager_key="iceberg_io_manager", kinds={"spark", "iceberg"},
                tags=b.tags, description="Every decoded event of the window in the one change-log schema "
                "(docs/architecture.md): rows, DDL and watermarks, with lineage.",
            ),
            "quarantine": AssetOut(
                key=quarantine_key, io_manager_key="iceberg_io_manager", kinds={"spark", "iceberg"},
                tags=b.tags, description="Messages (or single events of a batch) that could not be used: "
                "reason code, detail, raw key/value bytes and lineage.",
            ),
        },
        partitions_def=b.partitions_def,
        group_name=b.group,
        check_specs=[
            AssetCheckSpec(SCHEMA_CHECK, asset=log_key, partitions_def=b.partitions_def,
                           description="pandera ChangeLogModel + row invariants, failing counts in metadata"),
            AssetCheckSpec(QUARANTINE_CHECK, asset=quarantine_key, partitions_def=b.partitions_def,
                           description="warns when the window quarantined anything but records that carry "
                           "no change by design (tombstones, control records)"),
            AssetCheckSpec(QUARANTINE_RATE_CHECK, asset=quarantine_key, partitions_def=b.partitions_def,
                           description="errors when the share of quarantined messages exceeds the "
                           f"source's max_quarantine_rate ({b.source.max_quarantine_rate:g})"),
        ],
    )
    def decode(context: AssetExecutionContext, raw_messages: DataFrame):
        # Two caches: the decoder's output, because the conversion rule reads its distinct
        # column types first; then the converted events, which the counts, the contract and
        # both writes read (the conversion casts every value: it must run once, not per
        # action). Raw bytes are kept for rejected events only, which are all the
        # quarantine needs (Python decoders send them for their own rejects only; those
        # of `implausible_commit_ts`, `invalid_table_name` and `invalid_value` events are
        # looked up in the raw messages). Once the second cache is filled the first is dropped.
        start_ms, _end_ms = window_bounds_ms(b.partitions_def, context.partition_key)
        cached = events_of_window(
            b.decoder().decode(raw_messages), raw_messages, start_ms, b.settings.window_ms).persist()
        decoded = _raw_bytes_of_rejects_only(quarantine_unconvertible_values(
            quarantine_invalid_table_names(cached))).persist()
        try:
            by_kind = {
                f"{r.kind}": int(r.n)
                for r in decoded.groupBy(
                    F.coalesce(F.concat(F.lit("quarantined:"), F.col(REJECT_REASON)), F.col("event_kind")).alias("kind")
                ).agg(F.count(F.lit(1)).alias("n")).collect()
            }
            cached.unpersist()
            events = conform(decoded.where(F.col(REJECT_REASON).isNull()), CHANGE_LOG_SCHEMA)
            rejected = decoded.where(F.col(REJECT_REASON).isNotNull()).select(
                *[F.col(REJECT_REASON).alias("reason") if c == "reason" else
                  F.col(REJECT_DETAIL).alias("detail") if c == "detail" else F.col(c)
                  for c in QUARANTINE_COLUMNS]
            )
            reasons = {k.split(":", 1)[1]: v for k, v in by_kind.items() if k.startswith("quarantined:")}
            kinds = {k: v for k, v in by_kind.items() if not k.startswith("quarantined:")}
            quarantined = sum(reasons.values())
            no_change = sum(n for r, n in reasons.items() if r in NO_CHANGE_REASONS)
            messages = raw_messages.count()
            bad_messages, without_change = _message_counts(rejected) if quarantined else (0, 0)  # no job when clean
            refilled = [r for r in (INVALID_VALUE, IMPLAUSIBLE_COMMIT_TS, INVALID_TABLE_NAME) if reasons.get(r)]
            if refilled:
                rejected = refill_raw_bytes(rejected, raw_messages, refilled)
            judged = messages - without_change  # the rate is a share of the messages that could change rows
            rate = bad_messages / judged if judged > 0 else 0.0
            outcome = validate(ChangeLogModel, events)
            yield Output(
                events, output_name="change_log",
                metadata={
                    "messages_in": messages,
                    "events_out": sum(kinds.values()),
                    "row_events": kinds.get("row", 0),
                    "ddl_events": kinds.get("ddl", 0),
                    "watermark_events": kinds.get("watermark", 0),
                    "quarantined": quarantined,
                    "commit_order": b.decoder().commit_order(),
                },
            )
            yield Output(
                rejected, output_name="quarantine",
                metadata={"quarantined": quarantined, "quarantined_messages": bad_messages,
                          "no_change_records": no_change, "messages_in": messages,
                          "by_reason": MetadataValue.md(counts_table(reasons, ("reason", "messages")))},
            )
            yield contract_check(log_key, SCHEMA_CHECK, outcome)
            yield AssetCheckResult(
                asset_key=quarantine_key, check_name=QUARANTINE_CHECK, passed=quarantined == no_change,
                severity=AssetCheckSeverity.WARN,
                metadata={"quarantined": quarantined, "no_change_records": no_change,
                          "by_reason": MetadataValue.json(reasons)},
            )
            yield AssetCheckResult(
                asset_key=quarantine_key, check_name=QUARANTINE_RATE_CHECK,
                passed=rate <= b.source.max_quarantine_rate, severity=AssetCheckSeverity.ERROR,
                metadata={"messages": messages, "no_change_messages": without_change,
                          "quarantined_messages": bad_messages,
                          "rate": MetadataValue.float(round(rate, 6)),
                          "max_rate": MetadataValue.float(b.source.max_quarantine_rate)},
            )
        finally:
            decoded.unpersist()
            cached.unpersist()

    return decode


def _message_counts(rejected: DataFrame) -> tuple[int, int]:
    """Messages with a reject that is bad input, and messages with a record that carries no
    change by design (the checks leave those out), in one job."""
    no_change = F.col("reason").isin(*NO_CHANGE_REASONS)
    r = (rejected.groupBy(*MESSAGE_KEY).agg(F.max(~no_change).alias("bad"), F.max(no_change).alias("none"))
         .agg(F.count_if("bad").alias("bad"), F.count_if("none").alias("none")).first())
    return int(r.bad or 0), int(r.none or 0)


def _raw_bytes_of_rejects_only(decoded: DataFrame) -> DataFrame:
    rejected = F.col(REJECT_REASON).isNotNull()
    return decoded.withColumns({c: F.when(rejected, F.col(c)) for c in ("key", "value")})
