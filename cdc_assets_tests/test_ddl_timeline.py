"""DDL applied as barriers, end to end: every statement of issue 4, one mid-window and one between
two updates of the same row; snapshots and point-in-time reads against a brute-force replay."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance

from cdc_assets.common.iceberg_tables import table_name
from cdc_assets.common.tso import ms_to_tso
from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.replay import replay
from cdc_assets.simulator.kafka import KafkaMessage
from cdc_assets.simulator.writers import StorageSinkWriter
from cdc_assets.snapshot.entry_tables import read_entry_arrow
from cdc_assets.snapshot.export import export_snapshot
from cdc_assets.snapshot.history import END_OP, VALID_FROM, VALID_TO
from cdc_assets.snapshot.history_read import full_history, read_history
from cdc_assets.snapshot.point_in_time import parse_instant, tables_as_of
from cdc_assets.snapshot.reconstruct import COMMIT_TS_COLUMN
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.ddl_upstream import Table, Upstream, add_column, drop_column, rename_column
from cdc_assets_tests.e2e import settings_for

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z; windows are hourly
HOUR = 3_600_000
ITEMS, TMP, TMP2, GONE, OTHER = ("shop", "items"), ("shop", "tmp"), ("shop", "tmp2"), ("shop", "gone"), ("other", "t")
GHO, DEL = ("shop", "_tmp2_gho"), ("shop", "_tmp2_del")  # gh-ost's copy of tmp2, and the old tmp2


def _scenario() -> Upstream:
    u = Upstream(T0 + 1_000)
    # window 1
    u.ddl("QUERY", "shop", "", "CREATE DATABASE shop", lambda ts: None)
    u.ddl("CREATE", "shop", "items", "CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20), qty INT)",
          lambda ts: ts.__setitem__(ITEMS, Table([("id", "int"), ("name", "varchar(20)"), ("qty", "int")], ["id"])))
    for i in (1, 2, 3):
        u.after(1_000).insert(ITEMS, {"id": i, "name": f"n{i}", "qty": i * 10})
    u.after(1_000).update(ITEMS, (1,), name="a1")
    u.after(600_000).ddl("ALTER", "shop", "items",  # mid-window
                         "ALTER TABLE `shop`.`items` ADD COLUMN price DECIMAL(10,2) NOT NULL DEFAULT 9.99",
                         add_column(ITEMS, "price", "decimal(10,2)", Decimal("9.99")))
    u.after(1_000).insert(ITEMS, {"id": 4, "name": "n4", "qty": 40, "price": Decimal("1.50")})
    u.after(1_000).update(ITEMS, (2,), qty=21)  # the same row, before and after a column rename
    u.after(1_000).ddl("ALTER", "shop", "items", "ALTER TABLE items RENAME COLUMN qty TO stock",
                       rename_column(ITEMS, "qty", "stock"))
    u.after(1_000).update(ITEMS, (2,), stock=22)
    u.after(1_000).ddl("CREATE", "shop", "tmp", "CREATE TABLE tmp (k VARCHAR(10) PRIMARY KEY, v INT)",
                       lambda ts: ts.__setitem__(TMP, Table([("k", "varchar(10)"), ("v", "int")], ["k"])))
    u.after(1_000).insert(TMP, {"k": "a", "v": 1})
    u.after(1_000).insert(TMP, {"k": "b", "v": 2})
    u.ms = T0 + HOUR - 10_000
    u.watermark()
    # window 2
    u.ms = T0 + HOUR + 1_000
    u.ddl("ALTER", "shop", "items", "ALTER TABLE shop.items MODIFY COLUMN stock BIGINT",
          rename_column(ITEMS, "stock", "stock", "bigint"))
    u.after(1_000).ddl("ALTER", "shop", "items", "ALTER TABLE shop.items DROP COLUMN name",
                       drop_column(ITEMS, "name"))
    u.after(1_000).delete(ITEMS, (3,))
    u.after(1_000).ddl("TRUNCATE", "shop", "tmp", "TRUNCATE TABLE shop.tmp", lambda ts: ts[TMP].rows.clear(), ends="TRUNCATE")
    u.after(1_000).insert(TMP, {"k": "x", "v": 9})
    u.after(1_000).ddl("RENAME", "shop", "tmp2", "RENAME TABLE shop.tmp TO shop.tmp2",
                       lambda ts: ts.__setitem__(TMP2, ts.pop(TMP)), ends="RENAME_TABLE")
    u.after(1_000).update(TMP2, ("x",), v=10)
    u.after(1_000).ddl("CREATE", "shop", "gone", "CREATE TABLE shop.gone (id INT PRIMARY KEY)",
                       lambda ts: ts.__setitem__(GONE, Table([("id", "int")], ["id"])))
    u.after(1_000).insert(GONE, {"id": 1})
    u.after(1_000).ddl("ERASE", "shop", "gone", "DROP TABLE shop.gone", lambda ts: ts.pop(GONE), ends="DROP_TABLE")
    u.ms = T0 + 2 * HOUR - 10_000
    u.watermark()
    # window 3
    u.ms = T0 + 2 * HOUR + 1_000
    u.ddl("CREATE", "shop", "gone", "CREATE TABLE shop.gone (id INT PRIMARY KEY, note TEXT)",  # re-create
          lambda ts: ts.__setitem__(GONE, Table([("id", "int"), ("note", "text")], ["id"])))
    u.after(1_000).insert(GONE, {"id": 7, "note": "back"})
    u.after(1_000).ddl("QUERY", "other", "", "CREATE DATABASE other", lambda ts: None)
    u.after(1_000).ddl("CREATE", "other", "t", "CREATE TABLE other.t (id INT PRIMARY KEY)",
                       lambda ts: ts.__setitem__(OTHER, Table([("id", "int")], ["id"])))
    u.after(1_000).insert(OTHER, {"id": 5})
    u.after(1_000).ddl("QUERY", "other", "", "DROP DATABASE other", lambda ts: ts.pop(OTHER),
                       ends="DROP_DATABASE")
    u.after(1_000).ddl("ALTER", "shop", "items", "ALTER TABLE shop.items CHANGE COLUMN stock qty2 INT",
                       rename_column(ITEMS, "stock", "qty2", "int"))
    u.after(1_000).update(ITEMS, (4,), qty2=41)
    u.after(1_000).ddl("ALTER", "shop", "items", "ALTER TABLE shop.items ADD INDEX i_qty (qty2)", lambda ts: None)
    # an online schema change of tmp2 the way gh-ost does it: a copy, altered (MySQL's list form of
    # ADD COLUMN), the rows copied while writes go on, then swapped in and the old table dropped
    u.after(1_000).ddl("CREATE", "shop", "_tmp2_gho",
                       "create /* gh-ost */ table `shop`.`_tmp2_gho` like `shop`.`tmp2`",
                       lambda ts: ts.__setitem__(GHO, Table(list(ts[TMP2].columns), list(ts[TMP2].pk))))
    u.after(1_000).ddl("ALTER", "shop", "_tmp2_gho",
                       "alter /* gh-ost */ table `shop`.`_tmp2_gho` add column (w int, note varchar(8) default 'n')",
                       lambda ts: (add_column(GHO, "w", "int", None)(ts),
                                   add_column(GHO, "note", "varchar(8)", "n")(ts)))
    u.after(1_000).insert(GHO, {"k": "x", "v": 10, "note": "n"})  # the copy
    u.after(1_000).insert(TMP2, {"k": "y", "v": 11})  # a write meanwhile, and gh-ost applying it
    u.after(1_000).insert(GHO, {"k": "y", "v": 11, "note": "n"})
    u.after(1_000).ddl("RENAME", "shop", "_tmp2_gho",
                       "rename /* gh-ost */ table `shop`.`tmp2` to `shop`.`_tmp2_del`, "
                       "`shop`.`_tmp2_gho` to `shop`.`tmp2`",
                       lambda ts: (ts.__setitem__(DEL, ts.pop(TMP2)), ts.__setitem__(TMP2, ts.pop(GHO))),
                       moves=((TMP2, DEL), (GHO, TMP2)))
    u.after(1_000).ddl("ERASE", "shop", "_tmp2_del", "drop /* gh-ost */ table if exists `shop`.`_tmp2_del`",
                       lambda ts: ts.pop(DEL), ends="DROP_TABLE")
    u.after(1_000).update(TMP2, ("y",), w=3)
    u.ms = T0 + 3 * HOUR + 1_000
    u.watermark()
    return u


def _expected(u: Upstream, tso: int) -> dict[tuple[str, str], tuple[list[str], list[tuple]]]:
    return {
        name: ([c for c, _ in t.columns], sorted(tuple(r[c] for c, _ in t.columns) for r in t.rows.values()))
        for name, t in u.state_at(tso).items()
    }


def _rows(columns: list[str], records: list[dict]) -> list[tuple]:
    return sorted(tuple(r[c] for c in columns) for r in records)


@pytest.fixture(scope="module")
def ddl_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddl")
    u = _scenario()
    dump = tmp / "dump"
    dump.mkdir()
    (dump / "topic.txt").write_text("\n".join(u.lines) + "\n")
    settings = settings_for(tmp / "home", dump, layout="lines")
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    return u, settings, summary


def _as_storage_sink(u: Upstream, root: Path) -> None:
    """The same changes as TiCDC's storage sink writes them (the simulator's writer)."""
    writer = StorageSinkWriter(root)
    for offset, line in enumerate(u.lines):
        writer.write(KafkaMessage(0, offset, 0, None, line.encode()))
    writer.close()


@pytest.fixture(scope="module")
def storage_sink_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddl_sink")
    u = _scenario()
    _as_storage_sink(u, tmp / "sink")
    settings = settings_for(tmp / "home", tmp / "sink", layout="storage-sink")
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    return u, settings, summary


@pytest.mark.parametrize("run", ["ddl_run", "storage_sink_run"])
def test_every_window_snapshot_equals_the_brute_force_replay(run, request):
    u, settings, summary = request.getfixturevalue(run)
    assert summary.ok and summary.windows == 3 and summary.quarantined == 0
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    for window in list_manifests(*snapshots):
        manifest = read_manifest(*snapshots, window)
        got = {}
        for entry in manifest.tables.values():
            table = read_entry_arrow(*snapshots, entry)
            columns = [c for c in table.column_names if c != COMMIT_TS_COLUMN]
            got[(entry.database, entry.table)] = (columns, _rows(columns, table.to_pylist()))
        assert got == _expected(u, ms_to_tso(manifest.window_end_ms) - 1), window
        assert manifest.ddl.unparsed == []


def test_schema_changes_are_recorded_with_their_commit_ts(ddl_run):
    u, settings, _ = ddl_run
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    first, second, third = (read_manifest(*snapshots, w) for w in list_manifests(*snapshots))
    items = first.tables["shop.items"]
    assert [c["columns"] for c in items.schema_changes] == [
        ["id", "name", "qty"], ["id", "name", "qty", "price"], ["id", "name", "stock", "price"]]
    assert all(c["commit_ts"] in u.commits for c in items.schema_changes)
    assert second.tables["shop.items"].schema["mysql_types"]["stock"] == "bigint"
    assert set(second.ddl.dropped_tables) == {"shop.tmp", "shop.gone"}
    assert second.ddl.dropped_tables["shop.tmp"]["by"] == "RENAME TABLE to shop.tmp2"
    assert second.tables["shop.tmp2"].moved_in == 1
    assert third.ddl.dropped_tables["other.t"]["by"] == "DROP DATABASE"
    assert "other.t" not in third.tables


def test_the_rename_renamed_the_iceberg_table_and_its_tags_read_the_rows_before(ddl_run):
    """RENAME TABLE shop.tmp TO shop.tmp2 (window 2) renamed the Iceberg table: no table under
    the old name, the new one is the same table (UUID) whose first window's tag reads tmp's
    rows; the gh-ost swap of window 3 (a copy created in the window) writes tmp2's table."""
    u, settings, _ = ddl_run
    snapshots = settings.warehouse, "src"
    first, second, third = (read_manifest(*snapshots, w) for w in list_manifests(*snapshots))
    catalog = load_pyiceberg_catalog(settings.warehouse)
    old, new = ("src." + table_name("snapshots", *name) for name in (TMP, TMP2))
    assert not catalog.table_exists(old)
    tmp2 = catalog.load_table(new)
    assert str(tmp2.metadata.table_uuid) == first.tables["shop.tmp"].table_uuid
    assert second.ddl.renamed_tables == {"shop.tmp2": {"from": "shop.tmp", "identifier": new,
                                                             "previous_identifier": old}}
    at_first = tmp2.scan(snapshot_id=tmp2.snapshot_by_name(first.tag).snapshot_id).to_arrow().to_pylist()
    assert _rows(["k", "v"], at_first) == _expected(u, ms_to_tso(first.window_end_ms) - 1)[TMP][1]
    assert third.tables["shop.tmp2"].table_uuid == str(tmp2.metadata.table_uuid)
    assert third.ddl.renamed_tables == {}  # gh-ost's copy was created in the window: no Iceberg table moved
    # every commit says which window made it, and the global watermark that completed it
    for manifest in (first, second, third):
        entry = manifest.tables["shop.items"]
        summary = catalog.load_table(entry.identifier).snapshot_by_id(entry.snapshot_id).summary
        props = summary.additional_properties
        assert props["cdc.window-start-ms"] == str(manifest.window_start_ms)
        assert props["cdc.window-end-tso"] == str(ms_to_tso(manifest.window_end_ms))
        assert int(props["cdc.global-watermark-tso"]) >= ms_to_tso(manifest.window_end_ms)
    # the tables created and dropped inside one window never had an Iceberg table
    assert not catalog.table_exists("src." + table_name("snapshots", *OTHER))


