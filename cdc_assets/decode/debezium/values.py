"""Debezium / Kafka Connect column values -> the change log's canonical text and MySQL type names.

A value arrives as parsed JSON with its numbers kept as written (`JsonNumber`: decimals keep
every digit, numbers stay apart from strings), plus, when the message carries a schema, its
Connect field schema (type, logical name, parameters, TiCDC's `tidb_type`).
Semantic types (debezium.io MySQL connector "data type mappings"):

- io.debezium.time.Date (days) -> `YYYY-MM-DD`; Timestamp / MicroTimestamp /
  NanoTimestamp (epoch ms / us / ns of the wall clock read as UTC) -> datetime text;
  ZonedTimestamp (ISO-8601 instant) -> UTC text; Time / MicroTime / NanoTime -> TIME
  text (may be negative or above 24 h). Fractions: 6 digits, left out when zero.
- `time.precision.mode=isostring` (Debezium 3): IsoDate `2023-11-21Z`, IsoTime
  `10:15:30.5Z`, IsoTimestamp `2023-11-21T18:29:26Z` (a DATETIME's wall clock labelled UTC)
  -> date / TIME / datetime text. Only UTC labels are read (Debezium writes `Z`): another
  offset would move a wall clock, so it does not convert.
- org.apache.kafka.connect.data.Decimal: base64 of the big-endian two's-complement
  unscaled value + `scale` parameter (or a plain JSON number: Flink CDC's numeric
  format); VariableScaleDecimal: {scale, value}. Exact up to 76 digits.
- io.debezium.data.Bits: base64 of little-endian bytes -> the unsigned integer.
- Connect `bytes`, and TiCDC strings whose `tidb_type` is binary/blob: base64 ->
  canonical base64 of the same bytes. JSON booleans -> `1` / `0`. A Connect `string` whose
  propagated source type is binary is in the connector's `binary.handling.mode` (the
  decoder option `binary-handling-mode`: bytes, the default, and base64 read base64;
  base64-url-safe; hex).
- TiCDC writes BIGINT UNSIGNED as a wrapped int64 (2^64-1 arrives as -1): with
  `tidb_type` (or a propagated source type) "bigint unsigned" a negative value gets 2^64
  added. Without either nothing says the column is unsigned: the wrapped value is kept.

A value that does not convert for its rule (bad base64, a time out of range, ...) becomes
None; the decoder quarantines its event as `invalid_value`.

Column types: `tidb_type` (TiCDC extension) > the propagated source type parameter
(`column.propagate.source.type`) > the logical name > the Connect type. Without a
schema, from the JSON kind of the value (number -> decimal, string/null -> varchar).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from datetime import date, datetime, timedelta, timezone

from cdc_assets.decode.common.arrow_events import as_text

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
_INTEGER_RE = re.compile(r"[+-]?[0-9]+")
_EXPONENT_RE = re.compile(r"(-?)(\d+)(?:\.(\d+))?[eE]([+-]?\d+)")
_ZONED_RE = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{0,9}))?)?)?"
    r"\s*(Z|UTC|[+-]\d{1,2}(?::?\d{2})?)?", re.A
)
_UTC_LABEL = r"(?:Z|[+-]00:?00)?"  # isostring values are labelled UTC (Debezium writes Z)
_ISO_DATE_RE = re.compile(rf"(\d{{4}}-\d{{2}}-\d{{2}}){_UTC_LABEL}", re.A)
_ISO_TIME_RE = re.compile(rf"([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d)(?:\.(\d{{1,9}}))?)?{_UTC_LABEL}", re.A)
_WHITESPACE = re.compile(r"\s+")
_LEADING_ZEROS = re.compile(r"^0+(?=\d)")
_US_PER_DAY = 86_400_000_000
# 0001-01-01 .. 9999-12-31 23:59:59.999999 in epoch microseconds; TIME within +-10^15 us.
_MIN_DATETIME_US, _MAX_DATETIME_US = -62_135_596_800_000_000, 253_402_300_799_999_999
_MAX_TIME_US = 10**15
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_TWO_POW_64 = 1 << 64
_MAX_UNSCALED = 10**76  # beyond MySQL's 65 digits with room to spare
_MAX_EXPONENT = 1000  # a plain-digit rewrite longer than this keeps the exponent form
_EPOCH = date(1970, 1, 1)
_EPOCH_DT = datetime(1970, 1, 1, tzinfo=timezone.utc)


class JsonNumber(str):
    """A JSON number with a fraction or exponent, kept as written (`json.loads(parse_float=)`):
    a double would re-print 9999999999.99 and drop DECIMAL digits beyond 17."""

    __slots__ = ()


def _number_text(n: JsonNumber) -> str:
    """A number's digits without trailing fraction zeros (`1.50` -> `1.5`, `1.0` -> `1`):
    JSON numbers carry no scale, so a schema-less `1.0` and a typed `1` are the same value."""
    text = str.__str__(n)
    if "." in text and "e" not in text and "E" not in text:
        text = text.rstrip("0").rstrip(".")
        if text == "-0":
            text = "0"
    return text


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


#: Parses JSON keeping every number's digits (integers as Python ints, others as
#: `JsonNumber`); NaN / Infinity are not JSON and fail like any other malformed text.
EXACT_JSON = json.JSONDecoder(parse_float=JsonNumber, parse_constant=_reject_constant)


def loads_exact(text: str):
    return EXACT_JSON.decode(text)


def _json_text(v) -> str:
    """Compact JSON of a parsed value, numbers exactly as they came."""
    if type(v) is dict:
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _json_text(x) for k, x in v.items()) + "}"
    if type(v) is list:
        return "[" + ",".join(_json_text(x) for x in v) + "]"
    if type(v) is JsonNumber:
        return _number_text(v)
    return json.dumps(v, ensure_ascii=False)


def text_of(v) -> str | None:
    """A JSON value read as text: strings as they are, numbers with their digits, booleans
    `true` / `false`, objects and arrays as compact JSON (numbers inside kept as written)."""
    t = type(v)
    if v is None or t is str:
        return v
    if t is JsonNumber:
        return _number_text(v)
    if t is dict or t is list:
        return _json_text(v)
    return as_text(v)


def to_long(v) -> int | None:
    """A JSON value as a 64-bit integer, as a lenient cast reads it: integers, integral text,
    numbers with a fraction truncated; None when it does not fit or is not a number."""
    t = type(v)
    if t is int:
        return v if _INT64_MIN <= v <= _INT64_MAX else None
    if t is str:
        s = v.strip()
        n = int(s) if _INTEGER_RE.fullmatch(s) else None
    elif t is JsonNumber:
        try:
            n = int(float(v)) if "e" in v or "E" in v else int(v.split(".")[0] or "0")
        except (ValueError, OverflowError):
            return None
    elif t is bool:
        return int(v)
    else:
        return None
    return n if n is not None and _INT64_MIN <= n <= _INT64_MAX else None


def to_int(v) -> int | None:
    n = to_long(v)
    return n if n is not None and _INT32_MIN <= n <= _INT32_MAX else None


# -- field schemas ------------------------------------------------------------------------
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


# -- value conversion -----------------------------------------------------------------------
def canonical_values(raw: dict | None, rules: dict, bad: list) -> dict | None:
    """An image's values -> canonical text per the column rules (`field_facts`); the names
    of values that did not convert are appended to `bad`."""
    if raw is None:
        return None
    out = {}
    for k, v in raw.items():
        t = type(v)
        if t is str:
            r = rules.get(k)
            if r is None or r[0] == "text":
                out[k] = v  # the common case: plain text passes straight through
                continue
        elif v is None:
            out[k] = None
            continue
        elif t is bool:
            out[k] = "1" if v else "0"
            continue
        else:
            r = rules.get(k)
        text = _convert(r[0], r[1], v) if r is not None else text_of(v)
        if text is None:
            bad.append(k)
        out[k] = text
    return out


def _convert(rule: str, scale: int | None, v) -> str | None:
    text = text_of(v)
    if rule == "text":
        return text
    if rule == "decimal_number":
        return plain_number_text(text)
    if rule == "decimal":
        if type(v) is not str:  # Flink CDC's numeric format: a plain JSON number
            return plain_number_text(text)
        return _byte_decimal(_base64(text), scale)
    if rule == "variable_decimal":
        if type(v) is not dict:
            return None
        own_scale = to_int(v.get("scale"))
        return _byte_decimal(_base64(text_of(v.get("value"))), scale if own_scale is None else own_scale)
    if rule in ("base64", "base64url", "hex"):
        b = _base64(text) if rule == "base64" else _base64url(text) if rule == "base64url" else _hex(text)
        return None if b is None else base64.b64encode(b).decode("ascii")
    if rule == "bits":
        b = _base64(text)
        if b is None or len(b) > 8:
            return None
        return str(int.from_bytes(b, "little"))
    if rule == "iso_date":
        m = _ISO_DATE_RE.fullmatch(text.strip()) if type(v) is str else None
        return _valid_date(m.group(1)) if m else None
    if rule == "iso_time":
        m = _ISO_TIME_RE.fullmatch(text.strip()) if type(v) is str else None
        if m is None:
            return None
        h, mi, sec, frac = m.groups()
        return micros_to_time_text(((int(h) * 60 + int(mi)) * 60 + int(sec or 0)) * 1_000_000 + _micros_of(frac))
    if rule == "iso_timestamp":  # a DATETIME's wall clock: another offset than UTC would move it
        return micros_to_datetime_text(_zoned_micros(text, utc_only=True))
    number = to_long(v if type(v) is int else text)  # the time and unsigned rules read integer text
    if rule == "unsigned_bigint":
        return str(number + _TWO_POW_64) if number is not None and number < 0 else text
    if rule == "date":
        return _date_text(number)
    if rule == "zoned":
        return micros_to_datetime_text(_zoned_micros(text))
    if number is None:
        return None
    unit = rule.rsplit("_", 1)[1]
    micros = number * 1000 if unit == "ms" else number if unit == "us" else number // 1000
    if unit == "ms" and not _INT64_MIN <= micros <= _INT64_MAX:
        return None
    return micros_to_time_text(micros) if rule.startswith("time") else micros_to_datetime_text(micros)


def _base64(text: str | None) -> bytes | None:
    if text is None:
        return None
    try:
        return base64.b64decode(_WHITESPACE.sub("", text), validate=True)
    except (binascii.Error, ValueError):
        return None


_URL_SAFE = str.maketrans("-_+/", "+/!!")  # "+" and "/" are not in the URL-safe alphabet: made invalid


def _base64url(text: str | None) -> bytes | None:
    """URL-safe base64, padded or not, validated like `_base64`."""
    if text is None:
        return None
    body = _WHITESPACE.sub("", text).rstrip("=")
    return _base64(body.translate(_URL_SAFE) + "=" * (-len(body) % 4))


def _hex(text: str | None) -> bytes | None:
    try:
        return bytes.fromhex(text) if text is not None and text.isascii() else None
    except ValueError:
        return None


def _byte_decimal(b: bytes | None, scale: int | None) -> str | None:
    """Big-endian two's-complement unscaled bytes + scale -> exact decimal text."""
    if b is None or scale is None or scale < 0:
        return None
    unscaled = int.from_bytes(b, "big", signed=True)
    if abs(unscaled) >= _MAX_UNSCALED:
        return None
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    body = f"{digits[:-scale]}.{digits[-scale:]}" if scale > 0 else digits
    return "-" + body if unscaled < 0 else body


