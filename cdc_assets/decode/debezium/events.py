"""Debezium envelopes -> change-log events, in plain Python per Arrow batch (`mapInArrow`).

The rules are those of `debezium/decoder.py`'s docstring; the reject rules below run in the order
the quarantine reasons are documented (the first failing one wins). Messages are parsed with
the standard library's JSON parser because numbers must keep their exact text
(`debezium.exact_json.loads_exact`); orjson reads them as doubles.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from dataclasses import dataclass

import orjson
import pyarrow as pa

from cdc_assets.common.tso import ms_to_commit_ts
from cdc_assets.contracts.schemas import (
    CONTROL_RECORD, DDL, DELETE, INSERT, READ, ROW, TOMBSTONE, UPDATE, WATERMARK,
)
from cdc_assets.decode.common.arrow_events import (
    DEFAULT_MAX_MESSAGE_BYTES, EventRows, Reject, event, gc_paused, name_text, oversized,
)
from cdc_assets.decode.common.kafka_time import HINT, PENDING
from cdc_assets.decode.common.key_option import KeyOption, key_values
from cdc_assets.decode.debezium.envelope import EnvelopeReader, RowSchema
from cdc_assets.decode.debezium.exact_json import loads_exact, text_of, to_long
from cdc_assets.decode.debezium.field_schemas import value_kind_type
from cdc_assets.decode.debezium.values import canonical_values

ROW_OPS = {"c": INSERT, "i": INSERT, "u": UPDATE, "d": DELETE, "r": READ}
WATERMARK_OP, DDL_OP = "m", "a"
TRUNCATE_OP = "t"  # Debezium's MySQL connector: TRUNCATE on the table's own topic (`skipped.operations`)
_BEFORE_OPS, _AFTER_OPS = (UPDATE, DELETE), (INSERT, UPDATE, READ)
_NOT_AN_EVENT = "valid JSON, but not a Debezium change event (no op and no ddl)"
_TABLE_FROM_ID = re.compile(r'"([^"]*)"$')
_FIRST_WORD = re.compile(r"^\s*(\w+)", re.A)
_FILE_NUMBER = re.compile(r"(\d+)$", re.A)
# A snapshot's schema setup: Debezium writes these before each CREATE for its schema history,
# also in snapshots that send no rows after them (`snapshot.mode=no_data` / `recovery`, a
# blocking snapshot with `additional-conditions`).
_SNAPSHOT_DROP = re.compile(r"\s*DROP\s+(TABLE|DATABASE|SCHEMA)\s+IF\s+EXISTS\b", re.I | re.A)
_SNAPSHOT_DROP_DETAIL = ("Debezium snapshot's schema setup (DROP ... IF EXISTS): no change to rows "
                         "(option apply-snapshot-drops=true applies it)")
_SIZED_TYPES = re.compile(r"decimal|numeric|char|varchar|binary|varbinary|bit|datetime|timestamp|time|float|double")
_SCALED_TYPES = re.compile(r"decimal|numeric|float|double")


@dataclass(frozen=True)
class Options:
    """What a batch function needs of the decoder: how commit_ts is found, the key fallback."""

    derive_commit_ts: bool  # plain Debezium: no TSO, commit_ts = source.ts_ms << 18
    key_option: KeyOption  # the `primary-key` option
    binary_mode: str = "bytes"  # the `binary-handling-mode` option (Debezium's connector)
    apply_snapshot_drops: bool = False  # the `apply-snapshot-drops` option
    # the `unavailable-value-placeholder` option's forms in the change log (`placeholder_forms`);
    # the decoder always passes them (TiCDC's `debezium`: none)
    unavailable: frozenset = frozenset()
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES  # the `max-message-bytes` option
    kafka_commit_time: bool = False  # `commit-time=kafka-timestamp`: set after decoding (`kafka_time`)


def placeholder_forms(placeholder: str) -> frozenset:
    """How Debezium's placeholder for a value the binlog did not log (`binlog_row_image=NOBLOB`;
    the connector's `unavailable.value.placeholder`) reads in the change log: as text, and as
    a binary column's bytes (base64 as the change log holds them; hex when `hex` mode wrote
    them as a string without the source type)."""
    if not placeholder:
        return frozenset()
    raw = placeholder.encode("utf-8")
    return frozenset((placeholder, base64.b64encode(raw).decode("ascii"), raw.hex(), raw.hex().upper()))


def _obj(v) -> dict:
    return v if type(v) is dict else {}


def _text(v) -> str | None:
    return v if v is None or type(v) is str else text_of(v)


def _blank_to_none(s: str | None) -> str | None:
    return s if s else None


def _source_table(source: dict) -> str | None:
    return name_text(source.get("table"), "source.table")


def _texts(v) -> list | None:
    return [_text(x) for x in v] if type(v) is list else None


# -- the envelope -------------------------------------------------------------------------
def _table_change(payload: dict) -> dict:
    """The first of `tableChanges` (CloudCanal writes one object, not an array)."""
    changes = payload.get("tableChanges")
    if type(changes) is list:
        return _obj(changes[0]) if changes else {}
    return _obj(changes)


def _key_names(key: bytes | None) -> list | None:
    """Primary-key names: the Kafka key's schema fields, else its payload's names, else the
    bare key object's names; None when the key names none."""
    names = None
    try:
        k = orjson.loads(key) if key else None
    except orjson.JSONDecodeError:  # invalid, or a number beyond 64 bits
        try:
            k = loads_exact(key.decode("utf-8"))
        except (ValueError, RecursionError):
            k = None
    if type(k) is dict:
        fields = _obj(k.get("schema")).get("fields")
        payload = k.get("payload")
        if type(fields) is list:
            names = [_text(f.get("field")) if type(f) is dict else None for f in fields]
        elif type(payload) is dict:
            names = list(payload)
        elif "payload" not in k:
            names = list(k)
    return names if names else None


