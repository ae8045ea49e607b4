"""Issue 45, the snapshot step's folds: a window that MERGEs its touched keys counts them, its
conversion failures and its key uniqueness on the MERGE source's own job (observed), or, for a
small window, from its actions collected and applied in Arrow; reads refs and snapshot
summaries with pyiceberg; and counts its history rows on the job that materializes them. The figures are those of the whole-table path (`merge_touched_keys=False`, counted by
separate actions), on a window with duplicates, deletes of absent keys and keys that do not
convert; and the step's Spark jobs stay under a bound."""

from __future__ import annotations

from dagster import AssetCheckResult, AssetKey
from pyspark.sql import functions as F

from cdc_assets.common import iceberg_tables
from cdc_assets.common.iceberg_refs import load_table
from cdc_assets.common.spark_session import jobs_since, spark_job_ids
from cdc_assets.common.warehouse import load_pyiceberg_catalog
from cdc_assets.common.window_commits import WINDOW_END_PROPERTY, WINDOW_PROPERTY
from cdc_assets.snapshot import history as history_module, small_window, timeline as timeline_module
from cdc_assets.snapshot.history import history_table
from cdc_assets.contracts.schemas import CHANGE_LOG_SCHEMA
from cdc_assets.defs.layers.snapshots import _snapshot_results
from cdc_assets.snapshot.entry_tables import read_entry_arrow, snapshot_table
from cdc_assets.snapshot.store import write_window_snapshot

HOUR = 3_600_000
W1 = 1_767_225_600_000  # 2026-01-01T00:00Z
TABLES = ["t1", "t2", "t3", "t4"]


def _changes(spark, rows: list[tuple[str, str, object, str | None]], window_start_ms: int):
    """Change-log rows of tables db.<t> (id bigint, name varchar): (table, op, id, name)."""
    ts = (window_start_ms + 1_000) << 18
    data = [(i, t, op, str(key), name) for i, (t, op, key, name) in enumerate(rows)]
    frame = spark.createDataFrame(data, "i long, t string, op string, id string, name string")
    image = F.create_map(F.lit("id"), F.col("id"), F.lit("name"), F.col("name"))
    values = {
        "topic": F.lit("t"), "kafka_partition": F.lit(0), "kafka_offset": F.col("i"), "event_index": F.lit(0),
        "event_kind": F.lit("row"), "op": F.col("op"), "database": F.lit("db"), "table": F.col("t"),
        "commit_ts": F.lit(ts) + F.col("i"), "pk_names": F.array(F.lit("id")), "pk_values": F.array(F.col("id")),
        "before": F.when(F.col("op") == "DELETE", image), "after": F.when(F.col("op") != "DELETE", image),
        "column_types": F.create_map(F.lit("id"), F.lit("bigint"), F.lit("name"), F.lit("varchar(20)")),
    }
    return frame.select(*[values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name)
                          for f in CHANGE_LOG_SCHEMA.fields])


FIRST = [(t, "INSERT", i, f"n{i}") for t in TABLES for i in range(1, 31)]
SECOND = [row for t in TABLES for row in [
    *[(t, "INSERT", i, f"n{i}") for i in range(31, 36)],
    *[(t, "UPDATE", i, f"u{i}") for i in range(1, 6)],
    *[(t, "UPDATE", i, f"v{i}") for i in range(1, 3)],  # a key changed twice: the later wins
    *[(t, "DELETE", i, None) for i in range(10, 13)],
    (t, "DELETE", 999, None),  # a key the snapshot never had: not a deleted key
    (t, "INSERT", "abc", "x"), (t, "INSERT", "abc", "y"),  # a key that does not convert: one failure
    (t, "INSERT", 70, "z"), (t, "DELETE", 70, None),  # inserted and deleted in the window: neither
]]


# Only new keys (and the delete of a key the snapshot never had): appended, no MERGE.
INSERTS = [row for t in TABLES for row in [*[(t, "INSERT", i, f"n{i}") for i in range(31, 41)], (t, "DELETE", 999, None)]]


def _window(spark, store, merge: bool, history: bool, second_rows=SECOND):
    first = write_window_snapshot(spark, _changes(spark, FIRST, W1), *store, W1, W1 + HOUR, None,
                                  keep_history=history, merge_touched_keys=merge)
    return _written(spark, store, W1 + HOUR, second_rows, first, merge, history)


