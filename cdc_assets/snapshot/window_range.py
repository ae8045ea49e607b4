"""The snapshot stage's shared work over consecutive windows of one run (issue 45, range runs).

Each window's schema pre-pass (the tables' columns and types, and its DDL events: one Spark
action, `window_schema.schemas_and_rows`) was a job of its own, a fixed cost of every window
whatever its size. A run of several windows now makes it one action over all of them
(`schemas_and_rows_by`, grouped by window), and caches their row events once: each window
then reads its own rows from that cache, in its turn, as before.

The windows of a run are taken in groups of at most `MAX_ROWS` change-table rows (counted in
the commits' summaries, no job), so that one group's cache stays bounded in a long backfill.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pyspark.sql import DataFrame, functions as F

from cdc_assets.common.iceberg_tables import WINDOW_COLUMN as WINDOW
from cdc_assets.contracts.schemas import ROW
from cdc_assets.snapshot.ddl.barriers import ddl_rows
from cdc_assets.snapshot.reconstruct import TableSchema
from cdc_assets.snapshot.window_schema import Name, schemas_and_rows_by

MAX_ROWS = 2_000_000
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrefetchedWindow:
    """One window's row events (a filter of the group's cache), table schemas and DDL rows."""
    rows: DataFrame
    schemas: dict[Name, TableSchema]
    ddl: list


class PrefetchedRange:
    """Windows of one group: their rows cached, their schemas and DDL collected by one action."""

    def __init__(self, changes: DataFrame, starts: list[int]):
        """`changes`: the change table's rows of (at least) these windows, with `WINDOW`."""
        mine = changes.where(F.col(WINDOW).isin(*starts))
        self._rows = mine.where(F.col("event_kind") == ROW).persist()
        try:  # the action that fills the cache: every window's shapes and DDL events
            self._found = schemas_and_rows_by(self._rows, ddl_rows(mine, WINDOW), WINDOW)
        except BaseException:
            self._rows.unpersist()
            raise

    def window(self, start_ms: int) -> PrefetchedWindow:
        schemas, ddl = self._found.get(start_ms, ({}, []))
        return PrefetchedWindow(self._rows.where(F.col(WINDOW) == F.lit(start_ms)).drop(WINDOW), schemas, ddl)

    def release(self) -> None:
        self._rows.unpersist()


def window_groups(starts: list[int], rows_of: Callable[[int], int], max_rows: int = MAX_ROWS) -> list[list[int]]:
    """`starts` in order, cut into groups of consecutive windows of at most `max_rows` rows
    (a window larger than that is a group of its own)."""
    groups: list[list[int]] = []
    total = 0
    for start in starts:
        rows = rows_of(start)
        if groups and total + rows <= max_rows:
            groups[-1].append(start)
            total += rows
        else:
            groups.append([start])
            total = rows
    return groups


def prefetched_windows(changes: Callable[[], DataFrame],
                       groups: list[list[int]]) -> Iterator[tuple[int, PrefetchedWindow | None]]:
    """Each window of `groups` in order with its prefetch from `changes()` (read only when a
    group has several windows); a group of one window gets none (its own pre-pass is the
    same single action). A group's cache is dropped when the caller asks for the next
    group's first window, or stops.

    A group whose shared pre-pass fails gets none either: each of its windows then runs its
    own, so the windows before one that fails (bad data, too large) are still built and
    published, and the failure is that window's, as in a run of one window."""
    for group in groups:
        prefetch = None
        if len(group) > 1:
            try:
                prefetch = PrefetchedRange(changes(), group)
            except Exception as failed:  # noqa: BLE001 - the windows' own pre-pass reports it
                log.warning("the shared schema pre-pass of windows %s failed (%s); each window runs its own",
                            group, failed)
        if prefetch is None:
            for start in group:
                yield start, None
            continue
        try:
            for start in group:
                yield start, prefetch.window(start)
        finally:
            prefetch.release()
