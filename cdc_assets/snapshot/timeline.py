"""A window's changes applied in commit order: row events, with the DDL as barriers between them.

Every table's state (schema + rows) starts as the previous window's snapshot. Rows between two
barriers are applied together (`reconstruct.reconstruct_table`: latest action per key wins); a
barrier then changes schemas and rows as its DDL says:

| DDL | effect |
|---|---|
| CREATE TABLE | the declared columns, types and primary key; an existing table keeps its rows, conformed |
| CREATE TABLE … LIKE | the source table's columns, types and primary key, no rows (gh-ost, pt-osc) |
| ADD COLUMN | existing rows get the declared default (MySQL's implicit one for NOT NULL), else null |
| ADD COLUMN of a column the images added first | the DDL's place and type; its values kept, no default |
| DROP COLUMN | the column disappears |
| MODIFY / CHANGE COLUMN | new type (values `try_cast`, failures counted); CHANGE also renames |
| RENAME COLUMN | the values carry over under the new name |
| RENAME TABLE | rows and schema move to the new name; the old name has no snapshot after; the Iceberg table is renamed (`origin`) |
| TRUNCATE TABLE | no rows (an emptying commit of the Iceberg table) |
| DROP TABLE / DROP DATABASE | no snapshot after the drop (the Iceberg table gets an emptying commit and stays in the catalog for time travel); a later CREATE starts empty, on the same Iceberg table |

Without DDL the schema follows the row images: a column they start to carry is added (the rows
before it have it null) and recorded in `schema_changes` with no DDL (`added_by_row_images`).
A window without DDL takes the fast path: every table's rows in one pass, with no DDL to split them at.
Each state's `origin` names the table of the previous snapshot whose rows it continues (itself,
or the table a RENAME moved here; None for a table created in the window): the store renames
that Iceberg table, so its history and tags follow the rows (snapshot/table_moves.py).
`Flush` and `Closure` records let the history layer see each version that ended (the states
and records: snapshot/window_state.py; ALTER TABLE's column changes: snapshot/column_changes.py).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession, functions as F

from cdc_assets.common.concurrent_jobs import run_concurrently
from cdc_assets.common.names import table_id
from cdc_assets.contracts.schemas import ROW
from cdc_assets.snapshot.column_changes import alter_columns
from cdc_assets.snapshot.ddl import parse as D
from cdc_assets.snapshot.ddl.barriers import (
    SEGMENT, Barrier, barriers_from, ddl_rows, is_single_rename, order_unknown, rename_order, with_segments,
)
from cdc_assets.snapshot.ddl.rewrite import changes_rows_or_names
from cdc_assets.snapshot.reconstruct import (
    COMMIT_TS_COLUMN, TableResult, TableSchema, conform_frame, conformed, key_actions, merge_source,
    reconstruct_table, stores_as, typed_actions,
)
from cdc_assets.snapshot.small_window import SmallWindow
from cdc_assets.snapshot.table_errors import TableFailed, caught, naming_table
from cdc_assets.snapshot.window_range import PrefetchedWindow
from cdc_assets.snapshot.window_schema import combined, schemas_and_rows, schemas_by
from cdc_assets.snapshot.window_state import Closure, Flush, Name, TableState, WindowResult


def apply_window(spark: SparkSession, changes: DataFrame, previous: dict[Name, TableState],
                 keep_history: bool = False, touched_keys_only: bool = False,
                 failed: dict[Name, str] | None = None, prefetched: PrefetchedWindow | None = None) -> WindowResult:
    """`previous`: every table of the previous snapshot (frames lazy). Returns the state at the window
    end; call `release()` on it after writing its frames. With `touched_keys_only`, a table whose
    rows alone changed (no DDL, same schema) and that has a key gets a MERGE source of only the
    keys its changes touch (`merge_source`), whose counts are observed when the writer merges
    it into the previous snapshot (`TableState.settle`), or, for a small window, computed in
    Arrow (`small_window`: the source's plan never runs); so does a new table's small first
    window (no previous snapshot, no DDL: a source onto no rows, `TableState.onto_empty`).
    `failed`: tables not to build (an earlier window failed to): their rows and DDL are skipped.
    `prefetched`: the window's row events, schemas and DDL rows, found for the run's windows
    together (snapshot/window_range.py): the window's own schema pre-pass is skipped."""
    run = _Run(spark, changes, previous, keep_history, touched_keys_only, failed)
    run.prefetched = prefetched
    try:
        run.apply()
    except BaseException:
        for df in run.persisted:  # nobody will call release() on a result that never came
            df.unpersist()
        raise
    return WindowResult(run.states, run.dropped, run.barriers, run.unparsed, run.flushes, run.closures,
                        run.persisted, run.failed)


class _Run:
    def __init__(self, spark: SparkSession, changes: DataFrame, previous: dict[Name, TableState], keep_history: bool,
                 touched_keys_only: bool = False, failed: dict[Name, str] | None = None):
        self.spark = spark
        self.failed: dict[Name, str] = dict(failed or {})
        self.touched_keys_only = touched_keys_only
        self.states = dict(previous)
        self.keep_history = keep_history
        self.changes = changes
        self.barriers: list[Barrier] = []  # known once `apply` starts
        self.rows = changes.where(F.col("event_kind") == ROW)
        self.dropped: dict[Name, dict] = {}
        self.unparsed: list[dict] = []
        self.flushes: list[Flush] = []
        self.closures: list[Closure] = []
        self.persisted: list[DataFrame] = []
        self.progress: dict[Name, int] = {}  # per table: rows of segments below this are applied
        self.prefetched: PrefetchedWindow | None = None
        self._segment_schemas: dict[int, dict[Name, TableSchema]] = {}  # a window with DDL: by segment
        self._gone: dict[Name, TableState] = {}  # dropped or renamed away in this window

    def apply(self) -> None:
        if self.prefetched is not None:  # cached and found with the run's other windows
            rows, schemas, ddl = self.prefetched.rows, self.prefetched.schemas, self.prefetched.ddl
        else:
            # Cached: the schema job and every table's actions read it (otherwise each table
            # re-reads the whole window's Parquet, maps included), and every DDL segment.
            rows = self.rows.persist()
            self.persisted.append(rows)
            # One Spark action: the tables' schemas (which fills the cache) and the DDL events.
            schemas, ddl = schemas_and_rows(rows, ddl_rows(self.changes))
        self.barriers = barriers_from(ddl)
        self.rows = with_segments(rows, self.barriers)
        if self.barriers:
            schemas = None  # each flush's own: `combined` from its segments'
            self.rows = self.rows.persist()  # the segments, computed once
            self.persisted.append(self.rows)
            # Every segment's table schemas by one job (which fills the cache): a flush then
            # combines its segments' without a job of its own.
            self._segment_schemas = schemas_by(self.rows, SEGMENT)
            self._pending = {}
            for segment, found in sorted(self._segment_schemas.items()):
                for name in found:
                    self._pending.setdefault(name, []).append(segment)
            if self.prefetched is None:  # read whole by the job above: the segments' cache holds it
                self.persisted.remove(rows)
                rows.unpersist()
        else:  # one segment: the tables with rows are the ones the schema job saw
            self._pending = {name: [0] for name in schemas}
        for barrier in self._in_applicable_order():
            if (barrier.database, barrier.table or "") in self.failed:
                self._unparsed(barrier, "not applied: its table failed to build", structure_covers=False)
                continue
            with naming_table(table_id(barrier.database, barrier.table or ""),
                              f"its DDL at commit_ts {barrier.commit_ts} ({(barrier.sql or '')[:200]!r})"):
                for change in barrier.changes:
                    self._apply_ddl(barrier, change)
                if barrier.declared_columns:
                    self._apply_structure(barrier)
        self._flush_remaining(schemas)

    def _in_applicable_order(self) -> Iterator[Barrier]:
        """The barriers in commit order; single-table renames that share a commit_ts and whose
        order nothing tells (TiCDC's storage sink writes each to its own file) in `rename_order`,
        given the tables that exist when the first of them is reached (lazily: the barriers
        before are applied by then). An order that is a guess is listed with the unapplied DDL."""
        i = 0
        while i < len(self.barriers):
            group = [self.barriers[i]]
            while (is_single_rename(group[0]) and i + len(group) < len(self.barriers)
                   and is_single_rename(nxt := self.barriers[i + len(group)]) and nxt.commit_ts == group[0].commit_ts):
                group.append(nxt)
            if len(group) > 1 and order_unknown(group):
                # a table exists if the snapshot has it, or it has rows before these renames and
                # was not dropped or renamed away since
                existing = set(self.states) | {n for n, segments in self._pending.items()
                                               if segments[0] <= group[0].index and n not in self._gone}
                group, guessed = rename_order(group, existing)
                for b in group if guessed else ():
                    self._unparsed(b, "applied, in a guessed order: renames at one commit ts move a table "
                                      "the snapshot does not know, which may have existed", structure_covers=False)
            yield from group
            i += len(group)

    # rows -------------------------------------------------------------------------------------
    def _flush(self, name: Name, upto: int) -> None:
        """Apply this table's rows of segments [next_segment, upto]."""
        start = self.progress.get(name, 0)
        self.progress[name] = max(start, upto + 1)
        if not any(start <= s <= upto for s in self._pending.get(name, [])):
            return
        rows = self.rows.where(_is(name) & F.col(SEGMENT).between(start, upto))
        self._apply_rows([name], rows, checkpoint=True, schemas={name: self._schema_of(name, start, upto)})

    def _flush_remaining(self, schemas: dict[Name, TableSchema] | None = None) -> None:
        """`schemas`: the window's table schemas when already known (a window without DDL)."""
        last = len(self.barriers)
        untouched = [n for n in self._pending if n not in self.progress]
        partial = [n for n in self._pending if n in self.progress]
        if untouched:  # the fast path: every such table's rows in one pass
            rows = self.rows
            for name in partial:
                rows = rows.where(~_is(name))
            if schemas is None:  # a window with DDL (the only kind with partial tables)
                schemas = {name: self._schema_of(name, 0, last) for name in untouched}
            self._apply_rows(untouched, rows, checkpoint=False, schemas=schemas)
        for name in partial:
            self._flush(name, last)

    def _schema_of(self, name: Name, start: int, upto: int) -> TableSchema:
        """The table's schema over its rows of segments [start, upto] (`window_schema.combined`)."""
        return combined([self._segment_schemas[s][name] for s in self._pending[name] if start <= s <= upto])

    def _apply_rows(self, names: list[Name], rows: DataFrame, checkpoint: bool,
                    schemas: dict[Name, TableSchema]) -> None:
        actions = key_actions(rows)
        plans = [(name, self.states.get(name), schemas[name]) for name in names
                 if name in schemas and name not in self.failed]
        plans = [(name, state, state.schema.merged_with(s) if state else s) for name, state, s in plans]
        # The tables' counting jobs are independent: submitted together (see concurrent_jobs).
        # One table's failure is its own: the others are built (`WindowResult.failed`).
        rebuilt = run_concurrently([functools.partial(caught, functools.partial(
            self._rebuild, actions, state, schema, checkpoint)) for _, state, schema in plans])
        for (name, state, schema), outcome in zip(plans, rebuilt):
            if isinstance(outcome, TableFailed):
                self.failed[name] = str(outcome)
                continue
            typed, before, result = outcome
            # A MERGE window of few events: also applied in Arrow when the store can (small_window).
            small = (SmallWindow(actions, typed, schema, self.keep_history, self._cache)
                     if result.merge_source is not None and SmallWindow.fits(schema) else None)
            if self.keep_history:  # the rows before, in the schema the images grew to (new columns null)
                self.flushes.append(Flush(name, typed, None if before is None else conformed(before, schema), schema))
            onto_empty = state is None
            if state is None:
                state = self._new_state(name, schema)
            elif added := state.schema.added_by(schema):
                _record_image_columns(state, schema, added)
            state.schema, state.frame, state.changed = schema, result.frame, True
            state.merging(result.merge_source, result.observed, small, onto_empty=onto_empty)
            state.inserted_keys += result.inserted_keys
            state.deleted_keys += result.deleted_keys
            state.conversion_failures += result.conversion_failures

    def _rebuild(self, actions: DataFrame, state: TableState | None, schema: TableSchema,
                 checkpoint: bool) -> tuple[DataFrame, DataFrame | None, TableResult]:
        """One table's rows after `actions`: (its typed actions, cached unless a small window
        reads them once; the rows it started from; result). Reads `state` only; the caller
        applies the result."""
        with naming_table(schema.id, "applying its rows"):
            return self._rebuild_table(actions, state, schema, checkpoint)

    def _rebuild_table(self, actions: DataFrame, state: TableState | None, schema: TableSchema,
                       checkpoint: bool) -> tuple[DataFrame, DataFrame | None, TableResult]:
        # Typed and sorted once per table: the MERGE source, the snapshot and the history read them,
        # cached; a small window's are read once (collected for Arrow), cached only if Spark's
        # plans take it after all (`SmallWindow`).
        typed = typed_actions(actions, schema)
        merges = not checkpoint and self._merges_touched_keys(state, schema)
        starts = not checkpoint and not merges and self._starts_small(state, schema)
        if not (starts or (merges and SmallWindow.fits(schema))):  # `starts` implies it fits
            self._cache(typed)
        before = state.frame if state else None
        if merges:
            # Only the touched keys are written: counted as they are (no job here). The history
            # reads the previous rows of these keys by joining `before` with each key's first action.
            result = merge_source(typed, schema, state.frame)
        elif starts:
            # A new table's small first window: its source (onto no rows) is the table, applied
            # in Arrow like any small window (small_window), its counts found there.
            result = merge_source(typed, schema, self.spark.createDataFrame([], schema.spark_schema()))
        else:
            # Untouched by this window so far, the frame is the previous snapshot's: the manifest
            # knows its rows.
            known_rows = None
            if state is not None and not state.changed and before is not None:
                known_rows = state.previous_rows
            result = reconstruct_table(actions, schema, before, previous_rows=known_rows, typed=typed)
        if checkpoint:
            result = replace(result, frame=result.frame.localCheckpoint())
            if not self.keep_history:  # the checkpoint holds the rows: nothing reads the actions again
                typed.unpersist()
        return typed, before, result

    def _cache(self, frame: DataFrame) -> None:
        """Persist `frame` until the window's result is released."""
        frame.persist()
        self.persisted.append(frame)  # list.append is atomic: safe from the pool's threads

    def _merges_touched_keys(self, state: TableState | None, schema: TableSchema) -> bool:
        """Whether only the keys this window's actions touch need writing: rows alone changed
        the table (no DDL before in this window, the same stored schema). The writer merges them
        into the previous snapshot (iceberg_tables.IcebergTable.write_window)."""
        return bool(self.touched_keys_only and state is not None and state.frame is not None and not state.changed
                    and stores_as(schema, state.schema) and schema.primary_key)

    def _starts_small(self, state: TableState | None, schema: TableSchema) -> bool:
        """Whether a table unknown before this window (no previous snapshot, no DDL in it) is
        written as a MERGE source onto no rows: its window is small enough for Arrow
        (`SmallWindow.fits`), and it has a primary key. Larger ones are reconstructed whole."""
        return bool(self.touched_keys_only and state is None and schema.primary_key and SmallWindow.fits(schema))

    # DDL --------------------------------------------------------------------------------------
    def _apply_ddl(self, b: Barrier, change: D.SchemaChange) -> None:
        if isinstance(change, D.Unparsed):
            self._unparsed(b, change.error)
            return
        if isinstance(change, D.CreateDatabase):
            return
        if isinstance(change, D.DropDatabase):
            for name in {n for n in [*self.states, *self._pending] if n[0] == change.database}:
                self._flush(name, b.index)
                if name in self.states:
                    self._remove(name, b, "DROP DATABASE")
            return
        name = change.table
        self._flush(name, b.index)
        if isinstance(change, D.RenameTable):
            self._flush(change.new_table, b.index)
        state = self.states.get(name)
        if isinstance(change, D.CreateTable):
            self._create(b, change, state)
            return
        if isinstance(change, D.CreateTableLike):
            self._create_like(b, change, state)
            return
        if state is None:  # ALTER / TRUNCATE / DROP of a table this snapshot never had: nothing to change
            return
        if isinstance(change, D.DropTable):
            self._remove(name, b, "DROP TABLE")
        elif isinstance(change, D.TruncateTable):
            self._record_closure(name, state, b.commit_ts, "TRUNCATE")
            state.removed_by_ddl += self._count(state.frame)
            state.frame = None
            self._changed(state, b)
        elif isinstance(change, D.RenameTable):
            self._rename(b, state, change.new_table)
        else:
            self._alter(b, state, change)

    def _unparsed(self, b: Barrier, error: str, structure_covers: bool = True) -> None:
        """A statement not applied: listed in the manifest, and the `ddl_applied` check warns;
        unless the protocol's structure (`declared_columns`) says what the statement did: the
        columns after it, never rows it removed or a table it renamed or dropped."""
        if b.declared_columns and structure_covers and not changes_rows_or_names(b.sql or ""):
            return
        self.unparsed.append({"commit_ts": b.commit_ts, "table": f"{b.database}.{b.table}", "sql": b.sql[:500],
                              "error": error})

    def _apply_structure(self, b: Barrier) -> None:
        """The protocol's own description of the table after the DDL wins over what the SQL said
        (the SQL still tells a rename from a drop + add, so values carry over)."""
        name = (b.database, b.table)
        if b.ddl_type and b.ddl_type.upper() in ("DROP", "ERASE") or name in self.dropped and name not in self.states:
            return
        self._flush(name, b.index)
        state = self.states.get(name)
        declared = b.declared_columns
        pk = list(b.declared_primary_key) or (state.schema.primary_key if state else [])
        if state is None:
            state = self._new_state(name, TableSchema(name[0], name[1], list(declared), dict(declared), pk))
        s = state.schema
        keep = lambda d: {k: v for k, v in d.items() if k in declared and declared[k] == s.mysql_types.get(k)}  # noqa: E731
        # Column order: the table's own, then new columns (a map's order is not to be relied on).
        columns = [c for c in s.columns if c in declared] + [c for c in declared if c not in s.columns]
        state.schema = replace(s, columns=columns, mysql_types=dict(declared), primary_key=pk,
                               decimal_scales=keep(s.decimal_scales),
                               decimal_integer_digits=keep(s.decimal_integer_digits))
        if state.frame is not None:
            missing = [c for c in declared if c not in state.frame.columns]
            state.frame = state.frame.withColumns({c: F.lit(None) for c in missing}) if missing else state.frame
        self._conform(state)
        last = state.schema_changes[-1] if state.schema_changes else None
        if last is None or last["commit_ts"] != b.commit_ts or "added_by_row_images" in last:
            self._changed(state, b)
        else:
            state.schema_changes[-1]["columns"] = list(state.schema.columns)

    def _create(self, b: Barrier, change: D.CreateTable, state: TableState | None) -> None:
        if state is not None and change.if_not_exists:
            return
        db, table = change.table
        schema = TableSchema(db, table, [c.name for c in change.columns],
                             {c.name: c.mysql_type for c in change.columns}, list(change.primary_key))
        if state is None:
            state = self._new_state(change.table, schema)
        state.schema = schema
        self._conform(state)
        self._changed(state, b)

    def _create_like(self, b: Barrier, change: D.CreateTableLike, state: TableState | None) -> None:
        if state is not None and change.if_not_exists:
            return
        self._flush(change.source, b.index)  # the source's rows before the DDL may add columns
        source = self.states.get(change.source)
        if source is None:  # columns unknown here: the table's rows will tell, as without DDL
            self._unparsed(b, f"CREATE TABLE ... LIKE {'.'.join(change.source)}: no such table in the snapshot")
            return
        s = source.schema
        schema = replace(s, database=change.table[0], table=change.table[1], columns=list(s.columns),
                         mysql_types=dict(s.mysql_types), primary_key=list(s.primary_key),
                         decimal_scales=dict(s.decimal_scales), decimal_integer_digits=dict(s.decimal_integer_digits))
        if state is None:
            state = self._new_state(change.table, schema)
        state.schema = schema
        self._conform(state)
        self._changed(state, b)

    def _new_state(self, name: Name, schema: TableSchema) -> TableState:
        """A table that starts in this window; one dropped earlier in it keeps its counts, so that
        previous + inserted - deleted - removed by DDL + moved in = rows still holds."""
        gone = self._gone.pop(name, None)
        state = TableState(schema, None)
        if gone is not None:
            state.previous_rows, state.inserted_keys, state.deleted_keys = \
                gone.previous_rows, gone.inserted_keys, gone.deleted_keys
            state.removed_by_ddl, state.moved_in = gone.removed_by_ddl, gone.moved_in
            state.conversion_failures = gone.conversion_failures
        self.states[name] = state
        return state

    def _remove(self, name: Name, b: Barrier, how: str, end_op: str | None = None) -> None:
        state = self.states.pop(name)
        self._record_closure(name, state, b.commit_ts, end_op or how.replace(" ", "_"))
        rows = self._count(state.frame)
        self.dropped[name] = {"commit_ts": b.commit_ts, "by": how, "sql": b.sql[:500], "rows": rows}
        state.removed_by_ddl += rows
        state.frame = None
        self._gone[name] = state

    def _rename(self, b: Barrier, state: TableState, new: Name) -> None:
        old = (state.schema.database, state.schema.table)
        if new in self.states:  # MySQL refuses this: the snapshot missed a DROP, or the order is wrong
            self._unparsed(b, f"RENAME TABLE to {new[0]}.{new[1]}: that table exists in the snapshot",
                           structure_covers=False)
            return
        frame, schema = state.frame, state.schema
        self._remove(old, b, f"RENAME TABLE to {new[0]}.{new[1]}", "RENAME_TABLE")
        # The rows start a version under the new name (history: valid from the rename).
        moved = self._new_state(new, replace(schema, database=new[0], table=new[1]))
        moved.origin = state.origin
        if frame is not None:
            moved.frame = frame.withColumn(COMMIT_TS_COLUMN, F.lit(b.commit_ts).cast("long"))
            moved.moved_in += self.dropped[old]["rows"]
        self._changed(moved, b)

    def _alter(self, b: Barrier, state: TableState, change: D.SchemaChange) -> None:
        if alter_columns(state, change, b.commit_ts):
            self._conform(state)
            self._changed(state, b)

    # helpers ----------------------------------------------------------------------------------
    def _conform(self, state: TableState) -> None:
        if state.frame is None:
            return
        frame, failures = conform_frame(state.frame, state.schema)
        state.frame = frame.localCheckpoint()
        state.conversion_failures += failures

    def _changed(self, state: TableState, b: Barrier) -> None:
        state.changed = True
        state.schema_changes.append({"commit_ts": b.commit_ts, "ddl_type": b.ddl_type, "sql": b.sql[:500],
                                     "columns": list(state.schema.columns)})

    def _record_closure(self, name: Name, state: TableState, commit_ts: int, end_op: str) -> None:
        if self.keep_history and state.frame is not None:
            self.closures.append(Closure(name, state.frame, state.schema, commit_ts, end_op))

    @staticmethod
    def _count(frame: DataFrame | None) -> int:
        return 0 if frame is None else frame.count()


def _record_image_columns(state: TableState, schema: TableSchema, added: list[str]) -> None:
    """Columns the row images carry and no DDL added (without DDL the schema follows the images):
    a schema change of its own, at the first event that carried one, with no DDL type or SQL."""
    state.schema_changes.append({"commit_ts": min(schema.first_commit_ts[c] for c in added), "ddl_type": None,
                                 "sql": None, "added_by_row_images": added, "columns": list(schema.columns)})


def _is(name: Name):
    return (F.col("database") == name[0]) & (F.col("table") == name[1])