def test_point_in_time_equals_the_brute_force_replay_at_random_instants(ddl_run, spark):
    u, settings, _ = ddl_run
    rng = random.Random(4)
    ddl_and_rows = [ts for ts in u.commits]
    instants = sorted(set(rng.sample(ddl_and_rows, 8) + [ts - 1 for ts in rng.sample(ddl_and_rows, 4)]
                          + [rng.randrange(u.commits[0], u.commits[-1]) for _ in range(4)]))
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    window_ends = [ms_to_tso(read_manifest(*snapshots, w).window_end_ms) - 1 for w in list_manifests(*snapshots)]
    for tso in instants + window_ends:
        got = {}
        for name, t in tables_as_of(spark, *snapshots, tso).items():
            columns = [c for c in t.frame.columns if c != COMMIT_TS_COLUMN]
            got[name] = (columns, _rows(columns, [r.asDict() for r in t.frame.collect()]))
        assert got == _expected(u, tso), tso


def test_export_as_of_a_utc_time_inside_a_window_and_at_a_window_end(ddl_run, spark, tmp_path):
    u, settings, _ = ddl_run
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    inside = "2026-01-01T01:00:04.500Z"  # after DROP COLUMN name, before the DELETE of row 3
    exported = {(e.database, e.table): e for e in export_snapshot(*snapshots, tmp_path / "a", inside,
                                                                  spark=lambda: spark)}
    expected = _expected(u, parse_instant(inside))
    assert set(exported) == set(expected)
    items = pq.read_table(exported[ITEMS].path)
    assert [c for c in items.column_names if c != COMMIT_TS_COLUMN] == expected[ITEMS][0] == ["id", "stock", "price"]
    assert _rows(expected[ITEMS][0], items.to_pylist()) == expected[ITEMS][1]
    assert items.schema.field("stock").type == "int64"

    at_end = {(e.database, e.table) for e in export_snapshot(*snapshots, tmp_path / "b", "2026-01-01T02:00:00Z")}
    assert at_end == {ITEMS, TMP2}  # no Spark needed at a window end


