"""TiCDC's Canal-JSON encoder with `enable-tidb-extension=true` (spec: ticdc-canal-json.txt).

Mirrors tiflow's `canal_json_row_event_encoder.go`:
- key order id, database, table, pkNames, isDdl, type, es, ts, sql, sqlType, mysqlType,
  old, data, _tidb (TiCDC writes `old` before `data`); one row per message; Kafka key null;
- `es` = commit physical ms, `ts` = build time ms, `_tidb.commitTs` = commit TSO;
- `mysqlType` without type parameters but with " unsigned" ("decimal", "bigint unsigned");
- `sqlType` is Java's SQL type code, computed from the row image sent in `data`: unsigned
  integers beyond the signed range are promoted (bigint unsigned > 2^63-1 -> DECIMAL 3);
- UPDATE: `old` holds every column's previous value; DELETE: the row is in `data`,
  `old` is null; values are TiDB text, binary bytes as ISO-8859-1 code points,
  TIMESTAMP in the changefeed's zone, ENUM / SET as index / bit mask (`values.tidb_text`);
- DDL and TIDB_WATERMARK messages carry null sqlType/mysqlType/data/old.

One deviation: TiCDC's `mysqlType` object comes from a Go map, so its key order is random
per message; here it follows the table's column order to keep dumps reproducible.
"""

from __future__ import annotations

from collections.abc import Iterable

from cdc_assets.simulator.encoder import Encoder, KeyValue
from cdc_assets.simulator.go_json import go_json_dumps
from cdc_assets.simulator.schema import UINT, TableDef
from cdc_assets.simulator.tso import tso_physical_ms
from cdc_assets.simulator.values import tidb_text
from cdc_assets.simulator.workload import DELETE, UPDATE, DdlEvent, RowChange

# java.sql.Types codes TiCDC uses per MySQL type (spec: "SQL Type field").
JAVA_SQL_TYPES = {
    "tinyint": -6, "smallint": 5, "mediumint": 4, "int": 4, "bigint": -5,
    "float": 7, "double": 8, "decimal": 3,
    "char": 1, "varchar": 12, "tinytext": 2005, "text": 2005, "mediumtext": 2005, "longtext": 2005,
    "binary": 2004, "varbinary": 2004, "tinyblob": 2004, "blob": 2004, "mediumblob": 2004, "longblob": 2004,
    "date": 91, "datetime": 93, "timestamp": 93, "time": 92, "year": 12,
    "enum": 4, "set": -7, "bit": -7, "json": 12,
}
# Unsigned integers above the signed maximum get a wider Java type (mediumint: never).
UNSIGNED_PROMOTION = {
    "tinyint": (127, 5), "smallint": (32767, 4), "int": (2147483647, -5), "bigint": ((1 << 63) - 1, 3),
}
# TiDB DDL action -> Canal event type (tiflow `convertDdlEventType`); default QUERY.
DDL_EVENT_TYPES = {
    "create table": "CREATE", "rename table": "RENAME", "rename tables": "RENAME",
    "add index": "CINDEX", "add primary key": "CINDEX", "drop index": "DINDEX", "drop primary key": "DINDEX",
    "add column": "ALTER", "drop column": "ALTER", "modify column": "ALTER",
    "drop table": "ERASE", "truncate table": "TRUNCATE",
}
_TYPE_ALIASES = {"integer": "int"}


class _TableCodec:
    """Per-table constants, computed once: column order, types, promotion thresholds."""

    def __init__(self, table: TableDef, time_zone: str = "UTC", java_floats: bool = False):
        self.columns = table.columns
        self.time_zone, self.java_floats = time_zone, java_floats
        self.pk_names = list(table.primary_key)
        self.mysql_types = {}
        self.sql_types = {}
        self.promotions = []  # (name, threshold, promoted java type)
        for col in table.columns:
            base = _TYPE_ALIASES.get(col.base_type, col.base_type)
            self.mysql_types[col.name] = f"{base} unsigned" if col.unsigned else base
            self.sql_types[col.name] = JAVA_SQL_TYPES[base]
            if col.kind == UINT and base in UNSIGNED_PROMOTION:
                self.promotions.append((col.name, *UNSIGNED_PROMOTION[base]))

    def sql_types_for(self, row: dict) -> dict:
        if not self.promotions:
            return self.sql_types
        out = dict(self.sql_types)
        for name, threshold, promoted in self.promotions:
            v = row[name]
            if v is not None and v > threshold:
                out[name] = promoted
        return out

    def text_row(self, row: dict) -> dict:
        return {c.name: tidb_text(c, row[c.name], time_zone=self.time_zone, java_floats=self.java_floats)
                for c in self.columns}


class CanalJsonEncoder(Encoder):
    name = "canal-json"
    ddl_to_all_partitions = False

    def __init__(self, tables: Iterable[TableDef], *, time_zone: str = "UTC"):
        super().__init__(tables, time_zone=time_zone)
        self._codecs = {k: _TableCodec(t, time_zone) for k, t in self.tables.items()}

    def encode_row(self, change: RowChange, commit_ts: int, *, build_ms: int) -> KeyValue:
        codec = self._codecs[(change.database, change.table)]
        image = change.before if change.op == DELETE else change.after
        msg = {
            "id": 0,
            "database": change.database,
            "table": change.table,
            "pkNames": codec.pk_names,
            "isDdl": False,
            "type": change.op,
            "es": tso_physical_ms(commit_ts),
            "ts": build_ms,
            "sql": "",
            "sqlType": codec.sql_types_for(image),
            "mysqlType": codec.mysql_types,
            "old": [codec.text_row(change.before)] if change.op == UPDATE else None,
            "data": [codec.text_row(image)],
            "_tidb": {"commitTs": commit_ts},
        }
        return None, go_json_dumps(msg).encode("utf-8")

    def encode_ddl(self, ddl: DdlEvent, *, build_ms: int) -> KeyValue:
        msg = {
            "id": 0,
            "database": ddl.database,
            "table": ddl.table,
            "pkNames": None,
            "isDdl": True,
            "type": DDL_EVENT_TYPES.get(ddl.ddl_type, "QUERY"),
            "es": tso_physical_ms(ddl.commit_ts),
            "ts": build_ms,
            "sql": ddl.sql,
            "sqlType": None,
            "mysqlType": None,
            "data": None,
            "old": None,
            "_tidb": {"commitTs": ddl.commit_ts},
        }
        return None, go_json_dumps(msg).encode("utf-8")

    def encode_watermark(self, ts: int, *, build_ms: int) -> KeyValue:
        msg = {
            "id": 0,
            "database": "",
            "table": "",
            "pkNames": None,
            "isDdl": False,
            "type": "TIDB_WATERMARK",
            "es": tso_physical_ms(ts),
            "ts": build_ms,
            "sql": "",
            "sqlType": None,
            "mysqlType": None,
            "data": None,
            "old": None,
            "_tidb": {"watermarkTs": ts},
        }
        return None, go_json_dumps(msg).encode("utf-8")