def plain_number_text(text: str | None) -> str | None:
    """A JSON number in exponent form ("1.0E38", "-9.5e-7") -> plain decimal text; other
    text unchanged. For DECIMAL columns written as doubles (TiCDC's Debezium), so the
    snapshot sees the digits and not an exponent it cannot read as a decimal."""
    m = _EXPONENT_RE.fullmatch(text) if text is not None and ("e" in text or "E" in text) else None
    if m is None:
        return text
    sign, whole, fraction, exponent = m.groups()
    digits = whole + (fraction or "")
    point = len(whole) + int(exponent)
    if abs(point) > _MAX_EXPONENT:
        return text
    if point <= 0:
        body = "0." + "0" * -point + digits
    elif point >= len(digits):
        body = digits + "0" * (point - len(digits))
    else:
        body = digits[:point] + "." + digits[point:]
    return sign + _LEADING_ZEROS.sub("", body)


def _valid_date(text: str) -> str | None:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        return None


def _date_text(days: int | None) -> str | None:
    if days is None or not _INT32_MIN <= days <= _INT32_MAX:
        return None
    try:
        return (_EPOCH + timedelta(days=days)).isoformat()
    except OverflowError:
        return None


def _clock_text(us: int) -> str:
    """Non-negative microseconds -> `HH:MM:SS[.ffffff]` (hours may exceed 23)."""
    seconds, frac = divmod(us, 1_000_000)
    minutes, s = divmod(seconds, 60)
    h, m = divmod(minutes, 60)
    return f"{h:02d}:{m:02d}:{s:02d}" + (f".{frac:06d}" if frac else "")


