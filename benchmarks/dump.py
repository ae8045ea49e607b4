"""A fast, seeded TiCDC Canal-JSON dump generator for benchmarks (numpy-vectorised).

The project's simulator (`cdc_assets.simulator`) models TiDB transactions, restarts and
every protocol faithfully, but runs at a few thousand events per second: too slow for 10M
events. This generator writes the same wire format (TiCDC Canal-JSON with `_tidb`, one row
per message, TIDB_WATERMARK messages, Spark's Kafka Parquet schema) for a simpler workload:

- 4 tables (single and composite keys, int / bigint / decimal / varchar / datetime, nulls),
  or with `width` set one table of that many columns (`wide_table`), whose values every
  window types and writes per column;
- one row change per transaction, commit TSOs strictly increasing; per key the first
  change is an INSERT, a DELETE is always followed by an INSERT, the rest are UPDATEs;
- 3 partitions (by key hash); every `watermark_ms` a TIDB_WATERMARK goes to every
  partition after all its events below that TSO, and a final one closes the last window;
- duplicates: `dup_rate` of the events are re-sent, half right after the original
  (identical copy), half after the next watermark (a late copy);
- `expected/<db>.<table>.parquet`: the final state (strings, as in the messages), written
  from the same arrays, so every engine's answer can be checked.

Dumps are cached under `<cache>/events=<n>-seed=<s>-hours=<h>-keys=<k>[-width=<w>]/` (a
`_DONE` file marks a complete one).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
TOPIC = "tidb_cdc"
PARTITIONS = 3
SHIFT = 18

# (name, mysql type as TiCDC writes it, declared type, generator kind, nullable)
Column = tuple[str, str, str, str, bool]


@dataclass(frozen=True)
class Table:
    database: str
    table: str
    columns: tuple[Column, ...]
    pk: tuple[str, ...]
    weight: float

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"


TABLES: tuple[Table, ...] = (
    Table("shop", "orders", (
        ("order_id", "bigint", "BIGINT", "key", False),
        ("customer_id", "int", "INTEGER", "int", False),
        ("amount", "decimal", "DECIMAL(10,2)", "dec2", False),
        ("status", "varchar", "VARCHAR", "status", False),
        ("updated_at", "datetime", "TIMESTAMP", "datetime", False),
    ), ("order_id",), 0.4),
    Table("shop", "customers", (
        ("id", "int", "INTEGER", "key", False),
        ("name", "varchar", "VARCHAR", "name", False),
        ("balance", "decimal", "DECIMAL(12,2)", "dec2", False),
        ("created_at", "datetime", "TIMESTAMP", "datetime", False),
        ("note", "varchar", "VARCHAR", "note", True),
    ), ("id",), 0.15),
    Table("shop", "order_items", (
        ("order_id", "bigint", "BIGINT", "key_div4", False),
        ("line_no", "int", "INTEGER", "key_mod4", False),
        ("sku", "varchar", "VARCHAR", "sku", False),
        ("quantity", "int", "INTEGER", "small", False),
        ("unit_price", "decimal", "DECIMAL(10,2)", "dec2", False),
    ), ("order_id", "line_no"), 0.3),
    Table("inventory", "stock", (
        ("sku", "varchar", "VARCHAR", "key_sku", False),
        ("qty", "int", "INTEGER", "int", False),
        ("price", "decimal", "DECIMAL(12,4)", "dec4", True),
    ), ("sku",), 0.15),
)
# A wide table's columns after its key cycle through these (mysql type, declared type, kind, nullable).
_WIDE_KINDS: tuple[tuple[str, str, str, bool], ...] = (
    ("int", "INTEGER", "int", False), ("varchar", "VARCHAR", "status", False),
    ("decimal", "DECIMAL(10,2)", "dec2", False), ("datetime", "TIMESTAMP", "datetime", False),
    ("varchar", "VARCHAR", "name", False), ("int", "INTEGER", "small", False),
    ("varchar", "VARCHAR", "note", True), ("varchar", "VARCHAR", "sku", False),
)


def wide_table(width: int) -> Table:
    """`bench.wide_rows`: a bigint key and `width - 1` columns cycling through the kinds above."""
    columns = [("id", "bigint", "BIGINT", "key", False)] + [
        (f"c{i:02d}", *_WIDE_KINDS[(i - 1) % len(_WIDE_KINDS)]) for i in range(1, width)]
    return Table("bench", "wide_rows", tuple(columns), ("id",), 1.0)


_SQL_TYPES = {"bigint": -5, "int": 4, "decimal": 3, "varchar": 12, "datetime": 93}
_STATUSES = np.array(["new", "paid", "shipped", "done", "cancelled"])
_NAMES = np.array(["Ada", "Bo", "Chen", "Dmitri", "Eve", "Farah", "Gustavo", "Hana", "Émile", "Zoë"])
OPS = np.array(["INSERT", "UPDATE", "DELETE"])
INSERT, UPDATE, DELETE = 0, 1, 2


@dataclass(frozen=True)
class DumpSpec:
    events: int
    seed: int = 42
    hours: int = 4
    watermark_ms: int = 60_000
    file_span_ms: int = 10 * 60_000
    dup_rate: float = 0.02
    keys_per_event: float = 0.1  # key space = events * this (so ~10 changes per key)
    width: int = 0  # 0: the four tables of TABLES; else one table of this many columns (`wide_table`)
    copies: int = 1  # above 1: that many copies of the tables (`<table>_<i>`), each with its share of the events

    @property
    def folder_name(self) -> str:
        wide = f"-width={self.width}" if self.width else ""
        many = f"-copies={self.copies}" if self.copies > 1 else ""
        return f"events={self.events}-seed={self.seed}-hours={self.hours}-keys={self.keys_per_event}{wide}{many}"

    @property
    def tables(self) -> tuple[Table, ...]:
        tables = (wide_table(self.width),) if self.width else TABLES
        if self.copies <= 1:
            return tables
        return tuple(replace(t, table=f"{t.table}_{i}", weight=t.weight / self.copies)
                     for i in range(self.copies) for t in tables)


@dataclass(frozen=True)
class Dump:
    root: Path
    spec: DumpSpec

    @property
    def dump_dir(self) -> Path:
        return self.root / "dump"

    @property
    def expected_dir(self) -> Path:
        return self.root / "expected"

    @property
    def info(self) -> dict:
        return json.loads((self.root / "info.json").read_text())


def dump_tables(dump_root: Path) -> tuple[Table, ...]:
    """The tables of a generated dump (from its info.json)."""
    return DumpSpec(**json.loads((Path(dump_root) / "info.json").read_text())["spec"]).tables


def _mysql_types_json(t: Table) -> str:
    return json.dumps({c[0]: c[1] for c in t.columns}, separators=(",", ":"))


def _sql_types_json(t: Table) -> str:
    return json.dumps({c[0]: _SQL_TYPES[c[1]] for c in t.columns}, separators=(",", ":"))


def _column_text(kind: str, keys: np.ndarray, rng: np.random.Generator, start_s: int) -> np.ndarray:
    """Values of one column for `keys` (object array of str, None = SQL NULL)."""
    n = len(keys)
    if kind == "key":
        return keys.astype(str).astype(object)
    if kind == "key_div4":
        return (keys // 4).astype(str).astype(object)
    if kind == "key_mod4":
        return (keys % 4).astype(str).astype(object)
    if kind == "key_sku":
        return np.char.add("SKU-", np.char.zfill(keys.astype(str), 8)).astype(object)
    if kind == "int":
        return rng.integers(0, 1_000_000, n).astype(str).astype(object)
    if kind == "small":
        return rng.integers(1, 100, n).astype(str).astype(object)
    if kind == "dec2":
        cents = rng.integers(0, 10_000_000, n)
        return np.char.add(np.char.add((cents // 100).astype(str), "."),
                           np.char.zfill((cents % 100).astype(str), 2)).astype(object)
    if kind == "dec4":
        v = rng.integers(0, 100_000_000, n)
        out = np.char.add(np.char.add((v // 10_000).astype(str), "."),
                          np.char.zfill((v % 10_000).astype(str), 4)).astype(object)
        out[rng.random(n) < 0.1] = None
        return out
    if kind == "status":
        return _STATUSES[rng.integers(0, len(_STATUSES), n)].astype(object)
    if kind == "name":
        return np.char.add(_NAMES[rng.integers(0, len(_NAMES), n)],
                           rng.integers(0, 10_000, n).astype(str)).astype(object)
    if kind == "sku":
        return np.char.add("SKU-", np.char.zfill(rng.integers(0, 10**8, n).astype(str), 8)).astype(object)
    if kind == "note":
        out = np.char.add('say "hi" \\ ', rng.integers(0, 1000, n).astype(str)).astype(object)
        out[rng.random(n) < 0.3] = None
        return out
    if kind == "datetime":
        secs = start_s + rng.integers(0, 86_400 * 30, n)
        return np.char.replace(np.datetime_as_string(secs.astype("datetime64[s]")), "T", " ").astype(object)
    raise ValueError(kind)


def _json_str(v) -> str:
    return "null" if v is None else json.dumps(v, ensure_ascii=False)


def _row_objects(t: Table, cols: list[np.ndarray]) -> list[str]:
    """`{"c1":"v1",...}` per row. Values that need escaping go through json.dumps."""
    names = [c[0] for c in t.columns]
    plain = [c[3] not in ("note", "name") for c in t.columns]
    parts = []
    for name, values, is_plain in zip(names, cols, plain):
        if is_plain:
            parts.append([f'"{name}":null' if v is None else f'"{name}":"{v}"' for v in values])
        else:
            parts.append([f'"{name}":{_json_str(v)}' for v in values])
    return ["{" + ",".join(p) + "}" for p in zip(*parts)]


def generate_dump(spec: DumpSpec, cache: Path) -> Dump:
    root = Path(cache) / spec.folder_name
    if (root / "_DONE").exists():
        return Dump(root, spec)
    if root.exists():
        shutil.rmtree(root)
    tmp = root.with_name(root.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / "dump" / TOPIC).mkdir(parents=True)
    (tmp / "expected").mkdir()
    info = _write(spec, tmp)
    (tmp / "info.json").write_text(json.dumps(info, indent=1))
    (tmp / "_DONE").write_text("")
    tmp.rename(root)
    return Dump(root, spec)


def _write(spec: DumpSpec, out: Path) -> dict:
    rng = np.random.default_rng(spec.seed)
    n = spec.events
    duration_ms = spec.hours * 3_600_000
    # Commit times: sorted, strictly increasing TSOs (logical = rank within the millisecond).
    ms = START_MS + np.sort(rng.integers(0, duration_ms, n))
    first_in_ms = np.searchsorted(ms, ms, side="left")
    commit_ts = (ms << SHIFT) | (np.arange(n) - first_in_ms)
    tables = spec.tables
    weights = np.array([t.weight for t in tables])
    table_idx = rng.choice(len(tables), n, p=weights / weights.sum())
    key_space = np.maximum(1, (weights / weights.sum() * n * spec.keys_per_event).astype(np.int64))
    keys = (rng.random(n) * key_space[table_idx]).astype(np.int64)

    # Ops per key in commit order: first INSERT; a "delete wish" becomes a DELETE unless the
    # previous change was one (then INSERT); after a DELETE comes an INSERT.
    gid = table_idx.astype(np.int64) * (1 << 40) + keys
    order = np.lexsort((np.arange(n), gid))
    g_sorted = gid[order]
    first = np.ones(n, bool)
    first[1:] = g_sorted[1:] != g_sorted[:-1]
    wish = rng.random(n) < 0.12
    wish[first] = False
    prev_wish = np.zeros(n, bool)
    prev_wish[1:] = wish[:-1]
    prev_wish[first] = False
    is_delete = wish & ~prev_wish
    prev_delete = np.zeros(n, bool)
    prev_delete[1:] = is_delete[:-1]
    prev_delete[first] = False
    op_sorted = np.where(is_delete, DELETE, np.where(first | prev_delete, INSERT, UPDATE))
    last = np.ones(n, bool)
    last[:-1] = g_sorted[1:] != g_sorted[:-1]
    op = np.empty(n, np.int8)
    op[order] = op_sorted
    is_last = np.zeros(n, bool)
    is_last[order] = last
    partition = (gid * 2654435761 % (1 << 32)) % PARTITIONS

    # Duplicates: re-sent copies, half right after the original, half after the next watermark.
    dup = rng.random(n) < spec.dup_rate
    late = dup & (rng.random(n) < 0.5)
    wm_grid = spec.watermark_ms
    final_wm_ms = (START_MS + duration_ms + 3_600_000 - 1) // 3_600_000 * 3_600_000
    expected: dict[int, list[list]] = {i: [[] for _ in t.columns] for i, t in enumerate(tables)}
    counts = {"row_events": int(n), "duplicates": int((dup & ~late).sum()), "late": int(late.sum()),
              "watermarks": 0, "messages": 0}
    next_offset = [0] * PARTITIONS
    spans = np.arange(START_MS, final_wm_ms + spec.file_span_ms, spec.file_span_ms)
    for c in range(len(spans) - 1):
        lo, hi = spans[c], spans[c + 1]
        idx = np.nonzero((ms >= lo) & (ms < hi))[0]
        crng = np.random.default_rng([spec.seed, c])
        values = _chunk_messages(tables, idx, table_idx, keys, op, commit_ts, crng, expected, is_last)
        # Watermarks in this span: ts W in (lo, hi] on the grid, last one also the final.
        wms = np.arange((lo // wm_grid + 1) * wm_grid, hi + 1, wm_grid)
        wms = wms[wms <= final_wm_ms]
        for p in range(PARTITIONS):
            sel = partition[idx] == p
            pidx = idx[sel]
            pvals = [values[i] for i in np.nonzero(sel)[0]]
            sort_keys = [commit_ts[pidx] * 4 + 1]
            msgs = list(pvals)
            d = dup[pidx]
            lt = late[pidx]
            imm = d & ~lt
            sort_keys.append(commit_ts[pidx][imm] * 4 + 2)
            msgs += [v for v, f in zip(pvals, imm) if f]
            next_wm = (ms[pidx][lt] // wm_grid + 1) * wm_grid
            sort_keys.append((next_wm << SHIFT) * 4 + 3)
            msgs += [v for v, f in zip(pvals, lt) if f]
            sort_keys.append((wms << SHIFT) * 4)
            msgs += [_watermark(int(w) << SHIFT) for w in wms]
            sk = np.concatenate(sort_keys)
            o = np.argsort(sk, kind="stable")
            msgs = [msgs[i] for i in o]
            kafka_ms = np.concatenate([ms[pidx], ms[pidx][imm], next_wm, wms])[o] + 5
            _write_file(out / "dump" / TOPIC, p, next_offset[p], msgs, kafka_ms)
            next_offset[p] += len(msgs)
            counts["watermarks"] += len(wms)
            counts["messages"] += len(msgs)
    for i, t in enumerate(tables):
        arrays = [pa.array(list(col), pa.string()) for col in expected[i]]
        pq.write_table(pa.Table.from_arrays(arrays, names=[c[0] for c in t.columns]),
                       out / "expected" / f"{t.name}.parquet")
    counts["expected_rows"] = {t.name: len(expected[i][0]) for i, t in enumerate(tables)}
    counts["value_bytes"] = int(sum(
        pc.sum(pc.binary_length(pq.read_table(f, columns=["value"]).column("value"))).as_py()
        for f in sorted((out / "dump" / TOPIC).glob("*.parquet"))))
    return {"spec": spec.__dict__, "counts": counts, "final_watermark_ms": int(final_wm_ms),
            "tables": [{"name": t.name, "pk": list(t.pk),
                        "columns": [[c[0], c[2]] for c in t.columns]} for t in tables]}


def _watermark(ts: int) -> bytes:
    return ('{"id":0,"database":"","table":"","pkNames":null,"isDdl":false,"type":"TIDB_WATERMARK",'
            f'"es":{ts >> SHIFT},"ts":{(ts >> SHIFT) + 3},"sql":"","sqlType":null,"mysqlType":null,'
            f'"data":null,"old":null,"_tidb":{{"watermarkTs":{ts}}}}}').encode()


def _chunk_messages(tables, idx, table_idx, keys, op, commit_ts, rng, expected, is_last) -> list[bytes]:
    """Canal-JSON bytes for the events `idx` (in the order of idx)."""
    out: list[bytes | None] = [None] * len(idx)
    start_s = START_MS // 1000
    for ti, t in enumerate(tables):
        pos = np.nonzero(table_idx[idx] == ti)[0]
        if not len(pos):
            continue
        ev = idx[pos]
        k = keys[ev]
        data = [_column_text(c[3], k, rng, start_s) for c in t.columns]
        old = [d if c[3].startswith("key") else _column_text(c[3], k, rng, start_s)
               for c, d in zip(t.columns, data)]
        data_obj = _row_objects(t, data)
        old_obj = _row_objects(t, old)
        fin = np.nonzero(is_last[ev] & (op[ev] != DELETE))[0]
        for ci, col in enumerate(data):
            expected[ti][ci].extend(col[fin].tolist())
        head = (f'{{"id":0,"database":"{t.database}","table":"{t.table}",'
                f'"pkNames":{json.dumps(list(t.pk), separators=(",", ":"))},"isDdl":false,"type":"')
        mid_types = f'"sql":"","sqlType":{_sql_types_json(t)},"mysqlType":{_mysql_types_json(t)},'
        ops = op[ev]
        cts = commit_ts[ev]
        for j in range(len(ev)):
            o = ops[j]
            c = int(cts[j])
            old_part = f'[{old_obj[j]}]' if o == UPDATE else "null"
            out[pos[j]] = (
                f'{head}{OPS[o]}","es":{c >> SHIFT},"ts":{(c >> SHIFT) + 2},{mid_types}'
                f'"old":{old_part},"data":[{data_obj[j]}],"_tidb":{{"commitTs":{c}}}}}'
            ).encode()
    return out


_SCHEMA = pa.schema([
    pa.field("key", pa.binary()), pa.field("value", pa.binary()), pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")), pa.field("timestampType", pa.int32()),
])


def _write_file(folder: Path, partition: int, first_offset: int, msgs: list[bytes], kafka_ms: np.ndarray) -> None:
    if not msgs:
        return
    n = len(msgs)
    table = pa.Table.from_arrays([
        pa.nulls(n, pa.binary()), pa.array(msgs, pa.binary()), pa.array([TOPIC] * n, pa.string()),
        pa.array(np.full(n, partition, np.int32)), pa.array(np.arange(first_offset, first_offset + n)),
        pa.array((kafka_ms * 1000).astype("datetime64[us]")).cast(pa.timestamp("us", tz="UTC")),
        pa.array(np.zeros(n, np.int32)),
    ], schema=_SCHEMA)
    pq.write_table(table, folder / f"part-{partition}-{first_offset:020d}.parquet",
                   compression="snappy", row_group_size=100_000)
