"""The snapshot windows' commit point: the Iceberg table `<source>.snapshot_windows` of the
warehouse's catalog, one row per committed window.

    window_start_ms  long     the window (the row's key)
    window_end_ms    long
    carried_forward  boolean  nothing landed in it: its tables are an earlier window's
    manifest         string   the window's manifest (JSON: `WindowManifest.to_json`)

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

The manifest document and its parts are typed records (`WindowManifest`, `TableEntry`,
`DdlRecord`, `FailedTable`) whose fields are the document's keys. A key this version does not
know (a document written by another version) is kept in the record's `other_keys` and written
back as it was: reading and committing a window again never loses what the document held.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field, fields, replace

import pyarrow as pa

TABLE = "snapshot_windows"
START, END, CARRIED, MANIFEST = "window_start_ms", "window_end_ms", "carried_forward", "manifest"
CARRIED_FROM = "carried_from_window_start_ms"
# Snapshot summary properties of a commit: the first and last window it wrote.
FIRST_PROPERTY, LAST_PROPERTY = "cdc.first-window-start-ms", "cdc.last-window-start-ms"
_RETRIES = 10
# pyiceberg would retry a failed commit on the new state by itself: the conflict check comes first.
TABLE_PROPERTIES = {"format-version": "2", "commit.retry.num-retries": "0"}


class _JsonRecord:
    """A record whose fields are its JSON document's keys. The keys a record does not have are
    kept in its `other_keys` and written back: a document another version wrote survives a
    read and a commit. A field of `_OMITTED_WHEN_NONE` that is None has no key."""

    _OMITTED_WHEN_NONE: tuple[str, ...] = ()
    _NOT_STORED: tuple[str, ...] = ()  # fields of the run that wrote the record, never in its document

    @classmethod
    def from_json(cls, doc: dict, **converted):
        """`converted`: the fields given as records instead of the document's values."""
        names = {f.name for f in fields(cls)} - {"other_keys", *cls._NOT_STORED}
        known = {k: v for k, v in doc.items() if k in names}
        return cls(**{**known, **converted}, other_keys={k: v for k, v in doc.items() if k not in names})

    def to_json(self, **converted) -> dict:
        """`converted`: the fields given as documents instead of their values."""
        doc = dict(self.other_keys)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in self._NOT_STORED:
                continue
            if f.name != "other_keys" and not (f.name in self._OMITTED_WHEN_NONE and value is None):
                doc[f.name] = converted.get(f.name, value)
        return doc


@dataclass(frozen=True)
class TableEntry(_JsonRecord):
    """One table in a window's manifest: its Iceberg table and snapshot, and the window's counts
    (`previous_rows + inserted_keys - deleted_keys - removed_by_ddl + moved_in = rows`, the
    reconciliation check)."""

    database: str
    table: str
    identifier: str  # `<namespace>.<name>` of its Iceberg table when written (a later RENAME may move it)
    snapshot_id: int
    rows: int
    written_window_start_ms: int  # the window that wrote this snapshot (an unchanged table keeps it)
    schema: dict  # `TableSchema.to_json()`
    spark_schema: str  # the Spark schema's JSON: the types its rows are read back in
    previous_rows: int = 0  # its rows at the previous window's end
    inserted_keys: int = 0  # keys the window's changes inserted
    deleted_keys: int = 0  # keys they deleted
    removed_by_ddl: int = 0  # rows TRUNCATE, DROP or RENAME TABLE removed
    moved_in: int = 0  # rows RENAME TABLE moved in from another table
    conversion_failures: int = 0  # values that did not convert to their column's type
    schema_changes: list[dict] = field(default_factory=list)  # DDL (or new image columns): commit_ts, sql, columns
    table_uuid: str | None = None  # finds the table after a rename; None: not known (catalog lookup)
    failed: str | None = None  # why the window could not build it: the entry is the previous one
    other_keys: dict = field(default_factory=dict)
    # Keys twice in the snapshot, when the write that made it tells (a MERGE of one source row
    # per key: 0); None: not known, the primary-key check scans the table. Not stored.
    duplicate_keys: int | None = field(default=None, compare=False)

    _OMITTED_WHEN_NONE = ("table_uuid", "failed")
    _NOT_STORED = ("duplicate_keys",)

    def carried(self) -> TableEntry:
        """A table the window did not change: this entry (same snapshot), no changes counted."""
        return replace(self, previous_rows=self.rows, inserted_keys=0, deleted_keys=0, removed_by_ddl=0, moved_in=0,
                       conversion_failures=0, schema_changes=[], duplicate_keys=None)


@dataclass(frozen=True)
class FailedTable(_JsonRecord):
    """A table the window could not build, and why (it keeps its previous entry, marked failed)."""

    database: str
    table: str
    reason: str
    other_keys: dict = field(default_factory=dict)


@dataclass(frozen=True)
class DdlRecord(_JsonRecord):
    """What the window's DDL did. The per-table records stay JSON documents, as the UI shows them:
    `dropped_tables` (table id -> commit_ts, by, sql, rows, and the emptying commit's identifier
    and snapshot_id), `renamed_tables` (new table id -> from, identifier, previous_identifier),
    `unparsed` (statements not applied: commit_ts, table, sql, error)."""

    applied: int = 0
    dropped_tables: dict[str, dict] = field(default_factory=dict)
    renamed_tables: dict[str, dict] = field(default_factory=dict)
    unparsed: list[dict] = field(default_factory=list)
    history_versions_ended: dict[str, int] = field(default_factory=dict)
    history_tables: list[list[str]] = field(default_factory=list)  # [database, table] of the history tables written
    other_keys: dict = field(default_factory=dict)

    def emptied_tables(self) -> dict[str, int]:
        """The dropped tables' emptying commits (`identifier -> snapshot id`), published with the window."""
        return {d["identifier"]: d["snapshot_id"] for d in self.dropped_tables.values() if "snapshot_id" in d}


