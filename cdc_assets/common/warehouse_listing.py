"""The warehouse's tables as any Iceberg engine sees them (`cdc-assets tables`): the catalog
and how pyiceberg opens it, and per table its source, real database and table names, layer,
Iceberg identifier and window-end tags. pyiceberg reads the catalog and each table's metadata
file: no Spark, no data file read, nothing written.

    {"catalog": {"name": "cdc", "properties": {...}},
     "tables": [{"source", "database", "table", "layer", "identifier", "tags": ["end-…", …]}, …]}

`pyiceberg.catalog.load_catalog(name, **properties)` opens the catalog (S3 credentials from the
reader's environment; a property that may hold a secret, such as a REST token, is left out);
a table at the end of
a window is `catalog.load_table(identifier).scan(snapshot_id=table.snapshot_by_name(tag)
.snapshot_id)`, or `VERSION AS OF '<tag>'` in SQL engines.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path

from cdc_assets.common.iceberg_tables import parse_table_name
from cdc_assets.common.warehouse import (
    CATALOG, CATALOG_FILE, Warehouse, as_warehouse, printable_properties, pyiceberg_properties, sqlite_file,
    table_identifier,
)

END_TAG = re.compile(r"end-\d{8}T\d{4}Z")  # iceberg_tables.end_tag


class TablesError(Exception):
    """The warehouse cannot be listed: no catalog there, or no such source in it."""


# The layers stored as one table per source, partitioned by window (no database or table). The
# raw layer stores no messages, only its record of each window's read (`window_reads`).
WINDOWED_LAYERS = ("window_reads", "quarantine", "change_table")
# The snapshot windows' commit point: one table per source, a row per window (snapshot/manifests).
SNAPSHOT_WINDOWS = "snapshot_windows"
SOURCE_TABLES = (*WINDOWED_LAYERS, SNAPSHOT_WINDOWS)


@dataclass(frozen=True)
class WarehouseTable:
    source: str
    database: str | None  # None for a windowed layer's table (one per source)
    table: str | None
    layer: str
    identifier: str
    tags: tuple[str, ...]

    def as_json(self) -> dict:
        return {**asdict(self), "tags": list(self.tags)}


def catalog_json(warehouse: Warehouse | Path | str) -> dict:
    """What `pyiceberg.catalog.load_catalog(name, **properties)` takes to open the catalog,
    without secrets (`warehouse.printable_properties`)."""
    return {"name": CATALOG, "properties": printable_properties(warehouse)}


def _open_catalog(warehouse: Warehouse):
    """The catalog, opened read-only in effect (pyiceberg would otherwise create its tables
    in a file that lacks them); a TablesError when `warehouse` has none."""
    from pyiceberg.catalog import load_catalog
    from sqlalchemy.exc import SQLAlchemyError

    path = sqlite_file(warehouse)
    if path is not None and not path.is_file():
        where = warehouse.location if path.parent == Path(warehouse.location) else f"{warehouse.location} ({path})"
        raise TablesError(f"{where} has no Iceberg catalog ({CATALOG_FILE} not found): "
                          "not a warehouse, or no window materialized there yet")
    extra = {"init_catalog_tables": "false"} if warehouse.catalog_type == "jdbc" else {}
    try:
        catalog = load_catalog(CATALOG, **pyiceberg_properties(warehouse), **extra)
        catalog.list_namespaces()
    except SQLAlchemyError as exc:
        raise TablesError(f"{path or warehouse.catalog_uri} is not an Iceberg SQL catalog: {type(exc).__name__}: "
                          f"{str(exc).splitlines()[0]}") from None
    return catalog


def _end_tags(table) -> tuple[str, ...]:
    from pyiceberg.table.refs import SnapshotRefType

    return tuple(sorted(name for name, ref in table.metadata.refs.items()
                        if ref.snapshot_ref_type == SnapshotRefType.TAG and END_TAG.fullmatch(name)))


def warehouse_tables(warehouse: Warehouse | Path | str, source: str | None = None) -> list[WarehouseTable]:
    """Every table of the warehouse's layers (of `source` only, when given), sorted by source,
    layer, database, table: the per-table layers (`<layer>__<db>__<table>`: snapshots, history)
    and the tables of a whole source (`<source>.<layer>`: the windowed layers and
    `snapshot_windows`; database and table null). Any other table is not ours and is left out."""
    warehouse = as_warehouse(warehouse)
    catalog = _open_catalog(warehouse)
    sources = sorted(ns[0] for ns in catalog.list_namespaces() if len(ns) == 1)
    if source is not None:
        if source not in sources:
            raise TablesError(f"no source {source!r} in the catalog of {warehouse.location} (sources there: "
                              f"{', '.join(sources) or 'none'})")
        sources = [source]
    out = []
    for namespace in sources:
        for identifier in catalog.list_tables((namespace,)):
            if identifier[-1] in SOURCE_TABLES:
                layer, database, table = identifier[-1], None, None
            else:
                try:
                    layer, database, table = parse_table_name(identifier[-1])
                except ValueError:
                    continue
            out.append(WarehouseTable(source=namespace, database=database, table=table, layer=layer,
                                      identifier=table_identifier(namespace, identifier[-1]),
                                      tags=_end_tags(catalog.load_table(identifier))))
    return sorted(out, key=lambda t: (t.source, t.layer, t.database or "", t.table or ""))


def tables_json(warehouse: Warehouse | Path | str, source: str | None = None) -> dict:
    """The document `cdc-assets tables --json` prints."""
    return {"catalog": catalog_json(warehouse),
            "tables": [t.as_json() for t in warehouse_tables(warehouse, source)]}


def _shown(text: str | None) -> str:
    """A name as one printable cell (an empty or unprintable name quoted, as JSON does)."""
    import json

    if text is None:  # a windowed layer's table has no database or table
        return "-"
    return text if text and text.isprintable() else json.dumps(text)


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _grid(rows: list[list[str]]) -> list[str]:
    widths = [max(_width(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell + " " * (w - _width(cell)) for cell, w in zip(row, widths)).rstrip() for row in rows]


def render_text(document: dict) -> str:
    """`tables_json`'s document as a readable table."""
    catalog = document["catalog"]
    arguments = ", ".join(f"{k}={v!r}" for k, v in catalog["properties"].items())
    lines = [f"catalog {catalog['name']!r}: pyiceberg.catalog.load_catalog({catalog['name']!r}, {arguments})"]
    tables = document["tables"]
    if not tables:
        return "\n".join(lines + ["no tables"])
    rows = [["SOURCE", "LAYER", "DATABASE", "TABLE", "TAGS", "FIRST TAG", "LAST TAG", "IDENTIFIER"]]
    for t in tables:
        tags = t["tags"]
        rows.append([_shown(t["source"]), t["layer"], _shown(t["database"]), _shown(t["table"]), str(len(tags)),
                     tags[0] if tags else "-", tags[-1] if tags else "-", _shown(t["identifier"])])
    return "\n".join(lines + [""] + _grid(rows))
