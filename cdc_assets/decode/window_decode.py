"""The decode step of one window: raw messages -> change-log events and the quarantine,
with the counts the change log's metadata and checks report.

Decoding and the rules that reject after decoding (an implausible commit_ts, an invalid
table name, a value the snapshot could not convert) run here; the Dagster asset
(`defs/layers/change_log.py`) only wires the result to its outputs and checks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql import DataFrame, functions as F

from cdc_assets.contracts.schemas import (
    CHANGE_LOG_SCHEMA,
    NO_CHANGE_REASONS,
    QUARANTINE_COLUMNS,
    REJECT_DETAIL,
    REJECT_REASON,
    conform,
)
from cdc_assets.decode.base import Decoder
from cdc_assets.decode.common.raw_bytes import MESSAGE_KEY, refill_raw_bytes
from cdc_assets.decode.table_names import INVALID_TABLE_NAME, quarantine_invalid_table_names
from cdc_assets.decode.value_conversion import INVALID_VALUE, quarantine_unconvertible_values
from cdc_assets.decode.window_events import IMPLAUSIBLE_COMMIT_TS, events_of_window

_QUARANTINED = "quarantined:"


@dataclass(frozen=True)
class DecodedWindow:
    """A window's events (`CHANGE_LOG_SCHEMA`) and quarantine (`QUARANTINE_SCHEMA`'s columns),
    with its counts."""

    events: DataFrame
    quarantine: DataFrame
    #: raw messages of the window
    messages: int
    #: decoded events by `event_kind`
    kinds: dict[str, int]
    #: quarantined events by reason
    reasons: dict[str, int]
    #: messages with a reject that is bad input
    quarantined_messages: int
    #: messages with a record that carries no change by design (tombstones, control records)
    no_change_messages: int

    @property
    def quarantined(self) -> int:
        return sum(self.reasons.values())

    @property
    def no_change_records(self) -> int:
        return sum(n for r, n in self.reasons.items() if r in NO_CHANGE_REASONS)

    @property
    def quarantine_rate(self) -> float:
        """Bad messages as a share of the messages that could change rows."""
        judged = self.messages - self.no_change_messages
        return self.quarantined_messages / judged if judged > 0 else 0.0


@contextlib.contextmanager
def decode_window(decoder: Decoder, raw_messages: DataFrame, start_ms: int, window_ms: int) -> Iterator[DecodedWindow]:
    """Decode the window starting at `start_ms`; its frames stay cached until the block ends.

    Two caches: the decoder's output, because the conversion rule reads its distinct column
    types first; then the converted events, which the counts, the contract and both writes
    read (the conversion casts every value: it must run once, not per action). Raw bytes
    are kept for rejected events only, which are all the quarantine needs (Python decoders
    send them for their own rejects only; those of `implausible_commit_ts`,
    `invalid_table_name` and `invalid_value` events are looked up in the raw messages).
    Once the second cache is filled the first is dropped.
    """
    cached = events_of_window(decoder.decode(raw_messages), raw_messages, start_ms, window_ms).persist()
    decoded = _raw_bytes_of_rejects_only(quarantine_unconvertible_values(
        quarantine_invalid_table_names(cached))).persist()
    try:
        by_kind = {
            f"{r.kind}": int(r.n)
            for r in decoded.groupBy(
                F.coalesce(F.concat(F.lit(_QUARANTINED), F.col(REJECT_REASON)), F.col("event_kind")).alias("kind")
            ).agg(F.count(F.lit(1)).alias("n")).collect()
        }
        cached.unpersist()
        events = conform(decoded.where(F.col(REJECT_REASON).isNull()), CHANGE_LOG_SCHEMA)
        rejected = decoded.where(F.col(REJECT_REASON).isNotNull()).select(
            *[F.col(REJECT_REASON).alias("reason") if c == "reason" else
              F.col(REJECT_DETAIL).alias("detail") if c == "detail" else F.col(c)
              for c in QUARANTINE_COLUMNS]
        )
        reasons = {k.split(":", 1)[1]: v for k, v in by_kind.items() if k.startswith(_QUARANTINED)}
        kinds = {k: v for k, v in by_kind.items() if not k.startswith(_QUARANTINED)}
        messages = raw_messages.count()
        bad_messages, without_change = _message_counts(rejected) if reasons else (0, 0)  # no job when clean
        refilled = [r for r in (INVALID_VALUE, IMPLAUSIBLE_COMMIT_TS, INVALID_TABLE_NAME) if reasons.get(r)]
        if refilled:
            rejected = refill_raw_bytes(rejected, raw_messages, refilled)
        yield DecodedWindow(events, rejected, messages, kinds, reasons, bad_messages, without_change)
    finally:
        decoded.unpersist()
        cached.unpersist()


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
