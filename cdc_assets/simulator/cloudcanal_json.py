"""CloudCanal JSON, CloudCanal's default Kafka format (spec: cloudcanal-message-formats.txt).

- keys in the order of the spec's examples; one row per message; Kafka key null;
- `action` INSERT/UPDATE/DELETE (DDL: CREATE/ALTER/... with `isDdl` true, `sql`, empty
  `data`/`before`, and `tableChanges` when the table is known); `entryType` ROWDATA;
- UPDATE: `before` holds the full previous row (as in the spec's example); INSERT and
  DELETE: `before` empty, the row in `data`;
- `dbValType` = full MySQL type (`varchar(22)`), `jdbcType` = java.sql.Types code;
  `pks` the primary key names; `db` = `schema` = database (MySQL source);
- `execTs` = commit physical ms, `sendTs` = build time; `bid` = a batch id that grows with
  every transaction and is kept when a transaction is re-sent (orders same-ms commits);
- values are text like Canal's, binary bytes as ISO-8859-1 text (the doc is silent);
- no watermark messages (TRANSACTIONEND markers are not simulated): windows complete by
  event time. Read back with decoder cloudcanal-json, default options.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from cdc_assets.simulator.canal_json import DDL_EVENT_TYPES, JAVA_SQL_TYPES, _TableCodec
from cdc_assets.simulator.canal_official import full_mysql_type
from cdc_assets.simulator.encoder import Encoder, KeyValue
from cdc_assets.simulator.schema import TableDef
from cdc_assets.simulator.tso import tso_physical_ms
from cdc_assets.simulator.workload import DELETE, UPDATE, DdlEvent, RowChange


def _dumps(msg: dict) -> bytes:
    return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class CloudCanalJsonEncoder(Encoder):
    name = "cloudcanal-json"
    ddl_to_all_partitions = False

    def __init__(self, tables: Iterable[TableDef], *, time_zone: str = "UTC"):
        super().__init__(tables, time_zone=time_zone)
        # CloudCanal is Java: floats as Float/Double.toString (like Canal).
        self._codecs = {k: _TableCodec(t, time_zone, java_floats=True) for k, t in self.tables.items()}
        self._val_types = {k: {c.name: full_mysql_type(c) for c in t.columns} for k, t in self.tables.items()}
        self._batch_ids: dict[int, int] = {}  # commit_ts -> bid (stable across re-sends)

    def _bid(self, commit_ts: int) -> int:
        return self._batch_ids.setdefault(commit_ts, len(self._batch_ids) + 1)

    def _table_changes(self, key: tuple[str, str], ddl_type: str) -> dict | None:
        table = self.tables.get(key)
        if table is None:
            return None
        columns = [
            {"jdbcType": JAVA_SQL_TYPES[c.base_type if c.base_type != "integer" else "int"], "name": c.name,
             "position": i, "typeExpression": full_mysql_type(c), "typeName": c.base_type}
            for i, c in enumerate(table.columns)
        ]
        return {"table": {"columns": columns, "primaryKeyColumnNames": list(table.primary_key)}, "type": ddl_type}

    def encode_row(self, change: RowChange, commit_ts: int, *, build_ms: int) -> KeyValue:
        key = (change.database, change.table)
        codec = self._codecs[key]
        image = change.before if change.op == DELETE else change.after
        msg = {
            "action": change.op,
            "before": [codec.text_row(change.before)] if change.op == UPDATE else [],
            "bid": self._bid(commit_ts),
            "data": [codec.text_row(image)],
            "db": change.database,
            "dbValType": self._val_types[key],
            "isDdl": False,
            "entryType": "ROWDATA",
            "execTs": tso_physical_ms(commit_ts),
            "jdbcType": codec.sql_types_for(image),
            "pks": codec.pk_names,
            "schema": change.database,
            "sendTs": build_ms,
            "sql": "",
            "table": change.table,
        }
        return None, _dumps(msg)

    def encode_ddl(self, ddl: DdlEvent, *, build_ms: int) -> KeyValue:
        key = (ddl.database, ddl.table)
        action = DDL_EVENT_TYPES.get(ddl.ddl_type, "QUERY")
        codec = self._codecs.get(key)
        msg = {
            "action": action,
            "before": [],
            "bid": self._bid(ddl.commit_ts),
            "data": [],
            "db": ddl.database,
            "dbValType": self._val_types.get(key, {}),
            "isDdl": True,
            "entryType": "ROWDATA",
            "execTs": tso_physical_ms(ddl.commit_ts),
            "jdbcType": codec.sql_types if codec else {},
            "pks": codec.pk_names if codec else [],
            "schema": ddl.database,
            "sendTs": build_ms,
            "sql": ddl.sql,
            "table": ddl.table or "",
        }
        changes = self._table_changes(key, action)
        if changes is not None:
            msg["tableChanges"] = changes
        return None, _dumps(msg)

    def encode_watermark(self, ts: int, *, build_ms: int) -> None:
        return None
