"""End to end: official Canal rows without `pkNames` (RisingWave's and some Canal servers'
output) become snapshots keyed by the `primary-key` option, through Dagster, across windows,
even though the table's CREATE TABLE declares no key."""

from __future__ import annotations

import json
from dataclasses import replace

import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance

from cdc_assets.replay import replay
from cdc_assets.snapshot.export import export_snapshot
from cdc_assets_tests.e2e import settings_for

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000  # 2026-01-01T00:00Z; windows are hourly
HOUR = 3_600_000
TYPES = {"order_id": "int(11)", "line": "int(11)", "qty": "int(11)"}


def _canal(batch_id: int, ms: int, op: str, data: list[dict], old: list[dict] | None = None, **over) -> str:
    msg = {"id": batch_id, "database": "shop", "table": "items", "pkNames": None, "isDdl": False, "type": op,
           "es": ms, "ts": ms + 5, "sql": "", "mysqlType": TYPES, "data": data, "old": old}
    return json.dumps({**msg, **over})


def _row(order_id: int, line: int, qty: int) -> dict:
    return {"order_id": str(order_id), "line": str(line), "qty": str(qty)}


def test_rows_without_pk_names_are_keyed_by_the_primary_key_option(tmp_path):
    dump = tmp_path / "dump"
    dump.mkdir()
    lines = [
        _canal(1, T0 + 1_000, "CREATE", None, isDdl=True,
               sql="CREATE TABLE items (order_id INT, line INT, qty INT)"),
        _canal(2, T0 + 2_000, "INSERT", [_row(1, 1, 5), _row(1, 2, 7)]),
        _canal(3, T0 + 3_000, "UPDATE", [_row(1, 1, 6)], [{"qty": "5"}]),
        # window 2
        _canal(4, T0 + HOUR + 1_000, "DELETE", [_row(1, 2, 7)]),
        _canal(5, T0 + HOUR + 2_000, "INSERT", [_row(2, 1, 3)]),
        _canal(6, T0 + HOUR + 3_000, "UPDATE", [_row(2, 1, 4)], [{"qty": "3"}]),
    ]
    (dump / "topic.txt").write_text("\n".join(lines) + "\n")
    settings = settings_for(tmp_path / "home", dump, layout="lines", options={
        "enable-tidb-extension": "false", "content-compatible": "true",
        "primary-key": "shop.items:order_id,line"})
    settings = settings.with_overrides(sources=(replace(settings.sources[0], completeness="batch"),))
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    assert (summary.ok, summary.windows, summary.quarantined, summary.checks_failed) == (True, 2, 0, [])

    snapshots = (settings.warehouse, "src")  # (warehouse, source)

    def table_at(as_of: str) -> list[tuple]:
        (items,) = export_snapshot(*snapshots, tmp_path / as_of, as_of=as_of)
        return sorted((r["order_id"], r["line"], r["qty"]) for r in pq.read_table(items.path).to_pylist())

    assert table_at("2026-01-01T01:00:00") == [(1, 1, 6), (1, 2, 7)]
    assert table_at("latest") == [(1, 1, 6), (2, 1, 4)]
