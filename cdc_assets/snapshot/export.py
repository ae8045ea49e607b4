"""Export every table's state as one Parquet file per table: OUT/<database>.<table>.parquet.

The file name is the table's storage name (`names.table_id`: percent-encoded, and bounded
for long names); the real database and table names are in each file's Parquet metadata
(`REAL_NAME_KEYS`) and in the returned `ExportedTable`s.

`as_of` is `latest` (the newest window's snapshot), a TiDB TSO, or an ISO-8601 UTC time
(`snapshot/point_in_time`). An instant at a window end is copied from that window's snapshot without
Spark; any other instant replays part of the next window and needs a SparkSession (`spark`, a
function that returns one, is called only then).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from cdc_assets.common.names import table_id, temp_sibling
from cdc_assets.snapshot.entry_tables import read_entry_arrow
from cdc_assets.snapshot.point_in_time import parse_instant, plan, tables_as_of
from cdc_assets.snapshot.store import list_manifests, read_manifest

# Parquet key-value metadata of an exported file: its table's real names (UTF-8).
REAL_NAME_KEYS = (b"cdc_assets.database", b"cdc_assets.table")


@dataclass(frozen=True)
class ExportedTable:
    database: str
    table: str
    rows: int
    columns: list[str]
    path: Path


def export_snapshot(warehouse, source: str, out: Path, as_of: str = "latest",
                    spark: Callable[[], SparkSession] | None = None) -> list[ExportedTable]:
    windows = list_manifests(warehouse, source)
    if not windows:
        raise FileNotFoundError(f"no snapshot of source {source!r} has been materialized in {warehouse}")
    if as_of == "latest":
        return _export_window(warehouse, source, windows[-1], out)
    try:
        tso = parse_instant(as_of)
    except ValueError:
        raise ValueError(f"--as-of takes 'latest', a TiDB TSO or an ISO-8601 UTC time, got {as_of!r}") from None
    p = plan(warehouse, source, tso)
    if p.replay is None:
        return _export_window(warehouse, source, p.base, out) if p.base is not None else []
    if spark is None:
        raise ValueError(f"TSO {tso} is inside a window: exporting it needs a SparkSession")
    session = spark()
    exported = []
    with tempfile.TemporaryDirectory(prefix=".tmp-as-of-", dir=out.parent if out.parent.exists() else None) as tmp:
        for i, ((database, table), t) in enumerate(sorted(tables_as_of(session, warehouse, source, tso).items())):
            # Through Spark's own Parquet writer: the same file types as a window's snapshot.
            folder = Path(tmp) / str(i)
            t.frame.coalesce(1).write.parquet(str(folder))
            files = sorted(folder.glob("*.parquet"))
            data = (ds.dataset([str(f) for f in files], format="parquet").to_table() if files
                    else to_arrow_schema(t.frame.schema).empty_table())
            exported.append(_write(out, database, table, data))
    return exported


def _export_window(warehouse, source: str, window: int, out: Path) -> list[ExportedTable]:
    manifest = read_manifest(warehouse, source, window).require_built()
    return [
        _write(out, e.database, e.table, read_entry_arrow(warehouse, source, e))
        for _tid, e in sorted(manifest.tables.items())
    ]


def _write(out: Path, database: str, table: str, data) -> ExportedTable:
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{table_id(database, table)}.parquet"
    tmp = temp_sibling(target)
    names = dict(zip(REAL_NAME_KEYS, (database.encode(), table.encode())))
    pq.write_table(data.replace_schema_metadata({**(data.schema.metadata or {}), **names}), tmp)
    tmp.replace(target)
    return ExportedTable(database, table, data.num_rows, data.column_names, target)
