"""A seeded random mix of row changes and DDL (several per window, primary-key changes included,
the two tables swapped by one RENAME TABLE in each window after the first), replayed through Dagster and compared with the brute-force model at every window end, at random
instants, and version by version in the history."""

from __future__ import annotations

import json
import random
import re

import pytest
from dagster import DagsterInstance

from cdc_assets.replay import replay
from cdc_assets.snapshot.history import END_OP, VALID_FROM, VALID_TO
from cdc_assets.snapshot.history_read import read_history
from cdc_assets.snapshot.point_in_time import tables_as_of
from cdc_assets.snapshot.reconstruct import COMMIT_TS_COLUMN
from cdc_assets_tests.ddl_upstream import Table, Upstream, add_column, drop_column, rename_column
from cdc_assets_tests.e2e import settings_for

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000
HOUR = 3_600_000
WINDOWS = 3
# Statements per window. 30 (not 60): each DDL statement costs the window a commit of its own,
# and what a window costs is mostly those; seed 11 at 30 a window still has every kind of
# statement (the test asserts it): 16 DDL statements after the two CREATEs, 5-7 a window, each
# ALTER kind, TRUNCATE, the two swaps, and primary-key changes (60 a window: 34, twice the cost).
OPS = 30


A, B, TMP = ("db", "a"), ("db", "b"), ("db", "tmp")


def _swap(tables) -> None:
    tables[A], tables[B] = tables[B], tables[A]


def _random_upstream(seed: int) -> Upstream:
    rng = random.Random(seed)
    u = Upstream(T0 + 1_000)
    names = [("db", "a"), ("db", "b")]
    for name in names:
        u.ddl("CREATE", *name, f"CREATE TABLE db.{name[1]} (id INT PRIMARY KEY, c0 INT)",
              lambda ts, n=name: ts.__setitem__(n, Table([("id", "int"), ("c0", "int")], ["id"])))
    next_id, next_col = 1, 1
    for window in range(WINDOWS):
        u.ms = T0 + window * HOUR + 2_000
        for i in range(OPS):
            u.after(rng.randrange(1, 50_000))
            if window > 0 and i == OPS // 2:  # the two tables swapped in one statement (Iceberg: the tables swap)
                u.ddl("RENAME", "db", "a", "RENAME TABLE db.a TO db.tmp, db.b TO db.a, db.tmp TO db.b", _swap,
                      moves=((A, TMP), (B, A), (TMP, B)))
                continue
            name = rng.choice([n for n in names if n in u.tables])
            t = u.tables[name]
            others = [c for c, _ in t.columns if c != "id"]
            roll = rng.random()
            if roll < 0.35 or not t.rows:
                u.insert(name, {"id": next_id, **{c: rng.randrange(100) for c in others}})
                next_id += 1
            elif roll < 0.6 and others:
                key = rng.choice(sorted(t.rows))
                u.update(name, key, **{rng.choice(others): rng.randrange(100)})
            elif roll < 0.67:  # a primary-key change
                key = rng.choice(sorted(t.rows))
                u.update(name, key, id=next_id)
                next_id += 1
            elif roll < 0.77:
                u.delete(name, rng.choice(sorted(t.rows)))
            elif roll < 0.83:
                col, default = f"c{next_col}", rng.choice([None, 5])
                next_col += 1
                sql = f"ALTER TABLE db.{name[1]} ADD COLUMN {col} INT" + (" DEFAULT 5" if default else "")
                u.ddl("ALTER", *name, sql, add_column(name, col, "int", default))
            elif roll < 0.87 and len(others) > 1:
                col = rng.choice(others)
                u.ddl("ALTER", *name, f"ALTER TABLE db.{name[1]} DROP COLUMN {col}", drop_column(name, col))
            elif roll < 0.92 and others:
                col, new = rng.choice(others), f"c{next_col}"
                next_col += 1
                u.ddl("ALTER", *name, f"ALTER TABLE db.{name[1]} RENAME COLUMN {col} TO {new}",
                      rename_column(name, col, new))
            elif roll < 0.95 and others:
                col = rng.choice(others)
                u.ddl("ALTER", *name, f"ALTER TABLE db.{name[1]} MODIFY COLUMN {col} BIGINT",
                      rename_column(name, col, col, "bigint"))
            else:
                u.ddl("TRUNCATE", *name, f"TRUNCATE TABLE db.{name[1]}", lambda ts, n=name: ts[n].rows.clear(),
                      ends="TRUNCATE")
        u.ms = T0 + (window + 1) * HOUR - 1_000
        u.watermark()
    u.ms = T0 + WINDOWS * HOUR + 1_000
    u.watermark()
    return u


@pytest.mark.parametrize("seed", [11])
def test_random_ddl_and_rows_equal_the_brute_force_replay(seed, tmp_path, spark):
    u = _random_upstream(seed)
    # The workload has every kind of statement (a smaller one must not lose any).
    ddl = [line["sql"] for line in map(json.loads, u.lines) if line["isDdl"]]
    for kind in ("ADD COLUMN c\\d+ INT$", "ADD COLUMN c\\d+ INT DEFAULT", "DROP COLUMN", "RENAME COLUMN",
                 "MODIFY COLUMN", "TRUNCATE TABLE", "RENAME TABLE"):
        assert any(re.search(kind, sql) for sql in ddl), kind
    assert any(m["type"] == "UPDATE" and m["old"][0]["id"] != m["data"][0]["id"]
               for m in map(json.loads, u.lines)), "no primary-key change"
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "topic.txt").write_text("\n".join(u.lines) + "\n")
    settings = settings_for(tmp_path / "home", dump, layout="lines")
    summary = replay(settings, "src", DagsterInstance.ephemeral(), progress=lambda _m: None)
    assert summary.ok and summary.windows == WINDOWS and summary.quarantined == 0

    rng = random.Random(seed)
    window_ends = [((T0 + (w + 1) * HOUR) << 18) - 1 for w in range(WINDOWS)]
    instants = window_ends + sorted(rng.sample(u.commits, 6)) + [ts - 1 for ts in rng.sample(u.commits, 3)]
    for tso in instants:
        expected = {n: ([c for c, _ in t.columns], sorted(tuple(r[c] for c, _ in t.columns) for r in t.rows.values()))
                    for n, t in u.state_at(tso).items()}
        got = {}
        for name, t in tables_as_of(spark, settings.warehouse, "src", tso).items():
            columns = [c for c in t.frame.columns if c != COMMIT_TS_COLUMN]
            got[name] = (columns, sorted(tuple(r[c] for c in columns) for r in t.frame.collect()))
        assert got == expected, tso

    for name in {e[0] for e in u.ended}:
        present = lambda values: sorted((k, v) for k, v in values.items() if v is not None)  # noqa: E731
        expected = sorted((f, t, op, present(v)) for n, f, t, op, v in u.ended if n == name)
        got = sorted((r[VALID_FROM], r[VALID_TO], r[END_OP],
                      present({k: v for k, v in r.asDict().items() if k not in (VALID_FROM, VALID_TO, END_OP)}))
                     for r in read_history(spark, settings.warehouse, "src", *name).collect())
        assert got == expected, name