def _written(spark, store, window_start_ms: int, rows, previous, merge: bool, history: bool):
    """One window written after `previous`: (its Spark jobs, counts, checks, rows, manifest)."""
    events = []

    def audit(manifest):
        written = {k: t for k, t in manifest.tables.items() if t.written_window_start_ms == window_start_ms}
        events[:] = [e for e in _snapshot_results(AssetKey("s"), spark, store, 0, manifest.tables, manifest.ddl,
                                                  written, manifest.failed_tables, manifest.tag)
                     if isinstance(e, AssetCheckResult)]

    before = spark_job_ids()
    manifest = write_window_snapshot(spark, _changes(spark, rows, window_start_ms), *store, window_start_ms,
                                     window_start_ms + HOUR, previous, keep_history=history,
                                     merge_touched_keys=merge, audit=audit)
    jobs = jobs_since(before)
    checks = {e.check_name: (e.passed, {k: getattr(v, "value", v) for k, v in e.metadata.items()}) for e in events}
    counts = {tid: (t.previous_rows, t.inserted_keys, t.deleted_keys, t.conversion_failures, t.rows)
              for tid, t in manifest.tables.items()}
    rows = {tid: sorted((r["id"], r["name"]) for r in read_entry_arrow(*store, t).to_pylist())
            for tid, t in manifest.tables.items()}
    return jobs, counts, checks, rows, manifest


def _merged_and_whole(spark, tmp_path, second_rows=SECOND, history=True):
    """`_window` of the MERGE path (the touched keys) and of the whole-table path."""
    return (_window(spark, (tmp_path / "merge", "src"), merge=True, history=history, second_rows=second_rows),
            _window(spark, (tmp_path / "whole", "src"), merge=False, history=history, second_rows=second_rows))


def _summary(warehouse, entry) -> dict[str, str]:
    """The summary of a manifest entry's Iceberg snapshot, with its `operation`."""
    table = load_table(load_pyiceberg_catalog(warehouse), entry.identifier)
    summary = table.metadata.snapshot_by_id(entry.snapshot_id).summary
    return {**summary.additional_properties, "operation": summary.operation.value}


def _history(spark, warehouse) -> list[tuple]:
    """Every history row of the source's tables, sorted."""
    rows = []
    for t in TABLES:
        frame = spark.table(history_table(spark, warehouse, "src", "db", t).sql)
        rows += [(t, *r) for r in frame.select("id", "name", "_cdc_valid_from", "_cdc_valid_to", "_cdc_end_op",
                                               "window_start_ms").collect()]
    return sorted(rows, key=repr)


