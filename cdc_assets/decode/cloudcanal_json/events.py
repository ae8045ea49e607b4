"""CloudCanal JSON messages -> change-log events, in plain Python (orjson) per Arrow batch.

The rules are those of `cloudcanal_json/decoder.py`'s docstring; the first failing reject rule wins,
in the order of `_events` (`missing_commit_ts` first). Like Canal-JSON, a message is parsed
once, whatever the fields the rules read.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import tzinfo

import pyarrow as pa

from cdc_assets.common.tso import ms_to_commit_ts
from cdc_assets.contracts.schemas import DDL, ROW, WATERMARK
from cdc_assets.decode.common.arrow_events import DEFAULT_MAX_MESSAGE_BYTES, as_text, event, name_text
from cdc_assets.decode.common.canal_values import row_events, shared_types, type_flags
from cdc_assets.decode.common.json_fields import (
    bool_field, decode_each_object, long_field, object_field, objects_field, texts_field,
)
from cdc_assets.decode.common.key_option import NO_KEYS, KeyOption

_DML_ACTIONS = frozenset(("INSERT", "UPDATE", "DELETE"))
_TRANSACTION_END = "TRANSACTIONEND"


def _database(db, schema) -> str | None:
    """`db`, or `db.schema` when the source has schemas (PostgreSQL...)."""
    db, schema = name_text(db, "db"), name_text(schema, "schema")
    if schema is None or db is None or schema == db:
        return db if db is not None else schema
    return f"{db}.{schema}"


def _declared_structure(changes) -> tuple[dict | None, list | None]:
    """A DDL's `tableChanges.table` (the table after it; an object, or a one-element array):
    column name -> `typeExpression` (`typeName` without one) in `position` order, and
    `primaryKeyColumnNames`. (None, None) when it is absent or a column lacks a name or type:
    then the SQL alone says what changed, as for Canal. Metadata, so a malformed one is
    ignored rather than quarantining the DDL."""
    change = changes[0] if type(changes) is list and changes else changes
    table = change.get("table") if type(change) is dict else None
    columns = table.get("columns") if type(table) is dict else None
    if type(columns) is not list or not columns or not all(type(c) is dict for c in columns):
        return None, None
    if all(type(c.get("position")) is int for c in columns):
        columns = sorted(columns, key=lambda c: c["position"])
    declared = {}
    for c in columns:
        name, type_text = as_text(c.get("name")), as_text(c.get("typeExpression")) or as_text(c.get("typeName"))
        if not name or not type_text or name in declared:
            return None, None
        declared[name] = type_text.strip()
    pk = table.get("primaryKeyColumnNames")
    return declared, (pk if type(pk) is list and pk and all(type(n) is str for n in pk) else None)


def _events(m: dict, tz: tzinfo, key_option: KeyOption) -> list[tuple]:
    # Every field's JSON type is checked first, whatever the message's kind: a field of the
    # wrong type quarantines the message (`unexpected_shape`), as a schema would.
    is_ddl, ddl_flag = bool_field(m.get("isDdl")), bool_field(m.get("ddl"))
    is_ddl = ddl_flag if is_ddl is None else is_ddl
    exec_ts, bid = long_field(m.get("execTs")), long_field(m.get("bid"))
    types, data = object_field(m.get("dbValType")), objects_field(m.get("data"))
    before_rows = objects_field(m.get("before")) or ()
    pk_names = texts_field(m.get("pks"))
    action_text, entry_type = as_text(m.get("action")), as_text(m.get("entryType"))
    database, table = _database(m.get("db"), m.get("schema")), name_text(m.get("table"), "table")
    pk_names = pk_names or key_option.names_for(database, table)
    commit_ts = ms_to_commit_ts(exec_ts)
    missing_ts = ("missing_commit_ts", "no usable execTs") if commit_ts is None else None
    if not is_ddl and entry_type is not None and entry_type.upper() == _TRANSACTION_END:
        return [event(0, WATERMARK, *(missing_ts or (None, None)), database=database, table=table,
                      event_ms=exec_ts, watermark_ts=commit_ts)]
    position = bid if bid is not None and bid > 0 else None
    if is_ddl:
        sql = as_text(m.get("sql"))
        reject = missing_ts or (("missing_ddl_sql", "DDL message without sql") if not (sql or "").strip(" ") else None)
        columns, declared_pk = _declared_structure(m.get("tableChanges"))
        return [event(0, DDL, *(reject or (None, None)), database=database, table=table, commit_ts=commit_ts,
                      source_position=position, event_ms=exec_ts, ddl_type=action_text, ddl_sql=sql,
                      column_types=columns, pk_names=declared_pk)]
    op = None if action_text is None else action_text.upper()
    if types:
        types = shared_types(types)
    flags = type_flags(types, tz) if types else (False, False)
    message_reject = (
        missing_ts
        or (("unknown_event_type", f"unknown cloudcanal action {action_text if action_text is not None else 'null'}")
            if op not in _DML_ACTIONS else None)
        or (("missing_row_data", "DML message without data rows") if not data else None)
        or (("missing_table_name", "DML message without db or table") if database is None or table is None else None)
        or (("missing_primary_key", "DML message with empty pks, and the primary-key option names none for its table")
            if not pk_names else None))
    if message_reject is not None:  # the whole message: one quarantine row, not one per row of `data`
        return [event(0, ROW, *message_reject, op=op, database=database, table=table, commit_ts=commit_ts,
                      source_position=position, event_ms=exec_ts)]
    # The vendor documents no ENUM / SET value form: a value that is a member stays a name.
    # A DELETE's `before[i]`, when present, is its before image.
    return row_events(op, data, before_rows, types, tz, flags, database=database, table=table,
                      commit_ts=commit_ts, position=position, event_ms=exec_ts, pk_names=pk_names,
                      names_written=True, delete_image_from_old=True)


def decode_batches(batches: Iterator[pa.RecordBatch], time_zone: str, key_option: KeyOption = NO_KEYS,
                   max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> Iterator[pa.RecordBatch]:
    """All events of each message (one per element of `data` for DML, else one), or a reject."""
    return decode_each_object(batches, time_zone, _events, ("data", "before"), key_option, max_bytes=max_bytes)
