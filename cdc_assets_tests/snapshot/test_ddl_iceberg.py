"""DDL as Iceberg operations, on hand-made change-log rows written through the snapshot store:
DROP TABLE / DROP DATABASE and TRUNCATE are commits (main and the window's tag read empty, the
tags before keep the rows), RENAME TABLE renames the Iceberg table (history and tags follow,
earlier manifests still read), a swap moves both tables, and a rename onto a table the catalog
keeps (dropped earlier) falls back to writing the rows there. Every commit carries the window
in its summary."""

from __future__ import annotations

import pytest

from cdc_assets.common.iceberg_tables import end_tag, table_name
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.common.warehouse_listing import warehouse_tables
from cdc_assets.contracts.schemas import CHANGE_LOG_SCHEMA
from cdc_assets.snapshot.entry_tables import read_entry, read_entry_arrow
from cdc_assets.snapshot.store import write_window_snapshot

HOUR = 3_600_000
W1 = 1_767_225_600_000  # 2026-01-01T00:00Z
TYPES = {"id": "bigint", "name": "varchar(20)"}


class _Window:
    """One window's change-log rows, in commit order (a second apart)."""

    def __init__(self, start_ms: int):
        self.start_ms, self.events = start_ms, []

    def _event(self, kind: str, database: str, table: str, **fields) -> _Window:
        n = len(self.events)
        event = {f.name: None for f in CHANGE_LOG_SCHEMA.fields}
        event.update(topic="t", kafka_partition=0, kafka_offset=n, event_index=0, event_kind=kind,
                     database=database, table=table, commit_ts=ms_to_tso(self.start_ms + 1_000 * (n + 1)), **fields)
        self.events.append(event)
        return self

    def insert(self, table: str, key: int, name: str, database: str = "db") -> _Window:
        values = {"id": str(key), "name": name}
        return self._event("row", database, table, op="INSERT", pk_names=["id"], pk_values=[str(key)],
                           after=values, column_types=TYPES)

    def ddl(self, table: str, sql: str, ddl_type: str = "ALTER", database: str = "db") -> _Window:
        return self._event("ddl", database, table, ddl_type=ddl_type, ddl_sql=sql)

    def write(self, spark, snapshots, previous: dict | None) -> dict:
        changes = spark.createDataFrame(self.events, CHANGE_LOG_SCHEMA)
        return write_window_snapshot(spark, changes, *snapshots, self.start_ms, self.start_ms + HOUR, previous,
                                     global_watermark_ts=ms_to_tso(self.start_ms + HOUR))


@pytest.fixture
def snapshots(tmp_path):
    """The snapshot store's (warehouse, source)."""
    return tmp_path / "warehouse", "src"


def _catalog(snapshots):
    return load_pyiceberg_catalog(snapshots[0])


def _ident(database: str, table: str) -> str:
    return "src." + table_name("snapshots", database, table)


def _at(snapshots, identifier: str, ref: str) -> list[tuple]:
    """The table's rows at a tag or branch, read by pyiceberg."""
    table = _catalog(snapshots).load_table(identifier)
    snapshot = table.snapshot_by_name(ref)
    return sorted((r["id"], r["name"]) for r in table.scan(snapshot_id=snapshot.snapshot_id).to_arrow().to_pylist())


def _entry_rows(snapshots, entry) -> list[tuple]:
    return sorted((r["id"], r["name"]) for r in read_entry_arrow(*snapshots, entry).to_pylist())


def _spark_rows(spark, snapshots, entry) -> list[tuple]:
    return sorted((r["id"], r["name"]) for r in read_entry(spark, *snapshots, entry).collect())


def _tags(n: int) -> list[str]:
    return [end_tag(W1 + i * HOUR) for i in range(1, n + 1)]


