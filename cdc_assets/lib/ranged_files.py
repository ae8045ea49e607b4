"""A table's rows written into a snapshot folder as one set of files per key range (see
`key_ranges`). The folder stays flat, so every reader sees a plain Parquet folder; ranges a
window did not touch are hard links to the previous folder's files (copies where the
filesystem has no links), which is safe because snapshot files are never rewritten in place.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from cdc_assets.lib.key_ranges import (
    RANGE_COLUMN, SPLIT_FACTOR, KeyRanges, choose_lowers, key_types, range_index, ranges_wanted,
)
from cdc_assets.lib.snapshot import TableSchema


def write_table_files(spark: SparkSession, frame: DataFrame, schema: TableSchema, folder: Path, target_rows: int,
                      expected_rows: int, previous: KeyRanges | None = None, previous_folder: Path | None = None,
                      touched: set[int] | None = None) -> KeyRanges:
    """Write `frame` into `folder` (created). Without `touched`, `frame` is the whole table and
    the bounds are chosen anew; with it, `frame` holds exactly the rows of ranges `touched` of
    `previous`, and every other range is linked from `previous_folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    if touched is None:
        lowers = choose_lowers(frame, schema, ranges_wanted(expected_rows, target_rows), expected_rows)
        written = _write_ranges(frame, schema, lowers, folder)
        files = [written.get(i, []) for i in range(len(lowers) + 1)]
        rows = [_rows(folder, names) for names in files]
    else:
        assert previous is not None and previous_folder is not None
        lowers = previous.lowers
        written = _write_ranges(frame, schema, lowers, folder)
        stray = set(written) - touched
        if stray:  # would duplicate keys: the caller's frame was not what it claimed
            raise RuntimeError(f"rows of untouched key ranges {sorted(stray)} were written for {schema.id}")
        files, rows = [], []
        for i, names in enumerate(previous.files):
            if i in touched:
                files.append(written.get(i, []))
                rows.append(_rows(folder, files[-1]))
            else:
                _link(previous_folder, folder, names)
                files.append(names)
                rows.append(previous.rows[i])
    ranges = KeyRanges(list(schema.primary_key), key_types(schema), lowers, files, rows)
    return _split_oversized(spark, ranges, schema, folder, target_rows, frame.schema)


def _write_ranges(frame: DataFrame, schema: TableSchema, lowers: list[list[str]], folder: Path) -> dict[int, list[str]]:
    """Range index -> names of the new files in `folder` (ranges without rows have none)."""
    stage = folder / f".stage-{uuid.uuid4().hex[:8]}"  # hidden from readers until the files move out
    if lowers:
        # One task per range: one file per range, whatever the frame's partitioning.
        (frame.withColumn(RANGE_COLUMN, range_index(schema, lowers)).repartition(RANGE_COLUMN)
         .write.partitionBy(RANGE_COLUMN).parquet(str(stage)))
        parts = {int(d.name.split("=", 1)[1]): d for d in stage.glob(f"{RANGE_COLUMN}=*")}
    else:
        frame.write.parquet(str(stage))
        parts = {0: stage}
    out: dict[int, list[str]] = {}
    for index, part in parts.items():
        names = []
        for f in sorted(part.glob("*.parquet")):
            # Spark reuses a file name across partition folders: a new name per file.
            name = f"range-{uuid.uuid4().hex[:12]}.parquet"
            os.replace(f, folder / name)
            names.append(name)
        out[index] = names
    shutil.rmtree(stage)
    return out


def _split_oversized(spark: SparkSession, ranges: KeyRanges, schema: TableSchema, folder: Path, target_rows: int,
                     spark_schema) -> KeyRanges:
    """Split every range of more than SPLIT_FACTOR × target rows in place (its sub-bounds are
    keys of its own rows, so no other range moves)."""
    lowers, files, rows = list(ranges.lowers), list(ranges.files), list(ranges.rows)
    for i in reversed(range(len(files))):
        if rows[i] <= SPLIT_FACTOR * target_rows or not files[i]:
            continue
        own = spark.read.schema(spark_schema).parquet(*[str(folder / n) for n in files[i]])
        sub = choose_lowers(own, schema, ranges_wanted(rows[i], target_rows), rows[i])
        if not sub:
            continue
        written = _write_ranges(own, schema, sub, folder)
        for name in files[i]:
            (folder / name).unlink()
        parts = [written.get(j, []) for j in range(len(sub) + 1)]
        files[i:i + 1] = parts
        rows[i:i + 1] = [_rows(folder, names) for names in parts]
        lowers[i:i] = sub
    return KeyRanges(ranges.key, ranges.key_types, lowers, files, rows)


def _rows(folder: Path, names: list[str]) -> int:
    return sum(pq.read_metadata(folder / n).num_rows for n in names)


def _link(source: Path, target: Path, names: list[str]) -> None:
    for name in names:
        try:
            os.link(source / name, target / name)
        except OSError:  # another filesystem, or one without hard links
            shutil.copy2(source / name, target / name)
