"""Snapshot windows: every source table is an Iceberg table of the warehouse's catalog
(`<source>.snapshots__<db>__<table>`, common/iceberg_tables.py), and each window has a manifest,
a row of the Iceberg table `<source>.snapshot_windows` (snapshot/manifests.py): the commit
point.

A window writes the tables it changed on a branch cut from the snapshot the previous window
ended on (a table whose rows alone changed is a MERGE of the keys it touched, one commit);
then every table of the window is tagged with the window's end (`end-<UTC end>`) and, in
the newest window, `main` moves to it (`iceberg_tables.publish`); last, its manifest row is
committed, conditioned on the windows table as the run found it when it started (two runs of
one window: the later fails, `manifests.ManifestConflict`). The manifest records each
table's Iceberg identifier and snapshot id and the window's counts; a table without changes
keeps its previous entry (same snapshot), tagged again. Any engine reads a window's state
with `VERSION AS OF 'end-…'`.

The warehouse is an opaque location (a folder or `s3://…`): it is only handed to the catalog
helpers, never made into a path here.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.errors import AnalysisException, IllegalArgumentException
from pyspark.sql import DataFrame, SparkSession, types as T

from cdc_assets.snapshot import manifests as snapshot_windows
from cdc_assets.common.concurrent_jobs import run_concurrently
from cdc_assets.snapshot.history import write_window_history
from cdc_assets.common.warehouse import as_warehouse, identifier_parts, load_pyiceberg_catalog, use_catalog
from cdc_assets.common.iceberg_tables import (
    WATERMARK_PROPERTY, WINDOW_END_PROPERTY, WINDOW_END_TSO_PROPERTY, WINDOW_PROPERTY, IcebergTable, branch_name,
    end_tag, load_table, publish, resolve_identifier, table_name, table_uuids, tag_snapshots, window_properties,
)
from cdc_assets.snapshot.manifests import CARRIED_FROM, ManifestConflict, OldFormatWarehouse  # noqa: F401
from cdc_assets.snapshot.table_errors import TableFailed, caught, naming_table
from cdc_assets.snapshot.timeline import TableState, apply_window, previous_states, state_id
from cdc_assets.common.tso import ms_to_tso

SNAPSHOTS_LAYER = "snapshots"


def read_manifest(warehouse, source: str, window_start_ms: int) -> dict | None:
    """The committed manifest of one window (None: not committed)."""
    return snapshot_windows.read_window(warehouse, source, window_start_ms)


def read_manifests(warehouse, source: str) -> dict[int, dict]:
    """Every committed window's manifest, by window start, in one scan."""
    return snapshot_windows.read_windows(warehouse, source)


def list_manifests(warehouse, source: str) -> list[int]:
    """The starts of the committed windows, ascending."""
    return snapshot_windows.list_windows(warehouse, source)


def snapshot_table(spark: SparkSession | None, warehouse, source: str, database: str, table: str) -> IcebergTable:
    """The Iceberg table of one source table (`spark` None: no Spark catalog name needed).

    Its location, used when it is created, is a folder of its own
    (`<warehouse>/<source>/snapshots/<db>.<table>-<random>`, joined as text): a table renamed
    away keeps its files under the old name's folder, and a table created later under that
    name must not share it (orphan-file removal of one would delete the other's files)."""
    catalog = use_catalog(spark, warehouse) if spark is not None else ""
    folder = f"{state_id((database, table))}-{uuid.uuid4().hex[:8]}"
    return IcebergTable(catalog, source, table_name(SNAPSHOTS_LAYER, database, table),
                        as_warehouse(warehouse).snapshot_location(source, folder))


def table_at(spark: SparkSession, warehouse, identifier: str) -> IcebergTable:
    """The Iceberg table `<namespace>.<name>` of the store (reads, emptying commits)."""
    namespace, name = identifier_parts(identifier)
    return IcebergTable(use_catalog(spark, warehouse), namespace, name, "")


