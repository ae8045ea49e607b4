"""Which windows to materialize next: every complete window not materialized yet, in order.

Empty windows count too: a window's snapshot is built on the previous window's, so a
quiet hour must be materialized (cheaply) before the next one with data, and the quiet
windows the watermark has completed after the last one with data are materialized as well.
"""

from __future__ import annotations

from cdc_assets.lib.watermark_state import Completeness, LandingState


def windows_to_materialize(
    state: LandingState,
    policy: Completeness,
    window_ms: int,
    partition_start_ms: int,
    materialized: set[int],
    limit: int = 24,
) -> list[int]:
    last = state.last_complete_window(window_ms, policy)
    if last is None:
        return []
    first = max(min(state.windows), partition_start_ms)
    pending = [w for w in range(first, last + 1, window_ms) if w not in materialized]
    return pending[:limit]
