"""Compare materialized snapshots with a simulator's `truth.json` (demo and tests)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

from cdc_assets.common.mysql_types import BINARY_BASES, parse_mysql_type
from cdc_assets.common.names import table_id
from cdc_assets.snapshot.entry_tables import read_entry_arrow
from cdc_assets.snapshot.manifests import WindowManifest
from cdc_assets.snapshot.reconstruct import COMMIT_TS_COLUMN


def canonical(value, mysql_type: str):
    """A typed snapshot value or a truth string -> one comparable Python value."""
    if value is None:
        return None
    base = parse_mysql_type(mysql_type).base
    if base in BINARY_BASES:
        return base64.b64encode(value).decode() if isinstance(value, bytes) else value
    if base in ("decimal", "numeric"):
        return Decimal(str(value)).normalize()
    if base in ("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year", "bit"):
        return int(value)
    if base in ("float", "double", "real"):
        return float(value)
    if isinstance(value, dt.datetime):
        text = value.replace(tzinfo=None).isoformat(sep=" ")
        return text
    if isinstance(value, dt.date):
        return value.isoformat()
    if base in ("datetime", "timestamp") and isinstance(value, str):
        return dt.datetime.fromisoformat(value).isoformat(sep=" ")
    return value


def snapshot_rows(table, columns: list[str], types: dict[str, str]) -> list[tuple]:
    """`table`: a snapshot's rows (Arrow)."""
    rows = table.drop_columns([c for c in table.column_names if c == COMMIT_TS_COLUMN]).to_pylist()
    return sorted((tuple(canonical(r.get(c), types[c]) for c in columns) for r in rows), key=repr)


def truth_rows(rows: list[list], columns: list[str], types: dict[str, str]) -> list[tuple]:
    return sorted((tuple(canonical(v, types[c]) for v, c in zip(r, columns)) for r in rows), key=repr)


def compare_window(warehouse, source: str, manifest: WindowManifest, truth: dict, window_start_ms: int) -> dict[str, str]:
    """Per table: 'ok' or a short description of the difference."""
    window = next(w for w in truth["windows"] if w["start_ms"] == window_start_ms)
    out: dict[str, str] = {}
    for name, rows in window["tables"].items():
        meta = truth["tables"][name]
        db, tbl = name.split(".", 1)
        entry = manifest.tables.get(table_id(db, tbl))
        expected = truth_rows(rows, meta["columns"], meta["types"])
        if entry is None:
            out[name] = "ok" if not expected else f"missing table ({len(expected)} rows expected)"
            continue
        got = snapshot_rows(read_entry_arrow(warehouse, source, entry), meta["columns"], meta["types"])
        if got == expected:
            out[name] = "ok"
        else:
            missing = len(set(expected) - set(got))
            extra = len(set(got) - set(expected))
            out[name] = f"{len(got)} rows vs {len(expected)} expected ({missing} missing, {extra} unexpected)"
    return out


def load_truth(path: Path) -> dict:
    return json.loads(Path(path).read_text())
