"""Export a window's snapshot as one Parquet file per table: OUT/<database>.<table>.parquet."""

from __future__ import annotations

from dataclasses import dataclass
import uuid
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from cdc_assets.lib.snapshot_store import list_manifests, read_manifest, table_path
from cdc_assets.lib.tso import tso_to_ms


@dataclass(frozen=True)
class ExportedTable:
    database: str
    table: str
    rows: int
    columns: list[str]
    path: Path


def choose_window(snapshots: Path, as_of: str) -> int:
    """`latest`, or a TSO: the last window that ended at or before that instant."""
    windows = list_manifests(snapshots)
    if not windows:
        raise FileNotFoundError(f"no snapshot has been materialized under {snapshots}")
    if as_of == "latest":
        return windows[-1]
    try:
        at_ms = tso_to_ms(int(as_of))
    except ValueError:
        raise ValueError(f"--as-of takes 'latest' or a TiDB TSO, got {as_of!r}") from None
    ended = [w for w in windows if read_manifest(snapshots, w)["window_end_ms"] <= at_ms]
    if not ended:
        raise ValueError(f"no materialized window ends at or before TSO {as_of}")
    return ended[-1]


def export_snapshot(snapshots: Path, out: Path, as_of: str = "latest") -> list[ExportedTable]:
    window = choose_window(snapshots, as_of)
    manifest = read_manifest(snapshots, window)
    out.mkdir(parents=True, exist_ok=True)
    exported = []
    for tid, entry in sorted(manifest["tables"].items()):
        table = ds.dataset(str(table_path(snapshots, entry)), format="parquet").to_table()
        target = out / f"{tid}.parquet"
        tmp = target.with_name(f".tmp-{target.name}-{uuid.uuid4().hex[:8]}")
        pq.write_table(table, tmp)
        tmp.replace(target)
        exported.append(ExportedTable(entry["database"], entry["table"], table.num_rows, table.column_names, target))
    return exported
