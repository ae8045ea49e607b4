"""Aliyun DTS Avro encoder: one schemaless Avro `Record` per Kafka value (ORACLES.md §7).

There is no real DTS record in the corpus, so this encoder follows the SDK's schema and
readers (`AvroRecordParser`, `DefaultValueDeserializer`):
- `sourceTimestamp` = commit time in whole seconds (binlog precision); `sourcePosition`
  `pos@file` with file = TSO >> 32 and pos = TSO & 0xffffffff, so the decoder's
  `file << 32 | pos` gives back the TSO as the in-second order;
- `fields` = (name, MySQL binlog type code); primary key in tag `pk_uk_info`;
- values: ints as Integer, decimals as Decimal, strings as utf8mb4 Character, binary as
  BinaryObject, datetimes as DateTime; UPDATE carries both images, DELETE the before image;
- HEARTBEAT records stand for watermarks (whole seconds, rounded down); DDL records carry
  the statement in `afterImages`. Kafka key null.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import Decimal

from cdc_assets.decode.dts_avro.schema import NAMESPACE, parsed_record_schema
from cdc_assets.simulator.encoder import Encoder, KeyValue
from cdc_assets.simulator.schema import (
    BINARY, BIT, DATE, DATETIME, DECIMAL, ENUM, FLOAT, JSON, SET, STRING, TIME, TIMESTAMP, YEAR, ColumnDef, TableDef,
)
from cdc_assets.simulator.tso import tso_physical_ms
from cdc_assets.simulator.workload import DELETE, INSERT, DdlEvent, RowChange

# MySQL enum_field_types per column type (what DTS puts in Field.dataTypeNumber).
TYPE_CODES = {
    "tinyint": 1, "smallint": 2, "mediumint": 9, "int": 3, "integer": 3, "bigint": 8, "float": 4, "double": 5,
    "decimal": 246, "date": 10, "time": 19, "datetime": 18, "timestamp": 17, "year": 13, "char": 254,
    "varchar": 253, "binary": 254, "varbinary": 253, "tinytext": 249, "tinyblob": 249, "text": 252, "blob": 252,
    "mediumtext": 250, "mediumblob": 250, "longtext": 251, "longblob": 251, "json": 245, "enum": 247,
    "set": 248, "bit": 16, "geometry": 255,
}


def _named(name: str, value: dict | str) -> tuple[str, dict | str]:
    return f"{NAMESPACE}.{name}", value


def datetime_value(v: datetime) -> tuple[str, dict]:
    """DTS DateTime; its `millis` field holds microseconds (see dts_avro_records)."""
    return _named("DateTime", {"year": v.year, "month": v.month, "day": v.day, "hour": v.hour, "minute": v.minute,
                               "second": v.second, "millis": v.microsecond or None})


def _date_time(**segments) -> tuple[str, dict]:
    keys = ("year", "month", "day", "hour", "minute", "second", "millis")
    return _named("DateTime", {k: segments.get(k) for k in keys})


def _zero_date(text: str) -> tuple[str, dict]:
    """MySQL's zero DATE / DATETIME ("0000-00-00 00:00:00"): all segments 0."""
    segments = dict.fromkeys(("year", "month", "day"), 0)
    if " " in text:
        segments.update(hour=0, minute=0, second=0)
    return _date_time(**segments)


