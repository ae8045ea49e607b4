"""ALTER TABLE's column changes applied to a table's state: ADD, DROP, and MODIFY / CHANGE /
RENAME COLUMN change its schema and its rows' columns (the caller then conforms the rows to the
new types and records the schema change: snapshot/timeline.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

from pyspark.sql import functions as F

from cdc_assets.common.mysql_types import typed_value
from cdc_assets.common.tso import tso_to_ms
from cdc_assets.snapshot.ddl import parse as D
from cdc_assets.snapshot.window_state import TableState


def alter_columns(state: TableState, change: D.SchemaChange, commit_ts: int) -> bool:
    """Apply `change` (committed at `commit_ts`) to `state`'s schema and rows. False: it changes
    nothing (a column it names is absent, or already there and `IF NOT EXISTS`)."""
    s = state.schema
    if isinstance(change, D.AddColumn):
        # A column the table has already came from row images dated before this DDL (MySQL
        # logs no duplicate ADD): it takes the DDL's place and type, and keeps its values. Rows
        # that never carried it stay null, not the default: the snapshot cannot tell them from
        # rows set to NULL.
        c = change.column
        present = c.name in s.columns
        if present and change.if_not_exists:
            return False
        others = [n for n in s.columns if n != c.name]
        at = 0 if change.first else (others.index(change.after) + 1 if change.after in others else len(others))
        state.schema = replace(s, columns=others[:at] + [c.name] + others[at:],
                               mysql_types={**s.mysql_types, c.name: c.mysql_type})
        if state.frame is not None and not present:
            default = _commit_time_text(commit_ts) if c.default_is_commit_time else c.default
            typed = typed_value(F.lit(default).cast("string"), state.schema.spark_type_of(c.name))
            state.frame = state.frame.withColumn(c.name, typed)
    elif isinstance(change, D.DropColumn):
        if change.name not in s.columns:
            return False
        state.schema = replace(s, columns=[c for c in s.columns if c != change.name],
                               mysql_types={k: v for k, v in s.mysql_types.items() if k != change.name},
                               primary_key=[k for k in s.primary_key if k != change.name])
        if state.frame is not None:
            state.frame = state.frame.drop(change.name)
    elif isinstance(change, D.ChangeColumn):
        if change.old_name not in s.columns:
            return False
        rename = lambda n: change.new_name if n == change.old_name else n  # noqa: E731
        types = {rename(k): v for k, v in s.mysql_types.items()}
        if change.mysql_type is not None:
            types[change.new_name] = change.mysql_type
        forget = lambda d: {rename(k): v for k, v in d.items() if k != change.old_name or change.mysql_type is None}  # noqa: E731
        state.schema = replace(s, columns=[rename(c) for c in s.columns], mysql_types=types,
                               primary_key=[rename(k) for k in s.primary_key],
                               decimal_scales=forget(s.decimal_scales),
                               decimal_integer_digits=forget(s.decimal_integer_digits))
        if state.frame is not None and change.old_name != change.new_name:
            state.frame = state.frame.withColumnRenamed(change.old_name, change.new_name)
    return True


def _commit_time_text(commit_ts: int) -> str:
    return datetime.fromtimestamp(tso_to_ms(commit_ts) / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")

