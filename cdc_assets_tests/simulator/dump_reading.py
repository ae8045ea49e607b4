"""Read a simulated dump back, and a naive consumer that replays it (test-only)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cdc_assets.simulator import GeneratedDump


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes

    @property
    def msg(self) -> dict:
        return json.loads(self.value)


def read_records(dump: GeneratedDump) -> list[Record]:
    """All messages, ordered by (partition, offset)."""
    out: list[Record] = []
    for path in dump.files:
        if dump.layout == "kafka-parquet":
            t = pq.read_table(path)
            micros = t.column("timestamp").cast(pa.int64()).to_pylist()
            for r, us in zip(t.to_pylist(), micros):
                out.append(Record(r["partition"], r["offset"], us // 1000, r["key"], r["value"]))
        else:
            for line in Path(path).read_bytes().splitlines():
                k = json.loads(line)
                key = None if k["key"] is None else k["key"].encode("utf-8")
                out.append(Record(k["partition"], k["offset"], k["ts"], key, k["payload"].encode("utf-8")))
    out.sort(key=lambda r: (r.partition, r.offset))
    return out


def kind(msg: dict) -> str:
    if msg["isDdl"]:
        return "ddl"
    return "watermark" if msg["type"] == "TIDB_WATERMARK" else "row"


def canonical_row(msg_row: dict, columns: list[str], types: dict[str, str]) -> list:
    """Canal-JSON text -> truth.json canonical text (binary: ISO-8859-1 -> bytes -> base64)."""
    out = []
    for c in columns:
        v = msg_row[c]
        if v is not None and "binary" in types[c]:
            v = base64.b64encode(v.encode("latin-1")).decode("ascii")
        out.append(v)
    return out


def replay(records: list[Record], truth: dict) -> list[dict]:
    """Naive consumer: drop re-sent rows, apply in commit order, snapshot per truth window.

    Returns, per truth window, {table: {pk tuple: canonical row}}.
    """
    seen: set = set()
    rows = []
    for rec in records:
        m = rec.msg
        if kind(m) != "row":
            continue
        name = f"{m['database']}.{m['table']}"
        image = m["data"][0]
        pk = tuple(image[n] for n in m["pkNames"])
        ident = (name, pk, m["_tidb"]["commitTs"], m["type"])
        if ident in seen:
            continue
        seen.add(ident)
        rows.append((m["_tidb"]["commitTs"], name, m["type"], pk, image))
    rows.sort(key=lambda r: r[0])
    state = {name: {} for name in truth["tables"]}
    snapshots = []
    i = 0
    for w in truth["windows"]:
        while i < len(rows) and rows[i][0] >> 18 < w["end_ms"]:
            ts, name, op, pk, image = rows[i]
            meta = truth["tables"][name]
            if op == "DELETE":
                del state[name][pk]
            else:
                state[name][pk] = canonical_row(image, meta["columns"], meta["types"])
            i += 1
        snapshots.append({name: dict(s) for name, s in state.items()})
    return snapshots


def truth_rows_by_pk(truth: dict, window: dict) -> dict:
    out = {}
    for name, rows in window["tables"].items():
        meta = truth["tables"][name]
        idx = [meta["columns"].index(p) for p in meta["primary_key"]]
        out[name] = {tuple(r[i] for i in idx): r for r in rows}
    return out
