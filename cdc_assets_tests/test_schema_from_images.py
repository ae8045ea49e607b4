"""Without DDL the schema follows the row images (issue 42, item 3), through Dagster: a column
that images start to carry is added (earlier rows NULL, the schema version changes, the history
works), in a later window or later in the same one; an image carrying a column dated before the
ADD COLUMN that adds it; the other tables are untouched."""

from __future__ import annotations

import json

import pytest
from dagster import DagsterInstance
from pyspark.sql import SparkSession

from cdc_assets.common.tso import ms_to_tso
from cdc_assets.defs.metadata import schema_version
from cdc_assets.replay import replay
from cdc_assets.snapshot.entry_tables import read_entry
from cdc_assets.snapshot.history import END_OP, VALID_FROM, VALID_TO
from cdc_assets.snapshot.history_read import read_history
from cdc_assets.snapshot.manifests import WindowManifest
from cdc_assets.snapshot.reconstruct import COMMIT_TS_COLUMN
from cdc_assets.snapshot.store import list_manifests, read_manifest
from cdc_assets_tests.e2e import settings_for

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z; windows are hourly
HOUR = 3_600_000
W1, W2, W3 = T0, T0 + HOUR, T0 + 2 * HOUR
BASE = {"id": "int", "name": "varchar", "qty": "int"}
WITH_COUPON = {**BASE, "coupon": "varchar"}


def _row(ms: int, table: str, op: str, data: dict, types: dict = BASE, old: dict | None = None) -> str:
    return json.dumps({"id": 0, "database": "shop", "table": table, "pkNames": ["id"], "isDdl": False, "type": op,
                       "es": ms, "ts": ms, "sql": "", "mysqlType": types, "data": [data],
                       "old": [old] if old else None, "_tidb": {"commitTs": ms_to_tso(ms)}})


def _ddl(ms: int, table: str, sql: str) -> str:
    return json.dumps({"id": 0, "database": "shop", "table": table, "pkNames": None, "isDdl": True, "type": "ALTER",
                       "es": ms, "ts": ms, "sql": sql, "mysqlType": None, "data": None, "old": None,
                       "_tidb": {"commitTs": ms_to_tso(ms)}})


def _watermark(ms: int) -> str:
    return json.dumps({"id": 0, "database": "", "table": "", "pkNames": None, "isDdl": False,
                       "type": "TIDB_WATERMARK", "es": ms, "ts": ms, "sql": "", "data": None, "old": None,
                       "_tidb": {"watermarkTs": ms_to_tso(ms)}})


def _v(i: int, name: str, qty: int, **more) -> dict:
    return {"id": str(i), "name": name, "qty": str(qty), **more}


ADD_COUPON = "ALTER TABLE shop.late ADD COLUMN coupon BIGINT NOT NULL DEFAULT 0 AFTER id"

