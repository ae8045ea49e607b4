"""A Kafka Connect field schema -> how its values convert (the rule `values.canonical_values`
applies) and the column's MySQL type name.

Column types: `tidb_type` (TiCDC extension) > the propagated source type parameter
(`column.propagate.source.type`) > the logical name > the Connect type. Without a
schema, from the JSON kind of the value (number -> decimal, string/null -> varchar).
"""

from __future__ import annotations

import functools
import re

from cdc_assets.decode.debezium.exact_json import JsonNumber, text_of, to_int

_TIME = "io.debezium.time."
DATE, TIMESTAMP, MICRO_TIMESTAMP, NANO_TIMESTAMP, ZONED_TIMESTAMP = (
    _TIME + n for n in ("Date", "Timestamp", "MicroTimestamp", "NanoTimestamp", "ZonedTimestamp")
)
TIME, MICRO_TIME, NANO_TIME, YEAR = (_TIME + n for n in ("Time", "MicroTime", "NanoTime", "Year"))
# `time.precision.mode=isostring`: ISO-8601 text, always labelled UTC.
ISO_DATE, ISO_TIME, ISO_TIMESTAMP = (_TIME + n for n in ("IsoDate", "IsoTime", "IsoTimestamp"))
CONNECT_DECIMAL = "org.apache.kafka.connect.data.Decimal"
# `time.precision.mode=connect`: Kafka Connect's own logical types (days, ms of the day, epoch ms).
CONNECT_DATE, CONNECT_TIME, CONNECT_TIMESTAMP = (
    f"org.apache.kafka.connect.data.{n}" for n in ("Date", "Time", "Timestamp")
)
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
BITS, JSON, ENUM, ENUM_SET = (f"io.debezium.data.{n}" for n in ("Bits", "Json", "Enum", "EnumSet"))
SOURCE_TYPE, SOURCE_LENGTH, SOURCE_SCALE = (
    f"__debezium.source.column.{n}" for n in ("type", "length", "scale")
)
_NAMED_TYPES = {
    DATE: "date", TIMESTAMP: "datetime", MICRO_TIMESTAMP: "datetime", NANO_TIMESTAMP: "datetime",
    ZONED_TIMESTAMP: "timestamp", TIME: "time", MICRO_TIME: "time", NANO_TIME: "time", YEAR: "year",
    BITS: "bit", JSON: "json", ENUM: "enum", ENUM_SET: "set", VARIABLE_SCALE_DECIMAL: "decimal",
    "io.debezium.data.geometry.Geometry": "geometry", "io.debezium.data.geometry.Point": "geometry",
    "io.debezium.data.TiDBVectorFloat32": "vector",
    CONNECT_DATE: "date", CONNECT_TIME: "time", CONNECT_TIMESTAMP: "datetime",
    ISO_DATE: "date", ISO_TIME: "time", ISO_TIMESTAMP: "datetime",
}
_CONNECT_TYPES = {
    "int8": "tinyint", "int16": "smallint", "int32": "int", "int64": "bigint",
    "float": "float", "float32": "float", "double": "double", "float64": "double",
    "boolean": "boolean", "string": "varchar", "bytes": "varbinary",
    "struct": "json", "array": "json", "map": "json",
}
# How a column's values convert: decided once per distinct field schema.
_RULE_BY_NAME = {
    DATE: "date", TIMESTAMP: "datetime_ms", MICRO_TIMESTAMP: "datetime_us", NANO_TIMESTAMP: "datetime_ns",
    ZONED_TIMESTAMP: "zoned", TIME: "time_ms", MICRO_TIME: "time_us", NANO_TIME: "time_ns", BITS: "bits",
    CONNECT_DECIMAL: "decimal", VARIABLE_SCALE_DECIMAL: "variable_decimal",
    CONNECT_DATE: "date", CONNECT_TIME: "time_ms", CONNECT_TIMESTAMP: "datetime_ms",
    ISO_DATE: "iso_date", ISO_TIME: "iso_time", ISO_TIMESTAMP: "iso_timestamp",
}
_BINARY_TYPE_RE = re.compile(r"\s*((var)?binary|(tiny|medium|long)?blob)\b", re.A)
_UNSIGNED_BIGINT_RE = re.compile(r"\s*bigint\s+unsigned", re.A)
_DECIMAL_TYPE_RE = re.compile(r"\s*(decimal|numeric)\b", re.A)
_SOURCE_DECIMAL_RE = re.compile(r"(decimal|numeric)( unsigned)?( zerofill)?")


