"""The snapshot store on Iceberg: a window is written on its branch, audited, then published
(tagged, and `main` when it is the newest); a withheld window leaves no trace on main; quiet
windows and reruns move tags, never other windows' snapshots."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from pyspark.sql import functions as F

from cdc_assets.common.iceberg_tables import end_tag
from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.contracts.schemas import CHANGE_LOG_SCHEMA
from cdc_assets.snapshot import manifests
from cdc_assets.snapshot.carry_forward import carry_forward_windows
from cdc_assets.snapshot.entry_tables import read_entry_arrow
from cdc_assets.snapshot.manifests import ManifestConflict, OldFormatWarehouse, WindowManifest
from cdc_assets.snapshot.store import (
    WindowWithheld, list_manifests, read_manifest, read_manifests, write_window_snapshot,
)

HOUR = 3_600_000
W1 = 1_767_225_600_000  # 2026-01-01T00:00Z


def _changes(spark, rows: list[tuple[str, int, str]], window_start_ms: int):
    """Change-log rows of table db.t (id bigint, name varchar): (op, id, name)."""
    ts = (window_start_ms + 1_000) << 18
    data = [(i, op, str(key), name) for i, (op, key, name) in enumerate(rows)]
    frame = spark.createDataFrame(data, "i long, op string, id string, name string")
    image = F.create_map(F.lit("id"), F.col("id"), F.lit("name"), F.col("name"))
    values = {
        "topic": F.lit("t"), "kafka_partition": F.lit(0), "kafka_offset": F.col("i"), "event_index": F.lit(0),
        "event_kind": F.lit("row"), "op": F.col("op"), "database": F.lit("db"), "table": F.lit("t"),
        "commit_ts": F.lit(ts) + F.col("i"), "pk_names": F.array(F.lit("id")), "pk_values": F.array(F.col("id")),
        "before": F.when(F.col("op") == "DELETE", image), "after": F.when(F.col("op") != "DELETE", image),
        "column_types": F.create_map(F.lit("id"), F.lit("bigint"), F.lit("name"), F.lit("varchar(20)")),
    }
    return frame.select(*[values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name)
                          for f in CHANGE_LOG_SCHEMA.fields])


def _rows(store, entry) -> list[tuple]:
    return sorted((r["id"], r["name"]) for r in read_entry_arrow(*store, entry).to_pylist())


def _table(warehouse):
    return load_pyiceberg_catalog(warehouse).load_table(("src", "snapshots__db__t"))


@pytest.fixture
def store(tmp_path):
    """(warehouse, source): what the store's functions take."""
    return tmp_path / "warehouse", "src"


def test_windows_are_tagged_published_and_withheld_by_the_audit(spark, store):
    warehouse = store[0]
    first = write_window_snapshot(spark, _changes(spark, [("INSERT", i, f"n{i}") for i in range(1, 6)], W1),
                                  *store, W1, W1 + HOUR, None)
    entry = first.tables["db.t"]
    assert entry.identifier == "src.snapshots__db__t" and entry.rows == 5
    assert first.tag == end_tag(W1 + HOUR) == "end-20260101T0100Z"
    table = _table(warehouse)
    assert table.metadata.refs["end-20260101T0100Z"].snapshot_id == entry.snapshot_id
    assert table.current_snapshot().snapshot_id == entry.snapshot_id

    # An audit that fails withholds the window: no tag, main unchanged, no manifest.
    second = _changes(spark, [("UPDATE", 1, "changed"), ("DELETE", 2, "n2"), ("INSERT", 9, "n9")], W1 + HOUR)
    with pytest.raises(WindowWithheld, match="not published: the audit said no.*branch window-"):
        write_window_snapshot(spark, second, *store, W1 + HOUR, W1 + 2 * HOUR, first,
                              audit=lambda manifest: "the audit said no")
    table = _table(warehouse)
    assert "end-20260101T0200Z" not in table.metadata.refs
    assert table.current_snapshot().snapshot_id == entry.snapshot_id
    assert list_manifests(*store) == [W1]
    withheld = table.metadata.refs[f"window-{W1 + HOUR}"].snapshot_id  # left for inspection
    assert sorted((r["id"], r["name"]) for r in table.scan(snapshot_id=withheld).to_arrow().to_pylist()) == [
        (1, "changed"), (3, "n3"), (4, "n4"), (5, "n5"), (9, "n9")]

    # The audit passes: the window is a MERGE of the touched keys, tagged and on main.
    published = write_window_snapshot(spark, second, *store, W1 + HOUR, W1 + 2 * HOUR, first,
                                      audit=lambda manifest: None)
    entry2 = published.tables["db.t"]
    assert (entry2.rows, entry2.inserted_keys, entry2.deleted_keys) == (5, 1, 1)
    assert _rows(store, entry2) == [(1, "changed"), (3, "n3"), (4, "n4"), (5, "n5"), (9, "n9")]
    table = _table(warehouse)
    assert table.metadata.refs["end-20260101T0200Z"].snapshot_id == entry2.snapshot_id
    assert table.current_snapshot().snapshot_id == entry2.snapshot_id
    assert not [r for r in table.metadata.refs if r.startswith("window-")]
    assert _rows(store, entry) == [(i, f"n{i}") for i in range(1, 6)]  # the first window's state is kept


