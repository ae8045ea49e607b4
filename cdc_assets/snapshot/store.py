"""Writing a snapshot window: every source table is an Iceberg table of the warehouse's catalog
(snapshot/entry_tables.py), and each window has a manifest, a row of the Iceberg table
`<source>.snapshot_windows` (snapshot/manifests.py): the commit point.

A window writes the tables it changed on a branch cut from the snapshot the previous window
ended on (a table whose rows alone changed is a MERGE of the keys it touched, or a rewrite of
its one file's worth of rows, one commit);
then every table of the window is tagged with the window's end (`end-<UTC end>`) and, in
the newest window, `main` moves to it (`iceberg_refs.publish`); last, its manifest row is
committed, conditioned on the windows table as the run found it when it started (two runs of
one window: the later fails, `manifests.ManifestConflict`). The manifest records each
table's Iceberg identifier and snapshot id and the window's counts; a table without changes
keeps its previous entry (same snapshot), tagged again. Any engine reads a window's state
with `VERSION AS OF 'end-…'`. A window in which nothing landed is carried forward without
Spark (snapshot/carry_forward.py).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import replace

import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from cdc_assets.common.concurrent_jobs import run_concurrently
from cdc_assets.common.iceberg_refs import publish, table_uuids
from cdc_assets.common.iceberg_tables import MERGE_PRESENT, branch_name, end_tag
from cdc_assets.common.window_commits import (
    WATERMARK_PROPERTY, WINDOW_END_PROPERTY, WINDOW_END_TSO_PROPERTY, WINDOW_PROPERTY, window_properties,
)
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.snapshot import manifests
from cdc_assets.snapshot.carry_forward import recarry_followers
from cdc_assets.snapshot.entry_tables import read_entry, snapshot_table
from cdc_assets.snapshot.history import write_window_history
from cdc_assets.snapshot.manifests import DdlRecord, FailedTable, TableEntry, WindowManifest
from cdc_assets.snapshot.reconstruct import COMMIT_TS_COLUMN
from cdc_assets.snapshot.table_errors import TableFailed, caught, naming_table
from cdc_assets.snapshot.table_moves import empty_table, move_tables
from cdc_assets.snapshot.timeline import apply_window
from cdc_assets.snapshot.window_range import PrefetchedWindow
from cdc_assets.snapshot.window_state import Name, TableState, previous_states, state_id

log = logging.getLogger(__name__)


def read_manifest(warehouse, source: str, window_start_ms: int) -> WindowManifest | None:
    """The committed manifest of one window (None: not committed)."""
    return manifests.read_window(warehouse, source, window_start_ms)


def read_manifests(warehouse, source: str) -> dict[int, WindowManifest]:
    """Every committed window's manifest, by window start, in one scan."""
    return manifests.read_windows(warehouse, source)


def list_manifests(warehouse, source: str) -> list[int]:
    """The starts of the committed windows, ascending."""
    return manifests.list_windows(warehouse, source)


def write_window_snapshot(
    spark: SparkSession,
    changes: DataFrame,
    warehouse,
    source: str,
    window_start_ms: int,
    window_end_ms: int,
    previous: WindowManifest | None,
    keep_history: bool = False,
    merge_touched_keys: bool = True,
    audit: Callable[[WindowManifest], str | None] | None = None,
    global_watermark_ts: int | None = None,
    prefetched: PrefetchedWindow | None = None,
) -> WindowManifest:
    """Build and publish window [start, end) on `previous` (its manifest; None: the first).
    `keep_history`: also write the versions that ended in it (snapshot/history).
    `merge_touched_keys=False` rewrites every changed table whole (the benchmarks' peer).
    `prefetched`: the window's rows and schema pre-pass, found with the run's other windows
    (snapshot/window_range.py).

    Write-audit-publish: the tables are written on the window's branch, then `audit` sees
    the manifest to be; a reason it returns withholds the window (`WindowWithheld`): no
    tag, `main` unchanged, no manifest, the branch `window-<start ms>` left for inspection.
    Another run that committed this window since this one started: `ManifestConflict`,
    raised before anything is published."""
    since = manifests.begin(warehouse, source)
    earlier = read_manifest(warehouse, source, window_start_ms)  # this window's last commit, if any
    tables, ddl, failed = _write_tables(spark, changes, warehouse, source, window_start_ms, previous, keep_history,
                                        merge_touched_keys, earlier, window_end_ms, global_watermark_ts, prefetched)
    manifest = WindowManifest(window_start_ms, window_end_ms, end_tag(window_end_ms), tables, ddl, failed)
    reason = audit(manifest) if audit is not None else None
    if reason is not None:
        raise WindowWithheld(f"window {window_start_ms} was not published: {reason}; its tables are on "
                             f"the Iceberg branch {branch_name(window_start_ms)}")
    manifests.check_unchanged(warehouse, source, since, [window_start_ms])
    # main follows the newest window with data (quiet windows after it carry its snapshots)
    newest = all(manifests.carried_after(warehouse, source, window_start_ms).values())
    written = {t.identifier: t.snapshot_id for t in tables.values()
               if t.written_window_start_ms == window_start_ms and t.failed is None}
    written.update(ddl.emptied_tables())  # dropped tables: their emptying commit is published too
    carried = {t.identifier: t.snapshot_id for t in tables.values()}
    publish(warehouse, written, carried, end_tag(window_end_ms), branch_name(window_start_ms), newest)
    manifests.commit(warehouse, source, since, [manifest])
    recarry_followers(warehouse, source, manifest)
    return manifest