def test_history_holds_every_ended_version_and_snapshots_the_open_ones(ddl_run, spark):
    u, settings, _ = ddl_run
    for name in {e[0] for e in u.ended}:
        present = lambda values: sorted((k, v) for k, v in values.items() if v is not None)  # noqa: E731
        expected = sorted((f, t, op, present(v)) for n, f, t, op, v in u.ended if n == name)
        frame = read_history(spark, settings.warehouse, "src", *name)
        got = sorted(
            (r[VALID_FROM], r[VALID_TO], r[END_OP],
             present({k: v for k, v in r.asDict().items() if k not in (VALID_FROM, VALID_TO, END_OP)}))
            for r in frame.collect()
        )
        assert got == expected, name
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    last = read_manifest(*snapshots, list_manifests(*snapshots)[-1])
    for entry in last.tables.values():
        name = (entry.database, entry.table)
        pk = u.tables[name].pk
        rows = read_entry_arrow(*snapshots, entry).to_pylist()
        assert {tuple(r[k] for k in pk): r[COMMIT_TS_COLUMN] for r in rows} == u.starts[name], name


def test_full_history_adds_the_open_versions(ddl_run, spark):
    u, settings, _ = ddl_run
    frame = full_history(spark, settings.warehouse, "src", *ITEMS)
    rows = frame.collect()
    open_rows = {(r["id"], r[VALID_FROM]) for r in rows if r[VALID_TO] is None}
    assert open_rows == {(key[0], ts) for key, ts in u.starts[ITEMS].items()}
    assert len(rows) - len(open_rows) == sum(1 for e in u.ended if e[0] == ITEMS)


