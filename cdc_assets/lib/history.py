"""SCD type 2 history: every version of every row, with the commit_ts range it was valid in.

A window's history holds the versions that *ended* in that window:
- a version from before the window ends at the first change to its key in the window;
- a version that starts in the window ends at the next change to its key in the window;
- TRUNCATE, DROP TABLE, DROP DATABASE and RENAME TABLE end every row of the table.
Versions still open at the window end are the window's snapshot rows (valid from
`_cdc_commit_ts`). So history(as of window N) = the history folders of windows <= N + snapshot N,
and the cost of a window grows with its changes only.

Columns: the table's columns as they were when the version ended (a RENAME COLUMN before the end
shows the new name), then `_cdc_valid_from` and `_cdc_valid_to` (commit TSOs; valid_from <= ts <
valid_to) and `_cdc_end_op` (UPDATE, DELETE, INSERT, TRUNCATE, DROP_TABLE, DROP_DATABASE,
RENAME_TABLE). A version that lived zero time (two changes in one transaction) is left out.

Layout: <history>/window_start_ms=<ms>/<db>.<table>/part=<n>/ (one part per schema the window's
versions ended in), written atomically per window.
"""

from __future__ import annotations

import functools
from pathlib import Path

from pyspark.sql import DataFrame, functions as F

from cdc_assets.lib.concurrent_jobs import run_concurrently
from cdc_assets.lib.snapshot import COMMIT_TS_COLUMN, key_column, value_column
from cdc_assets.lib.storage import (
    exclusive, parquet_rows, remove_stale_temps, replace_dir, table_id, temp_sibling, window_dir,
)
from cdc_assets.lib.table_errors import naming_table
from cdc_assets.lib.table_timeline import Closure, Flush, WindowResult

VALID_FROM, VALID_TO, END_OP = "_cdc_valid_from", "_cdc_valid_to", "_cdc_end_op"


def write_window_history(result: WindowResult, history_root: Path, window_start_ms: int) -> dict[str, int]:
    """Write the versions that ended in the window; returns the count per table."""
    parts: dict[str, list[DataFrame]] = {}
    for f in result.flushes:
        with naming_table(table_id(*f.name), "building its history"):
            parts.setdefault(table_id(*f.name), []).append(_ended_by_rows(f))
    for c in result.closures:
        with naming_table(table_id(*c.name), "building its history"):
            parts.setdefault(table_id(*c.name), []).append(_ended_by_ddl(c))
    final = window_dir(history_root, window_start_ms)
    counts: dict[str, int] = {}
    with exclusive(final):
        remove_stale_temps(final)
        tmp = temp_sibling(final)
        tmp.mkdir(parents=True)
        writes = [(tid, frame, tmp / tid / f"part={i}")
                  for tid, frames in parts.items() for i, frame in enumerate(_by_schema(frames))]
        # Independent small writes: submitted concurrently (see concurrent_jobs).
        written = run_concurrently([functools.partial(_write_part, tid, frame, path) for tid, frame, path in writes])
        for (tid, _, _), rows in zip(writes, written):
            counts[tid] = counts.get(tid, 0) + rows
        replace_dir(tmp, final)
    return counts


def _write_part(tid: str, frame: DataFrame, path: Path) -> int:
    with naming_table(tid, "writing its history"):
        frame.write.parquet(str(path))
        return parquet_rows(path)


def _by_schema(frames: list[DataFrame]) -> list[DataFrame]:
    """Frames with the same columns and types unioned; one frame per distinct schema."""
    groups: dict[str, DataFrame] = {}
    for f in frames:
        key = f.schema.json()
        groups[key] = groups[key].unionByName(f) if key in groups else f
    return list(groups.values())


def _ended_by_ddl(c: Closure) -> DataFrame:
    return c.frame.select(*c.schema.columns, F.col(COMMIT_TS_COLUMN).alias(VALID_FROM),
                          F.lit(c.commit_ts).cast("long").alias(VALID_TO), F.lit(c.end_op).alias(END_OP))


def _ended_by_rows(f: Flush) -> DataFrame:
    """From the typed actions the snapshot was built from: each upsert ends at its key's next
    action, and a row from before the window at its key's first one."""
    schema = f.schema
    pk = schema.primary_key
    acts = f.actions.where("_cdc_key_ok")  # a table without a primary key has no versions
    values = [F.col(key_column(pk.index(c))).alias(c) if c in pk else F.col(value_column(i)).alias(c)
              for i, c in enumerate(schema.columns)]
    inside = acts.where((F.col("_cdc_kind") == "upsert") & (F.col("_cdc_next_ts") > F.col("commit_ts"))).select(
        *values, F.col("commit_ts").alias(VALID_FROM), F.col("_cdc_next_ts").alias(VALID_TO),
        F.col("_cdc_next_op").alias(END_OP))
    if f.before is None or not pk:
        return inside
    first = acts.where("_cdc_first").select(*[F.col(key_column(i)).alias(c) for i, c in enumerate(pk)],
                                            F.col("commit_ts").alias("_cdc_first_ts"),
                                            F.col("op").alias("_cdc_first_op"))
    ended = F.col("_cdc_first_ts") > F.col(COMMIT_TS_COLUMN)
    before = f.before.join(first, on=pk, how="inner").where(ended).select(
        *schema.columns, F.col(COMMIT_TS_COLUMN).alias(VALID_FROM), F.col("_cdc_first_ts").alias(VALID_TO),
        F.col("_cdc_first_op").alias(END_OP))
    return before.unionByName(inside)
