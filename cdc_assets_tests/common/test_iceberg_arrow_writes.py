"""A small window write through Arrow (common/iceberg_arrow_writes.py): the MERGE's result
computed in Arrow, and one overwrite snapshot committed by pyiceberg, as Spark's is."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import AlwaysTrue, EqualTo
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DecimalType, LongType, NestedField, StringType, TimestamptzType

from cdc_assets.common.iceberg_arrow_writes import as_table_rows, commit_overwrite, matches_as_spark, merged

P = "_cdc_present"


def test_a_merge_replaces_deletes_and_adds_keys_sorted_by_the_key():
    base = pa.table({"k1": pa.array([1, 2, 3], pa.int64()), "k2": ["a", "b", "c"], "v": [10, 20, 30]})
    source = pa.table({"k1": pa.array([1, 2, 3, 0, 9], pa.int64()), "k2": ["a", "b", "x", "z", "q"],
                       "v": [11, None, 31, 1, None], P: pa.array([True, None, True, True, None], pa.bool_())})
    # (1, a) replaced; (2, b) deleted; (3, x) and (0, z) added; (9, q) deletes a key the base never had
    assert merged(base, source, ["k1", "k2"], P).to_pylist() == [
        {"k1": 0, "k2": "z", "v": 1}, {"k1": 1, "k2": "a", "v": 11}, {"k1": 3, "k2": "c", "v": 30},
        {"k1": 3, "k2": "x", "v": 31}]


def test_decimal_and_timestamp_keys_match_and_a_null_key_matches_nothing():
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    base = pa.table({"d": pa.array([Decimal("1.50"), Decimal("2.50"), None], pa.decimal128(10, 2)),
                     "t": pa.array([when, when, when], pa.timestamp("us", tz="UTC")), "v": ["one", "two", "null"]})
    source = pa.table({"d": pa.array([Decimal("2.50"), None], pa.decimal128(10, 2)),
                       "t": pa.array([when, when], pa.timestamp("us", tz="UTC")), "v": ["new", "other null"],
                       P: pa.array([True, True])})
    values = merged(base, source, ["d", "t"], P).column("v").to_pylist()
    assert sorted(values[:2]) == ["null", "other null"] and values[2:] == ["one", "new"]  # nulls first, as Spark


def test_floating_point_keys_are_left_to_spark():
    schema = pa.schema([("f", pa.float64()), ("i", pa.int64()), ("s", pa.large_string())])
    assert matches_as_spark(schema, ["i", "s"]) and not matches_as_spark(schema, ["i", "f"])


def _catalog(tmp_path) -> SqlCatalog:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("ns")
    return catalog


SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "amount", DecimalType(12, 2)),
                NestedField(3, "at", TimestamptzType()), NestedField(4, "window_start_ms", LongType()),
                NestedField(5, "note", StringType()))


def _rows(schema: pa.Schema, ids: list[int], window: int) -> pa.Table:
    # Spark's Arrow types: plain strings, timestamps in the session's zone
    spark_like = pa.table({"id": pa.array(ids, pa.int64()), "amount": pa.array([Decimal(i) for i in ids], pa.decimal128(12, 2)),
                           "at": pa.array([datetime(2026, 1, 1, tzinfo=timezone.utc)] * len(ids),
                                          pa.timestamp("us", tz="Etc/UTC")),
                           "window_start_ms": pa.array([window] * len(ids), pa.int64()),
                           "note": pa.array([f"n{i}" for i in ids], pa.string())})
    return as_table_rows(spark_like, schema)


def test_an_overwrite_is_one_snapshot_on_its_branch_with_the_window_properties(tmp_path):
    table = _catalog(tmp_path).create_table("ns.snap", SCHEMA)
    schema = table.schema().as_arrow()
    table.append(_rows(schema, [1, 2], 0))
    base = table.metadata.current_snapshot_id
    with table.manage_snapshots() as refs:
        refs.create_branch(base, "window-1")
    commit_overwrite(table, _rows(schema, [2, 3, 4], 0), AlwaysTrue(), {"cdc.window-start-ms": "1"}, "window-1",
                     snapshot_id=base)
    table = table.refresh()
    head = table.snapshot_by_name("window-1")
    assert head.parent_snapshot_id == base and head.summary.operation.value == "overwrite"
    assert head.summary["cdc.window-start-ms"] == "1" and head.summary["total-records"] == "3"
    assert head.summary["total-data-files"] == "1"
    assert sorted(table.scan(snapshot_id=head.snapshot_id).to_arrow().column("id").to_pylist()) == [2, 3, 4]
    assert table.metadata.current_snapshot_id == base  # main did not move


def test_an_overwrite_that_deletes_every_row_leaves_the_table_empty(tmp_path):
    table = _catalog(tmp_path).create_table("ns.snap", SCHEMA)
    table.append(_rows(table.schema().as_arrow(), [1, 2], 0))
    commit_overwrite(table, table.schema().as_arrow().empty_table(), AlwaysTrue(), {})
    head = table.refresh().current_snapshot()
    assert head.summary.operation.value == "overwrite" and head.summary["total-records"] == "0"
    assert table.scan().to_arrow().num_rows == 0


def test_a_window_partition_is_replaced_and_the_others_kept(tmp_path):
    spec = PartitionSpec(PartitionField(4, 1000, IdentityTransform(), "window_start_ms"))
    table = _catalog(tmp_path).create_table("ns.history", SCHEMA, partition_spec=spec)
    schema = table.schema().as_arrow()
    for window, ids in ((1, [1, 2]), (2, [3])):
        commit_overwrite(table, _rows(schema, ids, window), EqualTo("window_start_ms", window), {})
    commit_overwrite(table, _rows(schema, [5], 1), EqualTo("window_start_ms", 1), {})  # a rerun of window 1
    rows = table.refresh().scan().to_arrow().to_pylist()
    assert sorted((r["window_start_ms"], r["id"]) for r in rows) == [(1, 5), (2, 3)]
    assert len(table.metadata.snapshots) == 3  # one snapshot per commit