def entry_identifier(warehouse, entry: dict) -> str:
    """The identifier a manifest entry's table has now: the entry's own, unless a later
    RENAME TABLE renamed the Iceberg table (`iceberg_tables.resolve_identifier`)."""
    return resolve_identifier(load_pyiceberg_catalog(warehouse), entry["identifier"],
                              entry.get("table_uuid"), entry["snapshot_id"])


def read_entry(spark: SparkSession, warehouse, source: str, entry: dict) -> DataFrame:
    """A manifest entry's rows: its table at its snapshot, in the recorded Spark types. A table
    renamed since (no table under the entry's identifier, or one without the snapshot) is
    found by its UUID."""
    schema = T.StructType.fromJson(json.loads(entry["spark_schema"]))
    try:
        return table_at(spark, warehouse, entry["identifier"]).read(spark, entry["snapshot_id"], schema)
    except (AnalysisException, IllegalArgumentException):
        identifier = entry_identifier(warehouse, entry)
        if identifier == entry["identifier"]:
            raise
    return table_at(spark, warehouse, identifier).read(spark, entry["snapshot_id"], schema)


def read_entry_arrow(warehouse, source: str, entry: dict):
    """A manifest entry's rows as an Arrow table, read by pyiceberg (no Spark), in the Arrow
    types of the recorded Spark types (Iceberg keeps a smallint as an int)."""
    from pyiceberg.exceptions import NoSuchTableError
    from pyspark.sql.pandas.types import to_arrow_schema

    catalog = load_pyiceberg_catalog(warehouse)
    try:
        table = load_table(catalog, entry["identifier"])
    except NoSuchTableError:
        table = None
    if table is None or table.metadata.snapshot_by_id(entry["snapshot_id"]) is None:  # renamed since
        table = load_table(catalog, resolve_identifier(catalog, entry["identifier"], entry.get("table_uuid"),
                                                       entry["snapshot_id"]))
    schema = to_arrow_schema(T.StructType.fromJson(json.loads(entry["spark_schema"])))
    data = table.scan(snapshot_id=entry["snapshot_id"]).to_arrow()
    return data.select(schema.names).cast(schema)


def require_built(manifest: dict) -> dict:
    """The manifest, unless a table of it failed to build (its state there is stale): reading
    it then is an error that names the tables, never a silently old table."""
    failed = manifest.get("failed_tables") or {}
    if failed:
        names = "; ".join(f"{f['database']}.{f['table']}: {f['reason']}" for f in failed.values())
        raise ValueError(f"window {manifest['window_start_ms']} has tables that failed to build ({names}); "
                         "materialize it (and the windows after it) again")
    return manifest


def write_window_snapshot(
    spark: SparkSession,
    changes: DataFrame,
    warehouse,
    source: str,
    window_start_ms: int,
    window_end_ms: int,
    previous: dict | None,
    keep_history: bool = False,
    merge_touched_keys: bool = True,
    audit: Callable[[dict], str | None] | None = None,
    global_watermark_ts: int | None = None,
) -> dict:
    """Build and publish window [start, end) on `previous` (its manifest; None: the first).
    `keep_history`: also write the versions that ended in it (snapshot/history).
    `merge_touched_keys=False` rewrites every changed table whole (the benchmarks' peer).

    Write-audit-publish: the tables are written on the window's branch, then `audit` sees
    the manifest to be; a reason it returns withholds the window (`WindowWithheld`): no
    tag, `main` unchanged, no manifest, the branch `window-<start ms>` left for inspection.
    Another run that committed this window since this one started: `ManifestConflict`,
    raised before anything is published."""
    since = snapshot_windows.begin(warehouse, source)
    earlier = read_manifest(warehouse, source, window_start_ms)  # this window's last commit, if any
    tables, ddl, failed = _write_tables(spark, changes, warehouse, source, window_start_ms, previous, keep_history,
                                        merge_touched_keys, earlier, window_end_ms, global_watermark_ts)
    manifest = {"window_start_ms": window_start_ms, "window_end_ms": window_end_ms, "tables": tables,
                "ddl": ddl, "failed_tables": failed, "tag": end_tag(window_end_ms)}
    reason = audit(manifest) if audit is not None else None
    if reason is not None:
        raise WindowWithheld(f"window {window_start_ms} was not published: {reason}; its tables are on "
                             f"the Iceberg branch {branch_name(window_start_ms)}")
    snapshot_windows.check_unchanged(warehouse, source, since, [window_start_ms])
    # main follows the newest window with data (quiet windows after it carry its snapshots)
    newest = all(snapshot_windows.carried_after(warehouse, source, window_start_ms).values())
    written = {t["identifier"]: t["snapshot_id"] for t in tables.values()
               if t["written_window_start_ms"] == window_start_ms and "failed" not in t}
    written.update(emptied_tables(ddl))  # dropped tables: their emptying commit is published too
    carried = {t["identifier"]: t["snapshot_id"] for t in tables.values()}
    publish(warehouse, written, carried, end_tag(window_end_ms), branch_name(window_start_ms), newest)
    snapshot_windows.commit(warehouse, source, since, [manifest])
    _recarry_followers(warehouse, source, manifest)
    return manifest


