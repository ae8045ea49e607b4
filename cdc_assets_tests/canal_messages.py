"""Hand-written TiCDC Canal-JSON messages for focused tests."""

from __future__ import annotations

import json
from pathlib import Path

TYPES = {"id": "int", "name": "varchar", "amount": "decimal", "raw": "varbinary", "big": "bigint unsigned"}


def row(op: str, ts: int, data: dict, old: dict | None = None, table: str = "t") -> bytes:
    return json.dumps({
        "id": 0, "database": "db", "table": table, "pkNames": ["id"], "isDdl": False, "type": op,
        "es": ts >> 18, "ts": ts >> 18, "sql": "", "sqlType": {}, "mysqlType": TYPES,
        "data": [data], "old": [old] if old else None, "_tidb": {"commitTs": ts},
    }).encode()


def watermark(ts: int) -> bytes:
    return json.dumps({"id": 0, "database": "", "table": "", "pkNames": None, "isDdl": False,
                       "type": "TIDB_WATERMARK", "es": ts >> 18, "ts": ts >> 18, "sql": "", "data": None,
                       "old": None, "_tidb": {"watermarkTs": ts}}).encode()


def values(i: int, name: str, amount: str = "1.50", raw: str | None = None, big: str = "18446744073709551615"):
    return {"id": str(i), "name": name, "amount": amount, "raw": raw, "big": big}


def kcat_file(path: Path, partition: int, messages: list[tuple[int, bytes]], ts: int) -> None:
    """A `kcat -J` dump file of topic `cdc`: one line per (offset, Canal-JSON payload)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(
        json.dumps({"topic": "cdc", "partition": partition, "offset": off, "tstype": "create", "ts": ts,
                    "broker": 1, "key": None, "payload": payload.decode()}) + "\n"
        for off, payload in messages))
