"""Which decoded events a window keeps: each event once, in the window of its commit time.

- A row or DDL event needs a plausible commit time (`tso.plausible_ms`, the rule the landing
  applies to watermarks): a commit ts of 0, -1 or one in the year 2500 is quarantined
  (`implausible_commit_ts`), never applied in whatever window its message landed in.
- A message that batches events of several commit times (Open Protocol) was landed in the
  window of each of its events (`windows.ROUTED_WINDOWS`: its home window, the one of its
  routing time, first). Each window decodes the whole message and keeps the events whose
  commit time is in it; an event that has no plausible commit time, or whose window the
  message was not landed in, is kept by the home window alone (quarantined there, or caught
  by the change table's `events_inside_window` check), so nothing is kept twice or lost.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F

from cdc_assets.common.tso import plausible_ms, tso_ms_col
from cdc_assets.common.windows import ROUTED_WINDOWS, window_start
from cdc_assets.contracts.schemas import DDL, REJECT_DETAIL, REJECT_REASON, ROW
from cdc_assets.decode.common.raw_bytes import MESSAGE_KEY

IMPLAUSIBLE_COMMIT_TS = "implausible_commit_ts"


def commit_ms(commit_ts: Column) -> Column:
    """The physical ms of a commit ts when it is plausible, else null (a TSO below 0 shifts
    to a negative time, which is not plausible either)."""
    return plausible_ms(tso_ms_col(commit_ts))


def window_of_commit(commit_ts: Column, window_ms: int) -> Column:
    return window_start(commit_ms(commit_ts), window_ms)


def reject_implausible_commit_ts(decoded: DataFrame) -> DataFrame:
    """Row and DDL events whose commit ts is set but implausible become quarantine rows."""
    bad = (
        F.col(REJECT_REASON).isNull() & F.col("event_kind").isin(ROW, DDL)
        & F.col("commit_ts").isNotNull() & commit_ms(F.col("commit_ts")).isNull()
    )
    return decoded.withColumns({
        REJECT_REASON: F.when(bad, F.lit(IMPLAUSIBLE_COMMIT_TS)).otherwise(F.col(REJECT_REASON)),
        REJECT_DETAIL: F.when(bad, F.concat(
            F.lit("commit ts "), F.col("commit_ts").cast("string"),
            F.lit(" is not a time between 2000 and 2200"))).otherwise(F.col(REJECT_DETAIL)),
    })


def events_of_window(decoded: DataFrame, raw_messages: DataFrame, window_start_ms: int, window_ms: int) -> DataFrame:
    """`decoded` (a decoder's output over the window's raw messages) with implausible commit
    times quarantined and only the events this window owns (module docstring)."""
    decoded = reject_implausible_commit_ts(decoded)
    if ROUTED_WINDOWS not in raw_messages.columns:
        return decoded
    # Only messages landed in several windows are looked up: a handful per window end.
    copies = F.broadcast(raw_messages.where(F.col(ROUTED_WINDOWS).isNotNull()).select(*MESSAGE_KEY, ROUTED_WINDOWS))
    windows = F.col(ROUTED_WINDOWS)
    own = window_of_commit(F.col("commit_ts"), window_ms)
    owner = F.when(F.coalesce(F.array_contains(windows, own), F.lit(False)), own).otherwise(windows[0])
    return (
        decoded.join(copies, on=MESSAGE_KEY, how="left")
        .where(windows.isNull() | (owner == F.lit(window_start_ms)))
        .select(*decoded.columns)
    )
