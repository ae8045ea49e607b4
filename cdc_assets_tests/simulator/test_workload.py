"""The simulated TiDB history: ordering, TiDB semantics and edge-case coverage."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest

from cdc_assets.simulator import DEFAULT_START_MS, DdlEvent, Transaction, Workload
from cdc_assets.simulator.tso import tso_logical, tso_physical_ms


@pytest.fixture(scope="module")
def events():
    return list(Workload(seed=7).events())


def test_same_seed_same_history_and_other_seed_differs():
    a = list(Workload(seed=11, row_changes=300).events())
    assert a == list(Workload(seed=11, row_changes=300).events())
    assert a != list(Workload(seed=12, row_changes=300).events())


def test_ddl_first_then_strictly_increasing_commits_in_the_configured_span(events):
    ddl = [e for e in events if isinstance(e, DdlEvent)]
    assert ddl[0].sql == "CREATE DATABASE `shop`"
    assert ddl[1].sql.startswith("CREATE TABLE `shop`.`customers` (`id` int NOT NULL, ")
    assert {(e.database, e.ddl_type) for e in ddl} >= {("shop", "create schema"), ("inventory", "create schema")}
    assert sorted(e.table for e in ddl if e.ddl_type == "create table") == ["customers", "order_items", "orders", "stock"]
    assert all(isinstance(e, DdlEvent) for e in events[: len(ddl)])
    ts = [e.commit_ts for e in events]
    assert all(a < b for a, b in zip(ts, ts[1:]))
    assert tso_physical_ms(ts[0]) == DEFAULT_START_MS
    assert tso_physical_ms(ts[-1]) < DEFAULT_START_MS + 4.5 * 3_600_000
    assert all(tso_logical(t) > 0 for t in ts)  # watermarks at b << 18 never collide with a commit
    assert sum(len(e.changes) for e in events if isinstance(e, Transaction)) == 3000


def test_each_key_changes_at_most_once_per_transaction_and_multi_row_transactions_exist(events):
    from cdc_assets.simulator.schema import DEMO_TABLES

    pk = {t.full_name: t.primary_key for t in DEMO_TABLES}
    sizes = []
    for e in events:
        if isinstance(e, Transaction):
            keys = [(c.database, c.table, tuple(c.row[n] for n in pk[f"{c.database}.{c.table}"])) for c in e.changes]
            assert len(keys) == len(set(keys))
            sizes.append(len(e.changes))
    assert max(sizes) >= 4 and sum(s > 1 for s in sizes) > 100


def test_updates_change_something_and_pk_updates_are_delete_plus_insert(events):
    from cdc_assets.simulator.schema import DEMO_TABLES

    tables = {t.full_name: t for t in DEMO_TABLES}
    pk_moves = 0
    for e in events:
        if not isinstance(e, Transaction):
            continue
        for c in e.changes:
            if c.op == "UPDATE":
                assert c.before != c.after
                t = tables[f"{c.database}.{c.table}"]
                assert t.pk_values(c.before) == t.pk_values(c.after)
        deletes = [c for c in e.changes if c.op == "DELETE"]
        inserts = [c for c in e.changes if c.op == "INSERT"]
        for d in deletes:
            t = tables[f"{d.database}.{d.table}"]
            non_key = [c.name for c in t.non_key_columns]
            for i in inserts:
                if (i.database, i.table) == (d.database, d.table) and all(i.after[n] == d.before[n] for n in non_key):
                    assert t.pk_values(i.after) != t.pk_values(d.before)
                    pk_moves += 1
    assert pk_moves >= 50


def test_values_hit_the_edges(events):
    changes = [c for e in events if isinstance(e, Transaction) for c in e.changes]
    images = [(f"{c.database}.{c.table}", c.row) for c in changes]
    order_ids = {r["order_id"] for n, r in images if n in ("shop.orders", "shop.order_items")}
    assert any(v > 2**63 for v in order_ids) and 2**64 - 1 in order_ids
    assert any(r["id"] < 0 for n, r in images if n == "shop.customers")
    assert any(r["qty"] < 0 for n, r in images if n == "inventory.stock")
    balances = [r["balance"] for n, r in images if n == "shop.customers"]
    assert all(b.as_tuple().exponent == -2 for b in balances) and any(b < 0 for b in balances)
    assert all(r["price"] is None or r["price"].as_tuple().exponent == -4 for n, r in images if n == "inventory.stock")
    assert {Decimal("9999999999.99"), Decimal("-9999999999.99")} & set(balances)
    assert {format(b, "f") for b in balances} & {"0.00", "-0.01", "0.01"}
    names = " ".join(r["name"] for n, r in images if n == "shop.customers")
    assert "Zoë" in names and "测试" in names and any(ord(ch) > 0xFFFF for ch in names)  # emoji
    assert any(r["note"] is None for n, r in images if n == "shop.customers")
    assert any(r["payload"] is None for n, r in images if n == "shop.orders")
    assert any(r["payload"] == b"" for n, r in images if n == "shop.orders")
    for table, col in (("shop.orders", "payload"), ("inventory.stock", "blob_col")):
        seen = set()
        for n, r in images:
            if n == table and r[col]:
                seen.update(r[col])
        assert seen == set(range(256)), table
    assert all(isinstance(r["created_at"], datetime) for n, r in images if n == "shop.customers")
