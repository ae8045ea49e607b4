"""The snapshot windows' commit point: the Iceberg table `<source>.snapshot_windows` of the
warehouse's catalog, one row per committed window.

    window_start_ms  long     the window (the row's key)
    window_end_ms    long
    carried_forward  boolean  nothing landed in it: its tables are an earlier window's
    manifest         string   the window's manifest (JSON; snapshot_store)

A window is committed by one pyiceberg overwrite of its row (delete + append, one catalog
commit); a run of quiet windows is one overwrite of all their rows. A carried-forward row
stores a reference to the window with data whose tables it carries (`carried_from_...`),
not a copy of them, so a run of thousands of quiet windows stays small; reads resolve it.

Optimistic concurrency instead of a lock (a lock needs a POSIX file system; the warehouse
may be S3): a writer takes the table's `main` snapshot when it starts (`begin`), and its
commit is conditioned on it (pyiceberg asserts the ref's snapshot). When another commit got
in between, the commits after the start are looked at: one that wrote any of the same windows
(every commit names its windows in its summary) means two runs of one window, and the later
one fails (`ManifestConflict`) -- before it publishes anything (`check_unchanged`) when it can
see it then; a commit of other windows (or a compaction) is no conflict: the commit is retried
on the new state.
"""

from __future__ import annotations

import json
import warnings

import pyarrow as pa

TABLE = "snapshot_windows"
START, END, CARRIED, MANIFEST = "window_start_ms", "window_end_ms", "carried_forward", "manifest"
CARRIED_FROM = "carried_from_window_start_ms"
# Snapshot summary properties of a commit: the first and last window it wrote.
FIRST_PROPERTY, LAST_PROPERTY = "cdc.first-window-start-ms", "cdc.last-window-start-ms"
_RETRIES = 10
# pyiceberg would retry a failed commit on the new state by itself: the conflict check comes first.
TABLE_PROPERTIES = {"format-version": "2", "commit.retry.num-retries": "0"}


class ManifestConflict(RuntimeError):
    """Another run committed the same window since this one started."""


class OldFormatWarehouse(RuntimeError):
    """The source's snapshot tables were committed by JSON manifest files (an older cdc_assets)."""


def _schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import BooleanType, LongType, NestedField, StringType

    return Schema(NestedField(1, START, LongType(), required=False),
                  NestedField(2, END, LongType(), required=False),
                  NestedField(3, CARRIED, BooleanType(), required=False),
                  NestedField(4, MANIFEST, StringType(), required=False))


_ARROW = pa.schema([(START, pa.int64()), (END, pa.int64()), (CARRIED, pa.bool_()), (MANIFEST, pa.large_string())])


def _catalog(warehouse):
    """Opened per call, never cached: a warehouse folder may be removed and made again (the
    tests, the benchmarks), and a cached connection would keep the removed catalog file."""
    from cdc_assets.common.warehouse import load_pyiceberg_catalog

    return load_pyiceberg_catalog(warehouse)


def _load(warehouse, source: str):
    """The table, or None when the source has no committed window."""
    from pyiceberg.exceptions import NoSuchTableError

    catalog = _catalog(warehouse)
    try:
        return catalog.load_table((source, TABLE))
    except NoSuchTableError:
        _refuse_old_format(catalog, source)
        return None


def _refuse_old_format(catalog, source: str) -> None:
    """Snapshot tables but no windows table: the JSON-manifest store wrote them (its manifests
    were files on the warehouse, which an object store cannot commit safely)."""
    from pyiceberg.exceptions import NoSuchNamespaceError

    try:
        names = [t[-1] for t in catalog.list_tables((source,))]
    except NoSuchNamespaceError:
        return
    if any(n.startswith("snapshots__") for n in names):
        raise OldFormatWarehouse(
            f"source {source!r} has snapshot tables but no {source}.{TABLE} table: its windows were committed by "
            "JSON manifest files (an older cdc_assets); replay the dump into a new warehouse (or drop this "
            "source's tables and materialize again)")


def _ensure(warehouse, source: str):
    from pyiceberg.exceptions import TableAlreadyExistsError

    table = _load(warehouse, source)
    if table is not None:
        return table
    catalog = _catalog(warehouse)
    catalog.create_namespace_if_not_exists(source)
    try:
        return catalog.create_table((source, TABLE), _schema(), properties=TABLE_PROPERTIES)
    except TableAlreadyExistsError:  # another writer created it first
        return catalog.load_table((source, TABLE))


def _rows(table, row_filter=None, columns: tuple[str, ...] = (START, END, CARRIED, MANIFEST)) -> list[dict]:
    if table is None or table.current_snapshot() is None:
        return []
    scan = table.scan(row_filter=row_filter, selected_fields=columns) if row_filter is not None \
        else table.scan(selected_fields=columns)
    return scan.to_arrow().to_pylist()


def _document(row: dict) -> dict:
    return json.loads(row[MANIFEST])


