"""The properties every decoder keeps on any input (used by the mutation and hypothesis tests)."""

from __future__ import annotations

from pyspark.sql import DataFrame, functions as F

from cdc_assets.contracts.checks import ChangeLogModel, validate
from cdc_assets.contracts.schemas import CHANGE_LOG_SCHEMA, REJECT_DETAIL, REJECT_REASON, conform
from cdc_assets.decode import Decoder
from cdc_assets.decode.table_names import quarantine_invalid_table_names
from cdc_assets.decode.value_conversion import quarantine_unconvertible_values
from cdc_assets.decode.window_events import reject_implausible_commit_ts

REASON_CODE = r"^[a-z][a-z0-9_]*$"
VERSION_ONLY_KEY = (1).to_bytes(8, "big")


def decode_like_the_asset(decoder: Decoder, raw: DataFrame) -> DataFrame:
    return quarantine_unconvertible_values(quarantine_invalid_table_names(reject_implausible_commit_ts(decoder.decode(raw))))


def assert_decoder_properties(raw: DataFrame, out: DataFrame, decoder: Decoder, name: str) -> DataFrame:
    """No message vanishes, every reject has a code and a detail, every decoded event meets
    the change-log contract. Returns the decoded events (change-log schema)."""
    if decoder.name == "open-protocol":  # a version-only key without a value is a valid empty batch
        empty_batch = (F.col("key") == F.lit(VERSION_ONLY_KEY)) & F.coalesce(F.length("value") == 0, F.lit(True))
        raw = raw.where(~empty_batch)
    missing = raw.select("topic", "kafka_offset").join(
        out.select("topic", "kafka_offset").distinct(), on=["topic", "kafka_offset"], how="left_anti")
    assert missing.count() == 0, f"{name}: messages vanished, e.g. {missing.limit(5).collect()}"

    rejected = out.where(F.col(REJECT_REASON).isNotNull())
    malformed = rejected.where(~F.col(REJECT_REASON).rlike(REASON_CODE) | F.col(REJECT_DETAIL).isNull())
    assert malformed.count() == 0, malformed.limit(3).collect()

    decoded = conform(out.where(F.col(REJECT_REASON).isNull()), CHANGE_LOG_SCHEMA)
    outcome = validate(ChangeLogModel, decoded)
    assert outcome.passed, (name, outcome.invariant_violations, outcome.failed_checks[:3])
    return decoded