class WindowWithheld(RuntimeError):
    """The window's audit failed: it was written on its branch but not published."""


def _recarry_followers(warehouse, source: str, manifest: dict) -> None:
    """Quiet windows carried forward from an earlier run of this window point at its old state
    (a table it failed to build, say): carry them again from this one."""
    later = snapshot_windows.carried_after(warehouse, source, manifest["window_start_ms"])
    followers, start = [], manifest["window_end_ms"]
    while later.get(start):
        followers.append(start)
        start += manifest["window_end_ms"] - manifest["window_start_ms"]
    if followers:
        carry_forward_windows(warehouse, source, followers, manifest["window_end_ms"] - manifest["window_start_ms"],
                              manifest)


_NOT_BUILT = "not built:"


def carried_entry(entry: dict) -> dict:
    """A table the window did not change: the previous entry (same snapshot), no changes counted."""
    return {**entry, "previous_rows": entry["rows"], "inserted_keys": 0, "deleted_keys": 0,
            "removed_by_ddl": 0, "moved_in": 0, "conversion_failures": 0, "schema_changes": []}


QUIET_DDL = {"applied": 0, "dropped_tables": {}, "renamed_tables": {}, "unparsed": [], "history_versions_ended": {},
             "history_tables": []}


def carry_forward_window(warehouse, source: str, window_start_ms: int, window_end_ms: int, previous: dict) -> dict:
    return carry_forward_windows(warehouse, source, [window_start_ms], window_end_ms - window_start_ms, previous)


def carry_forward_windows(warehouse, source: str, starts: list[int], window_ms: int, previous: dict) -> dict:
    """Commit consecutive windows in which nothing landed, after `previous`: every table keeps
    the previous window's snapshot and gets each window's end tag (one catalog commit per
    table for the whole run of windows, no Spark), then the windows' manifest rows, which refer
    to the window with data they carry, in one commit. A quiet hour costs a tag per table and
    a small row, so a dump whose commits lie years apart is not thousands of runs.
    `carried_forward` tells readers that the window has no change table (point in time needs
    none). Returns the last manifest."""
    expected = [previous.get("window_end_ms", -1) + i * window_ms for i in range(len(starts))]
    if starts != expected:
        raise RuntimeError(f"windows {starts[:3]}…: the previous manifest ends at "
                           f"{previous.get('window_end_ms')}, not where they start, or they are not consecutive")
    since = snapshot_windows.begin(warehouse, source)
    tables = {tid: carried_entry(e) for tid, e in previous["tables"].items()}
    # Tags first: a crash before the manifests leaves tags of windows the next tick carries again.
    tag_snapshots(warehouse, {t["identifier"]: t["snapshot_id"] for t in tables.values()},
                  [end_tag(s + window_ms) for s in starts])
    root = previous[CARRIED_FROM] if previous.get("carried_forward") else previous["window_start_ms"]
    manifests = [{"window_start_ms": start, "window_end_ms": start + window_ms,
                  "tables": tables, "ddl": QUIET_DDL, "carried_forward": True, CARRIED_FROM: root,
                  "tag": end_tag(start + window_ms),
                  # a table that failed to build stays failed until its window is materialized again
                  "failed_tables": previous.get("failed_tables", {})}
                 for start in starts]
    snapshot_windows.commit(warehouse, source, since, manifests)
    return manifests[-1]


