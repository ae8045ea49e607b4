"""Snapshot tables stored in primary-key ranges: a window rewrites the ranges its changes
touch and links the others; a range that outgrows its target is split in place."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import functions as F

from cdc_assets.lib.codecs import get_decoder
from cdc_assets.lib.key_ranges import SPLIT_FACTOR, KeyRanges
from cdc_assets.lib.snapshot_store import table_path, write_window_snapshot
from cdc_assets_tests.helpers import raw_frame

T0 = 1767225600000 << 18
TYPES = {"id": "int", "name": "varchar(20)"}
RANGE_ROWS = 20


def _msg(op: str, ts: int, rows: list[dict], types=TYPES, pk=("id",)) -> bytes:
    return json.dumps({
        "id": 0, "database": "db", "table": "t", "pkNames": list(pk), "isDdl": False, "type": op,
        "es": ts >> 18, "ts": ts >> 18, "sql": "", "sqlType": {}, "mysqlType": types,
        "data": rows, "old": None, "_tidb": {"commitTs": ts},
    }).encode()


def _changes(spark, messages: list[bytes]):
    decoded = get_decoder("canal-json").decode(raw_frame(spark, messages))
    return decoded.where(F.col("_reject_reason").isNull())


def _window(spark, root: Path, index: int, messages: list[bytes], previous: dict | None) -> dict:
    return write_window_snapshot(spark, _changes(spark, messages), root, index * 1000, index * 1000 + 1000, previous,
                                 range_rows=RANGE_ROWS)


def _rows(root: Path, entry: dict) -> dict[int, str]:
    table = pq.read_table(table_path(root, entry), columns=["id", "name"]).to_pylist()
    return {r["id"]: r["name"] for r in table}


def _inodes(root: Path, entry: dict) -> dict[str, int]:
    return {f.name: f.stat().st_ino for f in table_path(root, entry).glob("*.parquet")}


def _assert_ranges_hold_their_keys(root: Path, entry: dict) -> None:
    """Every file lies inside its range's bounds, and the per-range counts are right."""
    ranges = KeyRanges.from_json(entry["ranges"])
    bounds = [None] + [int(b[0]) for b in ranges.lowers] + [None]
    for i, names in enumerate(ranges.files):
        ids = [r for n in names for r in pq.read_table(table_path(root, entry) / n).column("id").to_pylist()]
        assert len(ids) == ranges.rows[i]
        assert all((bounds[i] is None or k >= bounds[i]) and (bounds[i + 1] is None or k < bounds[i + 1]) for k in ids)
    assert sum(ranges.rows) == entry["rows"]


def test_a_window_rewrites_only_the_key_ranges_it_touches(spark, tmp_path):
    root = tmp_path / "snapshots"
    first = _window(spark, root, 1, [_msg("INSERT", T0 + i, [{"id": str(i), "name": f"n{i}"}]) for i in range(1, 101)],
                    None)
    entry1 = first["tables"]["db.t"]
    ranges1 = KeyRanges.from_json(entry1["ranges"])
    assert entry1["rows"] == 100 and len(ranges1.files) >= 4
    assert max(ranges1.rows) <= SPLIT_FACTOR * RANGE_ROWS
    _assert_ranges_hold_their_keys(root, entry1)

    # One update in the first range, one delete in the middle, five inserts at the end.
    second = _window(spark, root, 2, [
        _msg("UPDATE", T0 + 1000, [{"id": "3", "name": "changed"}]),
        _msg("DELETE", T0 + 1001, [{"id": "50", "name": "n50"}]),
        *[_msg("INSERT", T0 + 1002 + i, [{"id": str(i), "name": f"n{i}"}]) for i in range(101, 106)],
    ], first)
    entry2 = second["tables"]["db.t"]
    expected = {i: f"n{i}" for i in range(1, 106) if i != 50} | {3: "changed"}
    assert _rows(root, entry2) == expected and entry2["rows"] == 104
    assert (entry2["inserted_keys"], entry2["deleted_keys"], entry2["previous_rows"]) == (5, 1, 100)
    ranges2 = KeyRanges.from_json(entry2["ranges"])
    touched = {i for i, (a, b) in enumerate(zip(ranges1.files, ranges2.files)) if a != b}
    assert entry2["ranges_rewritten"] == sorted(touched) and len(touched) == 3
    assert ranges2.lowers == ranges1.lowers
    # The untouched ranges are the previous folder's files, linked (same inodes), not rewritten.
    before, after = _inodes(root, entry1), _inodes(root, entry2)
    untouched = [n for i, names in enumerate(ranges2.files) if i not in touched for n in names]
    assert untouched and all(after[n] == before[n] for n in untouched)
    _assert_ranges_hold_their_keys(root, entry2)


