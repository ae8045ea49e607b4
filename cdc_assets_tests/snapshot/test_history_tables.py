"""The history of a source table as one Iceberg table: a window's versions replace that
window's rows (a rerun), and the schemas of the windows are unioned by name (new columns
added, types widened in place, an incompatible type in a column of its own)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyiceberg.types import DecimalType, DoubleType, LongType, StringType

from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.snapshot.history import _write_table, versions_by_table
from cdc_assets.snapshot.history_read import read_history

W1, W2 = 1_767_225_600_000, 1_767_229_200_000
NAME = ("db", "t")


@pytest.fixture
def store(tmp_path):
    (tmp_path / "warehouse").mkdir()  # a window's run makes it (its windows table comes first)
    return tmp_path / "warehouse", "src"


def _write(spark, store, frames: list[tuple[str, list[tuple]]], window: int, clear: bool = False) -> int:
    versions = versions_by_table({NAME: [spark.createDataFrame(rows, schema) for schema, rows in frames]})
    return _write_table(spark, *store, NAME, versions.get(NAME), window, clear)


def _read(store):
    table = load_pyiceberg_catalog(store[0]).load_table(("src", "history__db__t"))
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: (r["window_start_ms"], r["id"]))
    return table.schema(), rows


def test_windows_union_their_schemas_into_the_history_table(spark, store):
    v = "_cdc_valid_from long, _cdc_valid_to long, _cdc_end_op string"
    assert _write(spark, store, [(f"id int, qty int, amount float, price decimal(10,2), {v}",
                                  [(1, 5, 1.5, Decimal("1.10"), 10, 20, "UPDATE")])], W1) == 1
    # window 2: a DDL inside it, so two schemas: qty int -> bigint and a new column; then qty
    # becomes text (no Iceberg widening): those versions keep it in `qty__string`
    assert _write(spark, store, [
        (f"id int, qty bigint, amount double, price decimal(12,2), note string, {v}",
         [(2, 2 ** 40, 2.25, Decimal("12345678.12"), "n", 30, 40, "DELETE")]),
        (f"id int, qty string, {v}", [(3, "three", 50, 60, "UPDATE")]),
    ], W2) == 2
    schema, rows = _read(store)
    assert schema.find_field("qty").field_type == LongType()
    assert schema.find_field("amount").field_type == DoubleType()
    assert schema.find_field("price").field_type == DecimalType(12, 2)
    assert schema.find_field("note").field_type == StringType()
    assert schema.find_field("qty__string").field_type == StringType()
    assert [(r["window_start_ms"], r["id"], r["qty"], r["qty__string"], r["amount"], r["price"], r["note"])
            for r in rows] == [
        (W1, 1, 5, None, 1.5, Decimal("1.10"), None),
        (W2, 2, 2 ** 40, None, 2.25, Decimal("12345678.12"), "n"),
        (W2, 3, None, "three", None, None, None),
    ]
    # Spark reads the same through the catalog, without the window column
    frame = read_history(spark, *store, *NAME)
    assert "window_start_ms" not in frame.columns
    assert sorted((r["id"], r["qty"], r["qty__string"]) for r in frame.collect()) == [
        (1, 5, None), (2, 2 ** 40, None), (3, None, "three")]

    # A rerun of window 2 replaces its rows, in one commit, and leaves window 1's.
    snapshots = len(load_pyiceberg_catalog(store[0]).load_table(("src", "history__db__t")).metadata.snapshots)
    assert _write(spark, store, [(f"id int, qty int, {v}", [(4, 7, 70, 80, "UPDATE")])], W2) == 1
    table = load_pyiceberg_catalog(store[0]).load_table(("src", "history__db__t"))
    assert len(table.metadata.snapshots) == snapshots + 1
    assert [(r["window_start_ms"], r["id"], r["qty"]) for r in _read(store)[1]] == [(W1, 1, 5), (W2, 4, 7)]
    # ... and a rerun that ends no version of the table clears the window's rows.
    assert _write_table(spark, *store, NAME, None, W2, True) == 0
    assert [(r["window_start_ms"], r["id"]) for r in _read(store)[1]] == [(W1, 1)]
    # A rerun of window 2 whose versions are none (its changes inserted new keys only): 0, one
    # commit, and the window holds no row of the table any more.
    assert _write(spark, store, [(f"id int, qty int, {v}", [(5, 9, 90, 95, "DELETE")])], W2) == 1
    assert [(r["window_start_ms"], r["id"]) for r in _read(store)[1]] == [(W1, 1), (W2, 5)]
    snapshots = len(load_pyiceberg_catalog(store[0]).load_table(("src", "history__db__t")).metadata.snapshots)
    assert _write(spark, store, [(f"id int, qty int, {v}", [])], W2) == 0
    table = load_pyiceberg_catalog(store[0]).load_table(("src", "history__db__t"))
    assert len(table.metadata.snapshots) == snapshots + 1
    assert [(r["window_start_ms"], r["id"]) for r in _read(store)[1]] == [(W1, 1)]
    # Window 1's versions are its one data file; window 2 has none left.
    files = table.inspect.files().to_pylist()
    assert sorted(f["partition"]["window_start_ms"] for f in files) == [W1]


def test_a_window_of_many_versions_is_one_file(spark, store):
    v = "_cdc_valid_from long, _cdc_valid_to long, _cdc_end_op string"
    rows = [(i, i % 7, 10 * i, 10 * i + 5, "UPDATE") for i in range(2_000)]
    frame = spark.createDataFrame(rows, f"id int, qty int, {v}").repartition(8)
    assert _write_table(spark, *store, NAME, versions_by_table({NAME: [frame]}).get(NAME), W1, False) == 2_000
    table = load_pyiceberg_catalog(store[0]).load_table(("src", "history__db__t"))
    assert [f["record_count"] for f in table.inspect.files().to_pylist()] == [2_000]


def test_a_table_that_ends_no_version_gets_no_history_table(spark, store):
    v = "_cdc_valid_from long, _cdc_valid_to long, _cdc_end_op string"
    assert _write(spark, store, [(f"id int, qty int, {v}", [])], W1) == 0
    assert not load_pyiceberg_catalog(store[0]).table_exists(("src", "history__db__t"))


class _Applied:
    """A small window applied in Arrow (`small_window.SmallWindow`'s part the history reads)."""

    def __init__(self, versions):
        self.versions = versions

    def applied(self):
        return self

    def versions_written(self):
        pass


def test_versions_found_in_arrow_are_fitted_to_a_table_whose_layout_differs(spark, store):
    import pyarrow as pa

    v = "_cdc_valid_from long, _cdc_valid_to long, _cdc_end_op string"
    assert _write(spark, store, [(f"id int, qty int, note string, {v}", [(1, 5, "n", 10, 20, "UPDATE")])], W1) == 1
    # Window 2 (the note column dropped since): its versions were found in Arrow, in the snapshot
    # table's Arrow types; the history table still has `note`, so they are fitted by Spark from
    # those rows, and the window's actions (`frame`, which would give other rows) are not read.
    found = pa.table({"id": pa.array([2, 3], pa.int32()), "qty": pa.array([7, None], pa.int32()),
                      "_cdc_valid_from": pa.array([30, 50], pa.int64()), "_cdc_valid_to": pa.array([40, 60], pa.int64()),
                      "_cdc_end_op": pa.array(["DELETE", "UPDATE"], pa.large_string())})
    frame = versions_by_table({NAME: [spark.createDataFrame([(9, 9, 90, 99, "DELETE")], f"id int, qty int, {v}")]})
    assert _write_table(spark, *store, NAME, frame[NAME], W2, False, 2, _Applied(found)) == 2
    assert [(r["window_start_ms"], r["id"], r["qty"], r["note"], r["_cdc_end_op"]) for r in _read(store)[1]] == [
        (W1, 1, 5, "n", "UPDATE"), (W2, 2, 7, None, "DELETE"), (W2, 3, None, None, "UPDATE")]