def _write_tables(spark: SparkSession, changes: DataFrame, warehouse, source: str, window_start_ms: int,
                  previous: dict | None, keep_history: bool, merge_touched_keys: bool = True,
                  earlier: dict | None = None, window_end_ms: int | None = None,
                  global_watermark_ts: int | None = None) -> tuple[dict[str, dict], dict, dict[str, dict]]:
    """Write every table the window changed; carry the others over by reference.

    Returns the manifest's tables, its DDL record (applied, dropped tables with their
    emptying commit, renamed tables, unparsed) and the tables that failed to build, with the
    reason. A failed table keeps its previous entry, marked `failed`; a table failed by an
    earlier window is not built again on that stale entry: it stays failed until that window
    is materialized again."""
    prev_tables = (previous or {}).get("tables", {})
    states = previous_states(prev_tables, functools.partial(read_entry, spark, warehouse, source))
    stale = {(f["database"], f["table"]): f["reason"] if f["reason"].startswith(_NOT_BUILT)
             else f"{_NOT_BUILT} an earlier window failed to build it ({f['reason']})"
             for f in (previous or {}).get("failed_tables", {}).values()}
    result = apply_window(spark, changes, states, keep_history=keep_history,
                          touched_keys_only=merge_touched_keys,
                          failed=stale)
    try:
        # The history (the versions that ended) and the changed tables are independent small
        # jobs, submitted together (see concurrent_jobs); all are written before the manifest
        # commits the window.
        changed = [name for name, state in result.tables.items() if state.changed and name not in result.failed]
        if changed:
            snapshot_table(spark, warehouse, source, *changed[0]).ensure_namespace(spark)
        # Renames are catalog operations, made before the writes (which continue on the new names).
        moves = _move_tables(spark, warehouse, source, result, prev_tables)
        # The entry each write continues: a renamed table's previous one; none when the name's
        # Iceberg table was renamed away (a new table is created under it).
        bases = {name: moves.bases[name] if name in moves.bases
                 else None if name in moves.moved_away else prev_tables.get(state_id(name)) for name in changed}
        tasks = [functools.partial(caught, functools.partial(
                     _write_table, spark, warehouse, source, window_start_ms, name, result.tables[name], bases[name]))
                 for name in changed]
        tasks += [functools.partial(caught, functools.partial(_empty_table, spark, warehouse, window_start_ms, e))
                  for e in moves.emptied]
        if keep_history:
            # a rerun of the window clears its history rows of tables that end no version now
            rerun = [tuple(n) for n in (earlier or {}).get("ddl", {}).get("history_tables", [])]
            tasks.insert(0, functools.partial(write_window_history, spark, result, warehouse, source,
                                              window_start_ms, rerun))
        properties = window_summary(window_start_ms, window_end_ms, global_watermark_ts)
        with window_properties(spark, properties):
            outputs = run_concurrently(tasks)
        ended, history_tables = outputs.pop(0) if keep_history else ({}, [])
        written = dict(zip(changed, outputs[:len(changed)]))
        emptied = dict(zip([(e["database"], e["table"]) for e in moves.emptied], outputs[len(changed):]))
        result.failed.update({n: str(out) for n, out in {**written, **emptied}.items()
                              if isinstance(out, TableFailed)})
        _record_uuids({n: w for n, w in written.items() if not isinstance(w, TableFailed)}, bases, warehouse)
        tables: dict[str, dict] = {}
        for name, state in result.tables.items():
            tid = state_id(name)
            if name in result.failed:
                if tid in prev_tables:
                    tables[tid] = {**carried_entry(prev_tables[tid]), "failed": result.failed[name]}
            elif state.changed:
                tables[tid] = written[name]
            else:
                tables[tid] = carried_entry(prev_tables[tid])
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
    ddl = {
        "applied": len(result.barriers),
        "dropped_tables": dropped,
        "renamed_tables": moves.renamed,
        "unparsed": result.unparsed_ddl,
        "history_versions_ended": ended,
        "history_tables": [list(n) for n in history_tables],  # names of the history tables it wrote rows to
    }
    failed = {state_id(n): {"database": n[0], "table": n[1], "reason": reason}
              for n, reason in sorted(result.failed.items())}
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


