"""A window's tables as it applies them (`TableState`), and what applying it yields
(`WindowResult`, with the `Flush` and `Closure` records the history layer reads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from pyspark.sql import DataFrame

from cdc_assets.common.names import table_id
from cdc_assets.common.observed import ObservedMetrics
from cdc_assets.snapshot.ddl.barriers import Barrier
from cdc_assets.snapshot.manifests import TableEntry
from cdc_assets.snapshot.reconstruct import TableSchema, observed_counts

if TYPE_CHECKING:
    from cdc_assets.snapshot.small_window import SmallWindow

Name = tuple[str, str]


@dataclass
class TableState:
    schema: TableSchema
    frame: DataFrame | None  # None: no rows
    previous_rows: int = 0
    inserted_keys: int = 0
    deleted_keys: int = 0
    removed_by_ddl: int = 0
    moved_in: int = 0
    conversion_failures: int = 0
    changed: bool = False
    schema_changes: list[dict] = field(default_factory=list)
    # Set when only the keys the window touched are written: the MERGE source, one row per such
    # key (`iceberg_tables.MERGE_PRESENT` null: deleted); every other row is the previous
    # snapshot's, unchanged. `frame` then holds the touched keys' rows (its schema is the table's).
    merge_source: DataFrame | None = None
    # The MERGE source applies to no previous snapshot (a new table's small first window): its
    # rows are the whole table, written whole when not committed in Arrow (small_window).
    onto_empty: bool = False
    # The counts observed on `merge_source` (`reconstruct.merge_source`), known once it is
    # written; `settle` adds them.
    observed: ObservedMetrics | None = None
    # Source rows - distinct keys of the MERGE source (0: one row per key), once settled;
    # None for a table written whole (but a new table's source written whole: known).
    duplicate_source_keys: int | None = None
    # The previous snapshot's table whose rows this state continues (itself; the old name after
    # RENAME TABLE; None: created in this window). A swap gives each name the other's origin.
    origin: Name | None = None
    # Set when the window is small enough to apply in Arrow (snapshot/small_window.py): the
    # store binds it to the table, and then it gives the source, the counts and the history.
    small: SmallWindow | None = None

    # `observed_counts(observed)`, read once (under Spark Connect each read is a job)
    _counts: dict | None = field(default=None, init=False, repr=False, compare=False)

    def _observed_counts(self) -> dict:
        if self._counts is None:
            self._counts = observed_counts(self.observed)
        return self._counts

    def merging(self, source: DataFrame | None, observed: ObservedMetrics | None,
                small: SmallWindow | None = None, onto_empty: bool = False) -> None:
        """Write only the keys `source` touches (None: the whole frame), `observed` on it;
        `small`: the same window, to apply in Arrow when the store can; `onto_empty`: there
        is no previous snapshot (the source's rows are the table)."""
        self.merge_source, self.observed, self._counts, self.small = source, observed, None, small
        self.onto_empty = onto_empty and source is not None

    def inserts_only(self) -> bool:
        """Whether the MERGE source inserts keys and no key of it is in the previous snapshot
        (each other row deletes an absent key); call it once the source was materialized."""
        if self.observed is None:
            return False
        counts = self._observed_counts()
        return counts["matched_keys"] == 0 and counts["inserted_keys"] > 0

    def settle(self, counts: dict | None = None) -> None:
        """Add the counts observed on the MERGE source (call it after the source was written),
        or `counts`, the same counts found in Arrow (the source's plan never ran)."""
        if self.observed is None:
            return
        counts = counts if counts is not None else self._observed_counts()
        self.observed, self._counts = None, None
        self.inserted_keys += counts["inserted_keys"]
        self.deleted_keys += counts["deleted_keys"]
        self.conversion_failures += counts["conversion_failures"]
        self.duplicate_source_keys = counts["duplicate_source_keys"]


@dataclass(frozen=True)
class Flush:
    """Rows of one table applied together, on top of `before` (history: versions they ended).
    `actions`: their `reconstruct.typed_actions` (the snapshot was built from them too; cached
    unless a small window's, `small_window.SmallWindow`).
    `before` is in `schema`: columns the rows' images added are null in it."""

    name: Name
    actions: DataFrame
    before: DataFrame | None
    schema: TableSchema


@dataclass(frozen=True)
class Closure:
    """Every row of `frame` stopped existing under this name at `commit_ts` (TRUNCATE, DROP, RENAME)."""

    name: Name
    frame: DataFrame
    schema: TableSchema
    commit_ts: int
    end_op: str


@dataclass
class WindowResult:
    tables: dict[Name, TableState]
    dropped: dict[Name, dict]
    barriers: list[Barrier]
    unparsed_ddl: list[dict]
    flushes: list[Flush]
    closures: list[Closure]
    persisted: list[DataFrame]
    # Tables that could not be built (`TableFailed`), with the reason: the others are built
    # regardless, and these keep their previous snapshot, marked failed (snapshot/store.py).
    failed: dict[Name, str] = field(default_factory=dict)

    def release(self) -> None:
        """Free the cached inputs once every frame has been written."""
        for df in self.persisted:
            df.unpersist()


def previous_states(prev_tables: dict[str, TableEntry], read: Callable[[TableEntry], DataFrame]) -> dict[Name, TableState]:
    """The previous manifest's tables as starting states (frames read lazily)."""
    return {(e.database, e.table): TableState(TableSchema.from_json(e.schema), read(e),
                                              previous_rows=e.rows, origin=(e.database, e.table))
            for e in prev_tables.values()}


def state_id(name: Name) -> str:
    return table_id(*name)
