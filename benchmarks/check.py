"""Every engine must give the same answer: row count + an order-independent checksum per
table, computed by DuckDB over each output cast to the declared types, so a benchmark of a
wrong answer cannot go unnoticed."""

from __future__ import annotations

from pathlib import Path

from benchmarks.dump import TABLES, Table
from cdc_assets.lib.snapshot_store import list_manifests, read_manifest, table_path
from cdc_assets.lib.storage import table_id

Fingerprint = dict[str, tuple[int, int]]  # table -> (rows, checksum)


def _fingerprint(con, t: Table, source: str) -> tuple[int, int]:
    text = ", ".join(
        f"coalesce(CAST(CAST(\"{name}\" AS {decl}) AS VARCHAR), '\\N')" for name, _, decl, _, _ in t.columns
    )
    rows, checksum = con.execute(
        f"SELECT count(*), coalesce(sum(hash(concat_ws('|', {text}))), 0) FROM read_parquet('{source}')"
    ).fetchone()
    return int(rows), int(checksum)


def fingerprint_files(folder: Path) -> Fingerprint:
    """`folder/<db>.<table>.parquet` (a file or a Spark folder) per table."""
    import duckdb

    con = duckdb.connect()
    out = {}
    for t in TABLES:
        p = folder / f"{t.name}.parquet"
        out[t.name] = _fingerprint(con, t, str(p / "*.parquet") if p.is_dir() else str(p))
    return out


def fingerprint_snapshots(snapshots: Path) -> Fingerprint:
    """The newest manifest of a cdc_assets snapshot folder."""
    import duckdb

    manifest = read_manifest(snapshots, list_manifests(snapshots)[-1])
    con = duckdb.connect()
    out = {}
    for t in TABLES:
        entry = manifest["tables"].get(table_id(t.database, t.table))
        files = list(table_path(snapshots, entry).glob("*.parquet")) if entry else []
        out[t.name] = _fingerprint(con, t, str(table_path(snapshots, entry) / "*.parquet")) if files else (0, 0)
    return out


def expected(dump_root: Path) -> Fingerprint:
    return fingerprint_files(dump_root / "expected")