def emptied_tables(ddl: dict) -> dict[str, int]:
    """The dropped tables' emptying commits (`identifier -> snapshot id`), published with the window."""
    return {d["identifier"]: d["snapshot_id"] for d in ddl.get("dropped_tables", {}).values() if "snapshot_id" in d}


@dataclass
class _Moves:
    """What the window's DDL does to the Iceberg tables, beyond writing the changed ones."""

    bases: dict = field(default_factory=dict)  # table -> the entry its write continues (renamed: the new identifier)
    emptied: list = field(default_factory=list)  # previous entries whose table gets an emptying commit
    renamed: dict = field(default_factory=dict)  # the manifest's record: new table id -> from, identifiers
    moved_away: set = field(default_factory=set)  # tables whose Iceberg table another name took over


def _move_tables(spark: SparkSession, warehouse, source: str, result, prev_tables: dict[str, dict]) -> _Moves:
    """RENAME TABLE as Iceberg renames, and the tables that end empty.

    A table whose rows came from another table of the previous snapshot (`TableState.origin`)
    takes over that table's Iceberg table: renamed to its identifier, the history, snapshots
    and tags follow, and the window's write continues from the previous snapshot. Unless the
    new identifier is taken by a table that stays (created earlier, then dropped, so still in
    the catalog for time travel): then the rows are written into that table, as for a new
    table, and the old one ends empty. Swaps (a->tmp, b->a, tmp->b) rename through temporary
    names. A previous table whose Iceberg table neither continues nor is written (dropped,
    renamed to no Iceberg table) gets an emptying commit."""
    moves = _Moves()
    prev = {(e["database"], e["table"]): e for e in prev_tables.values()}
    built = {n: s for n, s in result.tables.items() if n not in result.failed}
    wanted = {n: s.origin for n, s in built.items()
              if s.origin is not None and s.origin != n and s.origin in prev and s.origin not in result.failed}
    if wanted:
        catalog = load_pyiceberg_catalog(warehouse)
        current = {n: resolve_identifier(catalog, prev[o]["identifier"], prev[o].get("table_uuid"),
                                         prev[o]["snapshot_id"]) for n, o in wanted.items()}
        target = {n: snapshot_table(None, warehouse, source, *n).identifier for n in wanted}
        # A target held by a table that does not move: that rename falls back; repeat, since a
        # table that stays put holds its own identifier for the others.
        moving = {n for n in wanted if current[n] != target[n]}
        while True:
            leaving = {current[n] for n in moving}
            blocked = {n for n in moving if target[n] not in leaving and catalog.table_exists(_parts(target[n]))}
            if not blocked:
                break
            moving -= blocked
        staying = {n for n in wanted if current[n] == target[n]}
        renames = [(current[n], target[n]) for n in moving]
        if len(renames) > 1:  # through temporary names: a target may be another's source
            temporary = [(old, f"{old}__renaming_{uuid.uuid4().hex[:8]}") for old, _ in renames]
            for old, temp in temporary:
                table_at(spark, warehouse, old).rename(spark, identifier_parts(temp)[1])
            renames = [(temp, new) for (_, temp), (_, new) in zip(temporary, renames)]
        for old, new in renames:
            table_at(spark, warehouse, old).rename(spark, identifier_parts(new)[1])
        for n in moving | staying:
            o = wanted[n]
            moves.bases[n] = {**prev[o], "identifier": target[n]}
            moves.renamed[state_id(n)] = {"from": state_id(o), "identifier": target[n],
                                          "previous_identifier": prev[o]["identifier"]}
    continued = {wanted[n] for n in moves.bases}
    moves.moved_away = {wanted[n] for n in moves.bases if moves.bases[n]["identifier"] != prev[wanted[n]]["identifier"]}
    moves.emptied = [e for name, e in prev.items()
                     if name not in built and name not in continued and name not in result.failed]
    return moves