def _resolve(doc: dict, data_windows: dict[int, dict]) -> dict:
    """A carried-forward window's manifest with the tables of the window it carries."""
    if not doc.get("carried_forward"):
        return doc
    from cdc_assets.snapshot.store import carried_entry

    base = data_windows.get(doc[CARRIED_FROM])
    if base is None:
        raise RuntimeError(f"window {doc[START]} carries window {doc[CARRIED_FROM]} forward, which has no "
                           "committed manifest: materialize that window again")
    return {**doc, "tables": {tid: carried_entry(e) for tid, e in base["tables"].items()},
            "failed_tables": base.get("failed_tables", {})}


def read_window(warehouse, source: str, window_start_ms: int) -> dict | None:
    """One window's manifest (a scan filtered on its start: the files' bounds prune the rest)."""
    from pyiceberg.expressions import EqualTo

    table = _load(warehouse, source)
    rows = _rows(table, EqualTo(START, window_start_ms))
    if not rows:
        return None
    doc = _document(rows[-1])
    if doc.get("carried_forward"):
        base = _rows(table, EqualTo(START, doc[CARRIED_FROM]))
        return _resolve(doc, {doc[CARRIED_FROM]: _document(base[-1])} if base else {})
    return doc


def read_windows(warehouse, source: str, after: int | None = None) -> dict[int, dict]:
    """Every window's manifest (those starting after `after`, when given), in one scan."""
    docs = {d[START]: d for d in map(_document, _rows(_load(warehouse, source)))}
    # all rows read: a carried window refers to an earlier one
    return {w: _resolve(d, docs) for w, d in sorted(docs.items()) if after is None or w > after}


def list_windows(warehouse, source: str) -> list[int]:
    return sorted(r[START] for r in _rows(_load(warehouse, source), columns=(START,)))


def carried_after(warehouse, source: str, window_start_ms: int) -> dict[int, bool]:
    """Per window after `window_start_ms`: whether it was carried forward (two small columns)."""
    from pyiceberg.expressions import GreaterThan

    rows = _rows(_load(warehouse, source), GreaterThan(START, window_start_ms), columns=(START, CARRIED))
    return {r[START]: bool(r[CARRIED]) for r in rows}


def begin(warehouse, source: str):
    """The table as a writer starting now sees it: its commit will be conditioned on it."""
    return _ensure(warehouse, source)


def _conflicts(table, since, starts: list[int]) -> list[int]:
    """The windows of `starts` that a commit after the snapshot `since` (on main) wrote."""
    hit: list[int] = []
    stop = since.current_snapshot().snapshot_id if since.current_snapshot() is not None else None
    snapshot = table.current_snapshot()
    while snapshot is not None and snapshot.snapshot_id != stop:
        props = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        if FIRST_PROPERTY in props:
            first, last = int(props[FIRST_PROPERTY]), int(props[LAST_PROPERTY])
            hit += [w for w in starts if first <= w <= last]
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    return sorted(set(hit))


def check_unchanged(warehouse, source: str, since, starts: list[int]) -> None:
    """ManifestConflict when another run committed one of `starts` after `since` (`begin`):
    called before publishing, so the loser of two runs of one window leaves `main` alone."""
    current = _load(warehouse, source)
    clash = _conflicts(current, since, starts)
    if clash:
        raise ManifestConflict(_conflict_message(source, clash))


def _conflict_message(source: str, clash: list[int]) -> str:
    return (f"window {clash[0]} of source {source!r} was committed by another run while this one was "
            f"building it{f' (and {len(clash) - 1} more)' if len(clash) > 1 else ''}: this run committed "
            "nothing; materialize the window again if its content should be rebuilt")


def commit(warehouse, source: str, since, manifests: list[dict]) -> None:
    """Commit the windows' manifests (rows replaced by window start) in one catalog commit,
    conditioned on `since` (see the module docstring)."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.expressions import EqualTo, In

    starts = [m[START] for m in manifests]
    data = pa.Table.from_pylist(
        [{START: m[START], END: m[END], CARRIED: bool(m.get("carried_forward")),
          MANIFEST: json.dumps(_stored(m), sort_keys=True)} for m in manifests], schema=_ARROW)
    where = EqualTo(START, starts[0]) if len(starts) == 1 else In(START, starts)
    props = {FIRST_PROPERTY: str(min(starts)), LAST_PROPERTY: str(max(starts))}
    table = since
    for _ in range(_RETRIES):
        clash = _conflicts(table, since, starts)
        if clash:
            raise ManifestConflict(_conflict_message(source, clash))
        try:
            with warnings.catch_warnings():  # a window's first commit replaces no row: not news
                warnings.filterwarnings("ignore", "Delete operation did not match any records")
                table.overwrite(data, overwrite_filter=where, snapshot_properties=props)
            return
        except CommitFailedException:  # another commit got in: conflict, or retry on it
            table = _load(warehouse, source)
    raise ManifestConflict(f"windows {starts[0]}..{starts[-1]} of source {source!r}: the commit kept failing "
                           f"after {_RETRIES} attempts (other writers kept committing)")


def _stored(manifest: dict) -> dict:
    """What the row keeps: a carried window refers to its window with data, not a copy."""
    if manifest.get("carried_forward"):
        return {k: v for k, v in manifest.items() if k not in ("tables", "failed_tables")}
    return manifest
