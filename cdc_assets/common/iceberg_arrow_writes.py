"""A small window write of a snapshot table without Spark's write path: the MERGE source is
collected as Arrow (by one action of its plan, or computed in Arrow by
snapshot/small_window.py) and committed by pyiceberg on the window's branch. A Spark write of
a few hundred rows is 4-6 jobs and 1-4 s of planning, file commit and catalog commit per
table; this is one collect and one catalog commit of about 0.1 s (docs/performance.md steps
23-25).

Only small writes take this path (at most `ARROW_WRITE_ROWS` events of the table in the
window, counted by the schema pre-pass before anything runs; a rewrite also needs a base
of one file of at most `ARROW_REWRITE_BYTES`, while an append of new keys reads no base): what
it writes is held in the driver's memory. A window's history versions take it too, as an
overwrite of the window's partition on `main` (`IcebergTable.overwrite_window_in_arrow`). A
rewrite is one Iceberg `overwrite` snapshot, as Spark's is (`commit_overwrite`; pyiceberg's own
`Table.overwrite` would be a delete snapshot and an append snapshot).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

# A table's row events in a window at most for its writes to go through Arrow (a source holds up
# to about two rows an event); more: Spark writes them. 250,000 holds every table of the bench's
# 250,000-event windows (at most 100,000 a table): Spark's paths took 37 jobs a window there,
# Arrow's 14, in the same time (docs/performance.md step 29). What the driver then holds is a
# table's typed actions: tens of MB for a narrow table, a few hundred for a wide one.
ARROW_WRITE_ROWS = 250_000
ARROW_REWRITE_BYTES = 16 * 1024 * 1024  # the largest one-file base rewritten in the driver


def merged(base: pa.Table, source: pa.Table, key: list[str], present: str) -> pa.Table:
    """What a MERGE of `source` into `base` leaves, sorted by `key`: the base's rows of keys
    the source does not have, and the source's rows whose `present` is true (a null `present`
    deletes its key). Both in the same schema but `present`; a null key matches nothing
    (as in SQL)."""
    rows = source.filter(pc.is_valid(source[present])).drop_columns([present])
    untouched = base.join(source.select(key), keys=key, join_type="left anti")
    return sorted_by(pa.concat_tables([untouched.select(rows.column_names), rows]), key)


def sorted_by(rows: pa.Table, key: list[str]) -> pa.Table:
    """`rows` in the order the table is written in (`WRITE ORDERED BY key`: ascending, nulls
    first)."""
    return rows.sort_by([(k, "ascending", "at_start") for k in key]) if key else rows


def matches_as_spark(schema: pa.Schema, key: list[str]) -> bool:
    """Whether Arrow's join matches these key columns as Spark's does: not for floating point
    (Arrow compares their bits: -0.0 is not 0.0, NaN is NaN)."""
    return not any(pa.types.is_floating(schema.field(k).type) for k in key)


def as_table_rows(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """`rows` (Spark's Arrow types) in the Iceberg table's Arrow schema, column by column by
    name: large strings, UTC timestamps, the field ids pyiceberg writes."""
    return pa.Table.from_arrays([rows[f.name].cast(f.type) for f in schema], schema=schema)


def commit_overwrite(table, rows: pa.Table, replaced, properties: dict[str, str], branch: str = "main",
                     snapshot_id: int | None = None) -> None:
    """One `overwrite` snapshot of the pyiceberg `table` on `branch` (whose head is `snapshot_id`;
    None: the current snapshot): the data files the filter `replaced` selects are deleted
    whole and `rows` (in the table's Arrow schema) appended. Whole files: the caller's filter
    selects files all of whose rows it means (every file, or one partition's)."""
    # What pyiceberg's own writes build data files with (the version is pinned in pyproject).
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    old = [task.file for task in table.scan(row_filter=replaced, snapshot_id=snapshot_id).plan_files()]
    with table.transaction() as transaction:
        with transaction.update_snapshot(snapshot_properties=properties, branch=branch).overwrite() as overwrite:
            for data_file in old:
                overwrite.delete_data_file(data_file)
            if rows.num_rows == 0:  # every row deleted: nothing to add (pyiceberg cannot bin-pack no rows)
                return
            for data_file in _dataframe_to_data_files(transaction.table_metadata, rows, table.io,
                                                      overwrite.commit_uuid):
                overwrite.append_data_file(data_file)