def test_quiet_windows_and_reruns_move_tags_only(spark, store):
    warehouse = store[0]
    first = write_window_snapshot(spark, _changes(spark, [("INSERT", 1, "a")], W1), *store, W1, W1 + HOUR, None)
    second = write_window_snapshot(spark, _changes(spark, [("INSERT", 2, "b")], W1 + HOUR), *store,
                                   W1 + HOUR, W1 + 2 * HOUR, first)
    quiet = carry_forward_windows(*store, [W1 + 2 * HOUR], HOUR, second)
    table = _table(warehouse)
    assert quiet.carried_forward and quiet.tag == "end-20260101T0300Z"
    assert table.metadata.refs["end-20260101T0300Z"].snapshot_id == second.tables["db.t"].snapshot_id

    # The second window again, with other content: its tag and the quiet window's follow it.
    redo = write_window_snapshot(spark, _changes(spark, [("INSERT", 3, "c")], W1 + HOUR), *store,
                                 W1 + HOUR, W1 + 2 * HOUR, first)
    table = _table(warehouse)
    new_id = redo.tables["db.t"].snapshot_id
    assert new_id != second.tables["db.t"].snapshot_id
    assert table.metadata.refs["end-20260101T0200Z"].snapshot_id == new_id
    assert table.metadata.refs["end-20260101T0300Z"].snapshot_id == new_id
    assert read_manifest(*store, W1 + 2 * HOUR).tables["db.t"].snapshot_id == new_id
    assert _rows(store, redo.tables["db.t"]) == [(1, "a"), (3, "c")]

    # An old window again: its own tag moves; main and the newer tags stay.
    old = write_window_snapshot(spark, _changes(spark, [("INSERT", 7, "z")], W1), *store, W1, W1 + HOUR, None)
    table = _table(warehouse)
    assert table.metadata.refs["end-20260101T0100Z"].snapshot_id == old.tables["db.t"].snapshot_id
    assert table.metadata.refs["end-20260101T0200Z"].snapshot_id == new_id
    assert table.current_snapshot().snapshot_id == new_id


def _windows_table(warehouse):
    return load_pyiceberg_catalog(warehouse).load_table(("src", "snapshot_windows"))


def test_two_runs_of_one_window_the_later_commit_fails_and_a_rerun_succeeds(spark, store):
    """Optimistic concurrency: run A starts window 2, run B builds and commits window 2 while A
    is still at it; A then fails with a clear error before publishing anything, so `main`, the
    tag and the manifest stay B's. Run A again: it commits."""
    warehouse = store[0]
    first = write_window_snapshot(spark, _changes(spark, [("INSERT", 1, "a")], W1), *store, W1, W1 + HOUR, None)
    by_b = []

    def b_commits_meanwhile(manifest: WindowManifest) -> None:  # A's audit: A has written its tables
        by_b.append(write_window_snapshot(spark, _changes(spark, [("INSERT", 2, "b")], W1 + HOUR), *store,
                                          W1 + HOUR, W1 + 2 * HOUR, first))
        return None

    with pytest.raises(ManifestConflict, match=f"window {W1 + HOUR} of source 'src' was committed by another "
                                               "run while this one was building it: this run committed nothing"):
        write_window_snapshot(spark, _changes(spark, [("INSERT", 3, "c")], W1 + HOUR), *store, W1 + HOUR,
                              W1 + 2 * HOUR, first, audit=b_commits_meanwhile)
    b_id = by_b[0].tables["db.t"].snapshot_id
    table = _table(warehouse)
    assert table.current_snapshot().snapshot_id == b_id
    assert table.metadata.refs["end-20260101T0200Z"].snapshot_id == b_id
    assert read_manifest(*store, W1 + HOUR).tables["db.t"].snapshot_id == b_id
    assert _rows(store, read_manifest(*store, W1 + HOUR).tables["db.t"]) == [(1, "a"), (2, "b")]

    again = write_window_snapshot(spark, _changes(spark, [("INSERT", 3, "c")], W1 + HOUR), *store, W1 + HOUR,
                                  W1 + 2 * HOUR, first)
    assert _rows(store, read_manifest(*store, W1 + HOUR).tables["db.t"]) == [(1, "a"), (3, "c")]
    assert _table(warehouse).current_snapshot().snapshot_id == again.tables["db.t"].snapshot_id
    assert list_manifests(*store) == [W1, W1 + HOUR]


