"""Which windows to materialize next: every complete window not materialized yet, in order.

Empty windows count too: a window's snapshot is built on the previous window's, so a
quiet hour must be materialized before the next one with data. A window in which nothing
landed needs no run: its manifest carries the previous snapshot forward
(`snapshot/carry_forward.py`); `split_quiet` says which can be carried now.
"""

from __future__ import annotations

from cdc_assets.landing.state import Completeness, LandingState


def windows_to_materialize(
    state: LandingState,
    policy: Completeness,
    window_ms: int,
    partition_start_ms: int,
    materialized: set[int],
    limit: int | None = 24,
) -> list[int]:
    complete = state.complete_windows(window_ms, policy)
    if not complete:
        return []
    first = max(min(state.windows), partition_start_ms)
    pending = [w for w in range(first, complete[-1] + 1, window_ms) if w not in materialized]
    return pending[:limit]


def split_quiet(pending: list[int], with_data: dict[int, int] | set[int], limit: int = 24,
                busy: frozenset[int] = frozenset()) -> tuple[list[int], list[int]]:
    """(quiet windows to carry forward now, windows to run), oldest first.

    A quiet window can be carried once the window before it is committed, so the quiet
    windows after a window still to run wait for it (the next tick carries them): a run is
    never requested for a window whose previous snapshot cannot exist yet. A window a run is
    already working on (`busy`) is left to that run."""
    carry: list[int] = []
    runs: list[int] = []
    for w in pending:
        if w in with_data or w in busy:
            runs.append(w)
            if len(runs) >= limit:
                break
        elif runs:
            break
        else:
            carry.append(w)
    return carry, runs
