"""Which windows to materialize next: every complete window not materialized yet, in order.

Empty windows count too: a window's snapshot is built on the previous window's, so a
quiet hour must be materialized (cheaply) before the next one with data.
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
    complete = state.complete_windows(window_ms, policy)
    if not complete:
        return []
    first = max(min(state.windows), partition_start_ms)
    pending = [w for w in range(first, complete[-1] + 1, window_ms) if w not in materialized]
    return pending[:limit]
