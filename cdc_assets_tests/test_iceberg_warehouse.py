"""The warehouse read without Spark: `cdc-assets tables --json` lists every snapshot table with
its window-end tags and how pyiceberg opens the catalog; every table at every tag, read by
pyiceberg (Arrow → DuckDB) exactly as listed, has Spark's rows (`VERSION AS OF '<tag>'`) and
the simulator's brute-force truth of that window."""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from pyiceberg.catalog import load_catalog

from cdc_assets.cli import main as cli_main
from cdc_assets.common.iceberg_tables import end_tag, table_name
from cdc_assets.common.names import table_id
from cdc_assets.common.warehouse import CATALOG, CATALOG_FILE, pyiceberg_properties, use_catalog
from cdc_assets.common.warehouse_listing import SOURCE_TABLES, tables_json
from cdc_assets.simulator.compare import load_truth, snapshot_rows, truth_rows
from cdc_assets.snapshot.manifests import WindowManifest
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.e2e import simulate_and_replay

HOUR = 3_600_000
REPO = Path(__file__).resolve().parents[1]
FIELDS = ["source", "database", "table", "layer", "identifier", "tags"]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory, spark):
    tmp = tmp_path_factory.mktemp("iceberg_warehouse")
    dump, summary, settings = simulate_and_replay(tmp, seed=43, layout="kafka-parquet", row_changes=300,
                                                  duration_ms=int(2.5 * HOUR))
    assert summary.ok, summary.as_json()
    return dump, settings


def tables_cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli_main(["tables", *args])
    out, err = capsys.readouterr()
    return code, out, err


def listed(capsys, warehouse: Path, *args: str) -> dict:
    code, out, err = tables_cli(capsys, "--warehouse", str(warehouse), "--json", *args)
    assert code == 0, err
    return json.loads(out)


def manifests(settings) -> list[WindowManifest]:
    return [read_manifest(settings.warehouse, "src", w) for w in list_manifests(settings.warehouse, "src")]


def test_tables_json_lists_every_snapshot_table_with_the_tag_of_every_window(run, capsys):
    dump, settings = run
    truth = load_truth(dump.truth_path)
    doc = listed(capsys, settings.warehouse)
    assert list(doc) == ["catalog", "tables"]
    assert doc["catalog"] == {"name": CATALOG, "properties": pyiceberg_properties(settings.warehouse)}
    assert doc["tables"] and all(list(t) == FIELDS for t in doc["tables"])
    assert doc["tables"] == sorted(doc["tables"], key=lambda t: (t["source"], t["layer"], t["database"] or "",
                                                                 t["table"] or ""))
    # The windowed layers and the windows' manifests: one table per source, no tags.
    windowed = [t for t in doc["tables"] if t["database"] is None]
    assert [(t["layer"], t["identifier"], t["table"], t["tags"]) for t in windowed] == [
        (layer, f"src.{layer}", None, []) for layer in sorted(SOURCE_TABLES)]
    # The history: a table per source table that had a version end, not tagged (one table,
    # partitioned by the window that wrote the versions).
    history = [t for t in doc["tables"] if t["layer"] == "history"]
    assert history and all(t["tags"] == [] and t["identifier"] == "src." + table_name("history", t["database"],
                                                                                      t["table"]) for t in history)
    written = {tuple(n) for m in manifests(settings) for n in m.ddl.history_tables}
    assert {(t["database"], t["table"]) for t in history} == written
    tables = [t for t in doc["tables"] if t["database"] is not None and t["layer"] != "history"]
    for t in tables:
        assert t["source"] == "src" and t["layer"] == "snapshots"
        assert t["identifier"] == "src." + table_name("snapshots", t["database"], t["table"])
        assert t["tags"] == sorted(set(t["tags"]))

    # Exactly the tables the windows wrote, each tagged with the end of every window it is in.
    windows = manifests(settings)
    by_name = {(t["database"], t["table"]): t for t in tables}
    in_windows = {(e.database, e.table) for m in windows for e in m.tables.values()}
    assert set(by_name) == in_windows
    for name, t in by_name.items():
        present = [m for m in windows if table_id(*name) in m.tables]
        assert t["tags"] == [end_tag(m.window_end_ms) for m in present]
        assert present == windows[windows.index(present[0]):]  # from its first window on, no gap

    # Every complete window is materialized, and its tag is on every table that existed then:
    # each table of its manifest, which holds every table with rows in the truth.
    complete = [w for w in truth["windows"] if w["complete"]]
    assert [m.window_start_ms for m in windows] == [w["start_ms"] for w in complete]
    for w, m in zip(complete, windows):
        tag = end_tag(w["end_ms"])
        assert m.tag == tag
        with_rows = {tuple(name.split(".", 1)) for name, rows in w["tables"].items() if rows}
        existed = {(e.database, e.table) for e in m.tables.values()}
        assert with_rows <= existed
        assert all(tag in by_name[name]["tags"] for name in existed)

    # --source narrows to that source (here: the same tables)
    assert listed(capsys, settings.warehouse, "--source", "src") == doc


def test_the_tags_point_at_the_manifests_snapshots(run, capsys):
    _, settings = run
    doc = listed(capsys, settings.warehouse)
    catalog = load_catalog(doc["catalog"]["name"], **doc["catalog"]["properties"])
    for m in manifests(settings):
        for entry in m.tables.values():
            table = catalog.load_table(entry.identifier)
            assert table.snapshot_by_name(m.tag).snapshot_id == entry.snapshot_id