def _declared_columns(change: dict) -> dict | None:
    """A schema-change event's `tableChanges[0].table.columns` as name -> MySQL type text, in
    column order (the table after the DDL); None when the event carries no structure."""
    columns = _obj(change.get("table")).get("columns")
    if type(columns) is not list or not columns:
        return None
    out = {}
    for c in columns:
        c = _obj(c)
        name, type_name = _text(c.get("name")), _text(c.get("typeName"))
        if name is None or type_name is None or name in out:
            return None
        base = type_name.strip(" ").lower()
        first = base.split(" ")[0]
        rest = base[len(first):].strip(" ")
        length, scale = to_long(c.get("length")), to_long(c.get("scale"))
        if _SIZED_TYPES.fullmatch(first) and length is not None and length >= 0:
            with_scale = scale is not None and _SCALED_TYPES.fullmatch(first)
            first = f"{first}({length}{f',{scale}' if with_scale else ''})"
        out[name] = f"{first} {rest}".strip(" ")
    return out


def _source_position(source: dict) -> int | None:
    """MySQL binlog order: file number << 32 | position (None for TiCDC: file is "")."""
    file = _text(source.get("file"))
    m = _FILE_NUMBER.search(file) if file else None
    pos = to_long(source.get("pos"))
    if m is None or pos is None:
        return None
    number = int(m.group(1))
    if number < (1 << 31) and 0 <= pos < (1 << 32):
        return (number << 32) | pos
    return None


def _database(source: dict) -> str | None:
    """The change log's database: `source.db`, or `<db>.<schema>` for connectors whose tables
    live in a schema (PostgreSQL, SQL Server, Oracle, Db2 write `source.schema`). Keeping the
    schema never merges `public.t` with `sales.t`; storage escapes the `.` inside a name part
    (`names.table_id`), so `<db>.<schema>` cannot meet a MySQL database of that name."""
    db, schema = name_text(source.get("db"), "source.db"), name_text(source.get("schema"), "source.schema")
    return db if db is None or schema is None else f"{db}.{schema}"