def micros_to_datetime_text(us: int | None) -> str | None:
    """Epoch microseconds -> `YYYY-MM-DD HH:MM:SS[.ffffff]`, without any time zone."""
    if us is None or not _MIN_DATETIME_US <= us <= _MAX_DATETIME_US:
        return None
    days, rest = divmod(us, _US_PER_DAY)
    return f"{(_EPOCH + timedelta(days=days)).isoformat()} {_clock_text(rest)}"


def micros_to_time_text(us: int | None) -> str | None:
    if us is None or not -_MAX_TIME_US <= us <= _MAX_TIME_US:
        return None
    return ("-" if us < 0 else "") + _clock_text(abs(us))


def _zoned_micros(text: str | None, utc_only: bool = False) -> int | None:
    """ISO-8601 instant text (`2018-01-13T09:52:33.123Z`, `+08:00` offsets; no zone = UTC,
    the session's zone) -> epoch microseconds. `utc_only`: None for any other offset."""
    m = _ZONED_RE.fullmatch(text.strip()) if text is not None else None
    if m is None:
        return None
    y, mo, d, h, mi, s, frac, zone = m.groups()
    offset = 0
    if zone and zone not in ("Z", "UTC"):
        sign = -1 if zone[0] == "-" else 1
        body = zone[1:].replace(":", "")
        hours, minutes = (body, "0") if len(body) <= 2 else (body[:-2], body[-2:])
        offset = sign * (int(hours) * 60 + int(minutes))
    try:
        wall = datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0), tzinfo=timezone.utc)
    except ValueError:
        return None
    if utc_only and offset:
        return None
    micros = (wall - _EPOCH_DT) // timedelta(microseconds=1) + _micros_of(frac)
    return micros - offset * 60_000_000


def _micros_of(fraction: str | None) -> int:
    """Fraction-of-second digits (up to 9) -> whole microseconds (MySQL keeps 6)."""
    return int((fraction or "").ljust(6, "0")[:6])
