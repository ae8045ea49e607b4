"""A tiny upstream database for DDL tests: applies each statement to a plain Python model (the
brute-force replay) and writes the TiCDC Canal-JSON message a changefeed would send for it.

The model keeps a copy of every table after every commit, so the true state at any TSO is a
lookup: `state_at(tso)`.
"""

from __future__ import annotations

import bisect
import copy
import json
from dataclasses import dataclass, field
from decimal import Decimal

from cdc_assets.common.tso import ms_to_tso

Name = tuple[str, str]


@dataclass
class Table:
    columns: list[tuple[str, str]]  # (name, MySQL type)
    pk: list[str]
    rows: dict[tuple, dict] = field(default_factory=dict)  # key -> {column: Python value}

    def key(self, row: dict) -> tuple:
        return tuple(row[k] for k in self.pk)


class Upstream:
    def __init__(self, start_ms: int):
        self.ms = start_ms
        self.tables: dict[Name, Table] = {}
        self.lines: list[str] = []
        self._history: list[tuple[int, dict[Name, Table]]] = []
        self.commits: list[int] = []
        self.starts: dict[Name, dict[tuple, int]] = {}  # open versions: key -> valid from
        self.ended: list[tuple[Name, int, int, str, dict]] = []  # (table, from, to, end op, values)

    # time ---------------------------------------------------------------------------------------
    def after(self, ms: int) -> "Upstream":
        self.ms += ms
        return self

    def _commit(self) -> int:
        self.ms += 1
        ts = ms_to_tso(self.ms) + 7  # a logical part, as TiDB's TSOs have
        self.commits.append(ts)
        return ts

    def _record(self, ts: int) -> None:
        self._history.append((ts, copy.deepcopy(self.tables)))

    def state_at(self, tso: int) -> dict[Name, Table]:
        i = bisect.bisect_right([ts for ts, _ in self._history], tso)
        return self._history[i - 1][1] if i else {}

    def watermark(self) -> None:
        ts = ms_to_tso(self.ms)
        self.lines.append(json.dumps({
            "id": 0, "database": "", "table": "", "pkNames": None, "isDdl": False, "type": "TIDB_WATERMARK",
            "es": self.ms, "ts": self.ms, "sql": "", "data": None, "old": None, "_tidb": {"watermarkTs": ts}}))

    # DML ----------------------------------------------------------------------------------------
    def insert(self, name: Name, row: dict) -> None:
        t = self.tables[name]
        full = {c: row.get(c) for c, _ in t.columns}
        ts = self._commit()
        t.rows[t.key(full)] = full
        self.starts.setdefault(name, {})[t.key(full)] = ts
        self._row_message(ts, name, "INSERT", full, None)

    def update(self, table: Name, key: tuple, **changes) -> None:
        name = table
        t = self.tables[name]
        old = t.rows.pop(key)
        new = {**old, **changes}
        ts = self._commit()
        t.rows[t.key(new)] = new
        self._end(name, key, ts, "UPDATE", old)
        self.starts[name][t.key(new)] = ts
        self._row_message(ts, name, "UPDATE", new, old)

    def delete(self, name: Name, key: tuple) -> None:
        t = self.tables[name]
        old = t.rows.pop(key)
        ts = self._commit()
        self._end(name, key, ts, "DELETE", old)
        self._row_message(ts, name, "DELETE", old, None)

    def _end(self, name: Name, key: tuple, ts: int, op: str, values: dict) -> None:
        self.ended.append((name, self.starts[name].pop(key), ts, op, dict(values)))

    def _row_message(self, ts: int, name: Name, op: str, data: dict, old: dict | None) -> None:
        t = self.tables[name]
        text = lambda r: {c: None if v is None else str(v) for c, v in r.items()}  # noqa: E731
        self.lines.append(json.dumps({
            "id": 0, "database": name[0], "table": name[1], "pkNames": t.pk, "isDdl": False, "type": op,
            "es": self.ms, "ts": self.ms, "sql": "", "sqlType": {c: 12 for c, _ in t.columns},
            "mysqlType": dict(t.columns), "data": [text(data)], "old": [text(old)] if old else None,
            "_tidb": {"commitTs": ts},
        }))
        self._record(ts)

    # DDL ----------------------------------------------------------------------------------------
    def ddl(self, kind: str, database: str, table: str, sql: str, change, ends: str | None = None,
            moves: tuple[tuple[Name, Name], ...] = ()) -> None:
        """`change(tables)` applies the statement to the model; `ends`: the op that ends the rows of
        a table it empties or removes (TRUNCATE, DROP_TABLE, DROP_DATABASE, RENAME_TABLE);
        `moves`: the (old, new) pairs of a RENAME TABLE that may reuse a name (`a TO b, c TO a`),
        in order: the old name's rows end, the new name's start anew."""
        ts = self._commit()
        before = {n: dict(t.rows) for n, t in self.tables.items()}
        change(self.tables)
        for old, new in moves:
            for key, values in before.get(old, {}).items():
                self._end(old, key, ts, "RENAME_TABLE", values)
            self.starts[new] = {key: ts for key in self.tables[new].rows} if new in self.tables else {}
        moved = {n for pair in moves for n in pair}
        for n, rows in before.items():
            if n not in moved and rows and (n not in self.tables or not self.tables[n].rows):
                assert ends, sql
                for key, values in rows.items():
                    self._end(n, key, ts, ends, values)
        for n, t in self.tables.items():
            if n not in before and n not in moved:  # created, or renamed to: its rows start anew
                self.starts[n] = {key: ts for key in t.rows}
        self.lines.append(json.dumps({
            "id": 0, "database": database, "table": table, "pkNames": None, "isDdl": True, "type": kind,
            "es": self.ms, "ts": self.ms, "sql": sql, "sqlType": None, "mysqlType": None, "data": None,
            "old": None, "_tidb": {"commitTs": ts},
        }))
        self._record(ts)


def add_column(name: Name, column: str, mysql_type: str, default) -> callable:
    def change(tables):
        t = tables[name]
        t.columns.append((column, mysql_type))
        for r in t.rows.values():
            r[column] = default
    return change


def rename_column(name: Name, old: str, new: str, mysql_type: str | None = None, convert=None) -> callable:
    def change(tables):
        t = tables[name]
        t.columns = [(new if c == old else c, (mysql_type or ty) if c == old else ty) for c, ty in t.columns]
        t.pk = [new if k == old else k for k in t.pk]
        for r in t.rows.values():
            v = r.pop(old)
            r[new] = convert(v) if convert and v is not None else v
    return change


def drop_column(name: Name, column: str) -> callable:
    def change(tables):
        t = tables[name]
        t.columns = [(c, ty) for c, ty in t.columns if c != column]
        for r in t.rows.values():
            r.pop(column)
    return change


def as_decimal(text: str) -> Decimal:
    return Decimal(text)
