"""Plain-Python half of the DTS Avro decoder: one Kafka value -> one flat event dict.

Runs inside `mapInArrow` (see `dts_avro/decoder.py`). Value rules (SDK `DefaultValueDeserializer`):
- Only MySQL-family sources (`source.sourceType` MySQL, DRDS) are read: other sources use
  other type codes (Oracle's, PostgreSQL's OIDs) and value units, so their row and DDL
  records are rejected (`unsupported_source_type`).
- Integer / Decimal: their `value` text; Float: shortest text of the double (of the
  float32 for FLOAT columns); Character: `value` bytes decoded with `charset` (charset
  `binary` => bytes; latin1 as MySQL's: cp1252 whose five undefined bytes are the C1
  controls of the same number); BinaryObject / BinaryGeometry: base64 of the exact bytes;
  TextObject / TextGeometry: their text; null and EmptyObject.NULL: SQL NULL.
- EmptyObject.NONE is not NULL: the SDK reads it as "no value" (`NoneValue`), a column the
  binlog did not log (`binlog_row_image` MINIMAL or NOBLOB). A row cannot be rebuilt from
  such an image, so an INSERT / UPDATE with one in its after-image, or an UPDATE / DELETE
  with one in a key column of its before-image, is rejected (`column_not_logged`). Other
  columns of a before-image (only its key is read) are left out of its map
  (`before_not_logged`), so the change log never shows them as NULL.
- Timestamp {timestamp s, millis}: an instant, UTC text. DateTime: date / time / datetime /
  year text from the segments present; a TIME is negative when any segment is (the SDK's
  `DateTime` setters), printed once with one sign. TimestampWithTimeZone: converted to UTC
  text; its zone is a signed offset in Java's `ZoneOffset` forms (`+8`, `+08`, `+08:00`,
  `+0800`, `+08:00:00`), optionally after `GMT` / `UTC`, or an IANA name.
- Decimal's precision / scale follow each value, not the column (`1.11` comes as (3,2) in a
  DECIMAL(8,2)), so the column type is a plain `decimal`, typed from the data.
  The SDK treats the `millis` field of both as MICROseconds (`setMicro(millis)`,
  `naons = millis * 1000`); so do we.
- `dataTypeNumber` is MySQL's binlog column type code; it has no sign flag, so integer
  columns are widened to a type that holds the signed and the unsigned range.
"""

from __future__ import annotations

import base64
import codecs
import io
import json
import math
import re
import struct
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from cdc_assets.decode.common.arrow_events import Reject
from cdc_assets.decode.common.key_option import NO_KEYS, KeyOption
from cdc_assets.decode.debezium.exact_json import plain_number_text
from cdc_assets.decode.dts_avro.schema import OPERATIONS

DML_OPERATIONS = ("INSERT", "UPDATE", "DELETE")
HEARTBEAT = "HEARTBEAT"

# MySQL enum_field_types -> column type name (text variants; binary ones come from the value).
_TYPE_BY_CODE = {
    0: "decimal", 246: "decimal", 1: "smallint", 2: "int", 9: "int", 3: "bigint", 8: "decimal(20,0)",
    4: "float", 5: "double", 6: "varchar", 7: "timestamp", 17: "timestamp", 10: "date", 14: "date",
    11: "time", 19: "time", 12: "datetime", 18: "datetime", 13: "year", 15: "varchar", 253: "varchar",
    254: "char", 16: "bit", 245: "json", 247: "enum", 248: "set", 249: "tinytext", 250: "mediumtext",
    251: "longtext", 252: "text", 255: "geometry",
}
_BINARY_BY_CODE = {15: "varbinary", 253: "varbinary", 254: "binary", 249: "tinyblob", 250: "mediumblob",
                   251: "longblob", 252: "blob"}
# MySQL charset names Python does not know under that name.
_CHARSETS = {"utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "latin1": "cp1252", "ucs2": "utf-16-be",
             "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be", "ujis": "euc_jp",
             "sjis": "shift_jis", "euckr": "euc_kr", "koi8r": "koi8_r", "koi8u": "koi8_u", "macce": "mac_latin2",
             "": "utf-8"}
