"""Canal-JSON messages -> change-log events, in plain Python (orjson) per Arrow batch.

Spark's `from_json` parses this shape row by row into maps and was the decoder's cost;
orjson plus a few dict operations per message is faster (1.2x at 1M messages, more on
larger dumps, on two cores: BENCHMARKS.md).
The rules are those of `canal_json.py`'s docstring; the reject rules below run in the
order the quarantine reasons are documented (the first failing one wins).
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Iterator
from datetime import timezone, tzinfo

import orjson
import pyarrow as pa

from cdc_assets.lib.changelog_schema import DDL, ROW, WATERMARK
from cdc_assets.lib.codecs.arrow_events import EventRows, Reject, as_text, event, gc_paused, timestamp_to_utc, zone
from cdc_assets.lib.tso import PHYSICAL_SHIFT

_DML_TYPES = frozenset(("INSERT", "UPDATE", "DELETE"))
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_BINARY_TYPE_RE = re.compile(
    r"\s*((var)?binary|(tiny|medium|long)?blob|geometry|point|linestring|polygon"
    r"|multipoint|multilinestring|multipolygon|geometrycollection|geomcollection)\b"
)
# `enum('a','b')` / `set('a','b')` -> the quoted member list (official Canal only).
_MEMBERS_RE = re.compile(r"\s*(?i:enum|set)\s*\(\s*'(.*)'\s*\)\s*", re.S)
_INTEGER_RE = re.compile(r"\s*[+-]?[0-9]+\s*")
_SHAPE = "valid JSON, but a field has an unexpected type for this protocol"


# -- per-type facts, cached: a dump has few distinct MySQL type texts -----------------------
@functools.lru_cache(maxsize=4096)
def _type_facts(mysql_type: str) -> tuple[bool, list[str] | None, bool, bool]:
    """(binary type, ENUM/SET members or None, is ENUM, is TIMESTAMP)."""
    lower = mysql_type.lower()
    m = _MEMBERS_RE.fullmatch(mysql_type)
    members = [x.replace("''", "'") for x in m.group(1).split("','")] if m and m.group(1) else None
    return (bool(_BINARY_TYPE_RE.match(lower)), members, lower.lstrip().startswith("enum"),
            lower.startswith("timestamp"))


def _facts(mysql_type) -> tuple[bool, list[str] | None, bool, bool]:
    return _type_facts(mysql_type if type(mysql_type) is str else as_text(mysql_type))


def _enum_or_set_name(v: str, members: list[str], is_enum: bool) -> str | None:
    """Index (ENUM) / bit mask (SET) -> member name(s), when `v` is a number that is not
    itself a member; None otherwise."""
    if v in members or not _INTEGER_RE.fullmatch(v):
        return None
    number = int(v)
    if not _INT64_MIN <= number <= _INT64_MAX:
        return None
    if is_enum:
        return members[number - 1] if 0 < number <= len(members) else None
    return ",".join(m for i, m in enumerate(members) if (number >> i) & 1)


def _canonical(row: dict | None, types: dict, tz: tzinfo) -> dict | None:
    """Binary columns: ISO-8859-1 text -> exact bytes -> base64. TIMESTAMP columns: the
    changefeed's wall clock -> UTC. ENUM/SET codes -> names. Others unchanged."""
    if row is None:
        return None
    out = {}
    for k, v in row.items():
        t = types.get(k)
        if v is not None and t is not None:
            v = v if type(v) is str else as_text(v)
            binary, members, is_enum, is_timestamp = _facts(t)
            name = _enum_or_set_name(v, members, is_enum) if members else None
            if name is not None:
                v = name
            elif binary:
                try:  # a non-Latin-1 value cannot be bytes: kept, and the event is quarantined
                    v = base64.b64encode(v.encode("latin-1")).decode("ascii")
                except UnicodeEncodeError:
                    pass
            elif is_timestamp and tz is not timezone.utc:
                v = timestamp_to_utc(v, tz)
        out[k] = v
    return out


