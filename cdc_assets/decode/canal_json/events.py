"""Canal-JSON messages -> change-log events, in plain Python (orjson) per Arrow batch.

Spark's `from_json` parses this shape row by row into maps and was the decoder's cost;
orjson plus a few dict operations per message is faster (1.2x at 1M messages, more on
larger dumps, on two cores: BENCHMARKS.md). Per message this costs about 10 µs of one core
(99k messages/s without Spark over the 1M bench dump; docs/performance.md, step 12): orjson
about a quarter, the rules here about a third, the batch's Arrow columns the rest.
The rules are those of `canal_json/decoder.py`'s docstring; the first failing reject rule wins, in
the order `_events` checks them (the large-message reasons first).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from datetime import tzinfo

import pyarrow as pa

from cdc_assets.common.tso import ms_to_commit_ts
from cdc_assets.contracts.schemas import CONTROL_RECORD, DDL, ROW, WATERMARK
from cdc_assets.decode.common.arrow_events import DEFAULT_MAX_MESSAGE_BYTES, as_text, event, name_text
from cdc_assets.decode.common.canal_values import row_events, shared_types, type_flags
from cdc_assets.decode.common.json_fields import (
    bool_field, decode_each_object, long_field, object_field, objects_field, positive_long_field, texts_field,
)
from cdc_assets.decode.common.kafka_time import HINT, PENDING
from cdc_assets.decode.common.key_option import NO_KEYS, KeyOption
from cdc_assets.decode.common.large_messages import key_only_reject

_DML_TYPES = frozenset(("INSERT", "UPDATE", "DELETE"))
# Official Canal's records that are not row events (docs/reliability.md). XA COMMIT: the rows
# came at XA PREPARE. A non-DDL QUERY is a statement's text: a rows-query or MariaDB annotate
# event beside its rows, or the only trace of DML in a STATEMENT / MIXED binlog (which may
# also come as its INSERT / UPDATE / DELETE type with `sql` and no rows); XA ROLLBACK
# takes back rows already sent. Those two count against the quarantine checks.
_NOT_ROW_EVENTS = {
    "XACOMMIT": (CONTROL_RECORD, "Canal XACOMMIT record: no change (the rows came at XA PREPARE)"),
    "QUERY": ("query_event", "Canal QUERY record (isDdl false): a statement without row images "
                             "(binlog_format must be ROW; canal.instance.filter.query.dml skips them)"),
    "XAROLLBACK": ("xa_rollback", "Canal XAROLLBACK record: the XA transaction's rows, sent at XA "
                                  "PREPARE, were rolled back and cannot be taken back"),
}

# A STATEMENT / MIXED binlog's DML: Canal sends its text with the statement's type and no rows.
_STATEMENT_DML = ("query_event", "Canal DML record without rows but with its statement (isDdl false): "
                                 "a STATEMENT / MIXED binlog's DML, which no snapshot can apply "
                                 "(binlog_format must be ROW)")


def _large_message_reject(tidb: dict, op: str | None) -> tuple[str, str] | None:
    """TiCDC's large-message handling (`large_messages.py`). Old TiCDC's claim-check message
    holds nothing but `_tidb`, so it has no `type` either."""
    if op == "DELETE" or ("claimCheckLocation" not in tidb and "onlyHandleKey" not in tidb):
        return None  # the common message: whole
    err = key_only_reject(False, as_text(tidb.get("claimCheckLocation")), bool_field(tidb.get("onlyHandleKey")))
    return None if err is None else (err.reason, err.detail)


# -- events -----------------------------------------------------------------------------
def _events(m: dict, tz: tzinfo, key_option: KeyOption, kafka_commit_time: bool = False,
            tidb_extension: bool = False) -> list[tuple]:
    """`tidb_extension`: the stream carries `_tidb` (`enable-tidb-extension=true`), so a
    row or DDL without `_tidb.commitTs` has no commit time: `es` is only the event's time,
    and placing it there could apply it out of order (missing_commit_ts).
    `kafka_commit_time`: commit times come from Kafka (`kafka_time`), set after decoding."""
    is_ddl, kind_text = bool_field(m.get("isDdl")), as_text(m.get("type"))
    tidb = object_field(m.get("_tidb")) or {}
    # A `_tidb.commitTs` that is there is the commit time, even 0 or -1: the decode step
    # quarantines an implausible one (`window_events`) instead of guessing one from `es`.
    es, tidb_ts, msg_id = long_field(m.get("es")), long_field(tidb.get("commitTs")), long_field(m.get("id"))
    watermark_ts = positive_long_field(tidb.get("watermarkTs"))
    database, table = name_text(m.get("database"), "database"), name_text(m.get("table"), "table")
    kind = DDL if is_ddl else WATERMARK if kind_text == "TIDB_WATERMARK" else ROW
    if kind == WATERMARK:
        reason, detail = ("missing_watermark_ts", "TIDB_WATERMARK without _tidb.watermarkTs") \
            if watermark_ts is None else (None, None)
        return [event(0, WATERMARK, database=database, table=table, event_ms=es,
                      watermark_ts=watermark_ts, reason=reason, detail=detail)]
    commit_ts = tidb_ts if tidb_ts is not None else None if tidb_extension else ms_to_commit_ts(es)
    no_commit_ts = ("missing_commit_ts", "no _tidb.commitTs in a stream with the TiDB extension "
                    "(enable-tidb-extension=true; official Canal: set it false to use es)"
                    + ("" if es is not None else HINT)) \
        if tidb_extension else ("missing_commit_ts", "no usable _tidb.commitTs or es" + HINT)
    # official Canal's batch id (> 0; TiCDC writes 0) orders ties on `es`
    position = msg_id if tidb_ts is None and msg_id is not None and msg_id > 0 else None
    if kafka_commit_time:  # set from the Kafka timestamp and offset after decoding (`kafka_time`)
        commit_ts, position = PENDING, None
    if kind == DDL:
        sql = as_text(m.get("sql"))
        reason, detail = (
            no_commit_ts if commit_ts is None
            else ("missing_ddl_sql", "DDL message without sql") if not (sql or "").strip(" ")
            else (None, None))
        return [event(0, DDL, database=database, table=table, commit_ts=commit_ts,
                      source_position=position, event_ms=es, ddl_type=kind_text, ddl_sql=sql,
                      reason=reason, detail=detail)]
    pk_names = texts_field(m.get("pkNames")) or key_option.names_for(database, table)
    types, data, old = object_field(m.get("mysqlType")), objects_field(m.get("data")), objects_field(m.get("old")) or ()
    op = None if kind_text is None else kind_text.upper()
    if types:
        types = shared_types(types)
    flags = type_flags(types, tz) if types else (False, False)
    message_reason = _large_message_reject(tidb, op) or (
        _NOT_ROW_EVENTS[op] if op in _NOT_ROW_EVENTS
        else ("unknown_event_type", f"unknown canal-json type {kind_text if kind_text is not None else 'null'}")
        if op not in _DML_TYPES
        else _STATEMENT_DML if not data and (as_text(m.get("sql")) or "").strip()
        else ("missing_row_data", "DML message without data rows") if not data
        else no_commit_ts if commit_ts is None
        else ("missing_table_name", "DML message without database or table") if database is None or table is None
        else ("missing_primary_key", "DML message without pkNames, and "
                                     "the primary-key option names none for its table")
        if not pk_names
        else None)
    if message_reason is not None:  # the whole message: one quarantine row, not one per row of `data`
        return [event(0, ROW, *message_reason, op=op, database=database, table=table, commit_ts=commit_ts,
                      source_position=position, event_ms=es)]
    return row_events(op, data, old, types, tz, flags, database=database, table=table, commit_ts=commit_ts,
                      position=position, event_ms=es, pk_names=pk_names)


def decode_batches(batches: Iterator[pa.RecordBatch], time_zone: str, key_option: KeyOption = NO_KEYS,
                   codec: str = "none", max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                   kafka_commit_time: bool = False, tidb_extension: bool = False) -> Iterator[pa.RecordBatch]:
    """All events of each message (one per element of `data` for DML, else one), or a reject.
    `codec`: TiCDC's `large-message-handle-compression` of the values; `max_bytes`: the
    `max-message-bytes` option. `kafka_commit_time`: commit times come from Kafka
    (`kafka_time`), not from the message; `tidb_extension`: every row and DDL must carry
    `_tidb.commitTs` (`_events`)."""
    events = functools.partial(_events, kafka_commit_time=kafka_commit_time, tidb_extension=tidb_extension)
    return decode_each_object(batches, time_zone, events, ("data", "old"), key_option, codec, max_bytes)