# Java's ZoneOffset forms (one-digit hours only alone), after an optional GMT / UTC.
_OFFSET_RE = re.compile(r"(?:GMT|UTC)?([+-])(?:(\d)|(\d{2})(?::?(\d{2})(?::?(\d{2}))?)?)", re.A | re.I)
_MAX_OFFSET = timedelta(hours=18)
# Sources whose records carry MySQL's type codes and value forms.
MYSQL_FAMILY_SOURCES = ("MySQL", "DRDS")


def _micros(us: int | None) -> str:
    return f".{us:06d}" if us else ""


def _datetime_text(d: dict) -> tuple[str, str]:
    """(text, column type) from the DateTime segments that are present."""
    y, mo, day, h, mi, s, us = (d.get(k) for k in ("year", "month", "day", "hour", "minute", "second", "millis"))
    if y is None and h is not None:
        parts = (h, mi or 0, s or 0, us or 0)
        sign = "-" if any(p < 0 for p in parts) else ""
        h, mi, s, us = (abs(p) for p in parts)
        return f"{sign}{h:02d}:{mi:02d}:{s:02d}{_micros(us)}", "time"
    if y is not None and mo is None:
        return f"{y:04d}", "year"
    if day is None or (h is not None and (mi is None or s is None)):
        present = sorted(k for k, v in d.items() if v is not None)
        raise Reject("invalid_value", f"DateTime with missing segments (present: {present})")
    if h is None:
        return f"{y:04d}-{mo:02d}-{day:02d}", "date"
    return f"{y:04d}-{mo:02d}-{day:02d} {h:02d}:{mi:02d}:{s:02d}{_micros(us)}", "datetime"


def _utc_text(moment: datetime) -> str:
    u = moment.astimezone(timezone.utc)
    return u.strftime("%Y-%m-%d %H:%M:%S") + _micros(u.microsecond)


def _zone(name: str):
    """A TimestampWithTimeZone's zone (see the module docstring). Not `arrow_events.zone`,
    which reads the `time-zone` option: this one reads each value's zone as Java's
    `ZoneOffset` writes it (one-digit hours, seconds, a `GMT` / `UTC` prefix, at most 18
    hours) and quarantines the value, not the run, when it is none."""
    text = name.strip()
    if text.upper() in ("Z", "UTC", "GMT"):
        return timezone.utc
    m = _OFFSET_RE.fullmatch(text)
    if m is not None:
        sign, h1, hh, mm, ss = m.groups()
        minutes, seconds = int(mm or 0), int(ss or 0)
        offset = timedelta(hours=int(h1 or hh), minutes=minutes, seconds=seconds)
        if minutes < 60 and seconds < 60 and offset <= _MAX_OFFSET:
            return timezone(-offset if sign == "-" else offset)
    else:
        try:
            return ZoneInfo(text)
        except (ValueError, KeyError, OSError):  # an unknown name, or one naming a folder of the zone files
            pass
    raise Reject("invalid_timestamp_value", f"unknown time zone {name!r}")


def _float_text(v: float, code: int) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    if code == 4:  # FLOAT column: the double holds a float32; print the float32's shortest text
        import numpy as np

        return str(np.float32(struct.unpack("f", struct.pack("f", v))[0]))
    return repr(v)


def _mysql_latin1_undefined(error: UnicodeDecodeError) -> tuple[str, int]:
    """MySQL's latin1 maps the bytes cp1252 leaves undefined (0x81 0x8D 0x8F 0x90 0x9D) to the
    C1 controls of the same number, and stores them."""
    return "".join(chr(b) for b in error.object[error.start:error.end]), error.end


codecs.register_error("cdc-mysql-latin1", _mysql_latin1_undefined)


def _charset(name: str) -> str:
    key = name.lower()
    try:
        return codecs.lookup(_CHARSETS.get(key, key)).name
    except LookupError:
        raise Reject("unknown_charset", f"unknown character set {name!r}") from None


