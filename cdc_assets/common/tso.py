"""TiDB TSO arithmetic: a TSO is (physical milliseconds << 18) | logical counter."""

from __future__ import annotations

from datetime import datetime, timezone

from pyspark.sql import Column, functions as F

PHYSICAL_SHIFT = 18


def tso_to_ms(tso: int) -> int:
    return tso >> PHYSICAL_SHIFT


def ms_to_tso(ms: int) -> int:
    """The smallest TSO whose physical time is `ms` (logical counter 0)."""
    return ms << PHYSICAL_SHIFT


# Times in ms at or beyond this would not stay a positive long once shifted into a TSO.
MAX_TSO_MS = 1 << 45


def ms_to_commit_ts(ms: int | None) -> int | None:
    """The commit_ts of a protocol that has only a commit time in ms (`ms << 18`); None when
    `ms` cannot make one (missing, not positive, or too large to shift)."""
    return ms << PHYSICAL_SHIFT if ms is not None and 0 < ms < MAX_TSO_MS else None


def tso_to_datetime(tso: int) -> datetime:
    return datetime.fromtimestamp(tso_to_ms(tso) / 1000, tz=timezone.utc)


def tso_ms_col(tso: Column) -> Column:
    return F.shiftright(tso, PHYSICAL_SHIFT)


def tso_time_col(tso: Column) -> Column:
    """TSO -> UTC timestamp column (millisecond precision)."""
    return F.timestamp_millis(tso_ms_col(tso))


# Physical times a real changefeed can carry (ms since epoch): 2000-01-01 .. 2200-01-01.
# Outside them a time is garbage (seconds for ms, a flipped bit) and is not trusted.
MIN_PLAUSIBLE_MS = 946_684_800_000
MAX_PLAUSIBLE_MS = 7_258_118_400_000


def is_plausible_ms(ms: int) -> bool:
    return MIN_PLAUSIBLE_MS <= ms < MAX_PLAUSIBLE_MS


def plausible_ms(ms: Column) -> Column:
    return F.when((ms >= MIN_PLAUSIBLE_MS) & (ms < MAX_PLAUSIBLE_MS), ms)