def test_a_merge_window_observes_the_figures_of_the_whole_table_path(spark, tmp_path, monkeypatch):
    history = True
    (jobs, counts, checks, rows, second), (_, whole_counts, whole_checks, whole_rows, whole) = _merged_and_whole(
        spark, tmp_path, history=history)
    # A source above the Arrow write's size goes through Spark: the base rewritten whole in one
    # plan, and the history written by Spark; the same figures.
    monkeypatch.setattr(iceberg_tables, "ARROW_WRITE_ROWS", -1)
    monkeypatch.setattr(history_module, "ARROW_WRITE_ROWS", -1)
    monkeypatch.setattr(small_window, "ARROW_WRITE_ROWS", -1)
    spark_jobs, spark_counts, spark_checks, spark_rows, in_spark = _window(spark, (tmp_path / "spark", "src"),
                                                                           merge=True, history=history)
    # A table above the whole-rewrite size is MERGEd (the key ranges it touched): the same figures.
    monkeypatch.setattr(iceberg_tables, "WHOLE_REWRITE_BYTES", -1)
    merge_jobs, merged_counts, merged_checks, merged_rows, merged = _window(spark, (tmp_path / "sql-merge", "src"),
                                                                            merge=True, history=history)
    # A small window into such a table: its source collected by its plan, then MERGEd by Spark
    # from those rows (a local relation), with nothing computed twice.
    monkeypatch.setattr(iceberg_tables, "ARROW_WRITE_ROWS", 50_000)
    monkeypatch.setattr(iceberg_tables, "ARROW_REWRITE_BYTES", -1)
    collected_jobs, collected_counts, collected_checks, collected_rows, collected = _window(
        spark, (tmp_path / "collected-merge", "src"), merge=True, history=history)
    assert (counts == whole_counts == spark_counts == merged_counts == collected_counts
            == {f"db.{t}": (30, 5, 3, 1, 32) for t in TABLES})
    assert checks == whole_checks == spark_checks == merged_checks == collected_checks
    assert rows == spark_rows == merged_rows == collected_rows
    assert (second.ddl.history_versions_ended == in_spark.ddl.history_versions_ended
            == merged.ddl.history_versions_ended == collected.ddl.history_versions_ended)
    for entry in collected.tables.values():  # Spark's MERGE: a commit of its own
        summary = _summary(tmp_path / "collected-merge", entry)
        assert summary["operation"] == "overwrite" and "spark.app.id" in summary
    for store in ("merge", "spark", "sql-merge", "collected-merge"):  # every path's history: the same versions
        assert _history(spark, tmp_path / store) == _history(spark, tmp_path / "whole")
    # The small tables were rewritten whole through Arrow (pyiceberg's commit: no Spark app id
    # in its summary): each is still one data file, and its commit carries the window's summary
    # properties as Spark's do.
    for entry in second.tables.values():
        summary = _summary(tmp_path / "merge", entry)
        assert summary["operation"] == "overwrite" and "spark.app.id" not in summary
        assert summary["total-data-files"] == "1" and summary["total-records"] == "32"
        assert summary[WINDOW_PROPERTY] == str(W1 + HOUR) and summary[WINDOW_END_PROPERTY] == str(W1 + 2 * HOUR)
    assert all("spark.app.id" in _summary(tmp_path / "spark", e) for e in in_spark.tables.values())
    assert checks["primary_key_unique"] == (True, {"duplicate_keys": 0, "by_table": {f"db.{t}": 0 for t in TABLES}})
    assert checks["values_convert"][1]["conversion_failures"] == 4
    assert rows == whole_rows
    assert rows["db.t1"][:3] == [(1, "v1"), (2, "v2"), (3, "u3")]
    assert second.ddl.history_versions_ended == whole.ddl.history_versions_ended
    # 5 updated + 3 deleted versions from before, the 2 updated again and key 70's inside
    assert second.ddl.history_versions_ended == {f"db.{t}": 11 for t in TABLES}
    # Spark's writes (`spark_jobs`): one collect of the schemas and the DDL, and per table one
    # rewrite (about 6 jobs: the source's and the join's shuffles, the write) and its history
    # write, whose job computes and counts the versions (the join with the rows before and the
    # shuffle into the one task that writes them: about 4 jobs); here it is each table's first
    # history write, so its versions are counted first (about 3 more). No check or metadata
    # read of its own (161 jobs with history before issue 45's folds; 79-88 before the shared
    # history checkpoint and the schema collect's DDL; 63-66 with a checkpoint and a MERGE per
    # table; 39 with the shared checkpoint, which cost more time than these jobs
    # (docs/performance.md step 20); 55 now). The SQL MERGE path: 77, and 77 for a source
    # collected and then MERGEd by Spark. Through Arrow (steps 23-24), the path chosen before
    # anything runs from the window's events of each table: each table's source and history
    # versions collected by their plans and committed by pyiceberg, 47 jobs (55 when each was
    # materialized first). Applied in Arrow (snapshot/small_window.py, step 25), each table's
    # typed actions are collected once and its snapshot, counts and versions computed from
    # them and from its one-file base read by pyiceberg: 16 jobs; 12 since those actions are
    # not cached (they are read once: caching them was a job of its own per table).
    assert jobs <= 15, jobs
    assert spark_jobs <= 65, spark_jobs
    assert merge_jobs <= 85, merge_jobs


def test_a_window_of_new_keys_appends_them_with_the_figures_of_the_whole_table_path(spark, tmp_path):
    (jobs, counts, checks, rows, second), (_, whole_counts, whole_checks, whole_rows, whole) = _merged_and_whole(
        spark, tmp_path, INSERTS)
    assert counts == whole_counts == {f"db.{t}": (30, 10, 0, 0, 40) for t in TABLES}
    assert checks == whole_checks
    assert checks["primary_key_unique"] == (True, {"duplicate_keys": 0, "by_table": {f"db.{t}": 0 for t in TABLES}})
    assert rows == whole_rows and rows["db.t1"][-1] == (40, "n40")
    assert second.ddl.history_versions_ended == whole.ddl.history_versions_ended == {f"db.{t}": 0 for t in TABLES}
    assert second.ddl.history_tables == []
    # Per table its window applied in Arrow (a small table is rewritten, not appended to: it
    # stays one file), which also finds that it ends no version (no history table): 12 jobs
    # (16 with its typed actions cached);
    # 34 with each source collected from its own plan; 47 through Spark's rewrite (35 with the
    # shared history checkpoint; with a checkpoint and an append per table: 40-42).
    for entry in second.tables.values():
        summary = _summary(tmp_path / "merge", entry)
        assert summary["total-data-files"] == "1" and "spark.app.id" not in summary
    assert jobs <= 15, jobs