class WindowWithheld(RuntimeError):
    """The window's audit failed: it was written on its branch but not published."""


_NOT_BUILT = "not built:"


def _write_tables(spark: SparkSession, changes: DataFrame, warehouse, source: str, window_start_ms: int,
                  previous: WindowManifest | None, keep_history: bool, merge_touched_keys: bool = True,
                  earlier: WindowManifest | None = None, window_end_ms: int | None = None,
                  global_watermark_ts: int | None = None, prefetched: PrefetchedWindow | None = None,
                  ) -> tuple[dict[str, TableEntry], DdlRecord, dict[str, FailedTable]]:
    """Write every table the window changed; carry the others over by reference.

    Returns the manifest's tables, its DDL record (applied, dropped tables with their
    emptying commit, renamed tables, unparsed) and the tables that failed to build, with the
    reason. A failed table keeps its previous entry, marked `failed`; a table failed by an
    earlier window is not built again on that stale entry: it stays failed until that window
    is materialized again."""
    prev_tables = previous.tables if previous is not None else {}
    states = previous_states(prev_tables, functools.partial(read_entry, spark, warehouse, source))
    stale = {(f.database, f.table): f.reason if f.reason.startswith(_NOT_BUILT)
             else f"{_NOT_BUILT} an earlier window failed to build it ({f.reason})"
             for f in (previous.failed_tables if previous is not None else {}).values()}
    result = apply_window(spark, changes, states, keep_history=keep_history,
                          touched_keys_only=merge_touched_keys,
                          failed=stale, prefetched=prefetched)
    try:
        # The history (the versions that ended) and the changed tables are independent small
        # jobs, submitted together (see concurrent_jobs); all are written before the manifest
        # commits the window.
        changed = [name for name, state in result.tables.items() if state.changed and name not in result.failed]
        if changed:
            snapshot_table(spark, warehouse, source, *changed[0]).ensure_namespace(spark)
        # Renames are catalog operations, made before the writes (which continue on the new names).
        moves = move_tables(spark, warehouse, source, result, prev_tables)
        # The entry each write continues: a renamed table's previous one; none when the name's
        # Iceberg table was renamed away (a new table is created under it).
        bases = {name: moves.bases[name] if name in moves.bases
                 else None if name in moves.moved_away else prev_tables.get(state_id(name)) for name in changed}
        _bind_small_windows(spark, warehouse, source, result, bases)
        tasks = [functools.partial(caught, functools.partial(
                     _write_table, spark, warehouse, source, window_start_ms, name, result.tables[name], bases[name]))
                 for name in changed]
        tasks += [functools.partial(caught, functools.partial(empty_table, spark, warehouse, window_start_ms, e))
                  for e in moves.emptied]
        if keep_history:
            # a rerun of the window clears its history rows of tables that end no version now
            rerun = [tuple(n) for n in earlier.ddl.history_tables] if earlier is not None else []
            tasks.insert(0, functools.partial(write_window_history, spark, result, warehouse, source,
                                              window_start_ms, rerun))
        properties = window_summary(window_start_ms, window_end_ms, global_watermark_ts)
        with window_properties(spark, properties):
            outputs = run_concurrently(tasks)
        ended, history_tables, history_failed = outputs.pop(0) if keep_history else ({}, [], {})
        result.failed.update(history_failed)  # its history not written: the table keeps its previous entry
        written = dict(zip(changed, outputs[:len(changed)]))
        emptied = dict(zip([(e.database, e.table) for e in moves.emptied], outputs[len(changed):]))
        result.failed.update({n: str(out) for n, out in {**written, **emptied}.items()
                              if isinstance(out, TableFailed)})
        written = _with_uuids({n: w for n, w in written.items() if not isinstance(w, TableFailed)}, bases, warehouse)
        tables: dict[str, TableEntry] = {}
        for name, state in result.tables.items():
            tid = state_id(name)
            if name in result.failed:
                if tid in prev_tables:
                    tables[tid] = replace(prev_tables[tid].carried(), failed=result.failed[name])
            elif state.changed:
                tables[tid] = written[name]
            else:
                tables[tid] = prev_tables[tid].carried()
    finally:
        result.release()
    dropped = {}
    for n, d in result.dropped.items():
        if n in result.tables:
            continue
        commit = emptied.get(n)
        if commit is not None and not isinstance(commit, TableFailed):
            d = {**d, **commit}
        dropped[state_id(n)] = d
    ddl = DdlRecord(
        applied=len(result.barriers),
        dropped_tables=dropped,
        renamed_tables=moves.renamed,
        unparsed=result.unparsed_ddl,
        history_versions_ended=ended,
        history_tables=[list(n) for n in history_tables],  # names of the history tables it wrote rows to
    )
    failed = {state_id(n): FailedTable(n[0], n[1], reason) for n, reason in sorted(result.failed.items())}
    return tables, ddl, failed