def _schema_dialect(source: dict) -> str | None:
    """The connector of a source with schemas (their DDL is not MySQL's), else None."""
    if _blank_to_none(_text(source.get("schema"))) is None:
        return None
    return _text(source.get("connector")) or "non-MySQL"


def _positive(n: int | None) -> int | None:
    return n if n is not None and n > 0 else None


# -- events -------------------------------------------------------------------------------
def _parse(value: bytes | None, key: bytes | None, reader: EnvelopeReader) -> tuple[object, RowSchema]:
    if not value:
        # a null value is Kafka's tombstone; a table without a key gets one with a null key too
        if key or value is None:
            raise Reject(TOMBSTONE, "Kafka tombstone (null value after a delete, for log compaction): nothing to apply")
        raise Reject("empty_message", "the Kafka message has no value")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        raise Reject("invalid_utf8", "the value is not valid UTF-8") from None
    try:
        return reader.read(text)
    except ValueError:  # json.JSONDecodeError, NaN / Infinity
        raise Reject("invalid_json", "the value is not valid JSON") from None
    except RecursionError:
        raise Reject("invalid_json", "the value's JSON nests too deeply to read") from None


def decode_message(out: EventRows, source_row: int, key: bytes | None, value: bytes | None,
                   options: Options, reader: EnvelopeReader) -> None:
    """Append the event of one Kafka message (a Debezium message holds one)."""
    try:
        out.row(source_row, _event(*_parse(value, key, reader), key, options))
    except Reject as err:
        out.add(source_row, 0, ROW, reason=err.reason, detail=err.detail)
    except RecursionError:  # a value nested deeper than the parser reached turned into text
        out.add(source_row, 0, ROW, reason="invalid_json", detail="the value's JSON nests too deeply to read")
    except Exception as e:  # a shape no rule foresaw: this message is quarantined, never the run
        out.add(source_row, 0, ROW, reason="decoder_error", detail=f"{type(e).__name__}: {e}"[:500])


def _event(payload, row_schema: RowSchema, key: bytes | None, options: Options) -> tuple:
    if type(payload) is not dict:
        raise Reject("unexpected_shape", _NOT_AN_EVENT)
    op, ddl = _text(payload.get("op")), _text(payload.get("ddl"))
    source = _obj(payload.get("source"))
    source_commit_ts, source_ms = to_long(source.get("commit_ts")), to_long(source.get("ts_ms"))
    if op is None and ddl is None:
        raise Reject(*_control_record(payload) or ("unexpected_shape", _NOT_AN_EVENT))
    kind = DDL if op == DDL_OP or op is None else WATERMARK if op == WATERMARK_OP else ROW
    commit_ts = source_commit_ts
    if options.kafka_commit_time:
        commit_ts = PENDING
    elif options.derive_commit_ts and commit_ts is None:
        ms = _positive(source_ms) or _positive(to_long(payload.get("ts_ms")))
        commit_ts = ms_to_commit_ts(ms)
    common = dict(commit_ts=commit_ts, source_position=_source_position(source), event_ms=source_ms)
    if kind == WATERMARK:
        reason = ("missing_watermark_ts", "watermark (op m) without source.commit_ts") \
            if source_commit_ts is None else (None, None)
        return event(0, WATERMARK, *reason, source_position=common["source_position"], event_ms=source_ms,
                     watermark_ts=source_commit_ts)
    if kind == DDL:
        return _ddl_event(payload, source, ddl, common, options)
    if op == TRUNCATE_OP:
        return _truncate_event(source, common, options)
    return _row_event(payload, row_schema, source, op, key, common, options)