def test_drop_and_truncate_are_commits_and_a_later_create_starts_empty_on_the_same_table(spark, snapshots):
    t1, t2, t3 = _tags(3)
    first = (_Window(W1).insert("a", 1, "a1").insert("a", 2, "a2").insert("b", 1, "b1").insert("b", 2, "b2")
             .insert("c", 1, "c1", database="d2").write(spark, snapshots, None))
    uuid_a = first.tables["db.a"].table_uuid
    assert uuid_a == str(_catalog(snapshots).load_table(_ident("db", "a")).metadata.table_uuid)

    second = (_Window(W1 + HOUR).ddl("a", "DROP TABLE db.a", "ERASE").ddl("b", "TRUNCATE TABLE db.b", "TRUNCATE")
              .ddl("", "DROP DATABASE d2", "QUERY", database="d2").write(spark, snapshots, first))
    assert set(second.tables) == {"db.b"}
    dropped = second.ddl.dropped_tables
    assert set(dropped) == {"db.a", "d2.c"} and dropped["d2.c"]["by"] == "DROP DATABASE"
    catalog = _catalog(snapshots)
    for tid, database, table, rows in [("db.a", "db", "a", [(1, "a1"), (2, "a2")]), ("d2.c", "d2", "c", [(1, "c1")])]:
        identifier = _ident(database, table)
        assert dropped[tid]["identifier"] == identifier
        iceberg = catalog.load_table(identifier)  # still in the catalog: time travel reads it
        assert iceberg.current_snapshot().snapshot_id == dropped[tid]["snapshot_id"]
        assert iceberg.scan().to_arrow().num_rows == 0  # main: empty
        assert _at(snapshots, identifier, t2) == []
        assert _at(snapshots, identifier, t1) == rows
        assert f"window-{W1 + HOUR}" not in iceberg.metadata.refs  # published: the branch is gone
    # TRUNCATE: a commit of its own, tagged, empty; the tag before keeps the rows
    b2 = second.tables["db.b"]
    assert b2.snapshot_id != first.tables["db.b"].snapshot_id and b2.rows == 0
    assert _at(snapshots, _ident("db", "b"), t2) == [] and _at(snapshots, _ident("db", "b"), t1) == [(1, "b1"), (2, "b2")]
    # The emptying commits say which window made them, like every other commit.
    summary = catalog.load_table(_ident("db", "a")).current_snapshot().summary.additional_properties
    assert summary["cdc.window-start-ms"] == str(W1 + HOUR)
    assert summary["cdc.window-end-ms"] == str(W1 + 2 * HOUR)
    assert summary["cdc.window-end-tso"] == str(ms_to_tso(W1 + 2 * HOUR))
    assert summary["cdc.global-watermark-tso"] == str(ms_to_tso(W1 + 2 * HOUR))

    # A later CREATE of the dropped name: the same Iceberg table, its schema evolved, from empty.
    third = (_Window(W1 + 2 * HOUR)
             .ddl("a", "CREATE TABLE db.a (id BIGINT PRIMARY KEY, name VARCHAR(20), note INT)", "CREATE")
             .insert("a", 7, "a7").insert("b", 3, "b3").write(spark, snapshots, second))
    a3 = third.tables["db.a"]
    assert a3.identifier == _ident("db", "a") and a3.table_uuid == uuid_a and a3.rows == 1
    assert _at(snapshots, _ident("db", "a"), t3) == [(7, "a7")]
    assert _at(snapshots, _ident("db", "a"), t1) == [(1, "a1"), (2, "a2")]
    assert [f.name for f in catalog.load_table(_ident("db", "a")).schema().fields][:3] == ["id", "name", "note"]
    # b: rows alone changed, a MERGE of the touched keys (an append: it only inserts); it
    # carries the window too.
    merged = _catalog(snapshots).load_table(_ident("db", "b")).current_snapshot().summary
    assert merged.additional_properties["cdc.window-start-ms"] == str(W1 + 2 * HOUR)
    assert merged.additional_properties["cdc.window-end-tso"] == str(ms_to_tso(W1 + 3 * HOUR))
    # the earlier windows' entries still read their rows
    assert _entry_rows(snapshots, first.tables["db.a"]) == [(1, "a1"), (2, "a2")]