def _params(f: dict) -> dict:
    p = f.get("parameters")
    return p if type(p) is dict else {}


# `binary.handling.mode` -> the rule of a binary column written as a Connect string.
BINARY_STRING_RULES = {"bytes": "base64", "base64": "base64", "base64-url-safe": "base64url", "hex": "hex"}


def field_facts(f: dict, binary_mode: str = "bytes") -> tuple[str, int | None, str]:
    """A Connect field schema -> (conversion rule, its `scale` parameter, MySQL type name).
    `binary_mode`: the connector's `binary.handling.mode` (see BINARY_STRING_RULES)."""
    p = _params(f)
    return _facts(
        text_of(f.get("type")), text_of(f.get("name")), text_of(f.get("tidb_type")),
        text_of(p.get(SOURCE_TYPE)), text_of(p.get(SOURCE_LENGTH)), text_of(p.get(SOURCE_SCALE)),
        text_of(p.get("scale")), text_of(p.get("connect.decimal.precision")), binary_mode,
    )


@functools.lru_cache(maxsize=4096)
def _facts(type_: str | None, name: str | None, tidb_type: str | None, source_type: str | None,
           source_length: str | None, source_scale: str | None, scale: str | None,
           precision: str | None, binary_mode: str) -> tuple[str, int | None, str]:
    declared = (tidb_type if tidb_type is not None else source_type)
    declared = declared.lower() if declared is not None else None
    binary_string = tidb_type is None and (type_ or "").lower() == "string"  # TiCDC's strings are base64
    rule = (
        _RULE_BY_NAME.get(name)
        or ("base64" if (type_ or "").lower() == "bytes" else None)
        or ((BINARY_STRING_RULES[binary_mode] if binary_string else "base64")
            if declared and _BINARY_TYPE_RE.match(declared) else None)
        or ("unsigned_bigint" if declared and _UNSIGNED_BIGINT_RE.match(declared) else None)
        # TiCDC writes DECIMAL as a JSON double: its digits, never an exponent.
        or ("decimal_number" if declared and _DECIMAL_TYPE_RE.match(declared) else None)
        or "text"
    )
    return rule, to_int(scale), _column_type(type_, name, tidb_type, source_type, source_length,
                                              source_scale, scale, precision)


def _column_type(type_, name, tidb_type, source_type, source_length, source_scale, scale, precision) -> str:
    if tidb_type is not None:
        return tidb_type.strip(" ").lower()
    if source_type is not None:  # `column.propagate.source.type`: "decimal(10,2)", "varbinary", ...
        base = source_type.strip(" ").lower()
        if source_length is not None and _SOURCE_DECIMAL_RE.fullmatch(base):
            return f"decimal({source_length},{source_scale if source_scale is not None else '0'})"
        word, _, rest = base.partition(" ")
        if word == "float" and source_length is not None and source_scale is None:
            # FLOAT(53) [UNSIGNED] is a double (mysql_types.spark_type)
            return f"float({source_length}){' ' + rest if rest else ''}"
        return base
    if name == CONNECT_DECIMAL:
        return f"decimal({precision},{scale if scale is not None else '0'})" if precision is not None else "decimal"
    named = _NAMED_TYPES.get(name)
    if named is not None:
        return named
    return _CONNECT_TYPES.get(type_.lower() if type_ is not None else None, "varchar")


def value_kind_type(v) -> str:
    """No schema: the JSON kind of the value -> a type that holds it without loss."""
    t = type(v)
    if t is bool:
        return "boolean"
    if t is int:
        return "decimal" if len(str(abs(v))) <= 38 else "double"
    if t is JsonNumber:
        digits = sum(c.isdigit() for c in v)
        return "double" if "e" in v or "E" in v or digits > 38 else "decimal"
    if t is dict or t is list:
        return "json"
    return "varchar"
