"""What a window's DDL does to the Iceberg tables beyond writing the changed ones: RENAME TABLE
as an Iceberg rename (the table's history, snapshots and tags follow its rows), and an emptying
commit for a table that ends (dropped, or renamed to no Iceberg table)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace

from pyspark.sql import SparkSession

from cdc_assets.common.iceberg_refs import resolve_identifier
from cdc_assets.common.iceberg_tables import branch_name
from cdc_assets.common.names import table_id
from cdc_assets.common.warehouse import identifier_parts, load_pyiceberg_catalog
from cdc_assets.snapshot.entry_tables import snapshot_table, table_at
from cdc_assets.snapshot.manifests import TableEntry
from cdc_assets.snapshot.table_errors import naming_table
from cdc_assets.snapshot.window_state import Name, WindowResult


@dataclass
class TableMoves:
    """What the window's DDL does to the Iceberg tables, beyond writing the changed ones."""

    bases: dict[Name, TableEntry] = field(default_factory=dict)  # table -> the entry its write continues (renamed: the new identifier)
    emptied: list[TableEntry] = field(default_factory=list)  # previous entries whose table gets an emptying commit
    renamed: dict[str, dict] = field(default_factory=dict)  # the manifest's record: new table id -> from, identifiers
    moved_away: set[Name] = field(default_factory=set)  # tables whose Iceberg table another name took over


def move_tables(spark: SparkSession, warehouse, source: str, result: WindowResult,
                prev_tables: dict[str, TableEntry]) -> TableMoves:
    """RENAME TABLE as Iceberg renames, and the tables that end empty.

    A table whose rows came from another table of the previous snapshot (`TableState.origin`)
    takes over that table's Iceberg table: renamed to its identifier, the history, snapshots
    and tags follow, and the window's write continues from the previous snapshot. Unless the
    new identifier is taken by a table that stays (created earlier, then dropped, so still in
    the catalog for time travel): then the rows are written into that table, as for a new
    table, and the old one ends empty. Swaps (a->tmp, b->a, tmp->b) rename through temporary
    names. A previous table whose Iceberg table neither continues nor is written (dropped,
    renamed to no Iceberg table) gets an emptying commit."""
    moves = TableMoves()
    prev = {(e.database, e.table): e for e in prev_tables.values()}
    built = {n: s for n, s in result.tables.items() if n not in result.failed}
    wanted = {n: s.origin for n, s in built.items()
              if s.origin is not None and s.origin != n and s.origin in prev and s.origin not in result.failed}
    if wanted:
        catalog = load_pyiceberg_catalog(warehouse)
        current = {n: resolve_identifier(catalog, prev[o].identifier, prev[o].table_uuid, prev[o].snapshot_id)
                   for n, o in wanted.items()}
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
            moves.bases[n] = replace(prev[o], identifier=target[n])
            moves.renamed[table_id(*n)] = {"from": table_id(*o), "identifier": target[n],
                                           "previous_identifier": prev[o].identifier}
    continued = {wanted[n] for n in moves.bases}
    moves.moved_away = {wanted[n] for n in moves.bases if moves.bases[n].identifier != prev[wanted[n]].identifier}
    moves.emptied = [e for name, e in prev.items()
                     if name not in built and name not in continued and name not in result.failed]
    return moves


def _parts(identifier: str) -> tuple[str, str]:
    namespace, name = identifier_parts(identifier)
    return namespace, name


def empty_table(spark: SparkSession, warehouse, window_start_ms: int, entry: TableEntry) -> dict:
    """A dropped table's emptying commit on the window's branch: what the manifest's DDL
    record says of it (the table stays in the catalog; its earlier tags keep the rows)."""
    with naming_table(table_id(entry.database, entry.table), "emptying its dropped table"):
        table = table_at(spark, warehouse, entry.identifier)
        snapshot_id = table.empty_window(spark, branch_name(window_start_ms), entry.snapshot_id)
        return {"identifier": table.identifier, "snapshot_id": snapshot_id}