def _plain(value):
    """One comparable Python value (aware times in UTC, bytes as bytes)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def _rows(arrow) -> list[tuple]:
    return sorted((tuple(_plain(v) for v in r.values()) for r in arrow.to_pylist()), key=repr)


def test_every_table_at_every_tag_reads_the_same_in_pyiceberg_duckdb_spark_and_the_truth(run, spark, capsys):
    dump, settings = run
    truth = load_truth(dump.truth_path)
    window_at = {end_tag(w["end_ms"]): w for w in truth["windows"]}
    doc = listed(capsys, settings.warehouse)
    # Opened exactly as printed: nothing of the project's own code in the read path below.
    catalog = load_catalog(doc["catalog"]["name"], **doc["catalog"]["properties"])
    spark_catalog = use_catalog(spark, settings.warehouse)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    checked = 0
    snapshot_tables = [t for t in doc["tables"] if t["layer"] == "snapshots"]
    for t in snapshot_tables:
        table = catalog.load_table(t["identifier"])
        namespace, name = t["identifier"].split(".", 1)
        in_spark = f"{spark_catalog}.`{namespace}`.`{name}`"
        # The tags are pyiceberg commits made after this session loaded (and cached) the
        # table: a new reader sees them, this session once it loads the table again.
        spark.catalog.refreshTable(in_spark)
        for tag in t["tags"]:
            arrow = table.scan(snapshot_id=table.snapshot_by_name(tag).snapshot_id).to_arrow()
            con.register("at_tag", arrow)
            duck = con.execute("SELECT * FROM at_tag").to_arrow_table()
            con.unregister("at_tag")
            by_spark = spark.sql(f"SELECT * FROM {in_spark} VERSION AS OF '{tag}'").toArrow()
            assert duck.column_names == by_spark.column_names, (t["identifier"], tag)
            assert _rows(duck) == _rows(by_spark), (t["identifier"], tag)

            window = window_at[tag]
            assert window["complete"], tag
            full = f"{t['database']}.{t['table']}"
            meta = truth["tables"][full]
            assert snapshot_rows(duck, meta["columns"], meta["types"]) == \
                truth_rows(window["tables"][full], meta["columns"], meta["types"]), (full, tag)
            checked += 1
    assert checked == sum(len(t["tags"]) for t in snapshot_tables) > len(snapshot_tables)


def test_the_readable_table_names_every_table(run, capsys):
    _, settings = run
    doc = listed(capsys, settings.warehouse)
    code, out, _ = tables_cli(capsys, "--warehouse", str(settings.warehouse))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"catalog '{CATALOG}': pyiceberg.catalog.load_catalog(")
    assert lines[2].split() == ["SOURCE", "LAYER", "DATABASE", "TABLE", "TAGS", "FIRST", "TAG", "LAST", "TAG",
                                "IDENTIFIER"]
    rows = [line.split() for line in lines[3:]]
    assert [(r[0], r[1], r[2], r[3], int(r[4]), r[-1]) for r in rows] == \
        [(t["source"], t["layer"], t["database"] or "-", t["table"] or "-", len(t["tags"]), t["identifier"])
         for t in doc["tables"]]


def test_the_command_needs_no_spark(run, tmp_path):
    """The installed command with no Java to start Spark with: the same document."""
    _, settings = run
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAVA", "SPARK", "PYSPARK"))}
    env.update({"PATH": str(bin_dir), "JAVA_HOME": str(tmp_path / "no-java"), "HOME": str(tmp_path),
                "PYTHONPATH": str(REPO)})  # this checkout's code, not the one the environment installed
    done = subprocess.run([str(bin_dir / "cdc-assets"), "tables", "--warehouse", str(settings.warehouse), "--json"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == tables_json(settings.warehouse)


def test_the_default_warehouse_is_the_configured_one(run, capsys, monkeypatch):
    _, settings = run
    monkeypatch.setenv("CDC_ASSETS_WAREHOUSE", str(settings.warehouse))
    code, out, err = tables_cli(capsys, "--json")
    assert code == 0, err
    assert json.loads(out) == listed(capsys, settings.warehouse)


# errors: exit 1 with the reason, nothing written -------------------------------------------------


def test_a_folder_without_a_catalog_is_an_error(tmp_path, capsys):
    code, out, err = tables_cli(capsys, "--warehouse", str(tmp_path), "--json")
    assert (code, out) == (1, "")
    assert "has no Iceberg catalog" in err and CATALOG_FILE in err
    assert not (tmp_path / CATALOG_FILE).exists()  # not created by looking


@pytest.mark.parametrize("content", [b"", b"not a database at all" * 100, "sqlite"])
def test_a_catalog_file_that_is_not_a_catalog_is_an_error(tmp_path, capsys, content):
    path = tmp_path / CATALOG_FILE
    if content == "sqlite":  # a SQLite database without the catalog's tables
        with sqlite3.connect(path) as db:
            db.execute("CREATE TABLE other (x int)")
    else:
        path.write_bytes(content)
    before = path.read_bytes()
    code, out, err = tables_cli(capsys, "--warehouse", str(tmp_path))
    assert (code, out) == (1, "")
    assert "is not an Iceberg SQL catalog" in err
    assert path.read_bytes() == before  # the catalog's tables were not created in it


def test_an_unknown_source_is_an_error(run, capsys):
    _, settings = run
    code, out, err = tables_cli(capsys, "--warehouse", str(settings.warehouse), "--source", "nope")
    assert (code, out) == (1, "")
    assert "no source 'nope'" in err and "sources there: src" in err