def test_a_range_that_outgrows_its_target_is_split_in_place(spark, tmp_path):
    root = tmp_path / "snapshots"
    first = _window(spark, root, 1, [_msg("INSERT", T0 + i, [{"id": str(i), "name": "a"}]) for i in range(1, 41)], None)
    lowers1 = KeyRanges.from_json(first["tables"]["db.t"]["ranges"]).lowers
    # Monotonic inserts all land in the last range, which grows past twice its target.
    second = _window(spark, root, 2, [_msg("INSERT", T0 + 1000 + i, [{"id": str(i), "name": "b"}])
                                      for i in range(41, 141)], first)
    entry = second["tables"]["db.t"]
    ranges = KeyRanges.from_json(entry["ranges"])
    assert ranges.lowers[:len(lowers1)] == lowers1  # earlier bounds stay where they were
    assert len(ranges.lowers) > len(lowers1)
    assert max(ranges.rows) <= SPLIT_FACTOR * RANGE_ROWS and entry["rows"] == 140
    assert set(_rows(root, entry)) == set(range(1, 141))
    _assert_ranges_hold_their_keys(root, entry)
    # The next window finds every key where it was placed: updates do not duplicate rows.
    third = _window(spark, root, 3, [_msg("UPDATE", T0 + 2000 + i, [{"id": str(i), "name": "c"}])
                                     for i in range(1, 141, 7)], second)
    rows = _rows(root, third["tables"]["db.t"])
    assert len(rows) == 140 == third["tables"]["db.t"]["rows"]
    assert {k for k, v in rows.items() if v == "c"} == set(range(1, 141, 7))


def test_composite_keys_of_every_ordered_type_are_found_again(spark, tmp_path):
    """Instants, bytes, decimals, dates and text in one key: bounds round-trip as typed values."""
    types = {"ts": "timestamp", "b": "varbinary(8)", "d": "decimal(10,3)", "day": "date", "s": "varchar(10)",
             "v": "int"}
    pk = ("ts", "b", "d", "day", "s")

    def row(i: int, v: int) -> dict:
        return {"ts": f"2026-01-0{1 + i % 3} 0{i % 10}:00:00", "b": f"k{i % 5}", "d": f"{i % 7}.{i:03d}",
                "day": f"2025-12-{10 + i % 9}", "s": f"s{i}", "v": str(v)}

    msg = lambda op, ts, i, v: _msg(op, ts, [row(i, v)], types, pk)  # noqa: E731
    root = tmp_path / "snapshots"
    first = _window(spark, root, 1, [msg("INSERT", T0 + i, i, 0) for i in range(100)], None)
    assert len(KeyRanges.from_json(first["tables"]["db.t"]["ranges"]).lowers) >= 3
    second = _window(spark, root, 2, [msg("UPDATE", T0 + 1000 + i, i, 1) for i in range(0, 100, 3)], first)
    entry = second["tables"]["db.t"]
    values = pq.read_table(table_path(root, entry), columns=["s", "v"]).to_pylist()
    assert len(values) == 100 == entry["rows"]
    assert {r["s"] for r in values if r["v"] == 1} == {f"s{i}" for i in range(0, 100, 3)}
    assert 0 < len(entry["ranges_rewritten"]) < len(entry["ranges"]["files"])
    assert os.path.isdir(table_path(root, entry))


def test_a_small_table_and_its_history_are_written_in_few_files(spark, tmp_path):
    """The window's frames are cached after shuffles; adaptive execution must still coalesce
    them (spark_config), or a few rows become a file per shuffle partition."""
    previous_partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "8")
    try:
        root, history = tmp_path / "snapshots", tmp_path / "history"
        first = write_window_snapshot(
            spark, _changes(spark, [_msg("INSERT", T0 + i, [{"id": str(i), "name": f"n{i}"}]) for i in range(6)]),
            root, 1000, 2000, None, history_root=history)
        second = write_window_snapshot(
            spark, _changes(spark, [_msg("UPDATE", T0 + 100 + i, [{"id": str(i), "name": f"m{i}"}]) for i in range(3)]),
            root, 2000, 3000, first, history_root=history)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous_partitions)
    entry = second["tables"]["db.t"]
    assert _rows(root, entry) == {0: "m0", 1: "m1", 2: "m2", 3: "n3", 4: "n4", 5: "n5"}
    # At most a file for the rows carried over and one for the window's upserts (they are
    # unioned); with Spark's default it was a file per shuffle partition.
    assert len(list(table_path(root, entry).glob("*.parquet"))) <= 2
    parts = list((history / "window_start_ms=2000").rglob("*.parquet"))
    assert len(parts) == 1 and pq.read_table(parts[0]).num_rows == 3