def _time_value(v: timedelta) -> tuple[str, dict]:
    """TIME as DateTime hour/minute/second segments; the sign rides on the hour (any negative
    segment makes a TIME negative), so a negative TIME above -1 h cannot be told from a
    positive one (not simulated)."""
    us = abs(v) // timedelta(microseconds=1)
    seconds, micro = divmod(us, 1_000_000)
    hour = seconds // 3600 * (-1 if v < timedelta(0) else 1)
    return _date_time(hour=hour, minute=seconds // 60 % 60, second=seconds % 60, millis=micro or None)


def avro_value(col: ColumnDef, v) -> tuple[str, dict | str] | None:
    """DTS's MySQL mapping (an assumption: no real record is public): integers and BIT as
    Integer, FLOAT/DOUBLE as Float, DATE/TIME/DATETIME/YEAR as DateTime segments, TIMESTAMP
    as an instant (Timestamp: epoch seconds + micros), text/ENUM/SET as Character, JSON as
    TextObject."""
    if v is None:
        return None
    kind = col.kind
    if isinstance(v, str) and kind in (DATE, DATETIME):
        return _zero_date(v)
    if kind == FLOAT:
        return _named("Float", {"value": float(v), "precision": 0, "scale": 0})
    if kind == DATE:
        return _date_time(year=v.year, month=v.month, day=v.day)
    if kind == TIME:
        return _time_value(v)
    if kind == YEAR:
        return _date_time(year=v)
    if kind == TIMESTAMP:
        return _named("Timestamp", {"timestamp": int(v.timestamp() // 1), "millis": v.microsecond})
    if kind in (ENUM, SET):
        return _named("Character", {"charset": "utf8mb4", "value": v.encode("utf-8")})
    if kind == JSON:
        return _named("TextObject", {"type": "JSON", "value": v})
    if kind == BIT:
        return _named("Integer", {"precision": 0, "value": str(v)})
    if col.kind == DECIMAL:
        return _named("Decimal", {"value": format(Decimal(v), "f"), "precision": col.precision, "scale": col.scale})
    if col.kind == STRING:
        return _named("Character", {"charset": "utf8mb4", "value": v.encode("utf-8")})
    if col.kind == BINARY:
        return _named("BinaryObject", {"type": col.base_type.upper(), "value": bytes(v)})
    if col.kind == DATETIME:
        return datetime_value(v)
    return _named("Integer", {"precision": 0, "value": str(v)})


def encode_record(record: dict) -> bytes:
    """A complete Record dict (fastavro union values as (name, value)) -> schemaless bytes."""
    import fastavro

    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed_record_schema(), record)
    return out.getvalue()


def record(operation: str, ts_seconds: int, position: str, *, object_name: str | None = None, tags=None,
           fields=None, before=None, after=None, record_id: int = 0) -> dict:
    return {
        "version": 1, "id": record_id, "sourceTimestamp": ts_seconds, "sourcePosition": position,
        "safeSourcePosition": position, "sourceTxid": "", "source": {"sourceType": "MySQL", "version": "8.0.32"},
        "operation": operation, "objectName": object_name, "processTimestamps": None, "tags": tags or {},
        "fields": fields, "beforeImages": before, "afterImages": after,
    }


def _position(tso: int) -> str:
    return f"{tso & 0xFFFFFFFF}@{tso >> 32}"


class DtsAvroEncoder(Encoder):
    name = "dts-avro"
    ddl_to_all_partitions = False

    def __init__(self, tables: Iterable[TableDef], *, time_zone: str = "UTC"):
        super().__init__(tables, time_zone=time_zone)  # TIMESTAMP is an instant: no zone needed
        self._fields = {k: [{"name": c.name, "dataTypeNumber": TYPE_CODES[c.base_type]} for c in t.columns]
                        for k, t in self.tables.items()}
        self._tags = {k: {"pk_uk_info": json.dumps({"PRIMARY": list(t.primary_key)})}
                      for k, t in self.tables.items()}
        self._next_id = 0

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id

    def encode_row(self, change: RowChange, commit_ts: int, *, build_ms: int) -> KeyValue:
        key = (change.database, change.table)
        cols = self.table(*key).columns

        def image(row):
            return [avro_value(c, row[c.name]) for c in cols] if row is not None else None

        rec = record(change.op, tso_physical_ms(commit_ts) // 1000, _position(commit_ts),
                     object_name=f"{change.database}.{change.table}", tags=self._tags[key], fields=self._fields[key],
                     before=None if change.op == INSERT else image(change.before),
                     after=None if change.op == DELETE else image(change.after), record_id=self._id())
        return None, encode_record(rec)

    def encode_ddl(self, ddl: DdlEvent, *, build_ms: int) -> KeyValue:
        name = f"{ddl.database}.{ddl.table}" if ddl.table else ddl.database
        rec = record("DDL", tso_physical_ms(ddl.commit_ts) // 1000, _position(ddl.commit_ts), object_name=name,
                     after=ddl.sql, record_id=self._id())
        return None, encode_record(rec)

    def encode_watermark(self, ts: int, *, build_ms: int) -> KeyValue:
        rec = record("HEARTBEAT", tso_physical_ms(ts) // 1000, _position(ts), record_id=self._id())
        return None, encode_record(rec)