def render(value, code: int) -> tuple[str | None, str]:
    """One image value -> (canonical text or None, column type name)."""
    default_type = _TYPE_BY_CODE.get(code, "varchar")
    if value is None or isinstance(value, str):  # null, or an EmptyObject symbol (see _empty_symbol)
        return None, default_type
    kind, v = value
    kind = kind.rsplit(".", 1)[-1]
    if kind == "EmptyObject":
        return None, default_type
    if kind == "Integer":
        return v["value"], default_type
    if kind == "Decimal":
        # the value's precision is not the column's (docstring); the column is typed from the
        # digits, so an exponent (`1.000E-7`) is written out with its scale (`0.0000001000`)
        return plain_number_text(v["value"]), "decimal"
    if kind == "Float":
        return _float_text(v["value"], code), "float" if code == 4 else "double"
    if kind == "Character":
        if v["charset"].lower() == "binary":
            return base64.b64encode(v["value"]).decode(), _BINARY_BY_CODE.get(code, "varbinary")
        try:
            charset = _charset(v["charset"])
            return v["value"].decode(charset, "cdc-mysql-latin1" if charset == "cp1252" else "strict"), default_type
        except UnicodeDecodeError as e:
            raise Reject("invalid_character_value", f"not {v['charset']} text: {e}") from None
    if kind in ("BinaryObject", "BinaryGeometry"):
        typ = "geometry" if kind == "BinaryGeometry" else _BINARY_BY_CODE.get(code, "varbinary")
        return base64.b64encode(v["value"]).decode(), typ
    if kind in ("TextObject", "TextGeometry"):
        typ = "geometry" if kind == "TextGeometry" else (
            "json" if v["type"].upper() == "JSON" else default_type)
        return v["value"], typ
    if kind == "Timestamp":
        moment = datetime.fromtimestamp(v["timestamp"], timezone.utc) + timedelta(microseconds=v["millis"] or 0)
        return _utc_text(moment), "timestamp"
    if kind == "DateTime":
        return _datetime_text(v)
    if kind == "TimestampWithTimeZone":
        d = v["value"]
        local = datetime(d["year"], d["month"], d["day"], d.get("hour") or 0, d.get("minute") or 0,
                         d.get("second") or 0, d.get("millis") or 0, tzinfo=_zone(v["timezone"]))
        return _utc_text(local), "timestamp"
    raise Reject("unknown_value_type", f"unknown DTS value type {kind}")


def source_position(text: str | None) -> int | None:
    """`end_log_pos@binlog_file_number` (e.g. `2196@4`) -> file << 32 | pos; else None."""
    pos, sep, file_no = (text or "").partition("@")
    if sep and pos.isdigit() and file_no.isdigit():
        return (int(file_no) << 32) | int(pos)
    return None


def primary_key(tags: dict) -> list[str] | None:
    """Tag `pk_uk_info` = JSON {"PRIMARY": [cols], <uk name>: [cols]} (SDK AvroRecordParser)."""
    raw = tags.get("pk_uk_info")
    if not raw:
        return None
    try:
        pk = json.loads(raw).get("PRIMARY")
    except (ValueError, AttributeError):
        raise Reject("invalid_primary_key_tag", f"pk_uk_info is not a JSON object: {raw[:200]}") from None
    return [str(c) for c in pk] if isinstance(pk, list) and pk else None


def _image(images, fields: list[dict], which: str) -> tuple[list | None, list[str], list[str]]:
    """(texts, types, names of the columns without a logged value) of one image."""
    if images is None or isinstance(images, str):
        return None, [], []
    if len(images) != len(fields):
        raise Reject("image_field_mismatch", f"{which} has {len(images)} values for {len(fields)} fields")
    texts, types, not_logged = [], [], []
    for value, field in zip(images, fields):
        text, typ = render(value, field["dataTypeNumber"])
        if text is None and value is not None and _empty_symbol(value) == "NONE":  # checked for NULLs only
            not_logged.append(field["name"])
        texts.append(text)
        types.append(typ)
    return texts, types, not_logged


def _empty_symbol(value) -> str | None:
    """NULL / NONE for an EmptyObject value. fastavro returns the symbol bare in the first
    image (where the schema defines the enum inline) and as (name, symbol) in the other."""
    if isinstance(value, str):  # the only member of the value union that is not a record
        return value
    if isinstance(value, tuple) and value[0].endswith("EmptyObject"):
        return value[1]
    return None


def _reject_not_logged(op: str, pk: list[str] | None, before_missing: list[str], after_missing: list[str]) -> None:
    """A row image the snapshot cannot use: see the module docstring."""
    if op in ("INSERT", "UPDATE") and after_missing:
        missing, which = after_missing, "afterImages"
    elif op in ("UPDATE", "DELETE"):
        missing, which = [c for c in before_missing if c in (pk or [])], "beforeImages"
    else:
        return
    if missing:
        raise Reject("column_not_logged",
                     f"{which} has no value (EmptyObject.NONE) for {', '.join(missing)}: the source logs partial "
                     "row images (binlog_row_image MINIMAL or NOBLOB?), from which the row cannot be rebuilt")


