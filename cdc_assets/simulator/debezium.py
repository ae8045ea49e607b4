"""TiCDC's Debezium encoder with `enable-tidb-extension=true` (spec: ticdc-debezium.txt).

Mirrors ticdc's `pkg/sink/codec/debezium/codec.go`:
- key: `{"payload": {primary-key columns}, "schema": <cluster>.<db>.<table>.Key}`;
  value: `{"payload": {source, ts_ms, transaction, op, before/after}, "schema": Envelope}`;
  with `disable_schema` (TiCDC `debezium-disable-schema=true`) only the payloads;
- `source.commit_ts` = commit TSO, `source.ts_ms` = commit physical ms, `payload.ts_ms` =
  build time; the field schemas carry `tidb_type` (the extension);
- values as Debezium's MySQL connector writes them, with TiCDC's differences: DECIMAL as
  a float64 (type double), binary strings as base64 text (type string), BIGINT UNSIGNED
  as a wrapped int64 (2^64-1 -> -1); DATE in days, DATETIME in ms (fsp 0-3) or us, TIME
  in us, TIMESTAMP as a UTC ISO instant, BIT(1) boolean, BIT(n) little-endian bytes,
  ENUM / SET names (see `debezium_value`);
- DDL (`SchemaChangeKey` / `SchemaChangeValue`, `tableChanges`) to every partition; the
  watermark is TiCDC's checkpoint event (`op` "m", `source.commit_ts` = ts).

Deviation: floats are printed by Python (`repr`), which matches Go's encoder for
1e-4 <= |x| < 1e16 — every DECIMAL the simulator generates.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from decimal import Context

from cdc_assets.simulator import floats
from cdc_assets.simulator.encoder import Encoder, KeyValue
from cdc_assets.simulator.go_json import go_json_dumps, raw_number
from cdc_assets.simulator.schema import (
    BINARY, BIT, DATE, DATETIME, DECIMAL, ENUM, FLOAT, INT, JSON, SET, STRING, TIME, TIMESTAMP, UINT, YEAR,
    ColumnDef, TableDef,
)
from cdc_assets.simulator.tso import tso_physical_ms
from cdc_assets.simulator.workload import DELETE, INSERT, DdlEvent, RowChange

CLUSTER_ID = "default"
_EPOCH = datetime(1970, 1, 1)
_EXACT = Context(prec=100)  # MySQL's 65 digits; the default context rounds to 28
_INT_CONNECT = {"tinyint": ("int16", "int16"), "smallint": ("int16", "int32"), "mediumint": ("int32", "int32"),
                "int": ("int32", "int64"), "integer": ("int32", "int64"), "bigint": ("int64", "int64")}
# java.sql.Types as TiCDC's MySQLType2JdbcType reports them in tableChanges.
_JDBC_TYPES = {"tinyint": -6, "smallint": 5, "mediumint": 4, "int": 4, "integer": 4, "bigint": -5,
               "decimal": 3, "char": 1, "varchar": 12, "tinytext": -1, "text": -1, "mediumtext": -1,
               "longtext": -1, "binary": -2, "varbinary": -3, "tinyblob": -4, "blob": -4, "mediumblob": -4,
               "longblob": -4, "datetime": 93}
# TiCDC's DDL change type per TiDB action (ticdc EncodeDDLEvent).
_CHANGE_TYPES = {"create schema": "CREATE", "create table": "CREATE", "drop table": "DROP",
                 "drop schema": "DROP", "truncate table": "DROP"}


def _f(field: str, type_: str, optional: bool, **extra) -> dict:
    return {"type": type_, "optional": optional, **extra, "field": field}


def _source_schema() -> dict:
    fields = [
        _f("version", "string", False), _f("connector", "string", False), _f("name", "string", False),
        _f("ts_ms", "int64", False),
        {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "version": 1,
         "parameters": {"allowed": "true,last,false,incremental"}, "default": "false", "field": "snapshot"},
        _f("db", "string", False), _f("sequence", "string", True), _f("table", "string", True),
        _f("server_id", "int64", False), _f("gtid", "string", True), _f("file", "string", False),
        _f("pos", "int64", False), _f("row", "int32", False), _f("thread", "int64", True),
        _f("query", "string", True), _f("commit_ts", "int64", False), _f("cluster_id", "string", False),
    ]
    return {"type": "struct", "fields": fields, "optional": False,
            "name": "io.debezium.connector.mysql.Source", "field": "source"}


def _transaction_schema() -> dict:
    fields = [_f("id", "string", False), _f("total_order", "int64", False),
              _f("data_collection_order", "int64", False)]
    return {"type": "struct", "fields": fields, "optional": True, "name": "event.block", "version": 1,
            "field": "transaction"}


def _source(cluster: str, db: str, table: str, ts: int) -> dict:
    return {
        "version": "2.4.0.Final", "connector": "TiCDC", "name": cluster, "ts_ms": tso_physical_ms(ts),
        "snapshot": "false", "db": db, "table": table, "server_id": 0, "gtid": None, "file": "", "pos": 0,
        "row": 0, "thread": 0, "query": None, "commit_ts": ts, "cluster_id": cluster,
    }


def tidb_type(col: ColumnDef) -> str:
    """TiCDC's `getTiDBType`: TiDB's type name, " unsigned" for unsigned integers."""
    base = "int" if col.base_type == "integer" else col.base_type
    return f"{base} unsigned" if col.unsigned and col.kind == UINT else base


def _named(col: ColumnDef, type_: str, optional: bool, name: str, **params) -> dict:
    out = {"type": type_, "optional": optional, "name": name, "version": 1}
    if params:
        out["parameters"] = params
    return {**out, "field": col.name}


def _is_connect_decimal(col: ColumnDef, mysql: bool) -> bool:
    """Debezium's MySQL connector (decimal.handling.mode=precise, bigint.unsigned.handling.mode=
    precise): DECIMAL and BIGINT UNSIGNED as Connect Decimal. TiCDC: a float64 / an int64."""
    return mysql and (col.kind == DECIMAL or (col.kind == UINT and col.base_type == "bigint"))


def field_schema(col: ColumnDef, *, mysql: bool = False) -> dict:
    """The Connect field schema; `mysql`: Debezium's MySQL connector, else TiCDC's encoder
    (which adds `tidb_type` and writes binary strings as base64 text of type string)."""
    optional = col.nullable and not col.primary_key
    head = {} if mysql else {"tidb_type": tidb_type(col)}
    kind = col.kind
    if _is_connect_decimal(col, mysql):
        precision, scale = (col.precision, col.scale) if kind == DECIMAL else (20, 0)
        return {**head, **_named(col, "bytes", optional, "org.apache.kafka.connect.data.Decimal",
                                 scale=str(scale), **{"connect.decimal.precision": str(precision)})}
    if kind in (INT, UINT):
        return {**head, **_f(col.name, _INT_CONNECT[col.base_type][col.unsigned], optional)}
    if kind == DECIMAL:
        return {**head, **_f(col.name, "double", optional)}
    if kind == FLOAT:
        return {**head, **_f(col.name, "float" if col.base_type == "float" else "double", optional)}
    if kind == DATETIME:
        name = "io.debezium.time.Timestamp" if col.fsp <= 3 else "io.debezium.time.MicroTimestamp"
        return {**head, **_named(col, "int64", optional, name)}
    named = {DATE: ("int32", "io.debezium.time.Date"), TIME: ("int64", "io.debezium.time.MicroTime"),
             TIMESTAMP: ("string", "io.debezium.time.ZonedTimestamp"), YEAR: ("int32", "io.debezium.time.Year"),
             JSON: ("string", "io.debezium.data.Json")}
    if kind in named:
        connect_type, name = named[kind]
        return {**head, **_named(col, connect_type, optional, name)}
    if kind in (ENUM, SET):
        name = "io.debezium.data.Enum" if kind == ENUM else "io.debezium.data.EnumSet"
        return {**head, **_named(col, "string", optional, name, allowed=",".join(col.members))}
    if kind == BIT:
        if col.bit_length == 1:
            return {**head, **_f(col.name, "boolean", optional)}
        return {**head, **_named(col, "bytes", optional, "io.debezium.data.Bits", length=str(col.bit_length))}
    if kind == BINARY and mysql:
        return _f(col.name, "bytes", optional)
    return {**head, **_f(col.name, "string", optional)}  # STRING, BINARY (TiCDC: base64 text)


def _twos_complement(n: int) -> bytes:
    return n.to_bytes(max(1, (n.bit_length() + 8) // 8), "big", signed=True)


def debezium_value(col: ColumnDef, v, *, mysql: bool = False):
    """A workload value as TiCDC's (or, `mysql`, Debezium's MySQL connector's) JSON value.

    Both follow Debezium's default temporal mode (adaptive_time_microseconds): DATE in
    days, DATETIME(0..3) in ms and DATETIME(4..6) in us of the wall clock read as UTC,
    TIME in us, TIMESTAMP as an ISO instant in UTC with fsp digits; zero dates -> null.
    """
    if v is None:
        return None
    kind = col.kind
    if _is_connect_decimal(col, mysql):
        unscaled = int(v.scaleb(col.scale, _EXACT)) if kind == DECIMAL else v
        return base64.b64encode(_twos_complement(unscaled)).decode("ascii")
    if kind == UINT and col.base_type == "bigint" and v >= 1 << 63:
        return v - (1 << 64)  # Go's int64(uint64): 2^64-1 -> -1
    if kind in (INT, UINT, STRING, YEAR, JSON, ENUM, SET):
        return v
    if kind == DECIMAL:
        return raw_number(floats.go_json(float(v), 64))  # TiCDC: ToFloat64 (lossy)
    if kind == FLOAT:
        bits = 32 if col.base_type == "float" else 64
        return raw_number(floats.java(v, bits) if mysql else floats.go_json(v, bits))
    if isinstance(v, str):  # a zero date: Debezium writes null
        return None
    if kind == DATETIME:
        unit = timedelta(milliseconds=1) if col.fsp <= 3 else timedelta(microseconds=1)
        return (v - _EPOCH) // unit
    if kind == DATE:
        return (v - _EPOCH.date()).days
    if kind == TIME:
        return v // timedelta(microseconds=1)
    if kind == TIMESTAMP:
        u = v.astimezone(timezone.utc)
        fraction = f".{u.microsecond:06d}"[: col.fsp + 1] if col.fsp else ""
        return u.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"
    if kind == BIT:
        if col.bit_length == 1:
            return v != 0
        return base64.b64encode(v.to_bytes((col.bit_length + 7) // 8, "little")).decode("ascii")
    assert kind == BINARY
    return base64.b64encode(v).decode("ascii")


def _ddl_column(col: ColumnDef, position: int) -> dict:
    base = "int" if col.base_type == "integer" else col.base_type
    unsigned = " UNSIGNED" if col.kind == UINT else ""
    name = base.upper() + unsigned
    length = col.params[0] if col.params and not col.members else None  # TiCDC: only a non-default length
    return {
        "name": col.name, "jdbcType": _JDBC_TYPES.get(base, 12), "nativeType": None, "comment": None,
        "defaultValueExpression": None, "enumValues": None, "typeName": name, "typeExpression": name,
        "charsetName": "utf8mb4" if col.kind == STRING else None,
        "length": 0 if col.kind == DATETIME else length,
        "scale": col.scale if col.kind == DECIMAL else None,
        "position": position, "optional": col.nullable and not col.primary_key,
        "autoIncremented": False, "generated": False,
    }


class _TableCodec:
    """Per-table constants: field schemas and the envelope / key schema objects."""

    def __init__(self, table: TableDef, cluster: str, mysql: bool = False):
        self.table, self.mysql = table, mysql
        prefix = f"{cluster}.{table.database}.{table.table}"
        fields = [field_schema(c, mysql=mysql) for c in table.columns]
        self.key_columns = [c for c in table.columns if c.primary_key]
        self.key_schema = {"type": "struct", "name": f"{prefix}.Key", "optional": False,
                           "fields": [field_schema(c, mysql=mysql) for c in self.key_columns]}
        image = {"type": "struct", "optional": True, "name": f"{prefix}.Value"}
        self.envelope_schema = {
            "type": "struct", "optional": False, "name": f"{prefix}.Envelope", "version": 1,
            "fields": [
                {**image, "field": "before", "fields": fields},
                {**image, "field": "after", "fields": fields},
                _source_schema(), _f("op", "string", False), _f("ts_ms", "int64", True), _transaction_schema(),
            ],
        }

    def image(self, row: dict | None) -> dict | None:
        if row is None:
            return None
        return {c.name: debezium_value(c, row[c.name], mysql=self.mysql) for c in self.table.columns}

    def key(self, row: dict) -> dict:
        return {c.name: debezium_value(c, row[c.name], mysql=self.mysql) for c in self.key_columns}


class DebeziumEncoder(Encoder):
    name = "debezium"
    ddl_to_all_partitions = True

    #: Debezium's own MySQL connector instead of TiCDC (see `DebeziumMySqlEncoder`).
    mysql: bool = False

    def __init__(self, tables: Iterable[TableDef], *, disable_schema: bool = False, cluster_id: str = CLUSTER_ID,
                 time_zone: str = "UTC"):
        super().__init__(tables, time_zone=time_zone)  # TIMESTAMP is a UTC instant: no zone needed
        self.disable_schema = disable_schema
        self.cluster = cluster_id
        self._codecs = {k: _TableCodec(t, cluster_id, self.mysql) for k, t in self.tables.items()}

    def _source(self, db: str, table: str, ts: int) -> dict:
        return _source(self.cluster, db, table, ts)

    def _message(self, payload: dict, schema: dict) -> bytes:
        msg = {"payload": payload} if self.disable_schema else {"payload": payload, "schema": schema}
        return go_json_dumps(msg).encode("utf-8")

    def encode_row(self, change: RowChange, commit_ts: int, *, build_ms: int) -> KeyValue:
        codec = self._codecs[(change.database, change.table)]
        payload = {"source": self._source(change.database, change.table, commit_ts), "ts_ms": build_ms,
                   "transaction": None}
        if change.op == INSERT:
            payload.update(op="c", before=None, after=codec.image(change.after))
        elif change.op == DELETE:
            payload.update(op="d", after=None, before=codec.image(change.before))
        else:
            payload.update(op="u", before=codec.image(change.before), after=codec.image(change.after))
        key = self._message(codec.key(change.row), codec.key_schema)
        return key, self._message(payload, codec.envelope_schema)

    def encode_ddl(self, ddl: DdlEvent, *, build_ms: int) -> KeyValue:
        key_schema = {"type": "struct", "name": "io.debezium.connector.mysql.SchemaChangeKey", "optional": False,
                      "version": 1, "fields": [{"field": "databaseName", "optional": False, "type": "string"}]}
        payload = {
            "source": _source(self.cluster, ddl.database, ddl.table, ddl.commit_ts), "ts_ms": build_ms,
            "databaseName": ddl.database, "schemaName": None, "ddl": ddl.sql,
            "tableChanges": self._table_changes(ddl),
        }
        schema = {"optional": False, "type": "struct", "version": 1,
                  "name": "io.debezium.connector.mysql.SchemaChangeValue",
                  "fields": [_source_schema(), {"field": "ts_ms", "optional": False, "type": "int64"},
                             *({"field": n, "optional": True, "type": "string"}
                               for n in ("databaseName", "schemaName", "ddl")),
                             {"field": "tableChanges", "optional": False, "type": "array",
                              "items": {"name": "io.debezium.connector.schema.Change", "optional": False,
                                        "type": "struct", "version": 1}}]}
        return self._message({"databaseName": ddl.database}, key_schema), self._message(payload, schema)

    def _table_changes(self, ddl: DdlEvent) -> list[dict]:
        if not ddl.table or ddl.ddl_type == "truncate table":
            return []  # TiCDC: no table, or TRUNCATE -> no tableChanges (the SQL says it)
        table = self.tables.get((ddl.database, ddl.table))
        change = {"type": _CHANGE_TYPES.get(ddl.ddl_type, "ALTER"), "id": f'"{ddl.database}"."{ddl.table}"'}
        if table is None or ddl.ddl_type == "drop table":
            return [{**change, "table": None}]
        return [{**change, "table": {
            "defaultCharsetName": "utf8mb4", "primaryKeyColumnNames": list(table.primary_key),
            "columns": [_ddl_column(c, i) for i, c in enumerate(table.columns, start=1)], "comment": None,
        }}]

    def encode_watermark(self, ts: int, *, build_ms: int) -> KeyValue:
        key_schema = {"type": "struct", "name": f"{self.cluster}.watermark.Key", "optional": False, "fields": []}
        payload = {"source": _source(self.cluster, "", "", ts), "ts_ms": build_ms, "transaction": None, "op": "m"}
        schema = {"type": "struct", "optional": False, "name": f"{self.cluster}.watermark.Envelope", "version": 1,
                  "fields": [_source_schema(), _f("op", "string", False), _f("ts_ms", "int64", True),
                             _transaction_schema()]}
        return self._message({}, key_schema), self._message(payload, schema)


class DebeziumMySqlEncoder(DebeziumEncoder):
    """Rows as Debezium's own MySQL connector writes them (decoder `debezium-json`), with
    `decimal.handling.mode=precise` and `bigint.unsigned.handling.mode=precise`: no
    `tidb_type`, DECIMAL / BIGINT UNSIGNED as Connect Decimal, binary as Connect bytes,
    floats printed by Jackson (Java), binlog `file`/`pos` instead of a TSO. Rows only: the
    type-fidelity matrix uses it; DDL and watermarks are TiCDC's shapes."""

    name = "debezium-json"
    decoder = ("debezium-json", {})
    mysql = True

    def _source(self, db: str, table: str, ts: int) -> dict:
        return {
            "version": "2.4.0.Final", "connector": "mysql", "name": self.cluster, "ts_ms": tso_physical_ms(ts),
            "snapshot": "false", "db": db, "table": table, "server_id": 1, "gtid": None,
            "file": "mysql-bin.000003", "pos": ts & 0xFFFFFFFF, "row": 0, "thread": 7, "query": None,
        }
