"""Every table's state at any instant: the snapshot of the last window that ended by then, plus
the next window's changes up to that instant, applied by the same code that builds snapshots.

Instants:
- a TSO `T`: every commit with commit_ts <= T (what a TiDB snapshot read at T sees);
- a UTC time `t`: every commit before t, i.e. the TSO `(t_ms << 18) - 1`. A window's end time
  therefore gives exactly that window's snapshot.

    from cdc_assets.snapshot.point_in_time import parse_instant, tables_as_of
    tables = tables_as_of(spark, warehouse, "my_source", parse_instant("2026-01-01T10:30:00Z"))
    tables[("shop", "items")].frame.show()
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession, functions as F

from cdc_assets.common.iceberg_tables import IcebergTable
from cdc_assets.common.window_commits import WindowTable, window_commit
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.common.warehouse import use_catalog
from cdc_assets.snapshot.entry_tables import read_entry
from cdc_assets.snapshot.reconstruct import TableSchema
from cdc_assets.snapshot.store import read_manifest, read_manifests
from cdc_assets.snapshot.timeline import apply_window
from cdc_assets.snapshot.window_state import Name, previous_states

CHANGE_TABLE_LAYER = "change_table"


@dataclass(frozen=True)
class TableAsOf:
    schema: TableSchema
    frame: DataFrame


@dataclass(frozen=True)
class Plan:
    """Where the state at `tso` comes from: a window's snapshot (`base`, None = nothing yet),
    and the window whose changes up to `tso` are replayed on it (None = the base is exact)."""

    tso: int
    base: int | None
    replay: int | None


def parse_instant(text: str) -> int:
    """A TSO (digits) or an ISO-8601 UTC time (a time without zone is UTC) -> the TSO to read at."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"expected a TiDB TSO or an ISO-8601 time, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return ms_to_tso(round(moment.timestamp() * 1000)) - 1


def plan(warehouse, source: str, tso: int) -> Plan:
    manifests = read_manifests(warehouse, source)  # one scan of the windows table
    windows = sorted(manifests)
    if not windows:
        raise FileNotFoundError(f"no snapshot of source {source!r} has been materialized in {warehouse}")
    ended = [w for w in windows if ms_to_tso(manifests[w].window_end_ms) - 1 <= tso]
    base = ended[-1] if ended else None
    if base is not None:
        manifests[base].require_built()
    start_ms = manifests[base].window_end_ms if base is not None else windows[0]
    if base is not None and ms_to_tso(start_ms) - 1 == tso:
        return Plan(tso, base, None)
    if ms_to_tso(start_ms) > tso:  # before the first window: no table had rows yet
        return Plan(tso, None, None)
    if base is not None and start_ms in manifests and manifests[start_ms].carried_forward:
        return Plan(tso, base, None)  # nothing landed in the next window: the base is exact
    if start_ms not in manifests:
        latest_end = manifests[windows[-1]].window_end_ms
        raise ValueError(
            f"TSO {tso} is after the last complete, materialized window (which ends at {latest_end} ms) "
            "or in a window that has not been materialized"
        )
    return Plan(tso, base, start_ms)


def tables_as_of(spark: SparkSession, warehouse, source: str, tso: int) -> dict[Name, TableAsOf]:
    """Each table's schema and rows at `tso` (see the module docstring). Dropped tables are absent."""
    p = plan(warehouse, source, tso)
    base_tables = read_manifest(warehouse, source, p.base).tables if p.base is not None else {}
    states = previous_states(base_tables, functools.partial(read_entry, spark, warehouse, source))
    if p.replay is not None:
        changes = _change_table(spark, warehouse, source, p.replay).where(F.col("commit_ts") <= F.lit(tso))
        result = apply_window(spark, changes, states)
        # Releasing the cached inputs keeps the frames correct: Spark recomputes what they read.
        result.release()
        states = result.tables
    return {n: TableAsOf(s.schema, _frame(spark, s)) for n, s in states.items()}


def _frame(spark: SparkSession, state) -> DataFrame:
    return state.frame if state.frame is not None else spark.createDataFrame([], state.schema.spark_schema())


def _change_table(spark: SparkSession, warehouse, source: str, window_start_ms: int) -> DataFrame:
    # an existing table: its location is the catalog's (none is given here)
    table = WindowTable(IcebergTable(use_catalog(spark, warehouse), source, CHANGE_TABLE_LAYER, ""))
    if window_commit(warehouse, table.table.identifier, window_start_ms) is None:
        raise FileNotFoundError(f"the change table of window {window_start_ms} is missing "
                                f"(Iceberg table {table.table.identifier})")
    return table.read(spark, window_start_ms)