LINES = [
    # window 1: `grown` gains `coupon` in its images mid-window; `later` and `late` do not yet
    _row(W1 + 1_000, "grown", "INSERT", _v(1, "x", 1)),
    _row(W1 + 2_000, "grown", "INSERT", _v(3, "z", 3)),
    _row(W1 + 3_000, "grown", "INSERT", _v(2, "y", 2, coupon="B2"), WITH_COUPON),
    _row(W1 + 4_000, "grown", "UPDATE", _v(1, "x", 1, coupon="B1"), WITH_COUPON, old={"coupon": None}),
    _row(W1 + 1_000, "later", "INSERT", _v(1, "a", 1)),
    _row(W1 + 1_000, "later", "INSERT", _v(2, "b", 2)),
    _row(W1 + 1_000, "late", "INSERT", _v(1, "p", 1)),
    _row(W1 + 1_000, "other", "INSERT", _v(1, "o", 1)),
    _watermark(W2),
    # window 2 (no DDL): `later`'s images carry `coupon`, in an UPDATE and an INSERT
    _row(W2 + 1_000, "later", "UPDATE", _v(1, "a", 10, coupon="A1"), WITH_COUPON, old={"qty": "1"}),
    _row(W2 + 2_000, "later", "INSERT", _v(3, "c", 3, coupon="A3"), WITH_COUPON),
    _row(W2 + 1_000, "other", "INSERT", _v(2, "o2", 2)),
    _watermark(W3),
    # window 3: an image of `late` carries `coupon` (an int) before the ADD COLUMN that adds it
    _row(W3 + 1_000, "late", "INSERT", _v(2, "q", 2, coupon="7"), {**BASE, "coupon": "int"}),
    _ddl(W3 + 2_000, "late", ADD_COUPON),
    _row(W3 + 3_000, "late", "UPDATE", _v(1, "p", 5, coupon="8"), {**BASE, "coupon": "bigint"}, old={"qty": "1"}),
    _row(W3 + 1_000, "other", "UPDATE", _v(1, "o", 9), old={"qty": "1"}),
    _watermark(W3 + HOUR),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("images")
    dump = tmp / "dump"
    dump.mkdir()
    (dump / "topic.txt").write_text("\n".join(LINES) + "\n")
    settings = settings_for(tmp / "home", dump, layout="lines")
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    snapshots = (settings.warehouse, "src")  # (warehouse, source)
    return summary, snapshots, settings.warehouse / "src"


def _manifests(snapshots) -> list[WindowManifest]:
    return [read_manifest(*snapshots, w) for w in list_manifests(*snapshots)]


def _rows(spark: SparkSession, snapshots, entry: dict) -> list[tuple]:
    df = read_entry(spark, *snapshots, entry)
    return sorted(tuple(r) for r in df.drop(COMMIT_TS_COLUMN).collect())


def test_every_window_passes_its_checks(run):
    summary, snapshots, _ = run
    assert summary.ok and summary.windows == 3 and summary.checks_failed == [] and summary.checks_warned == []
    assert summary.quarantined == 0


def test_a_column_images_start_to_carry_mid_window_is_added_earlier_rows_null(run, spark):
    _, snapshots, _ = run
    grown = _manifests(snapshots)[0].tables["shop.grown"]
    assert grown.schema["columns"] == ["id", "name", "qty", "coupon"]
    assert _rows(spark, snapshots, grown) == [(1, "x", 1, "B1"), (2, "y", 2, "B2"), (3, "z", 3, None)]
    assert (grown.previous_rows, grown.inserted_keys, grown.rows) == (0, 3, 3)


def test_a_column_images_carry_in_a_later_window_changes_the_schema_version(run, spark):
    _, snapshots, _ = run
    w1, w2, w3 = _manifests(snapshots)
    before, after = w1.tables["shop.later"], w2.tables["shop.later"]
    assert _rows(spark, snapshots, before) == [(1, "a", 1), (2, "b", 2)]
    assert _rows(spark, snapshots, after) == [(1, "a", 10, "A1"), (2, "b", 2, None), (3, "c", 3, "A3")]
    assert schema_version(before.spark_schema) != schema_version(after.spark_schema)
    # recorded as a schema change of its own, at the first image that carried the column
    assert after.schema_changes == [{"commit_ts": ms_to_tso(W2 + 1_000), "ddl_type": None, "sql": None,
                                        "added_by_row_images": ["coupon"],
                                        "columns": ["id", "name", "qty", "coupon"]}]
    assert (after.previous_rows, after.inserted_keys, after.deleted_keys, after.rows) == (2, 1, 0, 3)
    # carried over unchanged in window 3: same folder, same version
    assert w3.tables["shop.later"].snapshot_id == after.snapshot_id


def test_the_other_tables_are_unaffected(run, spark):
    _, snapshots, _ = run
    w1, w2, w3 = _manifests(snapshots)
    versions = {schema_version(m.tables["shop.other"].spark_schema) for m in (w1, w2, w3)}
    assert len(versions) == 1 and w3.tables["shop.other"].schema["columns"] == ["id", "name", "qty"]
    assert _rows(spark, snapshots, w3.tables["shop.other"]) == [(1, "o", 9), (2, "o2", 2)]
    assert all(m.tables["shop.other"].schema_changes == [] for m in (w1, w2, w3))


def test_an_image_dated_before_its_add_column_the_ddl_places_and_types_it(run, spark):
    _, snapshots, _ = run
    late = _manifests(snapshots)[2].tables["shop.late"]
    # The DDL's place (AFTER id) and type (BIGINT); the image's value kept; the row that never
    # carried the column stays NULL (no default: it cannot be told from a NULL).
    assert late.schema["columns"] == ["id", "coupon", "name", "qty"]
    assert late.schema["mysql_types"]["coupon"] == "bigint"
    assert json.loads(late.spark_schema)["fields"][1] == {"name": "coupon", "type": "long", "nullable": True,
                                                            "metadata": {}}
    assert _rows(spark, snapshots, late) == [(1, 8, "p", 5), (2, 7, "q", 2)]
    assert [(c["commit_ts"], c["sql"], c["columns"]) for c in late.schema_changes] == [
        (ms_to_tso(W3 + 1_000), None, ["id", "name", "qty", "coupon"]),
        (ms_to_tso(W3 + 2_000), ADD_COUPON, ["id", "coupon", "name", "qty"]),
    ]
    assert late.conversion_failures == 0


def test_the_history_of_rows_from_before_the_column_has_it_null(run, spark):
    _, _, source_root = run
    ended = lambda table: sorted(  # noqa: E731
        (r[VALID_FROM], r[VALID_TO], r[END_OP], r.asDict())
        for r in read_history(spark, source_root.parent, source_root.name, "shop", table).collect())
    (grown,) = ended("grown")  # row 1's first version, ended in window 1 by the UPDATE that set coupon
    assert grown[:3] == (ms_to_tso(W1 + 1_000), ms_to_tso(W1 + 4_000), "UPDATE")
    assert {k: grown[3][k] for k in ("id", "name", "qty", "coupon")} == {"id": 1, "name": "x", "qty": 1, "coupon": None}
    (later,) = ended("later")  # row 1's version from window 1, ended in window 2
    assert later[:3] == (ms_to_tso(W1 + 1_000), ms_to_tso(W2 + 1_000), "UPDATE")
    assert {k: later[3][k] for k in ("id", "name", "qty", "coupon")} == {"id": 1, "name": "a", "qty": 1, "coupon": None}
    (late,) = ended("late")  # row 1's version from window 1, ended after the ADD COLUMN
    assert late[:3] == (ms_to_tso(W1 + 1_000), ms_to_tso(W3 + 3_000), "UPDATE")
    assert {k: late[3][k] for k in ("id", "coupon", "name", "qty")} == {"id": 1, "coupon": None, "name": "p", "qty": 1}