def _control_record(payload: dict) -> tuple[str, str] | None:
    """Debezium's transaction-metadata (BEGIN / END) and heartbeat records, when their topics
    are landed with the tables': no change, by design (docs/reliability.md)."""
    if _text(payload.get("status")) in ("BEGIN", "END") and payload.get("id") is not None:
        return CONTROL_RECORD, f"Debezium transaction metadata ({payload['status']}): no change"
    if payload.keys() == {"ts_ms"}:
        return CONTROL_RECORD, "Debezium heartbeat: no change"
    return None


def _ddl_event(payload: dict, source: dict, ddl: str | None, common: dict, options: Options) -> tuple:
    change = _table_change(payload)
    database = name_text(payload.get("databaseName"), "databaseName")
    database = _database({**source, "db": database if payload.get("databaseName") is not None else source.get("db")})
    dialect = _schema_dialect(source)
    table_from_id = _TABLE_FROM_ID.search(_text(change.get("id")) or "")
    table = _source_table(source) or (table_from_id and _blank_to_none(table_from_id.group(1)))
    if not options.apply_snapshot_drops and _from_snapshot(source) and _SNAPSHOT_DROP.match(ddl or ""):
        return event(0, DDL, CONTROL_RECORD, _SNAPSHOT_DROP_DETAIL, op=READ, database=database, table=table,
                     ddl_type="DROP", ddl_sql=ddl, **common)
    if table is not None and "," in table:
        # one event per table of a multi-table statement (`RENAME TABLE t TO _t_del, _t_gho TO
        # t`), each listing them all: the statement's text names the tables, and the events,
        # without their structure, stay copies of one DDL (alignment keeps one)
        table, change = None, {}
    ddl_type = _text(change.get("type"))
    if ddl_type is None and ddl is not None:
        first = _FIRST_WORD.search(ddl)
        ddl_type = first.group(1).upper() if first else ""
    reason = (
        ("unsupported_ddl_dialect", f"a {dialect} connector's schema change: its SQL is not MySQL's, so it "
         "is not applied (the table's columns follow its row images)") if dialect is not None
        else ("missing_ddl_sql", "DDL event without ddl") if not (ddl or "").strip(" ")
        else ("missing_commit_ts", _commit_hint(options)) if common["commit_ts"] is None
        else (None, None)
    )
    return event(0, DDL, *reason, op=READ if _from_snapshot(source) else None, database=database, table=table,
                 pk_names=_texts(_obj(change.get("table")).get("primaryKeyColumnNames")),
                 column_types=_declared_columns(change), ddl_type=ddl_type, ddl_sql=ddl, **common)


def _from_snapshot(source: dict) -> bool:
    """An initial snapshot's schema event (`source.snapshot` true, first, last, ...): its rows,
    at the same binlog position, come after it (snapshot/ddl/barriers.py)."""
    flag = source.get("snapshot")
    return flag is True or (type(flag) is str and flag.lower() not in ("", "false", "incremental"))


def _truncate_event(source: dict, common: dict, options: Options) -> tuple:
    """`op: t` names its table in `source` only: the DDL event gets the statement it stands for."""
    database, table = _database(source), _source_table(source)
    if database is None or table is None:
        return event(0, DDL, "missing_table_name", "truncate (op t) without source.db or source.table",
                     database=database, table=table, ddl_type="TRUNCATE", **common)
    reason = ("missing_commit_ts", _commit_hint(options)) if common["commit_ts"] is None else (None, None)
    sql = "TRUNCATE TABLE {}.{}".format(*("`" + n.replace("`", "``") + "`" for n in (database, table)))
    return event(0, DDL, *reason, database=database, table=table, ddl_type="TRUNCATE", ddl_sql=sql, **common)


def _commit_hint(options: Options) -> str:
    return ("no source.ts_ms or ts_ms" + HINT if options.derive_commit_ts
            else "no source.commit_ts (Debezium's own connector: use protocol debezium-json)")


def _image(v) -> dict | None:
    """A row image: an object with at least one column (CloudCanal writes `{}` for none)."""
    return v if type(v) is dict and v else None