def _parts(identifier: str) -> tuple[str, str]:
    namespace, name = identifier_parts(identifier)
    return namespace, name


def _empty_table(spark: SparkSession, warehouse, window_start_ms: int, entry: dict) -> dict:
    """A dropped table's emptying commit on the window's branch: what the manifest's DDL
    record says of it (the table stays in the catalog; its earlier tags keep the rows)."""
    with naming_table(state_id((entry["database"], entry["table"])), "emptying its dropped table"):
        table = table_at(spark, warehouse, entry["identifier"])
        snapshot_id = table.empty_window(spark, branch_name(window_start_ms), entry["snapshot_id"])
        return {"identifier": table.identifier, "snapshot_id": snapshot_id}


def _record_uuids(written: dict, bases: dict, warehouse) -> None:
    """Each written entry's Iceberg table UUID (`resolve_identifier` finds the table by it after
    a rename): the entry it continues knows it, when that names the same table; else the
    catalog (a table's first write, or entries from before UUIDs were recorded)."""
    missing = set()
    for name, entry in written.items():
        base = bases.get(name)
        if base is not None and base["identifier"] == entry["identifier"] and "table_uuid" in base:
            entry["table_uuid"] = base["table_uuid"]
        else:
            missing.add(entry["identifier"])
    if missing:
        uuids = table_uuids(load_pyiceberg_catalog(warehouse), missing)
        for entry in written.values():
            entry.setdefault("table_uuid", uuids.get(entry["identifier"]))


def _write_table(spark: SparkSession, warehouse, source: str, window_start_ms: int, name: tuple[str, str],
                 state: TableState, previous_entry: dict | None) -> dict:
    """One changed table's snapshot (on the window's branch) and its manifest entry."""
    with naming_table(state_id(name), "writing its snapshot"):
        return _commit_table(spark, warehouse, source, window_start_ms, name, state, previous_entry)


def _commit_table(spark: SparkSession, warehouse, source: str, window_start_ms: int, name: tuple[str, str],
                  state: TableState, previous_entry: dict | None) -> dict:
    frame = state.frame if state.frame is not None else spark.createDataFrame([], state.schema.spark_schema())
    partial = state.touched_keys is not None
    if partial and previous_entry is None:  # the frame holds the touched keys only: never write it as the table
        raise RuntimeError(f"{state_id(name)}: only some keys were rebuilt, but there is no previous snapshot "
                           "to merge them into")
    table = snapshot_table(spark, warehouse, source, *name)
    key = state.schema.primary_key
    table.ensure(spark, frame.schema)
    table.evolve(spark, frame.schema, key)
    base = previous_entry["snapshot_id"] if previous_entry and previous_entry.get("identifier") == table.identifier \
        else None
    snapshot_id = table.write_window(spark, branch_name(window_start_ms), base, frame, key,
                                     keys=state.touched_keys if partial else None)
    return {
        "database": name[0], "table": name[1], "identifier": table.identifier, "snapshot_id": snapshot_id,
        "rows": table.total_records(spark, snapshot_id),
        "previous_rows": state.previous_rows,
        "inserted_keys": state.inserted_keys, "deleted_keys": state.deleted_keys,
        "removed_by_ddl": state.removed_by_ddl, "moved_in": state.moved_in,
        "conversion_failures": state.conversion_failures,
        "written_window_start_ms": window_start_ms,
        "schema": state.schema.to_json(), "spark_schema": frame.schema.json(),
        "schema_changes": state.schema_changes,
    }