def test_rename_moves_the_iceberg_table_and_earlier_windows_still_read(spark, snapshots):
    t1, t2, t3, t4 = _tags(4)
    first = (_Window(W1).insert("a", 1, "a1").insert("a", 2, "a2").insert("b", 10, "b10")
             .write(spark, snapshots, None))
    a1, b1 = first.tables["db.a"], first.tables["db.b"]

    # a -> c in the same database, b -> other.b across databases, then a row on c
    second = (_Window(W1 + HOUR).ddl("a", "RENAME TABLE db.a TO db.c", "RENAME")
              .ddl("b", "RENAME TABLE db.b TO other.b", "RENAME").insert("c", 3, "c3")
              .write(spark, snapshots, first))
    assert set(second.tables) == {"db.c", "other.b"}
    assert second.ddl.renamed_tables == {
        "db.c": {"from": "db.a", "identifier": _ident("db", "c"), "previous_identifier": _ident("db", "a")},
        "other.b": {"from": "db.b", "identifier": _ident("other", "b"), "previous_identifier": _ident("db", "b")}}
    catalog = _catalog(snapshots)
    assert not catalog.table_exists(_ident("db", "a")) and not catalog.table_exists(_ident("db", "b"))
    c = catalog.load_table(_ident("db", "c"))
    assert str(c.metadata.table_uuid) == a1.table_uuid == second.tables["db.c"].table_uuid
    assert _at(snapshots, _ident("db", "c"), t1) == [(1, "a1"), (2, "a2")]  # the history came along
    assert _at(snapshots, _ident("db", "c"), t2) == [(1, "a1"), (2, "a2"), (3, "c3")]
    assert _at(snapshots, _ident("other", "b"), t1) == [(10, "b10")]
    assert second.tables["db.c"].moved_in == 2
    # the first window's entries name the old identifiers: still read, by pyiceberg and Spark
    assert _entry_rows(snapshots, a1) == _spark_rows(spark, snapshots, a1) == [(1, "a1"), (2, "a2")]
    assert _entry_rows(snapshots, b1) == _spark_rows(spark, snapshots, b1) == [(10, "b10")]

    # a swap in one statement: c <-> other.b through tmp
    third = (_Window(W1 + 2 * HOUR)
             .ddl("c", "RENAME TABLE db.c TO db.tmp, other.b TO db.c, db.tmp TO other.b", "RENAME")
             .insert("c", 11, "b11").write(spark, snapshots, second))
    assert _entry_rows(snapshots, third.tables["db.c"]) == [(10, "b10"), (11, "b11")]
    assert _entry_rows(snapshots, third.tables["other.b"]) == [(1, "a1"), (2, "a2"), (3, "c3")]
    catalog = _catalog(snapshots)
    assert str(catalog.load_table(_ident("other", "b")).metadata.table_uuid) == a1.table_uuid
    assert str(catalog.load_table(_ident("db", "c")).metadata.table_uuid) == b1.table_uuid
    assert _at(snapshots, _ident("other", "b"), t1) == [(1, "a1"), (2, "a2")]
    assert _at(snapshots, _ident("db", "c"), t2) == [(10, "b10")]  # b's rows, under the name it had then
    assert not [i for i in catalog.list_tables(("src",)) if "renaming" in i[1]]  # no temporary name left
    for manifest in (first, second):  # every earlier entry still reads its rows
        for entry in manifest.tables.values():
            assert _entry_rows(snapshots, entry) == _spark_rows(spark, snapshots, entry)
    assert _entry_rows(snapshots, second.tables["db.c"]) == [(1, "a1"), (2, "a2"), (3, "c3")]

    # A new table under the first name: a new Iceberg table, in a folder of its own.
    fourth = _Window(W1 + 3 * HOUR).insert("a", 5, "new").write(spark, snapshots, third)
    new_a = catalog.load_table(_ident("db", "a"))
    assert str(new_a.metadata.table_uuid) not in (a1.table_uuid, b1.table_uuid)
    assert new_a.location() != catalog.load_table(_ident("other", "b")).location()
    assert _at(snapshots, _ident("db", "a"), t4) == [(5, "new")]
    assert _entry_rows(snapshots, a1) == _spark_rows(spark, snapshots, a1) == [(1, "a1"), (2, "a2")]
    assert fourth.tables["db.a"].table_uuid == str(new_a.metadata.table_uuid)
    listed = {(t.database, t.table): t.tags for t in warehouse_tables(snapshots[0], "src")
              if t.layer == "snapshots"}
    assert listed == {("db", "a"): (t4,), ("db", "c"): (t1, t2, t3, t4), ("other", "b"): (t1, t2, t3, t4)}


def test_a_rename_onto_a_table_the_catalog_keeps_writes_the_rows_there(spark, snapshots):
    t1, t2, t3 = _tags(3)
    first = _Window(W1).insert("a", 1, "a1").insert("b", 9, "b9").write(spark, snapshots, None)
    second = _Window(W1 + HOUR).ddl("b", "DROP TABLE db.b", "ERASE").write(spark, snapshots, first)
    third = _Window(W1 + 2 * HOUR).ddl("a", "RENAME TABLE db.a TO db.b", "RENAME").write(spark, snapshots, second)
    # db.b's Iceberg table (dropped, kept for time travel) takes the rows; db.a's ends empty
    assert third.ddl.renamed_tables == {}
    assert third.ddl.dropped_tables["db.a"]["identifier"] == _ident("db", "a")
    assert _at(snapshots, _ident("db", "b"), t3) == [(1, "a1")]
    assert _at(snapshots, _ident("db", "b"), t1) == [(9, "b9")] and _at(snapshots, _ident("db", "b"), t2) == []
    assert _at(snapshots, _ident("db", "a"), t3) == [] and _at(snapshots, _ident("db", "a"), t1) == [(1, "a1")]
    assert third.tables["db.b"].table_uuid == first.tables["db.b"].table_uuid