def test_the_history_tables_read_back_with_pyiceberg_across_add_column_and_a_widened_type(ddl_run):
    """Each source table's history is the Iceberg table `src.history__<db>__<table>`: any reader
    gets every ended version. `price` came by ADD COLUMN in window 1; `stock` (RENAME of qty) was
    widened int -> bigint by MODIFY COLUMN in window 2, in place (same Iceberg field)."""
    from pyiceberg.types import DecimalType, IntegerType, LongType

    from cdc_assets.common.warehouse import load_pyiceberg_catalog
    from cdc_assets.common.iceberg_tables import table_name

    u, settings, _ = ddl_run
    catalog = load_pyiceberg_catalog(settings.warehouse)
    table = catalog.load_table(("src", table_name("history", *ITEMS)))
    schema = table.schema()
    assert schema.find_field("price").field_type == DecimalType(10, 2)
    assert schema.find_field("qty").field_type == IntegerType()
    stock = schema.find_field("stock")
    assert stock.field_type == LongType()
    assert any(s.find_field(stock.field_id).field_type == IntegerType() for s in table.metadata.schemas)

    present = lambda values: sorted((k, v) for k, v in values.items() if v is not None)  # noqa: E731
    rows = table.scan().to_arrow().to_pylist()
    got = sorted((r[VALID_FROM], r[VALID_TO], r[END_OP],
                  present({k: v for k, v in r.items() if k not in (VALID_FROM, VALID_TO, END_OP, "window_start_ms")}))
                 for r in rows)
    assert got == sorted((f, t, op, present(v)) for n, f, t, op, v in u.ended if n == ITEMS)
    # each version is in the window it ended in
    assert all(r["window_start_ms"] == T0 + ((r[VALID_TO] >> 18) - T0) // HOUR * HOUR for r in rows)
    assert {T0, T0 + HOUR} <= {r["window_start_ms"] for r in rows}
