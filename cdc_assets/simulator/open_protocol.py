"""TiCDC's Open Protocol encoder (spec: ticdc-open-protocol.txt), one event per message.

Mirrors tiflow's open-protocol encoder with old values on:
- Kafka key = 8-byte big-endian version 1 + [8-byte length][key JSON]; value =
  [8-byte length][value JSON]. Key JSON `{"ts","scm","tbl","t"}` (`tbl` omitted when
  empty, as Go's `omitempty` does); DDL is broadcast to every partition.
- row value `{"u": cols}` (INSERT), `{"u": cols, "p": old cols}` (UPDATE), `{"d": cols}`
  (DELETE, every column); columns in Go map order (sorted by name), each
  `{"t": type code, "h": true (handle columns only), "f": flags, "v": value}`.
- values: integers as JSON numbers (unsigned bigint above 2^63 too; YEAR, BIT and the
  ENUM index / SET mask too), FLOAT / DOUBLE as Go prints them, decimals, dates, times
  and JSON as TiDB's text (TIMESTAMP in the changefeed's zone), char/varchar as UTF-8
  text, text/blob types as base64 of the bytes, binary/varbinary as Go `strconv.Quote`
  text without the quotes.
- flags: BinaryFlag for binary-charset columns (TiDB gives numbers and datetimes the
  binary charset too), HandleKey + PrimaryKey (+ MultipleKey for composite keys),
  Nullable, Unsigned.
- resolved event: key `{"ts","t":3}`, value = one zero-length frame (8 zero bytes).

- batches: up to `max-batch-size` (16, TiCDC's default) row events of one partition in one
  message: the key frames after one version, the value frames in the same order (`merge`).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

from cdc_assets.simulator import floats
from cdc_assets.simulator.encoder import Encoder, KeyValue
from cdc_assets.simulator.go_json import go_json_dumps, raw_number
from cdc_assets.simulator.schema import (
    BINARY, BIT, DATE, DATETIME, DECIMAL, ENUM, FLOAT, INT, JSON, SET, STRING, TIME, TIMESTAMP, UINT, YEAR,
    ColumnDef, TableDef,
)
from cdc_assets.simulator.values import enum_index, set_bits, tidb_text
from cdc_assets.simulator.workload import DELETE, UPDATE, DdlEvent, RowChange

VERSION = 1
ROW, DDL, RESOLVED = 1, 2, 3
BINARY_FLAG, HANDLE_KEY_FLAG, PRIMARY_KEY_FLAG = 0x01, 0x02, 0x08
MULTIPLE_KEY_FLAG, NULLABLE_FLAG, UNSIGNED_FLAG = 0x20, 0x40, 0x80
# MySQL base type -> docs "Column type code".
TYPE_CODES = {
    "tinyint": 1, "smallint": 2, "int": 3, "integer": 3, "bigint": 8, "mediumint": 9,
    "decimal": 246, "datetime": 12, "char": 254, "varchar": 15, "binary": 254, "varbinary": 15,
    "tinytext": 249, "tinyblob": 249, "mediumtext": 250, "mediumblob": 250,
    "longtext": 251, "longblob": 251, "text": 252, "blob": 252,
    "float": 4, "double": 5, "timestamp": 7, "date": 10, "time": 11, "year": 13, "bit": 16, "json": 245,
    "enum": 247, "set": 248,
}
_BASE64_BASES = {"tinytext", "mediumtext", "longtext", "text", "tinyblob", "mediumblob", "longblob", "blob"}
# TiDB DDL action -> docs "DDL Type Code".
DDL_TYPE_CODES = {
    "create schema": 1, "drop schema": 2, "create table": 3, "drop table": 4, "add column": 5,
    "drop column": 6, "add index": 7, "drop index": 8, "truncate table": 11, "modify column": 12,
    "rename table": 14, "add primary key": 32, "drop primary key": 33,
}
_SIMPLE_ESCAPES = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v",
                   ord("\\"): "\\\\", ord('"'): '\\"'}


def go_quote(data: bytes) -> str:
    """Go's strconv.Quote(string(data)) without the surrounding quotes."""
    out = []
    for ch in data.decode("utf-8", "surrogateescape"):
        cp = ord(ch)
        if 0xDC80 <= cp <= 0xDCFF:  # a byte that is not valid UTF-8
            out.append(f"\\x{cp - 0xDC00:02x}")
        elif cp in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[cp])
        elif ch.isprintable():  # Go's unicode.IsPrint: letters, marks, numbers, punct, symbols, ' '
            out.append(ch)
        elif cp < 0x20 or cp == 0x7F:
            out.append(f"\\x{cp:02x}")
        elif cp < 0x10000:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(f"\\U{cp:08x}")
    return "".join(out)


