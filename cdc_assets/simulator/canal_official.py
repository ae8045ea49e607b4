"""Official Alibaba Canal flat messages, as Canal itself writes them to Kafka
(spec: ticdc-canal-json.txt, "Comparison of TiCDC Canal-JSON and the official Canal").

Differences from TiCDC's Canal-JSON (`canal_json.py`):
- no `_tidb` extension and no watermark messages (`encode_watermark` returns None), so a
  consumer completes windows by event time; commit time is `es` (commit physical ms);
- `id` is the batch id: it grows with every transaction (DDL included) and a re-sent
  transaction keeps its id, so same-millisecond commits keep their order and an
  at-least-once copy is still recognised as one;
- UPDATE: `old` holds only the changed columns; DELETE: the row in `data`, `old` null;
- `mysqlType` with the full type parameters, MySQL 5.7 style (`int(11)`, `decimal(12,2)`,
  `bigint(20) unsigned`); `sqlType` as TiCDC (which copies Canal's value-based promotion);
- top-level keys in alphabetical order (fastjson sorts FlatMessage fields), row maps in
  column order; values are MySQL text, binary bytes as ISO-8859-1 code points like
  TiCDC; `ts` = build time.
Read back with decoder canal-json, `enable-tidb-extension=false, content-compatible=true`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from cdc_assets.simulator.canal_json import DDL_EVENT_TYPES, _TableCodec
from cdc_assets.simulator.encoder import Encoder, KeyValue
from cdc_assets.simulator.schema import ColumnDef, TableDef
from cdc_assets.simulator.tso import tso_physical_ms
from cdc_assets.simulator.workload import DELETE, UPDATE, DdlEvent, RowChange

# MySQL 5.7 default display widths (signed, unsigned) shown in COLUMN_TYPE.
_INT_WIDTHS = {
    "tinyint": (4, 3), "smallint": (6, 5), "mediumint": (9, 8), "int": (11, 10), "integer": (11, 10),
    "bigint": (20, 20),
}


def full_mysql_type(col: ColumnDef) -> str:
    """The column type as MySQL's information_schema COLUMN_TYPE prints it."""
    base = "int" if col.base_type == "integer" else col.base_type
    if col.members:
        quoted = ",".join("'" + m.replace("'", "''") + "'" for m in col.members)
        return f"{base}({quoted})"
    params = col.params
    if not params and col.base_type in _INT_WIDTHS:
        params = (_INT_WIDTHS[col.base_type][1 if col.unsigned else 0],)
    text = f"{base}({','.join(str(p) for p in params)})" if params else base
    return f"{text} unsigned" if col.unsigned else text


def _dumps(msg: dict) -> bytes:
    return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class CanalOfficialEncoder(Encoder):
    name = "canal-official"
    decoder = ("canal-json", {"enable-tidb-extension": "false", "content-compatible": "true"})
    ddl_to_all_partitions = False

    def __init__(self, tables: Iterable[TableDef], *, time_zone: str = "UTC"):
        super().__init__(tables, time_zone=time_zone)
        # Canal is Java: floats as Float/Double.toString.
        self._codecs = {k: _TableCodec(t, time_zone, java_floats=True) for k, t in self.tables.items()}
        self._mysql_types = {k: {c.name: full_mysql_type(c) for c in t.columns} for k, t in self.tables.items()}
        self._batch_ids: dict[int, int] = {}  # commit_ts -> batch id (stable across re-sends)

    def _batch_id(self, commit_ts: int) -> int:
        return self._batch_ids.setdefault(commit_ts, len(self._batch_ids) + 1)

    def encode_row(self, change: RowChange, commit_ts: int, *, build_ms: int) -> KeyValue:
        key = (change.database, change.table)
        codec = self._codecs[key]
        image = change.before if change.op == DELETE else change.after
        data = codec.text_row(image)
        old = None
        if change.op == UPDATE:
            before = codec.text_row(change.before)
            old = [{k: v for k, v in before.items() if v != data[k]}]
        msg = {
            "data": [data],
            "database": change.database,
            "es": tso_physical_ms(commit_ts),
            "id": self._batch_id(commit_ts),
            "isDdl": False,
            "mysqlType": self._mysql_types[key],
            "old": old,
            "pkNames": codec.pk_names,
            "sql": "",
            "sqlType": codec.sql_types_for(image),
            "table": change.table,
            "ts": build_ms,
            "type": change.op,
        }
        return None, _dumps(msg)

    def encode_ddl(self, ddl: DdlEvent, *, build_ms: int) -> KeyValue:
        msg = {
            "data": None,
            "database": ddl.database,
            "es": tso_physical_ms(ddl.commit_ts),
            "id": self._batch_id(ddl.commit_ts),
            "isDdl": True,
            "mysqlType": None,
            "old": None,
            "pkNames": None,
            "sql": ddl.sql,
            "sqlType": None,
            "table": ddl.table or "",
            "ts": build_ms,
            "type": DDL_EVENT_TYPES.get(ddl.ddl_type, "QUERY"),
        }
        return None, _dumps(msg)

    def encode_watermark(self, ts: int, *, build_ms: int) -> None:
        return None  # official Canal has no watermark / resolved-ts message