def _changes_values(types: dict, tz: tzinfo) -> tuple[bool, bool]:
    """(a column has a binary type, a column has a type `_canonical` may change)."""
    try:
        return _changes_by_types[(tz, *types.values())]
    except (KeyError, TypeError):  # TypeError: a type that is not text (not cached)
        pass
    has_binary = changes = False
    for t in types.values():
        if t is None:
            continue
        binary, members, _, is_timestamp = _facts(t)
        has_binary |= binary
        changes |= binary or members is not None or (is_timestamp and tz is not timezone.utc)
    if len(_changes_by_types) < 4096 and all(type(t) is str for t in types.values()):
        _changes_by_types[(tz, *types.values())] = has_binary, changes
    return has_binary, changes


_changes_by_types: dict[tuple, tuple[bool, bool]] = {}


def _has_non_latin1_binary(row: dict | None, types: dict) -> bool:
    for k, v in (row or {}).items():
        t = types.get(k)
        if v is not None and t is not None and _facts(t)[0] and any(ord(c) > 0xFF for c in as_text(v)):
            return True
    return False


# -- shape checks: a field of the wrong JSON type quarantines the message ----------------
def _long(v) -> int | None:
    if v is None or (type(v) is int and _INT64_MIN <= v <= _INT64_MAX):
        return v
    raise Reject("unexpected_shape", _SHAPE)


def _object(v) -> dict | None:
    if v is None or type(v) is dict:
        return v
    raise Reject("unexpected_shape", _SHAPE)


def _objects(v) -> list | None:
    if v is None:
        return v
    if type(v) is list:
        for x in v:
            if x is not None and type(x) is not dict:
                break
        else:
            return v
    raise Reject("unexpected_shape", _SHAPE)


def _parse(value: bytes | None) -> dict:
    if not value:
        raise Reject("empty_message", "the Kafka message has no value")
    try:
        m = orjson.loads(value)  # orjson also rejects invalid UTF-8: tell the two apart below
    except orjson.JSONDecodeError:
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            raise Reject("invalid_utf8", "the value is not valid UTF-8") from None
        raise Reject("invalid_json", "the value is not valid JSON") from None
    if type(m) is not dict:
        raise Reject("unexpected_shape", _SHAPE)
    return m


def _wrap64(x: int) -> int:
    """Spark's `shiftleft` on a long wraps around; so does this."""
    return ((x + (1 << 63)) % (1 << 64)) - (1 << 63)


# -- events -----------------------------------------------------------------------------
def decode_message(out: EventRows, source_row: int, value: bytes | None, tz: tzinfo) -> None:
    """Append the events of one Kafka message: one per element of `data` for DML, else one."""
    try:
        events = _events(_parse(value), tz)  # all of the message's events, or a reject
    except Reject as err:
        out.add(source_row, 0, ROW, reason=err.reason, detail=err.detail)
    except Exception as e:  # a shape no rule foresaw: this message is quarantined, never the run
        out.add(source_row, 0, ROW, reason="decoder_error", detail=f"{type(e).__name__}: {e}"[:500])
    else:
        for ev in events:
            out.row(source_row, ev)