def test_a_new_tables_first_window_is_applied_in_arrow_with_the_figures_of_the_whole_table_path(
        spark, tmp_path, monkeypatch):
    # New tables (no previous snapshot): inserts, then updates, deletes (also of a key never
    # there), a key that does not convert, a key inserted and deleted, all in their first window.
    rows = FIRST + SECOND
    arrow_jobs, *arrow = _written(spark, (tmp_path / "arrow", "src"), W1, rows, None, merge=True, history=True)
    _, *whole = _written(spark, (tmp_path / "whole", "src"), W1, rows, None, merge=False, history=True)
    # Arrow failing: the source is collected by its plan and written whole by Spark, the same figures.
    monkeypatch.setattr(small_window, "apply_actions", _raises)
    _, *fallback = _written(spark, (tmp_path / "fallback", "src"), W1, rows, None, merge=True, history=True)
    # Once the table exists, a rerun of its first window replaces its rows in Arrow (a branch cut from main).
    monkeypatch.undo()
    _, *rerun = _written(spark, (tmp_path / "arrow", "src"), W1, rows, None, merge=True, history=True)
    for counts, checks, table_rows, _manifest in (arrow, whole, fallback, rerun):
        # 35 keys inserted; 3 deleted and one inserted and deleted are no rows (not deleted keys)
        assert counts == {f"db.{t}": (0, 32, 0, 1, 32) for t in TABLES}
        assert checks == whole[1]
        assert table_rows == whole[2] and table_rows["db.t1"][:3] == [(1, "v1"), (2, "v2"), (3, "u3")]
    assert arrow[1]["primary_key_unique"] == (True, {"duplicate_keys": 0, "by_table": {f"db.{t}": 0 for t in TABLES}})
    # the versions that ended inside the window: 5 + 2 updated, 3 deleted, key 70's (`abc` has no key)
    for _, _, _, manifest in (arrow, whole, fallback):
        assert manifest.ddl.history_versions_ended == {f"db.{t}": 11 for t in TABLES}
    assert _history(spark, tmp_path / "arrow") == _history(spark, tmp_path / "fallback") == _history(
        spark, tmp_path / "whole")
    for entry in arrow[3].tables.values():  # pyiceberg's first commit: an append on main, one file
        summary = _summary(tmp_path / "arrow", entry)
        assert summary["operation"] == "append" and "spark.app.id" not in summary
        assert summary["total-data-files"] == "1" and summary[WINDOW_PROPERTY] == str(W1)
    for entry in rerun[3].tables.values():  # the rerun: every row replaced, on the window's branch
        summary = _summary(tmp_path / "arrow", entry)
        assert summary["operation"] == "overwrite" and summary["total-records"] == "32"
    # Per table one collect of its actions and pyiceberg's commits of its snapshot and history:
    # 12 jobs (68 through Spark's whole-table path: the counts, the sorted write and its
    # uniqueness scan, the history's count and write).
    assert arrow_jobs <= 15, arrow_jobs


def _raises(*args, **kwargs):
    raise RuntimeError("not in Arrow")


def test_a_table_whose_history_fails_is_that_tables_failure(spark, tmp_path, monkeypatch):
    write_versions = history_module._write_versions

    def failing(spark, table, *args, **kwargs):
        if table.name.endswith("t2"):
            raise RuntimeError("history write refused")
        return write_versions(spark, table, *args, **kwargs)

    monkeypatch.setattr(history_module, "_write_versions", failing)
    _, counts, checks, _, manifest = _written(spark, (tmp_path / "w", "src"), W1, FIRST + SECOND, None,
                                              merge=True, history=True)
    assert counts == {f"db.{t}": (0, 32, 0, 1, 32) for t in TABLES if t != "t2"}
    assert list(manifest.failed_tables) == ["db.t2"]
    assert "writing its history failed: RuntimeError: history write refused" in manifest.failed_tables["db.t2"].reason
    assert checks["tables_built"][0] is False


# Every key deleted: the one-file table rewritten through Arrow is left empty.
DELETES = [(t, "DELETE", i, None) for t in TABLES for i in range(1, 31)]


