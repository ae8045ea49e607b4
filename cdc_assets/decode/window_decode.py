"""The decode step of one window: raw messages -> change-log events and the quarantine,
with the counts the change table's metadata and checks report.

Decoding and the rules that reject after decoding (an implausible commit_ts, an invalid
table name, a value the snapshot could not convert) run here; the Dagster step
(`defs/layers/change_table.py`) aligns the events and wires both to its outputs and checks.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from pyspark.sql import Column, DataFrame, functions as F

from cdc_assets.common.observed import ObservedMetrics, observed
from cdc_assets.contracts.schemas import (
    CHANGE_LOG_SCHEMA,
    EVENT_KINDS,
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

#: The window start (ms) of each row of a group's decode (`decode_windows`).
WINDOW = "_cdc_window"


class DecodedWindow:
    """A window's events (`CHANGE_LOG_SCHEMA`) and quarantine (`QUARANTINE_SCHEMA`'s columns),
    with its counts.

    The counts are observed (`DataFrame.observe`) by the first action on `events` or
    `flagged`, the job that writes the change table: read them after it (reading earlier
    blocks). `quarantine` is built on first use, after that action, because it depends on the
    reasons counted."""

    def __init__(self, rows: DataFrame, window_start_ms: int, raw_messages: DataFrame, messages: ObservedMetrics,
                 extra: Sequence[str] = ()):
        self._part = rows.where(F.col(WINDOW) == F.lit(window_start_ms))
        watched, self._decoded = observed(self._part, *_count_metrics())
        self._accepted = watched.where(F.col(REJECT_REASON).isNull())
        self._extra = tuple(extra)
        self._raw_messages = raw_messages
        self._messages = messages

    # Plans are built on first use: each costs the driver calls into the JVM.
    @functools.cached_property
    def events(self) -> DataFrame:
        return conform(self._accepted, CHANGE_LOG_SCHEMA)

    @functools.cached_property
    def flagged(self) -> DataFrame:
        """The events with the `extra` columns of the rows (say, the alignment's flags) after theirs."""
        return conform(self._accepted, CHANGE_LOG_SCHEMA, self._extra)

    @functools.cached_property
    def quarantine(self) -> DataFrame:
        rejected = self._part.where(F.col(REJECT_REASON).isNotNull()).select(
            *[F.col(REJECT_REASON).alias("reason") if c == "reason" else
              F.col(REJECT_DETAIL).alias("detail") if c == "detail" else F.col(c)
              for c in QUARANTINE_COLUMNS]
        )
        # Only the reasons whose raw bytes the decoder left out need the raw messages again.
        refilled = [r for r in (INVALID_VALUE, IMPLAUSIBLE_COMMIT_TS, INVALID_TABLE_NAME) if self.reasons.get(r)]
        return refill_raw_bytes(rejected, self._raw_messages, refilled) if refilled else rejected

    @functools.cached_property
    def _counts(self) -> dict:
        return self._decoded.values()

    @property
    def messages(self) -> int:
        """Raw messages of the window."""
        return int(self._messages.values()["messages"])

    @property
    def kinds(self) -> dict[str, int]:
        """Decoded events by `event_kind` (the kinds that occur)."""
        counts = {k: int(self._counts[f"kind_{k}"]) for k in EVENT_KINDS}
        counts.update(Counter(str(k) for k in self._counts["other_kinds"]))
        return {k: n for k, n in counts.items() if n}

    @functools.cached_property
    def _rejects(self) -> list:
        return list(self._counts["rejects"])

    @property
    def reasons(self) -> dict[str, int]:
        """Quarantined events by reason."""
        return dict(Counter(r["reason"] for r in self._rejects))

    @property
    def quarantined_messages(self) -> int:
        """Messages with a reject that is bad input."""
        return len({_message(r) for r in self._rejects if r["reason"] not in NO_CHANGE_REASONS})

    @property
    def no_change_messages(self) -> int:
        """Messages with a record that carries no change by design (tombstones, control records)."""
        return len({_message(r) for r in self._rejects if r["reason"] in NO_CHANGE_REASONS})

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


def _message(reject) -> tuple:
    return tuple(reject[c] for c in MESSAGE_KEY)


class DecodedWindows:
    """The decoded rows of a group of windows (`DECODED_COLUMNS` and `WINDOW`, each row's
    window start), decoded in one pass (`decode_windows`), and each window's part of them."""

    def __init__(self, rows: DataFrame, raw_messages: Mapping[int, DataFrame], messages: Mapping[int, ObservedMetrics],
                 decoded: DataFrame):
        self.rows = rows
        self.raw_messages = dict(raw_messages)
        self._messages = dict(messages)
        self._decoded = decoded

    def release_decoded(self) -> None:
        """Drop the decoder's cached output early: once a cache of `rows` (or of frames made of
        them) is filled, nothing reads it again."""
        self._decoded.unpersist()

    def window(self, window_start_ms: int, rows: DataFrame | None = None, extra: Sequence[str] = ()) -> DecodedWindow:
        """One window's events, quarantine and counts, from `rows` (default: `self.rows`; or a
        frame made of them that adds the `extra` columns, which `DecodedWindow.flagged` keeps)."""
        return DecodedWindow(self.rows if rows is None else rows, window_start_ms,
                             self.raw_messages[window_start_ms], self._messages[window_start_ms], extra)


@contextlib.contextmanager
def decode_windows(decoder: Decoder, raw_messages: Mapping[int, DataFrame], window_ms: int) -> Iterator[DecodedWindows]:
    """Decode a group of windows (raw messages by window start) in one pass; the decoder's
    output stays cached until the block ends.

    The decoder's output is cached because the conversion rule reads its distinct column types
    first (one job for the group). Each window keeps its own events (`events_of_window`) and is
    tagged with its start (`WINDOW`); the conversion (which casts every value) then runs once
    per action on `rows`, so the caller materializes what it reads more than once (the change
    table's step caches the group's aligned rows). Raw bytes are kept for rejected events
    only, which are all the quarantine needs (Python decoders send them for their own rejects
    only; those of `implausible_commit_ts`, `invalid_table_name` and `invalid_value` events are
    looked up in the window's raw messages).

    No count runs a job of its own: each window's raw messages are counted as the decoder
    reads them (the type pre-pass), the events by kind and the rejects (their reasons and
    messages: a list of the rejects' lineage, small next to the quarantine rows written) by the
    first action on the window's events (`DecodedWindow`)."""
    counted = {start: observed(raw, F.count(F.lit(1)).alias("messages")) for start, raw in raw_messages.items()}
    parts = [events_of_window(decoder.decode(frame), raw_messages[start], start, window_ms)
             .withColumn(WINDOW, F.lit(start).cast("long")) for start, (frame, _) in counted.items()]
    cached = functools.reduce(DataFrame.unionByName, parts).persist()
    try:
        rows = _raw_bytes_of_rejects_only(quarantine_unconvertible_values(quarantine_invalid_table_names(cached)))
        yield DecodedWindows(rows, raw_messages, {start: handle for start, (_, handle) in counted.items()}, cached)
    finally:
        cached.unpersist()


@contextlib.contextmanager
def decode_window(decoder: Decoder, raw_messages: DataFrame, start_ms: int, window_ms: int) -> Iterator[DecodedWindow]:
    """Decode the window starting at `start_ms` (`decode_windows` of one window)."""
    with decode_windows(decoder, {start_ms: raw_messages}, window_ms) as group:
        yield group.window(start_ms)


def _count_metrics() -> list[Column]:
    """Events by kind (the finite kinds, and a list of any other: the contract check fails
    on those) and each reject's reason and message (reasons are open-ended: decoders name
    their own)."""
    rejected, kind = F.col(REJECT_REASON).isNotNull(), F.col("event_kind")
    return [
        *[F.count_if(~rejected & (kind == k)).alias(f"kind_{k}") for k in EVENT_KINDS],
        F.collect_list(F.when(~rejected & ~F.coalesce(kind.isin(*EVENT_KINDS), F.lit(False)),
                              F.coalesce(kind, F.lit("None")))).alias("other_kinds"),
        F.collect_list(F.when(rejected, F.struct(*MESSAGE_KEY, F.col(REJECT_REASON).alias("reason"))))
        .alias("rejects"),
    ]


def _raw_bytes_of_rejects_only(decoded: DataFrame) -> DataFrame:
    rejected = F.col(REJECT_REASON).isNotNull()
    return decoded.withColumns({c: F.when(rejected, F.col(c)) for c in ("key", "value")})
