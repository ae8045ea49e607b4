"""Every engine must give the same answer: row count + an order-independent checksum per
table, computed by DuckDB over each output cast to the declared types, so a benchmark of a
wrong answer cannot go unnoticed."""

from __future__ import annotations

from pathlib import Path

from benchmarks.dump import Table, dump_tables
from cdc_assets.common.names import table_id
from cdc_assets.snapshot.entry_tables import read_entry_arrow
from cdc_assets.snapshot.store import list_manifests, read_manifest

Fingerprint = dict[str, tuple[int, int]]  # table -> (rows, checksum)


def _fingerprint_relation(con, t: Table, relation: str) -> tuple[int, int]:
    text = ", ".join(
        f"coalesce(CAST(CAST(\"{name}\" AS {decl}) AS VARCHAR), '\\N')" for name, _, decl, _, _ in t.columns
    )
    rows, checksum = con.execute(
        f"SELECT count(*), coalesce(sum(hash(concat_ws('|', {text}))), 0) FROM {relation}"
    ).fetchone()
    return int(rows), int(checksum)


def _fingerprint(con, t: Table, source: str) -> tuple[int, int]:
    return _fingerprint_relation(con, t, f"read_parquet('{source}')")


def fingerprint_files(folder: Path, tables: tuple[Table, ...]) -> Fingerprint:
    """`folder/<db>.<table>.parquet` (a file or a Spark folder) per table."""
    import duckdb

    con = duckdb.connect()
    out = {}
    for t in tables:
        p = folder / f"{t.name}.parquet"
        out[t.name] = _fingerprint(con, t, str(p / "*.parquet") if p.is_dir() else str(p))
    return out


def fingerprint_snapshots(warehouse, source: str, tables: tuple[Table, ...]) -> Fingerprint:
    """The newest manifest of a source of a cdc_assets warehouse:
    each table at its snapshot, read by pyiceberg into Arrow, which DuckDB scans in place."""
    import duckdb

    manifest = read_manifest(warehouse, source, list_manifests(warehouse, source)[-1])
    con = duckdb.connect()
    out = {}
    for t in tables:
        entry = manifest.tables.get(table_id(t.database, t.table))
        if entry is None:
            out[t.name] = (0, 0)
            continue
        con.register("snapshot_rows", read_entry_arrow(warehouse, source, entry))
        out[t.name] = _fingerprint_relation(con, t, "snapshot_rows")
        con.unregister("snapshot_rows")
    return out


def expected(dump_root: Path) -> Fingerprint:
    return fingerprint_files(dump_root / "expected", dump_tables(dump_root))