def _row_event(payload: dict, row_schema: RowSchema, source: dict, op: str, key: bytes | None, common: dict,
               options: Options) -> tuple:
    row_op = ROW_OPS.get(op)
    before_in = _image(payload.get("before")) if row_op in _BEFORE_OPS else None
    after_in = _image(payload.get("after")) if row_op in _AFTER_OPS else None
    bad_before: list[str] = []
    bad_after: list[str] = []
    before = canonical_values(before_in, row_schema.rules, bad_before)
    after = canonical_values(after_in, row_schema.rules, bad_after)
    bad = list(dict.fromkeys(sorted(bad_before) + sorted(bad_after))) if bad_before or bad_after else bad_before
    column_types = row_schema.column_types
    if column_types is None:
        image = after_in if after_in is not None else before_in
        column_types = None if image is None else {k: value_kind_type(v) for k, v in image.items()}
    database, table = _database(source), _source_table(source)
    pk_names = _key_names(key) or options.key_option.names_for(database, table)
    not_logged = None
    if options.unavailable and row_op != READ:  # a snapshot reads whole rows
        if after is not None and not options.unavailable.isdisjoint(after.values()):
            not_logged = [k for k, v in after.items() if v in options.unavailable]
        if before is not None and not options.unavailable.isdisjoint(before.values()):
            # a before-image's value that was not logged is left out; a key's stays, and rejects
            keys = pk_names or ()
            before = {k: v for k, v in before.items() if k in keys or v not in options.unavailable}
            not_logged = not_logged or [k for k in keys if before.get(k) in options.unavailable] or None
    pk_values = key_values(pk_names, before, after)
    bad_schema = row_schema.bad
    reason = (
        ("unknown_event_type", f"unknown Debezium op {op}") if row_op is None
        else ("missing_commit_ts", _commit_hint(options)) if common["commit_ts"] is None
        else ("missing_table_name", "row event without source.db or source.table") if database is None or table is None
        else ("missing_row_data", f"op {op} without its row image (after for c/r/u, before for d)")
        if before is None and after is None
        else ("invalid_schema", "the row schema has duplicate or unnamed fields") if bad_schema
        else ("missing_primary_key", "no key fields in the Kafka key and "
                                     "the primary-key option names none for its table")
        if not pk_names
        else ("null_primary_key", "a primary key column is null or absent: "
              + ",".join(n for n in pk_names if n is not None)) if None in pk_values
        else ("column_not_logged", "the binlog did not log these columns (binlog_row_image NOBLOB / "
              "MINIMAL; Debezium's unavailable-value placeholder): " + ",".join(not_logged))
        if not_logged
        else ("invalid_value", "value does not decode for its schema type: " + ",".join(bad))
        if bad
        else (None, None)
    )
    # the hot path: the tuple in `EVENT_FIELDS` order, without `event()`'s keyword lookups
    return (0, ROW, row_op, database, table, common["commit_ts"], common["source_position"], common["event_ms"],
            pk_names, pk_values, before, after, column_types, None, None, None, *reason)


def decode_batches(batches: Iterator[pa.RecordBatch], options: Options) -> Iterator[pa.RecordBatch]:
    reader = EnvelopeReader(options.binary_mode)
    for batch in batches:
        with gc_paused():  # the events are freed before the collector runs again (`gc_paused`)
            decoded = _decoded_batch(batch, options, reader)
        yield decoded


def _decoded_batch(batch: pa.RecordBatch, options: Options, reader: EnvelopeReader) -> pa.RecordBatch:
    out = EventRows()
    big = oversized(batch, options.max_message_bytes)
    keys = batch.column("key").to_pylist()
    for i, value in enumerate(batch.column("value").to_pylist()):
        if big and i in big:
            out.add(i, 0, ROW, reason=big[i].reason, detail=big[i].detail)
        else:
            decode_message(out, i, keys[i], value, options, reader)
    return out.batch(batch)