def frame(*payloads: bytes) -> bytes:
    return b"".join(len(p).to_bytes(8, "big") + p for p in payloads)


def _json(obj) -> bytes:
    return go_json_dumps(obj).encode("utf-8")


class _TableCodec:
    """Per-table constants: type codes and flags per column, in Go map (sorted) order."""

    def __init__(self, table: TableDef, time_zone: str = "UTC"):
        self.time_zone = time_zone
        composite = len(table.primary_key) > 1
        self.columns = sorted(table.columns, key=lambda c: c.name)
        self.meta = {c.name: (TYPE_CODES[c.base_type], self._flags(c, composite)) for c in self.columns}

    @staticmethod
    def _flags(col: ColumnDef, composite: bool) -> int:
        flag = 0
        if col.kind not in (STRING, ENUM, SET, JSON):  # binary charset: binary strings, numbers, datetimes
            flag |= BINARY_FLAG
        if col.primary_key:
            flag |= HANDLE_KEY_FLAG | PRIMARY_KEY_FLAG | (MULTIPLE_KEY_FLAG if composite else 0)
        if col.nullable:
            flag |= NULLABLE_FLAG
        if col.unsigned:
            flag |= UNSIGNED_FLAG
        return flag

    def columns_json(self, row: dict) -> dict:
        out = {}
        for c in self.columns:
            code, flag = self.meta[c.name]
            col = {"t": code}
            if c.primary_key:
                col["h"] = True
            col["f"] = flag
            col["v"] = _value(c, row[c.name], self.time_zone)
            out[c.name] = col
        return out


def _value(col: ColumnDef, v, time_zone: str = "UTC"):
    """tiflow `internal.Column`: numbers as JSON numbers (ENUM / SET / BIT as their index,
    mask, number; FLOAT / DOUBLE printed by Go), DECIMAL, dates, times and JSON as TiDB's
    text (TIMESTAMP in the changefeed's zone)."""
    if v is None:
        return None
    kind = col.kind
    if kind in (INT, UINT, YEAR, BIT):
        return v
    if kind == ENUM:
        return enum_index(col, v)
    if kind == SET:
        return set_bits(col, v)
    if kind == FLOAT:
        return raw_number(floats.go_json(v, 32 if col.base_type == "float" else 64))
    if kind in (DECIMAL, DATETIME, TIMESTAMP, DATE, TIME, JSON):
        return tidb_text(col, v, time_zone=time_zone)
    data = v.encode("utf-8") if kind == STRING else v
    if col.base_type in _BASE64_BASES:
        return base64.b64encode(data).decode("ascii")
    if kind == BINARY:
        return go_quote(data)
    assert kind == STRING
    return v


class OpenProtocolEncoder(Encoder):
    name = "open-protocol"
    ddl_to_all_partitions = True
    batch_events = 16

    def merge(self, messages: list[KeyValue]) -> KeyValue:
        keys = b"".join(k[8:] for k, _ in messages)  # each key: version, then its one frame
        return VERSION.to_bytes(8, "big") + keys, b"".join(v for _, v in messages)

    def __init__(self, tables: Iterable[TableDef], *, time_zone: str = "UTC"):
        super().__init__(tables, time_zone=time_zone)
        self._codecs = {k: _TableCodec(t, time_zone) for k, t in self.tables.items()}

    @staticmethod
    def _key(ts: int, t: int, database: str = "", table: str = "") -> bytes:
        key = {"ts": ts}
        if database:
            key["scm"] = database
        if table:
            key["tbl"] = table
        key["t"] = t
        return VERSION.to_bytes(8, "big") + frame(_json(key))

    def encode_row(self, change: RowChange, commit_ts: int, *, build_ms: int) -> KeyValue:
        codec = self._codecs[(change.database, change.table)]
        if change.op == DELETE:
            value = {"d": codec.columns_json(change.before)}
        else:
            value = {"u": codec.columns_json(change.after)}
            if change.op == UPDATE:
                value["p"] = codec.columns_json(change.before)
        return self._key(commit_ts, ROW, change.database, change.table), frame(_json(value))

    def encode_ddl(self, ddl: DdlEvent, *, build_ms: int) -> KeyValue:
        value = {"q": ddl.sql, "t": DDL_TYPE_CODES.get(ddl.ddl_type, 0)}
        return self._key(ddl.commit_ts, DDL, ddl.database, ddl.table), frame(_json(value))

    def encode_watermark(self, ts: int, *, build_ms: int) -> KeyValue:
        return self._key(ts, RESOLVED), frame(b"")
