"""Aliyun DTS `Record` Avro schema (namespace com.alibaba.dts.formats.avro).

The 14 fields of the subscribe SDK's `Record.SCHEMA$` (shared/conformance
aliyun+aliyun-dts-subscribe-sdk-java/extracted/Record.SCHEMA$.avsc). The Python demo's
Record.avsc has a 15th trailing field `bornTimestamp`; reading with the 14-field schema
accepts both (a schemaless reader simply leaves the trailing field unread).
"""

from __future__ import annotations

from functools import lru_cache

NAMESPACE = "com.alibaba.dts.formats.avro"
OPERATIONS = [
    "INSERT", "UPDATE", "DELETE", "DDL", "BEGIN", "COMMIT", "ROLLBACK", "ABORT", "HEARTBEAT",
    "CHECKPOINT", "COMMAND", "FILL", "FINISH", "CONTROL", "RDB", "NOOP", "INIT",
]
SOURCE_TYPES = ["MySQL", "Oracle", "SQLServer", "PostgreSQL", "MongoDB", "Redis", "DB2", "PPAS", "DRDS",
                "HBASE", "HDFS", "FILE", "OTHER"]


def _record(name: str, *fields: tuple[str, object]) -> dict:
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


_OPT_INT = ["null", "int"]
_DATETIME = _record("DateTime", *[(n, _OPT_INT) for n in ("year", "month", "day", "hour", "minute", "second",
                                                           "millis")])
for _f in _DATETIME["fields"]:
    _f["default"] = None
# Order matters: it is the union branch index on the wire.
_VALUE_TYPES = [
    _record("Integer", ("precision", "int"), ("value", "string")),
    _record("Character", ("charset", "string"), ("value", "bytes")),
    _record("Decimal", ("value", "string"), ("precision", "int"), ("scale", "int")),
    _record("Float", ("value", "double"), ("precision", "int"), ("scale", "int")),
    _record("Timestamp", ("timestamp", "long"), ("millis", "int")),
    _DATETIME,
    _record("TimestampWithTimeZone", ("value", "DateTime"), ("timezone", "string")),
    _record("BinaryGeometry", ("type", "string"), ("value", "bytes")),
    _record("TextGeometry", ("type", "string"), ("value", "string")),
    _record("BinaryObject", ("type", "string"), ("value", "bytes")),
    _record("TextObject", ("type", "string"), ("value", "string")),
    {"type": "enum", "name": "EmptyObject", "symbols": ["NULL", "NONE"]},
]
_FIELD = _record("Field", ("name", "string"), ("dataTypeNumber", "int"))

RECORD_SCHEMA: dict = {
    "type": "record", "name": "Record", "namespace": NAMESPACE,
    "fields": [
        {"name": "version", "type": "int"},
        {"name": "id", "type": "long"},
        {"name": "sourceTimestamp", "type": "long"},
        {"name": "sourcePosition", "type": "string"},
        {"name": "safeSourcePosition", "type": "string", "default": ""},
        {"name": "sourceTxid", "type": "string", "default": ""},
        {"name": "source", "type": _record(
            "Source", ("sourceType", {"type": "enum", "name": "SourceType", "symbols": SOURCE_TYPES}),
            ("version", "string"))},
        {"name": "operation", "type": {"type": "enum", "name": "Operation", "symbols": OPERATIONS}},
        {"name": "objectName", "type": ["null", "string"], "default": None},
        {"name": "processTimestamps", "type": ["null", {"type": "array", "items": "long"}], "default": None},
        {"name": "tags", "type": {"type": "map", "values": "string"}, "default": {}},
        {"name": "fields", "type": ["null", "string", {"type": "array", "items": _FIELD}], "default": None},
        {"name": "beforeImages", "type": ["null", "string", {"type": "array", "items": ["null", *_VALUE_TYPES]}],
         "default": None},
        {"name": "afterImages", "type": ["null", "string", {"type": "array", "items": [
            "null", *[t["name"] for t in _VALUE_TYPES]]}], "default": None},
    ],
}


@lru_cache(maxsize=1)
def parsed_record_schema() -> dict:
    """Parsed once per Python worker (fastavro.parse_schema is the slow part)."""
    import fastavro

    return fastavro.parse_schema(RECORD_SCHEMA)
