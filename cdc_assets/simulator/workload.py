"""What happened in the simulated TiDB: DDL, then transactions of row changes.

Protocol-neutral on purpose: encoders (how TiCDC writes an event), the Kafka simulation
(partitions, offsets, restarts) and the truth builder all consume the same event stream.

TiDB semantics kept here because consumers depend on them:
- a transaction changes each primary key at most once and all its changes share one
  commit_ts; commit timestamps are TSOs, strictly increasing;
- an UPDATE that changes the primary key reaches TiCDC's MQ sinks as a DELETE of the old
  key plus an INSERT of the new key in the same transaction;
- an UPDATE always changes at least one column (TiDB writes nothing otherwise).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone

from cdc_assets.simulator.schema import DEMO_TABLES, INT, STRING, UINT, ColumnDef, TableDef
from cdc_assets.simulator.tso import make_tso
from cdc_assets.simulator.values import ValueGenerator, int_bounds

DEFAULT_START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
DEFAULT_DURATION_MS = 4 * 3_600_000 + 1_800_000  # 4.5 h: several hourly windows, the last one partial
DEFAULT_ROW_CHANGES = 3000

INSERT, UPDATE, DELETE = "INSERT", "UPDATE", "DELETE"

# Columns whose values mostly come from another table's key, so that the data looks
# related (no foreign keys are enforced, like most TiDB schemas).
REFERENCES = {
    ("shop", "orders", "customer_id"): ("shop", "customers", "id"),
    ("shop", "order_items", "order_id"): ("shop", "orders", "order_id"),
    ("shop", "order_items", "sku"): ("inventory", "stock", "sku"),
}
TABLE_WEIGHTS = {"shop.customers": 0.25, "shop.orders": 0.30, "shop.order_items": 0.30, "inventory.stock": 0.15}
# Statement mix once a table has a few rows; primary-key updates become DELETE + INSERT.
OP_WEIGHTS = (("insert", 0.42), ("update", 0.36), ("delete", 0.12), ("pk_update", 0.10))
STRING_KEY_PREFIXES = ("SKU", "SKU", "SKU", "sku", "测试", "Zoë", "🍕", "Ä-Ö")


@dataclass(frozen=True)
class RowChange:
    database: str
    table: str
    op: str  # INSERT | UPDATE | DELETE
    before: dict | None  # column -> value; None for INSERT
    after: dict | None  # column -> value; None for DELETE

    @property
    def row(self) -> dict:
        """The image that identifies the row: after, or before for a DELETE."""
        return self.after if self.after is not None else self.before


@dataclass(frozen=True)
class Transaction:
    commit_ts: int  # TiDB TSO
    changes: list[RowChange]


@dataclass(frozen=True)
class DdlEvent:
    commit_ts: int
    database: str
    table: str  # "" for database-level DDL
    ddl_type: str  # TiDB action name: "create schema", "create table", ...
    sql: str


Event = DdlEvent | Transaction


class _LiveRows:
    """Rows of one table keyed by primary key, with O(1) uniform random pick."""

    def __init__(self) -> None:
        self.rows: dict[tuple, dict] = {}
        self._keys: list[tuple] = []
        self._index: dict[tuple, int] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def put(self, key: tuple, row: dict) -> None:
        if key not in self._index:
            self._index[key] = len(self._keys)
            self._keys.append(key)
        self.rows[key] = row

    def remove(self, key: tuple) -> None:
        i = self._index.pop(key)
        last = self._keys.pop()
        if i < len(self._keys):
            self._keys[i] = last
            self._index[last] = i
        del self.rows[key]

    def random_key(self, rng: random.Random) -> tuple:
        return self._keys[rng.randrange(len(self._keys))]


@dataclass
class _TableState:
    table: TableDef
    live: _LiveRows = field(default_factory=_LiveRows)
    recently_deleted: deque = field(default_factory=lambda: deque(maxlen=64))
    counters: dict[str, int] = field(default_factory=dict)


class Workload:
    """A seeded TiDB-like database. `events()` replays the identical history each call."""

    def __init__(
        self,
        *,
        seed: int = 7,
        row_changes: int = DEFAULT_ROW_CHANGES,
        start_ms: int = DEFAULT_START_MS,
        duration_ms: int = DEFAULT_DURATION_MS,
        tables: tuple[TableDef, ...] = DEMO_TABLES,
    ):
        if row_changes < 1:
            raise ValueError("row_changes must be >= 1")
        if duration_ms < 2_000:
            raise ValueError("duration_ms must be >= 2000")
        self.seed = seed
        self.row_changes = row_changes
        self.start_ms = start_ms
        self.duration_ms = duration_ms
        self.tables = tables
        self._by_name = {t.full_name: t for t in tables}

    def table(self, database: str, table: str) -> TableDef:
        return self._by_name[f"{database}.{table}"]

    def events(self) -> Iterator[Event]:
        rng = random.Random(self.seed)
        yield from self._ddl()
        yield from _TransactionGenerator(self, rng).run()

    def _ddl(self) -> Iterator[DdlEvent]:
        # All DDL in the first second, before any row: CREATE DATABASE, then its tables.
        ddl: list[tuple[str, str, str, str]] = []
        seen: set[str] = set()
        for t in self.tables:
            if t.database not in seen:
                seen.add(t.database)
                ddl.append((t.database, "", "create schema", f"CREATE DATABASE `{t.database}`"))
            ddl.append((t.database, t.table, "create table", t.create_sql()))
        step = 1000 // (len(ddl) + 1)
        for i, (db, table, action, sql) in enumerate(ddl):
            yield DdlEvent(make_tso(self.start_ms + i * step, 1), db, table, action, sql)


class _TransactionGenerator:
    def __init__(self, workload: Workload, rng: random.Random):
        self.w = workload
        self.rng = rng
        self.values = ValueGenerator(rng)
        self.state = {t.full_name: _TableState(t) for t in workload.tables}
        names = [t.full_name for t in workload.tables]
        self.table_names = names
        self.table_weights = [TABLE_WEIGHTS.get(n, 0.2) for n in names]
        self.emitted = 0
        self._touched: set[tuple[str, tuple]] = set()
        self._changes: list[RowChange] = []

    def run(self) -> Iterator[Transaction]:
        w, rng = self.w, self.rng
        first_row_ms = w.start_ms + 1000
        span = w.duration_ms - 1000
        last_physical, last_logical = -1, 0
        while self.emitted < w.row_changes:
            # Stratified by row-change count: spreads commits evenly over the duration,
            # strictly increasing, and the last one stays below start + duration.
            physical = first_row_ms + int(span * (self.emitted + rng.random()) / w.row_changes)
            if physical <= last_physical:
                physical, logical = last_physical, last_logical + rng.randint(1, 3)
            else:
                logical = rng.randint(1, 40)  # never 0: a watermark b<<18 sits strictly below any commit
            last_physical, last_logical = physical, logical
            now = datetime.fromtimestamp(physical // 1000, tz=timezone.utc).replace(tzinfo=None)
            changes = self._transaction(now)
            if changes:
                yield Transaction(make_tso(physical, logical), changes)

    def _transaction(self, now: datetime) -> list[RowChange]:
        rng = self.rng
        r = rng.random()
        statements = 1 if r < 0.7 else 2 if r < 0.9 else rng.randint(3, 5)
        self._touched = set()
        self._changes = []
        for _ in range(statements):
            if self.emitted >= self.w.row_changes:
                break
            name = rng.choices(self.table_names, self.table_weights)[0]
            self._statement(self.state[name], now)
        return self._changes

    def _statement(self, st: _TableState, now: datetime) -> None:
        rng = self.rng
        op = "insert"
        if len(st.live) >= 3:
            op = rng.choices([o for o, _ in OP_WEIGHTS], [p for _, p in OP_WEIGHTS])[0]
        if op == "insert":
            key = self._new_key(st)
            if key is not None:
                self._emit(st, INSERT, None, self._new_row(st, key, now))
            return
        key = self._untouched_live_key(st)
        if key is None:
            return
        row = st.live.rows[key]
        if op == "delete":
            self._emit(st, DELETE, row, None)
        elif op == "update":
            self._emit(st, UPDATE, row, self._updated_row(st, row, now))
        else:  # pk_update: TiCDC splits it into DELETE(old key) + INSERT(new key), same commit
            new_key = self._new_key(st)
            if new_key is None or self.emitted + 2 > self.w.row_changes:
                return
            moved = dict(row)
            moved.update(zip(st.table.primary_key, new_key))
            self._emit(st, DELETE, row, None)
            self._emit(st, INSERT, None, moved)

    def _emit(self, st: _TableState, op: str, before: dict | None, after: dict | None) -> None:
        t = st.table
        key = t.pk_values(after if after is not None else before)
        self._touched.add((t.full_name, key))
        if op == DELETE:
            st.live.remove(key)
            st.recently_deleted.append(key)
        else:
            st.live.put(key, after)
        self._changes.append(RowChange(t.database, t.table, op, before, after))
        self.emitted += 1

    def _untouched_live_key(self, st: _TableState) -> tuple | None:
        for _ in range(8):
            key = st.live.random_key(self.rng)
            if (st.table.full_name, key) not in self._touched:
                return key
        return None

    def _new_key(self, st: _TableState) -> tuple | None:
        """A primary key that is neither live nor already changed in this transaction."""
        rng = self.rng
        for _ in range(20):
            if st.recently_deleted and rng.random() < 0.05:
                key = rng.choice(st.recently_deleted)  # resurrect a deleted key
            else:
                key = tuple(self._key_value(st, c) for c in st.table.columns if c.primary_key)
            if key not in st.live.rows and (st.table.full_name, key) not in self._touched:
                return key
        return None

    def _key_value(self, st: _TableState, col: ColumnDef):
        rng = self.rng
        ref = self._referenced_value(st.table, col)
        if ref is not None and rng.random() < 0.8:
            return ref
        if col.kind in (INT, UINT):
            lo, hi = int_bounds(col)
            if col.name == "line_no":
                return rng.randint(1, 6) if rng.random() < 0.95 else rng.choice((0, -1, hi))
            # Unsigned bigint keys above 2^63 do not fit a signed long: a classic consumer bug.
            high_half = col.kind == UINT and hi >= 1 << 63
            r = rng.random()
            if r < 0.03:
                return rng.choice((lo, hi, 0, (1 << 63) - 1, 1 << 63) if high_half else (lo, hi, 0))
            if r < 0.15:
                return rng.randint(1 << 63, hi) if high_half else rng.randint(lo, hi)
            n = st.counters.get(col.name, 0) + 1
            st.counters[col.name] = n
            return n
        if col.kind == STRING:
            n = st.counters.get(col.name, 0) + 1
            st.counters[col.name] = n
            if rng.random() < 0.01:
                return ""  # empty string is a legal key and must not turn into NULL
            key = f"{rng.choice(STRING_KEY_PREFIXES)}-{n:06d}"
            return key[: col.max_length] if col.max_length else key
        return self.values.value(ColumnDef(col.name, col.mysql_type), datetime(2026, 1, 1))

    def _referenced_value(self, table: TableDef, col: ColumnDef):
        ref = REFERENCES.get((table.database, table.table, col.name))
        if ref is None or f"{ref[0]}.{ref[1]}" not in self.state:
            return None
        target = self.state[f"{ref[0]}.{ref[1]}"]
        if not len(target.live):
            return None
        return target.live.rows[target.live.random_key(self.rng)][ref[2]]

    def _new_row(self, st: _TableState, key: tuple, now: datetime) -> dict:
        row = dict(zip(st.table.primary_key, key))
        for col in st.table.non_key_columns:
            row[col.name] = self._column_value(st.table, col, now)
        return row

    def _updated_row(self, st: _TableState, row: dict, now: datetime) -> dict:
        rng = self.rng
        cols = st.table.non_key_columns
        new = dict(row)
        for col in rng.sample(cols, rng.randint(1, min(3, len(cols)))):
            for _ in range(5):  # retry: an UPDATE must change something
                new[col.name] = self._column_value(st.table, col, now)
                if new[col.name] != row[col.name]:
                    break
        if "updated_at" in new:
            new["updated_at"] = now
        if new == row:
            col = cols[0]
            new[col.name] = self._distinct_value(col, row[col.name], now)
        return new

    def _distinct_value(self, col: ColumnDef, old, now: datetime):
        for _ in range(50):
            v = self.values.value(col, now)
            if v != old:
                return v
        raise RuntimeError(f"cannot find a new value for {col.name}")

    def _column_value(self, table: TableDef, col: ColumnDef, now: datetime):
        if col.name == "updated_at":
            return now
        ref = self._referenced_value(table, col)
        if ref is not None and self.rng.random() < 0.8:
            return ref
        return self.values.value(col, now)