@dataclass(frozen=True)
class WindowManifest(_JsonRecord):
    """A window's manifest. A carried-forward window (nothing landed in it) stores no tables: it
    names the window with data it carries (`carried_from_window_start_ms`), and a read resolves
    its tables from that one (`TableEntry.carried`)."""

    window_start_ms: int
    window_end_ms: int
    tag: str  # every table's Iceberg tag of the window end (`end-<UTC end>`)
    tables: dict[str, TableEntry] = field(default_factory=dict)  # by table id (`names.table_id`)
    ddl: DdlRecord = field(default_factory=DdlRecord)
    failed_tables: dict[str, FailedTable] = field(default_factory=dict)
    carried_forward: bool = False
    carried_from_window_start_ms: int | None = None
    other_keys: dict = field(default_factory=dict)

    _OMITTED_WHEN_NONE = (CARRIED_FROM,)

    @classmethod
    def from_json(cls, doc: dict) -> WindowManifest:
        return super().from_json(
            doc, tables={t: TableEntry.from_json(e) for t, e in doc.get("tables", {}).items()},
            ddl=DdlRecord.from_json(doc.get("ddl", {})),
            failed_tables={t: FailedTable.from_json(f) for t, f in doc.get("failed_tables", {}).items()})

    def to_json(self) -> dict:
        """The document its row stores: a carried window's without its tables (it refers to the
        window it carries)."""
        doc = super().to_json(tables={t: e.to_json() for t, e in self.tables.items()}, ddl=self.ddl.to_json(),
                              failed_tables={t: f.to_json() for t, f in self.failed_tables.items()})
        if self.carried_forward:
            del doc["tables"], doc["failed_tables"]
        else:
            del doc[CARRIED]
        return doc

    @property
    def window_ms(self) -> int:
        return self.window_end_ms - self.window_start_ms

    @property
    def data_window_start_ms(self) -> int:
        """The window with data whose tables this one holds: itself, or the one it carries."""
        return self.carried_from_window_start_ms if self.carried_forward else self.window_start_ms

    def require_built(self) -> WindowManifest:
        """The manifest, unless a table of it failed to build (its state there is stale): reading
        it then is an error that names the tables, never a silently old table."""
        if self.failed_tables:
            names = "; ".join(f"{f.database}.{f.table}: {f.reason}" for f in self.failed_tables.values())
            raise ValueError(f"window {self.window_start_ms} has tables that failed to build ({names}); "
                             "materialize it (and the windows after it) again")
        return self


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


def _document(row: dict) -> WindowManifest:
    return WindowManifest.from_json(json.loads(row[MANIFEST]))


def _resolve(manifest: WindowManifest, data_windows: dict[int, WindowManifest]) -> WindowManifest:
    """A carried-forward window's manifest with the tables of the window it carries."""
    if not manifest.carried_forward:
        return manifest
    base = data_windows.get(manifest.carried_from_window_start_ms)
    if base is None:
        raise RuntimeError(f"window {manifest.window_start_ms} carries window {manifest.carried_from_window_start_ms} "
                           "forward, which has no committed manifest: materialize that window again")
    return replace(manifest, tables={tid: e.carried() for tid, e in base.tables.items()},
                   failed_tables=base.failed_tables)


def read_window(warehouse, source: str, window_start_ms: int) -> WindowManifest | None:
    """One window's manifest (a scan filtered on its start: the files' bounds prune the rest)."""
    from pyiceberg.expressions import EqualTo

    table = _load(warehouse, source)
    rows = _rows(table, EqualTo(START, window_start_ms))
    if not rows:
        return None
    manifest = _document(rows[-1])
    if manifest.carried_forward:
        base = _rows(table, EqualTo(START, manifest.carried_from_window_start_ms))
        return _resolve(manifest, {manifest.carried_from_window_start_ms: _document(base[-1])} if base else {})
    return manifest


def read_windows(warehouse, source: str, after: int | None = None) -> dict[int, WindowManifest]:
    """Every window's manifest (those starting after `after`, when given), in one scan."""
    manifests = {m.window_start_ms: m for m in map(_document, _rows(_load(warehouse, source)))}
    # all rows read: a carried window refers to an earlier one
    return {w: _resolve(m, manifests) for w, m in sorted(manifests.items()) if after is None or w > after}


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


def commit(warehouse, source: str, since, manifests: list[WindowManifest]) -> None:
    """Commit the windows' manifests (rows replaced by window start) in one catalog commit,
    conditioned on `since` (see the module docstring)."""
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.expressions import EqualTo, In

    starts = [m.window_start_ms for m in manifests]
    data = pa.Table.from_pylist(
        [{START: m.window_start_ms, END: m.window_end_ms, CARRIED: m.carried_forward,
          MANIFEST: json.dumps(m.to_json(), sort_keys=True)} for m in manifests], schema=_ARROW)
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

