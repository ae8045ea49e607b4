"""A small window of one table applied in the driver, in Arrow: its typed actions collected by
one narrow Spark job, its previous snapshot read by pyiceberg, and from those both its new
snapshot and its history's versions, with the window's counts (docs/performance.md steps 25
and 28).

Spark's plans for the same (`reconstruct.merge_source`, `history._ended_by_rows`) each read the
previous snapshot again and join it with the window's actions: about 8 Spark jobs a table,
for a few thousand rows. Here the actions are typed by Spark as before (the conversions stay
Spark's: `reconstruct.unsorted_typed_actions`) but not sorted: each key's actions are ordered
in Arrow by the columns of Spark's order (`ordered_actions`), which saves the sort's shuffle
and its job. What follows is Arrow too: which keys the previous snapshot had, the counts, the
rows to merge and the versions that ended, by the rules of those Spark plans (the tests run
both side by side).

It applies to a table written by MERGE (rows alone changed, a primary key, the same schema)
whose window has at most `ARROW_WRITE_ROWS` events, on a previous snapshot of one file of at
most `ARROW_REWRITE_BYTES` in the table's current schema, keyed by columns Arrow compares as
Spark does (`IcebergTable.arrow_base`); and to a new table's first window of as few events
(no previous snapshot, no DDL: its source merges onto no rows, `IcebergTable.arrow_new`).
Anything else takes Spark's plans.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from cdc_assets.common.iceberg_arrow_writes import ARROW_WRITE_ROWS, as_table_rows
from cdc_assets.common.iceberg_tables import MERGE_PRESENT
from cdc_assets.snapshot.reconstruct import (
    COMMIT_TS_COLUMN, END_OP, ORDER_COLUMNS, UNIDENTIFIED_COLUMN, VALID_FROM, VALID_TO, TableSchema, key_column,
    unsorted_typed_actions, value_column, window_counts,
)

log = logging.getLogger(__name__)
_UPSERT, _DELETE = "upsert", "delete"  # `reconstruct`'s action kinds
_ROW, _BASE_ROW = "_cdc_row", "_cdc_base_row"


@dataclass(frozen=True)
class AppliedWindow:
    """One table's window applied in Arrow, in the Iceberg table's Arrow types."""
    counts: dict[str, int]  # as `reconstruct.observed_counts` gives them
    # Each None once its write is done (`SmallWindow.table_written`, `versions_written`):
    source: pa.Table | None  # the MERGE source: the table's columns and `MERGE_PRESENT` (null: deleted)
    versions: pa.Table | None  # the versions that ended: the table's columns, VALID_FROM, VALID_TO, END_OP
    base: pa.Table | None  # the previous snapshot's rows


def ordered_actions(rows: pa.Table, keys: int) -> pa.Table:
    """`reconstruct.unsorted_typed_actions`, collected, with what `typed_actions`' sort adds:
    per key (`keys` typed key columns; an action whose key does not type: its
    `UNIDENTIFIED_COLUMN`), oldest first by `ORDER_COLUMNS` (ascending, nulls first, as
    Spark's), whether each action is the key's first (`_cdc_first`) and latest while its
    key types (`_cdc_keep`), and the next action's `_cdc_next_ts` and `_cdc_next_op`; then
    only the rows `apply_actions` reads: every action that decides a key's row, starts a
    key's (or an unidentified key's) actions, or ends a version inside the window. Grouping
    compares values as Spark does for the key types this path takes (not floating point:
    `iceberg_arrow_writes.matches_as_spark`)."""
    partition = [key_column(i) for i in range(keys)] + [UNIDENTIFIED_COLUMN]
    order = pc.sort_indices(rows, sort_keys=[(c, "ascending", "at_start") for c in (*partition, *ORDER_COLUMNS)])
    rows = rows.take(order).combine_chunks()
    n = rows.num_rows
    same = np.ones(max(n - 1, 0), dtype=bool)  # row i+1 is of row i's key
    for c in partition:
        a, b = rows[c][1:], rows[c][:-1]
        equal = pc.or_kleene(pc.equal(a, b), pc.and_(pc.is_null(a), pc.is_null(b)))
        same &= pc.fill_null(equal, False).to_numpy(zero_copy_only=False)
    first = np.concatenate([[True], ~same]) if n else np.zeros(0, dtype=bool)
    has_next = np.concatenate([same, [False]]) if n else np.zeros(0, dtype=bool)
    next_ts = pc.if_else(pa.array(has_next), _shifted(rows["commit_ts"]), pa.scalar(None, pa.int64()))
    next_op = pc.if_else(pa.array(has_next), _shifted(rows["op"]), pa.scalar(None, rows.schema.field("op").type))
    keep = pc.and_(_true(rows["_cdc_key_ok"]), pa.array(~has_next))
    rows = rows.append_column("_cdc_first", pa.array(first)).append_column("_cdc_keep", keep).append_column(
        "_cdc_next_ts", next_ts).append_column("_cdc_next_op", next_op)
    ends_version = pc.and_(pc.equal(rows["_cdc_kind"], _UPSERT), pc.greater(rows["_cdc_next_ts"], rows["commit_ts"]))
    # `_true` where a null meets a boolean: Arrow's `or_` and `and_` give null there, SQL's do not.
    return rows.filter(pc.or_(pc.or_(keep, pa.array(first)), _true(pc.and_(rows["_cdc_key_ok"], ends_version))))


def _shifted(column: pa.ChunkedArray) -> pa.Array:
    """Each row's next row's value (the last: null)."""
    column = column.combine_chunks()
    return pa.concat_arrays([column.slice(1), pa.nulls(1, column.type)]) if len(column) else column


def apply_actions(actions: pa.Table, base: pa.Table, schema: TableSchema, table_schema: pa.Schema) -> AppliedWindow:
    """The window's `ordered_actions` applied to `base`, the previous snapshot in
    `table_schema` (the Iceberg table's): what `reconstruct.merge_source` observes and
    selects, and the versions `history._ended_by_rows` selects."""
    pk, cols = schema.primary_key, schema.columns
    keys = [key_column(i) for i in range(len(pk))]
    for c, k in zip(pk, keys):  # the typed keys in the table's types, to join with the base's
        actions = actions.set_column(actions.column_names.index(k), k, actions[k].cast(table_schema.field(c).type))
    actions = actions.append_column(_ROW, pa.array(np.arange(actions.num_rows, dtype=np.int64)))
    base_rows = base.select(pk).rename_columns(keys).append_column(
        _BASE_ROW, pa.array(np.arange(base.num_rows, dtype=np.int64)))
    # A null key matches nothing (an unidentified key's action), as in Spark's join.
    matched = actions.select([*keys, _ROW]).join(base_rows, keys=keys, join_type="inner")
    in_prev = pc.is_in(actions[_ROW], value_set=matched[_ROW].combine_chunks())

    kind = actions["_cdc_kind"]
    upsert, delete = pc.equal(kind, _UPSERT), pc.equal(kind, _DELETE)
    key_ok, first, keep = (_true(actions[c]) for c in ("_cdc_key_ok", "_cdc_first", "_cdc_keep"))
    failures = pc.if_else(pc.and_(keep, upsert), actions["_cdc_value_failures"], 0)
    counts = window_counts({
        "inserted": _count(keep, upsert, pc.invert(in_prev)), "deleted": _count(keep, delete, in_prev),
        "value_failures": pc.sum(failures).as_py() or 0, "unidentified": _count(pc.invert(key_ok), first),
        "source_rows": _count(keep), "source_keys": _count(key_ok, first), "matched": _count(keep, in_prev),
    })

    def table_columns(rows: pa.Table) -> list[pa.ChunkedArray]:
        return [rows[keys[pk.index(c)]] if c in pk else rows[value_column(i)] for i, c in enumerate(cols)]

    kept = actions.filter(keep)
    source = as_table_rows(pa.Table.from_arrays([*table_columns(kept), kept["commit_ts"]],
                                                names=[*cols, COMMIT_TS_COLUMN]), table_schema)
    present = pc.if_else(pc.equal(kept["_cdc_kind"], _UPSERT), True, pa.scalar(None, pa.bool_()))
    source = source.append_column(MERGE_PRESENT, present)

    version_schema = pa.schema([*[table_schema.field(c) for c in cols],
                                pa.field(VALID_FROM, pa.int64()), pa.field(VALID_TO, pa.int64()),
                                pa.field(END_OP, pa.string())])
    # an upsert ends at its key's next action inside the window
    inside = actions.filter(_true(pc.and_(pc.and_(key_ok, upsert), pc.greater(actions["_cdc_next_ts"],
                                                                              actions["commit_ts"]))))
    inside = pa.Table.from_arrays([*table_columns(inside), inside["commit_ts"], inside["_cdc_next_ts"],
                                   inside["_cdc_next_op"]], names=version_schema.names)
    # a row from before the window ends at its key's first action (when that is later)
    starts = actions.filter(pc.and_(key_ok, first)).select([*keys, "commit_ts", "op"]).join(
        base_rows, keys=keys, join_type="inner")
    before = base.take(starts[_BASE_ROW])
    ended = _true(pc.greater(starts["commit_ts"], before[COMMIT_TS_COLUMN]))
    before = pa.Table.from_arrays([*[before[c] for c in cols], before[COMMIT_TS_COLUMN], starts["commit_ts"],
                                   starts["op"]], names=version_schema.names).filter(ended)
    versions = pa.concat_tables([as_table_rows(before, version_schema), as_table_rows(inside, version_schema)])
    return AppliedWindow(counts, source, versions, base)


def _true(mask) -> pa.ChunkedArray:
    return pc.fill_null(mask, False)


def _count(*masks) -> int:
    every = masks[0]
    for m in masks[1:]:
        every = pc.and_(every, m)
    return int(pc.sum(pc.cast(_true(every), pa.int64())).as_py() or 0)


class SmallWindow:
    """One table's window, applied in Arrow once for both its snapshot and its history writes
    (they run in two threads: the first to ask computes it, the other waits for it)."""

    def __init__(self, actions: DataFrame, typed: DataFrame, schema: TableSchema, for_history: bool,
                 cache: Callable[[DataFrame], None] = lambda frame: None):
        """`actions`: the window's `key_actions`, of which the table's are collected unsorted
        (`reconstruct.unsorted_typed_actions`: one narrow job) and ordered here
        (`ordered_actions`). `typed`: the same actions sorted by Spark (`typed_actions`), which
        Spark's plans of the writes read instead when the window is not applied here (unbound,
        or Arrow failed): `cache`d then when both writes read it. `for_history`: the history's
        write takes the versions (else they are dropped with the rest once the table is written)."""
        self._actions, self._typed, self._schema, self._for_history, self._cache = (
            actions, typed, schema, for_history, cache)
        self._lock = threading.Lock()
        self._table = None  # the pyiceberg table, bound by `bind`
        self._base_snapshot_id: int | None = None
        self._applied: AppliedWindow | None = None
        self._failed = False

    @staticmethod
    def fits(schema: TableSchema) -> bool:
        """Whether the window's events of the table are few enough (known before any job)."""
        return schema.events is not None and schema.events <= ARROW_WRITE_ROWS

    def bind(self, table, base_snapshot_id: int | None) -> None:
        """The pyiceberg table and the snapshot the window merges into (`IcebergTable.arrow_base`;
        None: no rows, a new table's first window, `IcebergTable.arrow_new`); unbound, the
        window takes Spark's plans."""
        self._table, self._base_snapshot_id = table, base_snapshot_id

    def unbound(self) -> None:
        """Not applied in Arrow (the store cannot bind it): the writes take Spark's plans, which
        read the typed actions twice when the history is written too (cached then)."""
        self._cache_for_spark()

    def _cache_for_spark(self) -> None:
        if self._for_history:
            self._cache(self._typed)

    @property
    def usable(self) -> bool:
        return self._table is not None and not self._failed

    def table_written(self) -> None:
        """The table's snapshot is committed: its base and source are dropped (and the versions,
        when the history does not take them). The driver holds a table's rows only while it
        writes them."""
        self._forget("base", "source", *(() if self._for_history else ("versions",)))

    def versions_written(self) -> None:
        """The history's write is done (or took Spark's plan): the versions are dropped."""
        self._forget("versions")

    def _forget(self, *parts: str) -> None:
        with self._lock:
            if self._applied is not None:
                self._applied = replace(self._applied, **{p: None for p in parts})

    def applied(self) -> AppliedWindow | None:
        """The window applied (one narrow Spark job collects the actions); None when not
        usable. An error here is logged and the writes take Spark's plans, whose errors are
        the table's."""
        with self._lock:
            if self._applied is None and self.usable:
                try:
                    unsorted = unsorted_typed_actions(self._actions, self._schema).toArrow()
                    actions = ordered_actions(unsorted, len(self._schema.primary_key))
                    table_schema = self._table.schema().as_arrow()
                    base = (table_schema.empty_table() if self._base_snapshot_id is None else
                            as_table_rows(self._table.scan(snapshot_id=self._base_snapshot_id).to_arrow(), table_schema))
                    self._applied = apply_actions(actions, base, self._schema, table_schema)
                except Exception:  # noqa: BLE001 - Spark's plans are the fallback
                    log.warning("%s: the window could not be applied in Arrow; Spark's plans write it",
                                self._schema.id, exc_info=True)
                    self._failed = True
                    self._cache_for_spark()
            return self._applied