def _events(m: dict, tz: tzinfo) -> list[tuple]:
    is_ddl, kind_text = m.get("isDdl"), as_text(m.get("type"))
    if is_ddl is not None and type(is_ddl) is not bool:
        raise Reject("unexpected_shape", _SHAPE)
    tidb = _object(m.get("_tidb")) or {}
    es, tidb_ts, msg_id = _long(m.get("es")), _long(tidb.get("commitTs")), _long(m.get("id"))
    watermark_ts = _long(tidb.get("watermarkTs"))
    database, table = as_text(m.get("database")) or None, as_text(m.get("table")) or None
    kind = DDL if is_ddl else WATERMARK if kind_text == "TIDB_WATERMARK" else ROW
    if kind == WATERMARK:
        reason, detail = ("missing_watermark_ts", "TIDB_WATERMARK without _tidb.watermarkTs") \
            if watermark_ts is None else (None, None)
        return [event(0, WATERMARK, database=database, table=table, event_ms=es,
                      watermark_ts=watermark_ts, reason=reason, detail=detail)]
    commit_ts = tidb_ts if tidb_ts is not None else (None if es is None else _wrap64(es << PHYSICAL_SHIFT))
    # official Canal's batch id (> 0; TiCDC writes 0) orders ties on `es`
    position = msg_id if tidb_ts is None and msg_id is not None and msg_id > 0 else None
    if kind == DDL:
        sql = as_text(m.get("sql"))
        reason, detail = (
            ("missing_commit_ts", "no _tidb.commitTs and no es") if commit_ts is None
            else ("missing_ddl_sql", "DDL message without sql") if not (sql or "").strip(" ")
            else (None, None))
        return [event(0, DDL, database=database, table=table, commit_ts=commit_ts,
                      source_position=position, event_ms=es, ddl_type=kind_text, ddl_sql=sql,
                      reason=reason, detail=detail)]
    pk_names = m.get("pkNames")
    if pk_names is not None:
        if type(pk_names) is not list:
            raise Reject("unexpected_shape", _SHAPE)
        pk_names = [n if type(n) is str else as_text(n) for n in pk_names]
    types, data, old = _object(m.get("mysqlType")), _objects(m.get("data")), _objects(m.get("old")) or ()
    op = None if kind_text is None else kind_text.upper()
    has_binary, changes = _changes_values(types, tz) if types else (False, False)
    message_reason = (
        ("unknown_event_type", f"unknown canal-json type {kind_text if kind_text is not None else 'null'}")
        if op not in _DML_TYPES
        else ("missing_row_data", "DML message without data rows") if not data
        else ("missing_commit_ts", "no _tidb.commitTs and no es") if commit_ts is None
        else ("missing_table_name", "DML message without database or table") if database is None or table is None
        else ("missing_primary_key", "DML message without pkNames") if not pk_names
        else None)
    events = []
    for pos, row in enumerate(data or (None,)):
        before = after = None
        if op == "DELETE":
            before = row
        elif op == "INSERT":
            after = row
        elif op == "UPDATE":
            after = row
            o = old[pos] if pos < len(old) else None
            if o is not None and row is not None:
                before = {k: (o[k] if k in o else v) for k, v in row.items()}
        if changes:
            before, after = _canonical(before, types, tz), _canonical(after, types, tz)
        pk_values = None
        if pk_names is not None:
            image = after if after is not None else before
            pk_values = [None if image is None else image.get(n) for n in pk_names]
            if after is not None and before is not None and None in pk_values:
                pk_values = [v if v is not None else before.get(n) for v, n in zip(pk_values, pk_names)]
        reason, detail = message_reason or (None, None)
        if reason is None and None in pk_values:
            reason, detail = "null_primary_key", "a primary key column is null or absent: " + ",".join(
                n for n in pk_names if n is not None)
        elif reason is None and has_binary and _has_non_latin1_binary(row, types):
            reason, detail = "invalid_binary_value", "a binary column holds characters beyond ISO-8859-1"
        events.append((pos, ROW, op, database, table, commit_ts, position, es, pk_names, pk_values,
                       before, after, types, None, None, None, reason, detail))
    return events


def decode_batches(batches: Iterator[pa.RecordBatch], time_zone: str) -> Iterator[pa.RecordBatch]:
    tz = zone(time_zone)
    for batch in batches:
        out = EventRows()
        with gc_paused():
            for i, value in enumerate(batch.column("value").to_pylist()):
                decode_message(out, i, value, tz)
        yield out.batch(batch)