def test_a_window_that_deletes_every_row_leaves_empty_tables(spark, tmp_path):
    (_, counts, checks, rows, second), (_, whole_counts, whole_checks, whole_rows, _) = _merged_and_whole(
        spark, tmp_path, DELETES)
    assert counts == whole_counts == {f"db.{t}": (30, 0, 30, 0, 0) for t in TABLES}
    assert checks == whole_checks and rows == whole_rows == {f"db.{t}": [] for t in TABLES}
    assert second.failed_tables == {}
    for entry in second.tables.values():  # pyiceberg's empty overwrite of the one file
        summary = _summary(tmp_path / "merge", entry)
        assert summary["total-records"] == "0" and "spark.app.id" not in summary
    assert second.ddl.history_versions_ended == {f"db.{t}": 30 for t in TABLES}


def test_refs_and_summaries_are_read_without_spark(spark, tmp_path):
    store = (tmp_path / "warehouse", "src")
    first = write_window_snapshot(spark, _changes(spark, FIRST[:5], W1), *store, W1, W1 + HOUR, None)
    entry = first.tables["db.t1"]
    table = snapshot_table(spark, *store, "db", "t1")
    before = spark_job_ids()
    assert (table.ref_snapshot(spark, "main"), table.total_records(spark, entry.snapshot_id)) == (entry.snapshot_id, 5)
    assert table.ref_snapshot(spark, "window-1") is None
    assert jobs_since(before) == 0


def test_a_decimal_that_grows_in_digits_is_merged_into_the_stored_table(spark, tmp_path, monkeypatch):
    """A decimal without parameters (TiCDC's default Canal-JSON) whose second window shows more
    integer digits: the same stored type, so the window merges its touched key into the
    Iceberg table (snapshot/timeline.py `stores_as`); every row reads back, and the manifest
    keeps the digits learned."""
    def changes(rows, window_start_ms):
        ts = (window_start_ms + 1_000) << 18
        frame = spark.createDataFrame([(i, op, str(key), amount) for i, (op, key, amount) in enumerate(rows)],
                                      "i long, op string, id string, amount string")
        image = F.create_map(F.lit("id"), F.col("id"), F.lit("amount"), F.col("amount"))
        values = {
            "topic": F.lit("t"), "kafka_partition": F.lit(0), "kafka_offset": F.col("i"), "event_index": F.lit(0),
            "event_kind": F.lit("row"), "op": F.col("op"), "database": F.lit("db"), "table": F.lit("d"),
            "commit_ts": F.lit(ts) + F.col("i"), "pk_names": F.array(F.lit("id")), "pk_values": F.array(F.col("id")),
            "before": F.when(F.col("op") != "INSERT", image), "after": F.when(F.col("op") != "DELETE", image),
            "column_types": F.create_map(F.lit("id"), F.lit("bigint"), F.lit("amount"), F.lit("decimal")),
        }
        return frame.select(*[values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name)
                              for f in CHANGE_LOG_SCHEMA.fields])

    store = (tmp_path / "wh", "src")
    first = write_window_snapshot(spark, changes([("INSERT", i, "1.50") for i in range(3)], W1), *store, W1,
                                  W1 + HOUR, None, keep_history=True, merge_touched_keys=True)
    rebuilt = []  # tables the second window reconstructs whole (it should merge instead)
    whole = timeline_module.reconstruct_table
    monkeypatch.setattr(timeline_module, "reconstruct_table", lambda a, schema, *r, **k: (
        rebuilt.append(schema.id), whole(a, schema, *r, **k))[1])
    second = write_window_snapshot(spark, changes([("UPDATE", 1, "12345.67"), ("INSERT", 7, "99999.01")], W1 + HOUR),
                                   *store, W1 + HOUR, W1 + 2 * HOUR, first, keep_history=True, merge_touched_keys=True)
    entry = second.tables["db.d"]
    assert rebuilt == []
    assert (entry.schema["decimal_integer_digits"], entry.schema["decimal_scales"]) == ({"amount": 5}, {"amount": 2})
    assert (entry.previous_rows, entry.inserted_keys, entry.rows) == (3, 1, 4)
    rows = sorted((r["id"], str(r["amount"])) for r in read_entry_arrow(*store, entry).to_pylist())
    assert rows == [(0, "1.50"), (1, "12345.67"), (2, "1.50"), (7, "99999.01")]