def window_summary(window_start_ms: int, window_end_ms: int | None, global_watermark_ts: int | None) -> dict:
    """The snapshot summary properties of every commit of the window: its partition key, its
    end (ms and TSO) and the global watermark that completed it, when known."""
    properties = {WINDOW_PROPERTY: str(window_start_ms)}
    if window_end_ms is not None:
        properties[WINDOW_END_PROPERTY] = str(window_end_ms)
        properties[WINDOW_END_TSO_PROPERTY] = str(ms_to_tso(window_end_ms))
    if global_watermark_ts is not None:
        properties[WATERMARK_PROPERTY] = str(global_watermark_ts)
    return properties


def _with_uuids(written: dict[Name, TableEntry], bases: dict[Name, TableEntry | None],
                warehouse) -> dict[Name, TableEntry]:
    """Each written entry with its Iceberg table UUID (`resolve_identifier` finds the table by it
    after a rename): the entry it continues knows it, when that names the same table; else the
    catalog (a table's first write, or entries from before UUIDs were recorded)."""
    known = {}
    for name, entry in written.items():
        base = bases.get(name)
        if base is not None and base.identifier == entry.identifier and base.table_uuid is not None:
            known[name] = base.table_uuid
    missing = {entry.identifier for name, entry in written.items() if name not in known}
    uuids = table_uuids(load_pyiceberg_catalog(warehouse), missing) if missing else {}
    return {name: replace(entry, table_uuid=known[name] if name in known else uuids.get(entry.identifier))
            for name, entry in written.items()}


def _bind_small_windows(spark: SparkSession, warehouse, source: str, result, bases: dict[Name, TableEntry | None]
                        ) -> None:
    """Each small window (snapshot/small_window.py) bound to its table and the snapshot it
    merges into, when that can be merged in Arrow; a new table's (`TableState.onto_empty`) to
    the table, created here. Before the writes start, so that the table's snapshot and history
    writes both know whether it applies. One table after another: side by side, a CI run's
    replay (`e629a12`) held the local SQLite catalog's lock past its minute's timeout. The
    causes found since (connections finalized in other threads, readers shut out in SQLite's
    rollback journal: `warehouse.ensure_wal`) may make it safe again; not tried since."""
    for name, entry in bases.items():
        if result.tables[name].small is not None:
            _bind_small_window(spark, warehouse, source, name, result.tables[name], entry)


def _bind_small_window(spark: SparkSession, warehouse, source: str, name: Name, state: TableState,
                       entry: TableEntry | None) -> None:
    table = snapshot_table(spark, warehouse, source, *name)
    base = None if state.onto_empty else _base_snapshot(table, entry)
    columns = [*state.schema.columns, COMMIT_TS_COLUMN]
    key = state.schema.primary_key
    found = None
    try:
        if state.onto_empty:
            _ensure_table(spark, table, state.frame.schema, key)
            found = table.arrow_new(key, columns)
        elif base is not None:
            found = table.arrow_base(base, key, columns)
    except Exception:  # noqa: BLE001 - unbound, the table takes Spark's plans (their errors are its own)
        log.warning("%s: its window is not applied in Arrow", state_id(name), exc_info=True)
    if found is not None:
        state.small.bind(found, base)
    else:
        state.small.unbound()