def split_object_name(name: str | None) -> tuple[str | None, str | None]:
    """`db.table` (dots inside names escaped as \\u002E); `db.schema.table` -> db.schema."""
    if not name:
        return None, None
    parts = [p.replace("\\u002E", ".") for p in name.split(".")]
    if len(parts) == 1:
        return parts[0], None
    return ".".join(parts[:-1]), parts[-1]


def decode_value(value: bytes | None, schema: dict, key_option: KeyOption = NO_KEYS) -> dict:
    """One Kafka value -> the event fields (see `dts_avro.DECODED_ARROW_FIELDS`); the key is the
    `pk_uk_info` tag's PRIMARY, else the `primary-key` option's."""
    import fastavro

    if not value:
        raise Reject("empty_message", "the Kafka message has no value")
    try:
        rec = fastavro.schemaless_reader(io.BytesIO(value), schema, return_record_name=True)
    except Exception as e:  # any malformed Avro: truncated, bad union index, bad UTF-8...
        raise Reject("invalid_avro", f"{type(e).__name__}: {e}"[:500]) from None
    op = rec["operation"]
    source_type = (rec.get("source") or {}).get("sourceType")
    if (op == "DDL" or op in DML_OPERATIONS) and source_type not in MYSQL_FAMILY_SOURCES:
        raise Reject("unsupported_source_type", f"{op} from a {source_type} source: its type codes and values are "
                     f"not MySQL's (this decoder reads {', '.join(MYSQL_FAMILY_SOURCES)})")
    database, table = split_object_name(rec["objectName"])
    out = {
        "operation": op, "database": database, "table": table, "record_id": rec["id"],
        "source_ts": rec["sourceTimestamp"], "source_position": source_position(rec["sourcePosition"]),
        "pk_names": None, "col_names": None, "col_types": None, "code_types": None, "before_vals": None,
        "after_vals": None, "before_not_logged": None,
        "ddl_sql": None,
    }
    if op == "DDL":
        after = rec["afterImages"]
        out["ddl_sql"] = after if isinstance(after, str) else None
        return out
    if op not in DML_OPERATIONS:
        return out
    fields = rec["fields"] if isinstance(rec["fields"], list) else []
    names = [f["name"] for f in fields]
    if len(set(names)) != len(names):
        raise Reject("duplicate_column", f"duplicate field names in {names}")
    before, before_types, before_missing = _image(rec["beforeImages"], fields, "beforeImages")
    after, after_types, after_missing = _image(rec["afterImages"], fields, "afterImages")
    pk_names = primary_key(rec["tags"]) or key_option.names_for(database, table)
    _reject_not_logged(op, pk_names, before_missing, after_missing)
    # A value's own type beats the type code; a NULL says nothing about text vs binary or
    # a decimal's scale: its type stays null here (filled from the column's other values).
    types = []
    for i in range(len(fields)):
        chosen = None
        for vals, typs in ((after, after_types), (before, before_types)):
            if vals is not None and vals[i] is not None:
                chosen = typs[i]
                break
        types.append(chosen)
    out.update(pk_names=pk_names, col_names=names, col_types=types,
               code_types=[_TYPE_BY_CODE.get(f["dataTypeNumber"], "varchar") for f in fields],
               before_vals=before, after_vals=after, before_not_logged=before_missing or None)
    return out


def read_header(value: bytes | None) -> tuple[int | None, str | None]:
    """(sourceTimestamp, operation) from the first Record fields, without a full decode."""
    try:
        buf = memoryview(value or b"")
        pos = 0

        def varint() -> int:
            nonlocal pos
            shift = result = 0
            while True:
                b = buf[pos]
                pos += 1
                result |= (b & 0x7F) << shift
                if b < 0x80:
                    return (result >> 1) ^ -(result & 1)
                shift += 7

        def skip_string() -> None:
            nonlocal pos
            n = varint()
            pos += n

        varint()  # version
        varint()  # id
        ts = varint()
        for _ in range(3):  # sourcePosition, safeSourcePosition, sourceTxid
            skip_string()
        varint()  # source.sourceType
        skip_string()  # source.version
        op = varint()
        if pos > len(buf):
            return None, None
        return ts, OPERATIONS[op] if 0 <= op < len(OPERATIONS) else None
    except IndexError:
        return None, None
