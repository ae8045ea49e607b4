"""Which commitTs window a physical time falls in, and the windows a landed message was copied
into: the routing rule that landing writes and a window's decode reads back."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from cdc_assets.common.tso import plausible_ms

# Landed messages carry, next to the raw message columns, the landing sequence number and,
# for a message landed in several windows (a batch whose events straddle a window end), the
# windows it was landed in, its home window (the one of its routing time) first; null for a
# message landed in one window. `decode/window_events.py` reads it to decode each event once.
ROUTED_WINDOWS = "routed_windows"


def window_start(ms: str | Column, window_ms: int) -> Column:
    """The start (ms) of the window holding physical time `ms`."""
    ms = F.col(ms) if isinstance(ms, str) else ms
    return F.floor(ms / window_ms).cast("long") * window_ms


def routed_windows(routing_ms: Column, event_ms: Column, window_ms: int) -> Column:
    """[home window, other windows of its events...], or null when all are in the home window
    (or the message has no usable routing time: it stays unroutable, quarantined at home)."""
    others = F.array_sort(F.array_distinct(F.transform(
        F.filter(event_ms, lambda ms: plausible_ms(ms).isNotNull()), lambda ms: window_start(ms, window_ms))))
    home = window_start(routing_ms, window_ms)
    others = F.array_remove(others, home)
    return F.when(home.isNotNull() & (F.size(others) > 0), F.concat(F.array(home), others))


def is_home_copy(window_start_ms: Column) -> Column:
    """The copy of a message in its home window (every message landed in one window is)."""
    return F.col(ROUTED_WINDOWS).isNull() | (F.col(ROUTED_WINDOWS)[0] == window_start_ms)