def _ensure_table(spark: SparkSession, table, schema, key: list[str]) -> None:
    """The snapshot table exists, with `schema` as its current one, ordered by `key`."""
    table.ensure(spark, schema)
    table.evolve(spark, schema, key)


def _present_rows(spark: SparkSession, source: DataFrame, schema) -> DataFrame:
    """A small MERGE source's rows (`MERGE_PRESENT` set), collected by one action, so that
    what it observes is counted once (a sorted write would run its plan twice)."""
    collected = source.toArrow()
    rows = collected.filter(pc.is_valid(collected[MERGE_PRESENT])).drop_columns([MERGE_PRESENT])
    return spark.createDataFrame(rows, schema=schema)


def _base_snapshot(table, entry: TableEntry | None) -> int | None:
    """The snapshot a window's write of `table` continues: the previous entry's, when it names
    this Iceberg table (None: a new table, or one renamed away)."""
    return entry.snapshot_id if entry is not None and entry.identifier == table.identifier else None


def _write_table(spark: SparkSession, warehouse, source: str, window_start_ms: int, name: Name,
                 state: TableState, previous_entry: TableEntry | None) -> TableEntry:
    """One changed table's snapshot (on the window's branch) and its manifest entry."""
    with naming_table(state_id(name), "writing its snapshot"):
        return _commit_table(spark, warehouse, source, window_start_ms, name, state, previous_entry)


def _commit_table(spark: SparkSession, warehouse, source: str, window_start_ms: int, name: Name,
                  state: TableState, previous_entry: TableEntry | None) -> TableEntry:
    frame = state.frame if state.frame is not None else spark.createDataFrame([], state.schema.spark_schema())
    # A source onto no previous snapshot is the whole table: written whole when not in Arrow.
    partial = state.merge_source is not None and not state.onto_empty
    if partial and previous_entry is None:  # the frame holds the touched keys only: never write it as the table
        raise RuntimeError(f"{state_id(name)}: only some keys were rebuilt, but there is no previous snapshot "
                           "to merge them into")
    table = snapshot_table(spark, warehouse, source, *name)
    key = state.schema.primary_key
    base = _base_snapshot(table, previous_entry)
    applied = state.small.applied() if state.merge_source is not None and state.small is not None else None
    if applied is not None:  # applied in Arrow (small_window): one commit by pyiceberg
        # No `ensure`/`evolve`: the table and its schema are the base snapshot's (`arrow_base`),
        # or were made so before the writes (`_bind_small_windows`, a new table).
        snapshot_id = table.commit_merged(spark, branch_name(window_start_ms), base, applied.base, applied.source, key)
        state.small.table_written()
        state.settle(applied.counts)
    else:
        if state.onto_empty:  # its counts are observed on the source: collected once (no second run)
            frame = _present_rows(spark, state.merge_source, frame.schema)
        _ensure_table(spark, table, frame.schema, key)
        snapshot_id = table.write_window(spark, branch_name(window_start_ms), base,
                                         state.merge_source if partial else frame, key, merge=partial,
                                         inserts_only=state.inserts_only if partial else None,
                                         expected_rows=state.schema.events if partial else None)
        state.settle()  # the counts observed on the MERGE source, known now that it was written
    return TableEntry(
        database=name[0], table=name[1], identifier=table.identifier, snapshot_id=snapshot_id,
        rows=table.total_records(spark, snapshot_id),
        previous_rows=state.previous_rows,
        inserted_keys=state.inserted_keys, deleted_keys=state.deleted_keys,
        removed_by_ddl=state.removed_by_ddl, moved_in=state.moved_in,
        conversion_failures=state.conversion_failures,
        written_window_start_ms=window_start_ms,
        schema=state.schema.to_json(), spark_schema=frame.schema.json(),
        schema_changes=state.schema_changes,
        # One MERGE source row per key, merged into a previous snapshot whose keys were unique
        # (its window passed the check): no key twice, by construction. A table written whole
        # is not known: the check scans it.
        duplicate_keys=0 if state.duplicate_source_keys == 0 else None,
    )