def test_a_commit_of_other_windows_in_between_is_no_conflict(spark, store):
    """The windows table moved on since the run started, but not on its window: the commit is
    retried on the new state."""
    first = write_window_snapshot(spark, _changes(spark, [("INSERT", 1, "a")], W1), *store, W1, W1 + HOUR, None)
    since = manifests.begin(*store)
    carry_forward_windows(*store, [W1 + HOUR], HOUR, first)  # another writer, another window
    manifests.commit(*store, since, [replace(first, window_start_ms=W1 + 5 * HOUR, window_end_ms=W1 + 6 * HOUR)])
    assert list_manifests(*store) == [W1, W1 + HOUR, W1 + 5 * HOUR]
    assert read_manifest(*store, W1 + HOUR).carried_forward
    with pytest.raises(ManifestConflict, match=f"window {W1 + HOUR} "):
        manifests.commit(*store, since, [replace(first, window_start_ms=W1 + HOUR, window_end_ms=W1 + 2 * HOUR)])


def test_a_stored_manifest_reads_back_as_written_and_round_trips(spark, store):
    """The row's JSON document is `WindowManifest.to_json` of the manifest the write returned;
    read back, it is that manifest again, and written again, the same document."""
    first = write_window_snapshot(spark, _changes(spark, [("INSERT", 1, "a"), ("INSERT", 2, "b")], W1),
                                  *store, W1, W1 + HOUR, None)
    carry_forward_windows(*store, [W1 + HOUR], HOUR, first)
    rows = _windows_table(store[0]).scan().to_arrow().to_pylist()
    stored = {r["window_start_ms"]: json.loads(r["manifest"]) for r in rows}
    assert stored[W1] == first.to_json() and WindowManifest.from_json(stored[W1]) == first
    entry = stored[W1]["tables"]["db.t"]
    assert set(entry) == {"database", "table", "identifier", "snapshot_id", "rows", "previous_rows", "inserted_keys",
                          "deleted_keys", "removed_by_ddl", "moved_in", "conversion_failures",
                          "written_window_start_ms", "schema", "spark_schema", "schema_changes", "table_uuid"}
    assert set(stored[W1 + HOUR]) == {"window_start_ms", "window_end_ms", "tag", "ddl", "carried_forward",
                                      "carried_from_window_start_ms"}
    for doc in stored.values():
        assert WindowManifest.from_json(doc).to_json() == doc


def test_many_quiet_windows_are_one_commit_of_small_rows(spark, store):
    warehouse = store[0]
    first = write_window_snapshot(spark, _changes(spark, [("INSERT", 1, "a")], W1), *store, W1, W1 + HOUR, None)
    commits = len(_windows_table(warehouse).metadata.metadata_log)
    starts = [W1 + i * HOUR for i in range(1, 201)]
    last = carry_forward_windows(*store, starts, HOUR, first)
    table = _windows_table(warehouse)
    assert len(table.metadata.metadata_log) == commits + 1  # one catalog commit for 200 windows
    assert last.window_start_ms == starts[-1] and last.carried_forward
    assert list_manifests(*store) == [W1, *starts]
    # A quiet window's row refers to the window with data; a read resolves its tables.
    stored = table.scan(row_filter=f"window_start_ms = {starts[100]}").to_arrow().to_pylist()
    assert [json.loads(r["manifest"]).get("tables") for r in stored] == [None]
    quiet = read_manifest(*store, starts[100])
    entry = quiet.tables["db.t"]
    assert (entry.snapshot_id, entry.rows, entry.inserted_keys) == (
        first.tables["db.t"].snapshot_id, 1, 0)
    assert quiet.window_end_ms == starts[100] + HOUR and quiet.tag == end_tag(starts[100] + HOUR)
    assert read_manifests(*store)[starts[-1]].tables == quiet.tables


def test_a_warehouse_of_json_manifests_is_a_clear_error(spark, store):
    """Snapshot tables but no windows table: an older cdc_assets committed them with JSON files."""
    import pyarrow as pa

    warehouse, source = store
    warehouse.mkdir(parents=True)
    catalog = load_pyiceberg_catalog(warehouse)
    catalog.create_namespace(source)
    catalog.create_table((source, "snapshots__db__t"), pa.schema([("id", pa.int64())]))
    for read in (lambda: list_manifests(*store), lambda: read_manifest(*store, W1)):
        with pytest.raises(OldFormatWarehouse, match="committed by JSON manifest files .* replay the dump into a "
                                                     "new warehouse"):
            read()
