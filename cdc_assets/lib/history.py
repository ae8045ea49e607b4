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

from pyspark.sql import Column, DataFrame, Window, functions as F

from cdc_assets.lib.changelog_schema import DELETE, ROW, UPDATE
from cdc_assets.lib.concurrent_jobs import run_concurrently
from cdc_assets.lib.mysql_types import typed_value
from cdc_assets.lib.snapshot import COMMIT_TS_COLUMN, TableSchema
from cdc_assets.lib.storage import (
    exclusive, parquet_rows, remove_stale_temps, replace_dir, table_id, temp_sibling, window_dir,
)
from cdc_assets.lib.table_timeline import Closure, Flush, WindowResult

VALID_FROM, VALID_TO, END_OP = "_cdc_valid_from", "_cdc_valid_to", "_cdc_end_op"


def write_window_history(result: WindowResult, history_root: Path, window_start_ms: int) -> dict[str, int]:
    """Write the versions that ended in the window; returns the count per table."""
    parts: dict[str, list[DataFrame]] = {}
    for f in result.flushes:
        parts.setdefault(table_id(*f.name), []).append(_ended_by_rows(f))
    for c in result.closures:
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
        written = run_concurrently([functools.partial(_write_part, frame, path) for _, frame, path in writes])
        for (tid, _, _), rows in zip(writes, written):
            counts[tid] = counts.get(tid, 0) + rows
        replace_dir(tmp, final)
    return counts


def _write_part(frame: DataFrame, path: Path) -> int:
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
    schema = f.schema
    pk = schema.primary_key
    keys = [f"_cdc_k{i}" for i in range(len(pk))]
    acts = _all_actions(f.rows, schema, keys)
    by_key = Window.partitionBy(*keys).orderBy("commit_ts", F.asc_nulls_first("source_position"), "order",
                                               "kafka_partition", "kafka_offset", "event_index")
    acts = acts.withColumns({"_next_ts": F.lead("commit_ts").over(by_key), "_next_op": F.lead("op").over(by_key),
                             "_n": F.row_number().over(by_key)})
    values = [F.col(keys[pk.index(c)]).alias(c) if c in pk else F.col(f"_cdc_v_{i}").alias(c)
              for i, c in enumerate(schema.columns)]
    inside = acts.where((F.col("kind") == "upsert") & (F.col("_next_ts") > F.col("commit_ts"))).select(
        *values, F.col("commit_ts").alias(VALID_FROM), F.col("_next_ts").alias(VALID_TO),
        F.col("_next_op").alias(END_OP))
    if f.before is None or not pk:
        return inside
    first = acts.where("_n = 1").select(*[F.col(k).alias(c) for k, c in zip(keys, pk)],
                                        F.col("commit_ts").alias("_first_ts"), F.col("op").alias("_first_op"))
    before = f.before.join(first, on=pk, how="inner").where(F.col("_first_ts") > F.col(COMMIT_TS_COLUMN)).select(
        *schema.columns, F.col(COMMIT_TS_COLUMN).alias(VALID_FROM), F.col("_first_ts").alias(VALID_TO),
        F.col("_first_op").alias(END_OP))
    return before.unionByName(inside)


def _all_actions(rows: DataFrame, schema: TableSchema, keys: list[str]) -> DataFrame:
    """Every key action of the rows (a key-changing UPDATE is a delete of the old key, then an
    upsert of the new one), keys typed by name against the current primary key."""
    rows = rows.where(F.col("event_kind") == ROW)
    before_pk = F.transform("pk_names", lambda n: F.try_element_at(F.col("before"), n))
    act = lambda kind, key, order, values: F.struct(  # noqa: E731
        F.lit(kind).alias("kind"), key.alias("key"), F.lit(order).alias("order"), values.alias("values"))
    no_values = F.lit(None).cast("map<string,string>")
    acts = (F.when(F.col("op") == DELETE, F.array(act("delete", F.col("pk_values"), 0, no_values)))
            .when((F.col("op") == UPDATE) & F.col("before").isNotNull() & (before_pk != F.col("pk_values")),
                  F.array(act("delete", before_pk, 0, no_values), act("upsert", F.col("pk_values"), 1, F.col("after"))))
            .otherwise(F.array(act("upsert", F.col("pk_values"), 1, F.col("after")))))
    exploded = rows.select("pk_names", "op", "commit_ts", "source_position", "kafka_partition", "kafka_offset",
                           "event_index", F.explode(acts).alias("a")).select("*", "a.*").drop("a")

    def typed_key(c: str) -> Column:
        position = (F.array_position("pk_names", F.lit(c)) - 1).cast("int")
        return typed_value(F.get(F.col("key"), position), schema.spark_type_of(c))

    return exploded.select(
        "kind", "op", "order", "commit_ts", "source_position", "kafka_partition", "kafka_offset", "event_index",
        *[typed_key(c).alias(k) for c, k in zip(schema.primary_key, keys)],
        *[typed_value(F.try_element_at("values", F.lit(c)), schema.spark_type_of(c)).alias(f"_cdc_v_{i}")
          for i, c in enumerate(schema.columns)],
    ).where(_identified(keys))


def _identified(keys: list[str]) -> Column:
    """Actions whose key types against the current primary key (a table without one has no versions)."""
    ok = F.lit(bool(keys))
    for k in keys:
        ok = ok & F.col(k).isNotNull()
    return ok
